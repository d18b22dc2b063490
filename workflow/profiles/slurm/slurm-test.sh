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
# Both runs read the demo's config.yaml cut to the checkpoints SLURM_TEST_CHECKPOINTS (default: one ViT-S/16; every
# checkpoint runs the same rules, so a second one adds SLURM jobs, not SLURM paths; every architecture and file
# format is tested by `make test`), to one feature shard per data set, and without the video and attention readings
# (their rules are of the same kinds, a Snakemake checkpoint and per-shard jobs, and `make test` runs each through
# the workflow), written in place of the snapshot's config.yaml: each SLURM job pays Snakemake's start-up inside it,
# so two runs of the whole demo take longer than CI allows, and exercise no other SLURM path. (Not `--configfile X
# --replace-workflow-config`: Snakemake 9.27 passes the config file to the jobs SLURM runs but not the replacement,
# so each job merges config.yaml back in and plans the demo's other checkpoints.)
#
# Environment: VENV (default .venv, relative to the repository), SLURM_TEST_CHECKPOINTS (space-separated demo
# checkpoint names; "all" keeps config.yaml whole), SLURM_TEST_TIMEOUT (s, the SLURM run, default
# 2400), LOCAL_TEST_TIMEOUT (s, the local run, default 900), CORES (local run, default 2), SLURM_TEST_KEEP=1 keeps
# the scratch directory after a success (it is always kept after a failure), SLURM_TEST_KEEP_CLUSTER=1 leaves
# SLURM running.
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

write_test_config() { # write_test_config REPO_COPY: REPO_COPY/config.yaml cut to $CHECKPOINTS
  "$VENV/bin/python" - "$1/config.yaml" "$CHECKPOINTS" <<'EOF'
import sys

import yaml

source, names = sys.argv[1], sys.argv[2].split()
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
    config["videos"] = {}
    config["attention"] = False
with open(source, "w") as handle:
    yaml.safe_dump(config, handle, sort_keys=False)
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
write_test_config "$SCRATCH/snapshot" || die "could not cut the snapshot's config.yaml"
say "checkpoints: $CHECKPOINTS"
cp -a "$SCRATCH/snapshot" "$SCRATCH/repo"
say "SLURM run in $SCRATCH/repo (timeout ${SLURM_TIMEOUT} s; log $SCRATCH/slurm-run.log)"
t0=$SECONDS
slurm_rc=0
run_snakemake "$SCRATCH/slurm-run.log" "$SLURM_TIMEOUT" --profile workflow/profiles/slurm || slurm_rc=$?
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
(cd "$SCRATCH/repo" && PYTHONPATH="$SCRATCH/repo" "$VENV/bin/snakemake" --profile workflow/profiles/slurm -n) \
  >"$SCRATCH/slurm-dryrun.log" 2>&1 || die "dry run after the SLURM run failed: see $SCRATCH/slurm-dryrun.log"
grep -q 'Nothing to be done' "$SCRATCH/slurm-dryrun.log" || {
  tail -n 30 "$SCRATCH/slurm-dryrun.log" >&2
  die "after the SLURM run, a dry run still wants to run jobs"
}
say "dry run after the SLURM run: nothing to be done"
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
  || die "the workflow failed locally (status $?)"
local_s=$((SECONDS - t0))
say "local run finished in ${local_s} s"
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
