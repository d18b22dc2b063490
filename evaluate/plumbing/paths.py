"""Every file the workflow reads or writes, one pattern each, relative to the working directory.

docs/design.md §8. Each pattern is at once a Snakemake wildcard pattern (the rules use them as they are) and a
`str.format` template (the jobs and tests fill them in). Nothing else in the code spells a results/ path.
"""

from __future__ import annotations

RESULTS = "results"

# data sets and their manifests (every kind's: its images or sequences, the labels' identity, the shards), one each
MANIFEST = f"{RESULTS}/datasets/{{dataset}}/manifest.json"

# stage 2: a shard's images decoded once (uint8, both readings; the folder may be dropped, the record stays), then
# the two readings of every checkpoint on it
INPUTS = f"{RESULTS}/inputs/{{dataset}}/{{shard}}"
INPUTS_RECORD = f"{INPUTS}.json"
SHARD = f"{RESULTS}/features/{{checkpoint}}/{{dataset}}/{{shard}}"
KEYS480 = f"{SHARD}/keys480.npy"
TOKENS224 = f"{SHARD}/tokens224.npy"
IMAGE_IDS = f"{SHARD}/image_ids.json"
FEATURES_META = f"{SHARD}/meta.json"

# object discovery (docs/design.md §15): keys-native shards, each shard's boxes
NATIVE_KEYS = f"{SHARD}/keys-native.npy"
NATIVE_INDEX = f"{SHARD}/native.json"
DISCOVERY_BOXES = f"{RESULTS}/discovery/{{checkpoint}}/{{dataset}}/{{shard}}.json"

# saliency (docs/design.md §16): each checkpoint's reading of a shard (the decoder's grid masks and the solver's
# vertex values) and what that reading ran
SALIENCY_READING = f"{RESULTS}/saliency/{{checkpoint}}/{{dataset}}/{{shard}}.npz"
SALIENCY_META = f"{RESULTS}/saliency/{{checkpoint}}/{{dataset}}/{{shard}}.json"

# DINO's class-token attention masks (docs/design.md §17): each checkpoint's class-token attention of a shard of a
# segmentation set (per image (heads, gh, gw)) and the runner's meta beside it
CLS_ATTENTION_SHARD = f"{RESULTS}/cls-attention/{{checkpoint}}/{{dataset}}/{{shard}}.npz"
CLS_ATTENTION_META = f"{RESULTS}/cls-attention/{{checkpoint}}/{{dataset}}/{{shard}}.json"

# unsupervised semantic segmentation (docs/design.md §18): tokens320 shards (in the features' folders), each
# checkpoint's clusters of a set, and each shard's cluster maps (a PNG per image)
TOKENS320 = f"{SHARD}/tokens320.npy"
SEMSEG = f"{RESULTS}/semseg/{{checkpoint}}/{{dataset}}"
SEMSEG_FIT = f"{SEMSEG}/fit.json"
SEMSEG_MAPS = f"{SEMSEG}/maps/{{shard}}"

# stage 3: the decoder
DECODER = f"{RESULTS}/decoder"
SWEEP_SHARD = f"{DECODER}/sweep/{{dataset}}/{{shard}}.npz"
SWEEP_TABLE = f"{DECODER}/sweep.csv"
SELECTED = f"{DECODER}/selected.yaml"
MASKS_SHARD = f"{DECODER}/masks/{{checkpoint}}/{{dataset}}/{{shard}}.json"
MASKS = f"{DECODER}/masks/{{checkpoint}}/{{dataset}}.json"
EIGENVECTOR = f"{DECODER}/eigenvector/{{checkpoint}}/{{dataset}}.npz"

# stage 4: the probe
PROBE_WEIGHTS = f"{RESULTS}/probe/{{checkpoint}}/probe.safetensors"
PROBE_TRAINING = f"{RESULTS}/probe/{{checkpoint}}/training.json"

# the video reading (docs/design.md §12): each sequence's propagated masks in DAVIS's results layout
# (RESULTS_ROOT/<sequence>/<frame>.png) and what its propagation did
VIDEO_RESULTS_ROOT = f"{RESULTS}/video/{{checkpoint}}/{{dataset}}"
VIDEO_RESULTS = f"{VIDEO_RESULTS_ROOT}/{{sequence}}"
VIDEO_RUN = f"{RESULTS}/video_runs/{{checkpoint}}/{{dataset}}/{{sequence}}.json"
# the attention-spread reading (label-free, docs/design.md §13): one checkpoint's per-image (block, head) means on one
# shard, from the shard's decoded 224-px inputs, and the runner's meta beside it
ATTENTION_SHARD = f"{RESULTS}/attention/{{checkpoint}}/{{dataset}}/{{shard}}.npz"
ATTENTION_META = f"{RESULTS}/attention/{{checkpoint}}/{{dataset}}/{{shard}}.json"
# one image's last-block rows of one query patch, per head (the per-patch figure), and its meta
ATTENTION_ROWS = f"{RESULTS}/attention-rows/{{checkpoint}}/{{dataset}}.npz"
ATTENTION_ROWS_META = f"{RESULTS}/attention-rows/{{checkpoint}}/{{dataset}}.json"

# stage 5: the ledger, tables, figures, report
LEDGER = f"{RESULTS}/ledger"
RECORDS_IN_LEDGER = "records"
RECORD_IN_LEDGER = f"{RECORDS_IN_LEDGER}/{{kind}}/{{checkpoint}}/{{dataset}}.json"
RECORDS = f"{LEDGER}/{RECORDS_IN_LEDGER}"
RECORD = f"{LEDGER}/{RECORD_IN_LEDGER}"
SWEEP_RECORD = RECORD.replace("{kind}", "sweep")
DECODER_RECORD = RECORD.replace("{kind}", "decoder")
PROBE_RECORD = RECORD.replace("{kind}", "probe")
VIDEO_RECORD = RECORD.replace("{kind}", "video")
DISCOVERY_RECORD = RECORD.replace("{kind}", "{decoder}")  # kind = the box decoder's name (docs/design.md §15)
ATTENTION_RECORD = RECORD.replace("{kind}", "attention")
SALIENCY_RECORD = RECORD.replace("{kind}", "saliency")
ATTENTION_MASKS_RECORD = RECORD.replace("{kind}", "attention_masks")
SEMSEG_RECORD = RECORD.replace("{kind}", "semseg")
OPENINGS = f"{LEDGER}/openings.csv"
# a copy of each scoring's record under the key of what decided it, so a re-run on the same inputs opens no labels;
# beside it, the result its opening row hashes where the record does not hold it (the selection's sweep table rows)
SCORE_REUSE = f"{LEDGER}/reuse/{{key}}.json"
SCORE_REUSE_RESULT = f"{LEDGER}/reuse/{{key}}.result.json"
SCORES_CSV = f"{LEDGER}/scores.csv"
SCORES_PARQUET = f"{LEDGER}/scores.parquet"
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
REPORT = f"{RESULTS}/report.html"

# the embedded demo: seeded checkpoints, and each demo data set drawn in a folder named after its config section
DEMO_CHECKPOINT = f"{RESULTS}/demo/checkpoints/{{checkpoint}}.{{suffix}}"  # .pth, or .safetensors
DEMO_DATASET = f"{RESULTS}/demo/{{section}}/{{dataset}}"
