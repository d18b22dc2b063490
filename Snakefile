# labelfree-seg-eval: what each self-supervised ViT checkpoint has learned, without labels and with them.
# Thin by design: config, schema validation (in common.smk), the stage rules, and `rule all`.
from snakemake.utils import min_version

min_version("9.0")


# The experiment: the config files given with --configfile (`make run CONFIG=my.yaml`), whole; config.yaml only
# when none is given. Never both: every job an executor plugin submits (SLURM) is handed the same --configfile, so
# it reads the same experiment as the main process and nothing of config.yaml is merged back in.
if not workflow.overwrite_configfiles:

    configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/datasets.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/decoder.smk"
include: "workflow/rules/probe.smk"
include: "workflow/rules/video.smk"
include: "workflow/rules/discovery.smk"
include: "workflow/rules/saliency.smk"
include: "workflow/rules/segmentation.smk"
include: "workflow/rules/semseg.smk"
include: "workflow/rules/ledger.smk"
include: "workflow/rules/attention.smk"


rule all:
    default_target: True
    input:
        # named first so every data set's manifest (a Snakemake checkpoint) and every checkpoint file is scheduled
        # at once, not one after another as the input function below discovers them
        manifests=expand(paths.MANIFEST, dataset=ALL_DATASETS),
        checkpoints=[c.path for c in CHECKPOINTS.values()],
        outputs=all_targets,
