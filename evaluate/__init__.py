"""labelfree-seg-eval: what a self-supervised ViT checkpoint has learned, measured without labels and with them.

The package holds everything the Snakemake workflow computes: the ViT-S/16 backbone (`backbone`), checkpoint
formats (`checkpoints`), image transforms (`images`), COCO-format data sets (`datasets`), feature shards
(`features`), scores (`scores`), the linear probe (`probe`), the ledger (`ledger`) and its tables and figures.
"""

__version__ = "0.1.0"


class EvaluationError(Exception):
    """An error a user can act on: the message names the culprit (file, config key) and what is wrong.

    The workflow prints these without a traceback; anything else is a bug and keeps its traceback.
    """


class ConfigError(EvaluationError):
    """The config says something the workflow cannot do; the message names the key."""
