#!/usr/bin/env bash
# `make slurm-test`: the embedded demo workflow through a real single-node SLURM, checked against a local run.
#
#  1. installs snakemake-executor-plugin-slurm 2.8.0 into the project's venv if it is missing;
#  2. brings SLURM up (slurm-up.sh: Debian packages if missing, munge + slurmctld + slurmd; needs root);
#  3. snapshots the repository once (git's tracked and untracked-but-not-ignored files: no results/, .venv,
#     .snakemake, logs) into a scratch directory and runs `snakemake --profile workflow/profiles/slurm` in a copy
#     of it, under `timeout -k 30` (a run that hangs ignores SIGTERM); the user's own results/ are never touched;
#  4. lists every SLURM job the run submitted with its final state (`squeue --states=all`, the cluster keeps
#     finished jobs for MinJobAge=3600 s) and fails unless all of them COMPLETED; then checks that a dry run of the
#     finished copy has nothing left to do;
#  5. tears SLURM down (unless it was already running before this script), then runs the same workflow locally
#     (`--profile workflow/profiles/local`) in a fresh copy of the same snapshot AT THE SAME PATH, so that nothing
#     path- or checkout-dependent (absolute paths; the code version, `nogit:<source hash>` in a copy without .git)
#     can tell the two apart; the repository's own results/ are not reused for that reason, and because they may
#     be stale or partial;
#  6. compares every file under results/tables/ (csv, md, tex) byte for byte, and results/ledger/scores.csv
#     byte for byte once its timing columns (started, finished, wall_s, max_rss_mb) are set aside; prints which
#     matched. Exit status 0 only when everything above held.
#
# Both runs import the copy's own `evaluate`/`decoders` (PYTHONPATH), not the editable install's checkout, and run
# the repository's venv by absolute path (SLURM passes the environment to the jobs: sbatch --export=ALL).
#
# Both runs are given their experiment the way a user names one, `make run CONFIG=FILE` (Snakemake's --configfile
# FILE, which the SLURM jobs are handed too), while the snapshot's config.yaml stays the shipped demo: FILE is the
# demo cut to the checkpoints SLURM_TEST_CHECKPOINTS (default: one ViT-S/16; every checkpoint runs the same rules,
# so a second one adds SLURM jobs, not SLURM paths; every architecture and file format is tested by `make test`), to
# one feature shard per data set, without the video, discovery, saliency and attention readings (their rules are of
# the same kinds, a Snakemake checkpoint and per-shard jobs, and `make test` runs each through the workflow), and
# with every data set of every section renamed `slurm-<name>`: each SLURM job pays Snakemake's start-up inside it,
# so two runs of the whole demo take longer than CI allows, and exercise no other SLURM path. After each run,
# check_experiment fails unless exactly FILE's data sets were drawn and scored for exactly its checkpoints: a job
# that merged config.yaml back in (as Snakemake 9.27's jobs did under --replace-workflow-config, which it does not
# hand them) would see the demo's `demo-*` data sets beside the renamed ones, and its other checkpoints.
#
# Environment: VENV (default .venv, relative to the repository), SLURM_TEST_CHECKPOINTS (space-separated demo
# checkpoint names; "all" keeps every checkpoint, the video, discovery and saliency sets and attention),
# SLURM_TEST_TIMEOUT (s, the SLURM run, default 2400), LOCAL_TEST_TIMEOUT (s, the local run, default 900), CORES
# (local run, default 2), SLURM_TEST_KEEP=1 keeps the scratch directory after a success (it is always kept after a
# failure), SLURM_TEST_KEEP_CLUSTER=1 leaves SLURM running.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
VENV=${VENV:-.venv}
case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
SLURM_TIMEOUT=${SLURM_TEST_TIMEOUT:-2400}
LOCAL_TIMEOUT=${LOCAL_TEST_TIMEOUT:-900}
CHECKPOINTS=${SLURM_TEST_CHECKPOINTS:-dino-demo}
CORES=${CORES:-2}
export PATH="$PATH:/usr/sbin:/sbin"

