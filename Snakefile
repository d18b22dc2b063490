# labelfree-seg-eval: what each self-supervised ViT checkpoint has learned, without labels and with them.
# Thin by design: config, schema validation (in common.smk), the stage rules, and `rule all`.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/demo.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/decoder.smk"
include: "workflow/rules/probe.smk"
include: "workflow/rules/ledger.smk"


rule all:
    input:
        all_targets,
    default_target: True
