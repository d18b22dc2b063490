#!/usr/bin/env bash
# Stops the cluster that slurm-up.sh started: slurmd, slurmctld, then munged, each by its pid file (never by
# name), checking that the pid still belongs to that daemon. Safe to run when nothing is running.
# Then it removes /etc/slurm/slurm.conf if slurm-up.sh wrote it: with a config naming a controller that is gone,
# every SLURM client waits about 10 s before failing, and snakemake-executor-plugin-slurm runs
# `scontrol show config` when it is imported, so EVERY snakemake command on the machine would start 10 s slower.
# Without the file, clients fail at once. slurm-up.sh writes it again.
# `--restart` (used by slurm-up.sh after a config change) leaves munged and slurm.conf alone.
set -euo pipefail

[ "$(id -u)" -eq 0 ] || {
  echo "slurm-down.sh: must run as root (the daemons run as root and slurm); try: sudo bash $0" >&2
  exit 1
}

stop() { # stop PIDFILE NAME
  local pidfile=$1 name=$2 pid _
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$name" ]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      [ -d "/proc/$pid" ] || break
      sleep 0.2
    done
    if [ -d "/proc/$pid" ]; then
      echo "slurm-down.sh: $name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
    echo "slurm-down.sh: stopped $name (pid $pid)"
  fi
  rm -f "$pidfile"
}

MARKER="# written by labelfree-seg-eval workflow/profiles/slurm/slurm-up.sh"
CONF=/etc/slurm/slurm.conf

stop /run/slurmd.pid slurmd
stop /run/slurmctld.pid slurmctld
if [ "${1:-}" != "--restart" ]; then
  stop /run/munge/munged.pid munged
  if [ -f "$CONF" ] && head -n 1 "$CONF" | grep -qxF "$MARKER"; then
    rm -f "$CONF"
    echo "slurm-down.sh: removed $CONF (slurm-up.sh writes it again)"
  fi
fi