say() { printf '== slurm-test [%4ds] %s\n' "$SECONDS" "$*"; }
die() {
  echo "slurm-test: FAILED: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root: it installs Debian packages and starts the SLURM daemons \
(CI runs as root); try: sudo make slurm-test"
[ -x "$VENV/bin/snakemake" ] || die "no snakemake in $VENV; run 'make setup' first"

SCRATCH=""
JOB_IDS=""
STARTED_CLUSTER=0
OK=0

submitted_ids() { # the SLURM job ids a Snakemake log reports, comma-separated
  grep -oE 'has been submitted with SLURM jobid [0-9_]+' "$1" 2>/dev/null | awk '{print $NF}' | paste -sd, - || true
}

cleanup() {
  local rc=$?
  set +e
  [ "$rc" -eq 0 ] || echo "slurm-test: exit status $rc" >&2
  if [ -n "$SCRATCH" ] && [ -f "$SCRATCH/slurm-run.log" ]; then
    JOB_IDS=$(submitted_ids "$SCRATCH/slurm-run.log")
  fi
  if [ -n "$JOB_IDS" ] && command -v scancel >/dev/null; then
    # Jobs of a run that was killed (timeout) would otherwise keep running; finished ones are unaffected.
    local ids
    read -ra ids <<<"${JOB_IDS//,/ }"
    scancel --quiet --state=PENDING "${ids[@]}" 2>/dev/null
    scancel --quiet --state=RUNNING "${ids[@]}" 2>/dev/null
  fi
  if [ "$STARTED_CLUSTER" -eq 1 ] && [ "${SLURM_TEST_KEEP_CLUSTER:-0}" != 1 ]; then
    say "tearing SLURM down"
    bash "$HERE/slurm-down.sh"
    STARTED_CLUSTER=0
  fi
  if [ -n "$SCRATCH" ]; then
    if [ "$OK" -eq 1 ] && [ "${SLURM_TEST_KEEP:-0}" != 1 ]; then
      rm -rf "$SCRATCH"
    else
      echo "slurm-test: scratch directory kept for inspection: $SCRATCH" >&2
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

copy_repository() { # copy_repository DEST: the checkout without results/, .venv, .snakemake, logs, benchmarks
  local dest=$1
  mkdir -p "$dest"
  if git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (
      cd "$REPO"
      git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do
          if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
        done |
        tar --null --no-recursion -T - -cf -
    ) | tar -xf - -C "$dest"
  else
    tar -C "$REPO" --exclude=./.git --exclude=./.venv --exclude=./results --exclude=./.snakemake \
      --exclude=./logs --exclude=./benchmarks --exclude=__pycache__ -cf - . | tar -xf - -C "$dest"
  fi
  # Whatever the ignore rules say, the copy starts with no outputs.
  rm -rf "$dest/.snakemake" "$dest/logs" "$dest/benchmarks"
  mkdir -p "$dest/results"
  find "$dest/results" -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
  [ -f "$dest/Snakefile" ] || die "the copy of $REPO in $dest has no Snakefile"
}

write_test_config() { # write_test_config CONFIG_YAML FILE: writes FILE, the experiment both runs are given
  PYTHONPATH="$REPO" "$VENV/bin/python" - "$1" "$2" "$CHECKPOINTS" <<'EOF'
import sys

import yaml

from evaluate.datasets.kinds import SECTIONS  # every section that names data sets

source, target, names = sys.argv[1], sys.argv[2], sys.argv[3].split()
with open(source) as handle:
    config = yaml.safe_load(handle)
if names != ["all"]:
    unknown = sorted(set(names) - set(config["checkpoints"]))
    if unknown:
        sys.exit(f"slurm-test: SLURM_TEST_CHECKPOINTS names {unknown}, not checkpoints of {source}")
    config["checkpoints"] = {name: config["checkpoints"][name] for name in names}
    for key in ("reference_checkpoint", "compare_to"):
        if config.get(key) not in config["checkpoints"]:
            config[key] = names[0]
    sizes = [entry["demo"]["n_images"] for entry in config.get("datasets", {}).values() if "demo" in entry]
    if sizes:
        config["features"]["shard_size"] = max(sizes)
    for section in ("videos", "discovery", "saliency"):  # the longest protocols, left to the local tests
        config[section] = {}
    config["attention"] = False
for section in SECTIONS:
    renamed = {}
    for name, entry in (config.get(section) or {}).items():
        new = f"slurm-{name}"
        for key, value in entry.items():
            if isinstance(value, str):
                entry[key] = (value + "/").replace(f"/{name}/", f"/{new}/")[:-1]
        renamed[new] = entry
    config[section] = renamed
with open(target, "w") as handle:
    yaml.safe_dump(config, handle, sort_keys=False)
EOF
}

check_experiment() { # check_experiment RUN_DIR FILE: RUN_DIR drew and scored exactly FILE's data sets and checkpoints
  PYTHONPATH="$REPO" "$VENV/bin/python" - "$1" "$2" <<'EOF'
import csv
import sys
from pathlib import Path

import yaml

from evaluate.datasets.kinds import SECTIONS  # its demo sets are drawn into results/demo/<section>/

run, experiment = Path(sys.argv[1]), yaml.safe_load(Path(sys.argv[2]).read_text())
sets = {section: experiment.get(section) or {} for section in SECTIONS}
datasets = {name for entries in sets.values() for name in entries}
checkpoints = set(experiment["checkpoints"])
# every set of every other section is scored; a COCO-style set only in the eval role
evals = {name for name, entry in sets["datasets"].items() if "eval" in entry["roles"]}
evals |= {name for section in SECTIONS if section != "datasets" for name in sets[section]}
folders = [run / "results/demo" / section for section in SECTIONS]
drawn = {p.name for folder in folders if folder.is_dir() for p in folder.iterdir() if p.is_dir()}
with open(run / "results/ledger/scores.csv", newline="") as handle:
    rows = list(csv.DictReader(handle))
scored = {row["dataset"] for row in rows}
problems = []
if drawn != datasets:
    problems.append(f"data sets drawn: {sorted(drawn)}; the experiment file names {sorted(datasets)}")
if scored - datasets or not evals <= scored:
    problems.append(f"scores.csv scores the data sets {sorted(scored)}; the file's eval sets: {sorted(evals)}")
if {row["checkpoint"] for row in rows} != checkpoints:
    problems.append(f"scores.csv scores {sorted({row['checkpoint'] for row in rows})}, not {sorted(checkpoints)}")
for problem in problems:
    print(f"slurm-test: {run}: {problem}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
}

run_snakemake() { # run_snakemake LOG TIMEOUT ARGS...: in $SCRATCH/repo; prints progress, returns snakemake's status
  local log=$1 secs=$2 rc
  shift 2
  set +e
  (
    cd "$SCRATCH/repo"
    PYTHONPATH="$SCRATCH/repo${PYTHONPATH:+:$PYTHONPATH}" timeout -k 30 "$secs" "$VENV/bin/snakemake" "$@"
  ) 2>&1 | tee "$log" | grep --line-buffered -E 'steps \([0-9]+%\) done|submitted with SLURM jobid|Error|error:|Exiting because'
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "---- last 60 lines of $log" >&2
    tail -n 60 "$log" >&2
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "slurm-test: snakemake ran past ${secs} s and was killed" >&2
  fi
  return "$rc"
}

# 1. The executor plugin.
if ! "$VENV/bin/python" - <<'EOF' 2>/dev/null; then
import importlib.metadata as m, sys
sys.exit(m.version("snakemake-executor-plugin-slurm") != "2.8.0")
EOF
  say "installing snakemake-executor-plugin-slurm==2.8.0 into $VENV"
  "$VENV/bin/python" -m pip install --quiet snakemake-executor-plugin-slurm==2.8.0 \
    || die "pip install snakemake-executor-plugin-slurm==2.8.0 failed"
fi

# 2. SLURM.
if [ -s /run/slurmctld.pid ] && [ "$(cat "/proc/$(cat /run/slurmctld.pid)/comm" 2>/dev/null)" = slurmctld ]; then
  say "SLURM is already running; it will be left running"
else
  STARTED_CLUSTER=1
fi
say "bringing SLURM up"
bash "$HERE/slurm-up.sh" || die "slurm-up.sh failed"
min_job_age=$(scontrol show config | awk -F= '/^MinJobAge/ {gsub(/[^0-9]/, "", $2); print $2}')
[ "${min_job_age:-0}" -ge 600 ] || die "MinJobAge is ${min_job_age:-unset} s: the squeue status route needs >= 600 s \
(finished jobs must stay visible longer than the plugin's 180 s poll interval)"

# 3. The workflow through SLURM, in a scratch copy. One snapshot of the checkout feeds both runs, so that edits
# made to the repository while the test runs cannot make the two runs' code differ.
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/lfse-slurm-test.XXXXXX")
copy_repository "$SCRATCH/snapshot"
EXPERIMENT="$SCRATCH/experiment.yaml"
write_test_config "$SCRATCH/snapshot/config.yaml" "$EXPERIMENT" || die "could not cut config.yaml into $EXPERIMENT"
say "checkpoints: $CHECKPOINTS; experiment (CONFIG=) $EXPERIMENT, beside the shipped config.yaml"
cp -a "$SCRATCH/snapshot" "$SCRATCH/repo"
say "SLURM run in $SCRATCH/repo (timeout ${SLURM_TIMEOUT} s; log $SCRATCH/slurm-run.log)"
t0=$SECONDS
slurm_rc=0
run_snakemake "$SCRATCH/slurm-run.log" "$SLURM_TIMEOUT" --profile workflow/profiles/slurm \
  --configfile "$EXPERIMENT" || slurm_rc=$?
slurm_s=$((SECONDS - t0))
say "SLURM run ended in ${slurm_s} s with status $slurm_rc"

# 4. What SLURM ran, and how each job ended (printed for a failed run too).
JOB_IDS=$(submitted_ids "$SCRATCH/slurm-run.log")
[ -n "$JOB_IDS" ] || die "the Snakemake log names no submitted SLURM job: was the slurm executor used?"
n_jobs=$(tr ',' '\n' <<<"$JOB_IDS" | wc -l)
say "$n_jobs SLURM jobs submitted; final states (squeue --states=all):"
squeue --states=all --jobs="$JOB_IDS" -o '%.7i %.10T %.9M %.5C %.8m %k' | tee "$SCRATCH/slurm-jobs.txt"
states=$(squeue --states=all --jobs="$JOB_IDS" -h -o '%T' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')
say "states: ${states%, }"
[ "$slurm_rc" -eq 0 ] || die "the workflow failed through SLURM (snakemake status $slurm_rc)"
n_completed=$(squeue --states=all --jobs="$JOB_IDS" -h -o '%T' | grep -cx COMPLETED || true)
[ "$n_completed" -eq "$n_jobs" ] || die "only $n_completed of $n_jobs SLURM jobs COMPLETED"
(cd "$SCRATCH/repo" && PYTHONPATH="$SCRATCH/repo" "$VENV/bin/snakemake" --profile workflow/profiles/slurm \
  --configfile "$EXPERIMENT" -n) \
  >"$SCRATCH/slurm-dryrun.log" 2>&1 || die "dry run after the SLURM run failed: see $SCRATCH/slurm-dryrun.log"
grep -q 'Nothing to be done' "$SCRATCH/slurm-dryrun.log" || {
  tail -n 30 "$SCRATCH/slurm-dryrun.log" >&2
  die "after the SLURM run, a dry run still wants to run jobs"
}
say "dry run after the SLURM run: nothing to be done"
check_experiment "$SCRATCH/repo" "$EXPERIMENT" || die "the SLURM run did not read the experiment file alone"
say "the SLURM run drew and scored exactly the experiment file's data sets and checkpoints"
mv "$SCRATCH/repo" "$SCRATCH/slurm"
if [ "$STARTED_CLUSTER" -eq 1 ] && [ "${SLURM_TEST_KEEP_CLUSTER:-0}" != 1 ]; then
  say "tearing SLURM down"
  bash "$HERE/slurm-down.sh"
  STARTED_CLUSTER=0
fi

# 5. The same workflow locally, in a fresh copy of the same snapshot at the same path.
mv "$SCRATCH/snapshot" "$SCRATCH/repo"
say "local run in $SCRATCH/repo (--cores $CORES, timeout ${LOCAL_TIMEOUT} s; log $SCRATCH/local-run.log)"
t0=$SECONDS
run_snakemake "$SCRATCH/local-run.log" "$LOCAL_TIMEOUT" --profile workflow/profiles/local --cores "$CORES" \
  --configfile "$EXPERIMENT" || die "the workflow failed locally (status $?)"
local_s=$((SECONDS - t0))
say "local run finished in ${local_s} s"
check_experiment "$SCRATCH/repo" "$EXPERIMENT" || die "the local run did not read the experiment file alone"
mv "$SCRATCH/repo" "$SCRATCH/local"

# 6. Byte-for-byte comparison: every table, and scores.csv without the columns that time each job.
say "comparing results/tables/* and results/ledger/scores.csv (SLURM vs local)"
TIMING_COLUMNS="started,finished,wall_s,max_rss_mb"
compared=0
differ=0
list_outputs() { # the compared files of one run, relative to its root (not Snakemake's .snakemake_timestamp)
  (
    cd "$1"
    if [ -d results/tables ]; then find results/tables -type f ! -name '.snakemake*'; fi
    if [ -f results/ledger/scores.csv ]; then echo results/ledger/scores.csv; fi
  ) | LC_ALL=C sort
}
same_scores() { # same_scores A B: equal CSVs once the timing columns are set aside
  "$VENV/bin/python" - "$1" "$2" "$TIMING_COLUMNS" <<'EOF'
import csv
import sys

timing = set(sys.argv[3].split(","))


def rows(path):
    with open(path, newline="") as handle:
        table = list(csv.reader(handle))
    keep = [i for i, name in enumerate(table[0]) if name not in timing]
    return [[row[i] for i in keep] for row in table]


sys.exit(0 if rows(sys.argv[1]) == rows(sys.argv[2]) else 1)
EOF
}
while IFS= read -r f; do
  a="$SCRATCH/slurm/$f"
  b="$SCRATCH/local/$f"
  compared=$((compared + 1))
  if [ ! -f "$a" ]; then
    echo "  ONLY LOCAL  $f"
    differ=$((differ + 1))
  elif [ ! -f "$b" ]; then
    echo "  ONLY SLURM  $f"
    differ=$((differ + 1))
  elif cmp -s "$a" "$b"; then
    echo "  equal       $f ($(wc -c <"$a") bytes)"
  elif [ "$f" = results/ledger/scores.csv ] && same_scores "$a" "$b"; then
    echo "  equal       $f ($(wc -l <"$a") lines; byte for byte once the columns $TIMING_COLUMNS are set aside)"
  else
    echo "  DIFFER      $f"
    { diff -u "$b" "$a" || true; } | head -n 20 | sed 's/^/      /'
    differ=$((differ + 1))
  fi
done < <(sort -u <(list_outputs "$SCRATCH/slurm") <(list_outputs "$SCRATCH/local"))
[ "$compared" -gt 0 ] || die "neither run wrote results/tables/* or results/ledger/scores.csv"
[ "$differ" -eq 0 ] || die "$differ of $compared files differ between the SLURM and the local run"
say "PASSED: $n_jobs SLURM jobs COMPLETED; $compared of $compared files equal byte for byte; \
SLURM run ${slurm_s} s, local run ${local_s} s, total ${SECONDS} s"
OK=1
