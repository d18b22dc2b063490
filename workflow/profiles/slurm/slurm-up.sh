#!/usr/bin/env bash
# Starts a real single-node SLURM (munge + slurmctld + slurmd) on this machine, for `make slurm-test`.
# Idempotent: installs the Debian packages only if missing, rewrites /etc/slurm/slurm.conf (restarting the daemons
# only when it changed), starts only the daemons whose pid file is not alive, and waits until the node answers.
# About 1 s when the packages are there, about 20 s with apt. Needs root. Recipe: shared/notes/slurm.md.
#
# The cluster: one node named `hostname -s` at 127.0.0.1 with all of nproc's CPUs and 85% of the memory,
# partition `debug`, no accounting (so `sacct` fails: the profile uses `squeue`), MinJobAge=3600 so that finished
# jobs stay visible to `squeue --states=all` for an hour. It refuses to overwrite a slurm.conf it did not write
# (a real cluster's) unless SLURM_UP_FORCE=1. Stop it with slurm-down.sh (which also removes that slurm.conf).
set -euo pipefail

MARKER="# written by labelfree-seg-eval workflow/profiles/slurm/slurm-up.sh"
CONF=/etc/slurm/slurm.conf
LOGS=(/var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log /var/log/munge/munged.log)

die() {
  echo "slurm-up.sh: $*" >&2
  exit 1
}

show_logs() {
  local f
  for f in "${LOGS[@]}"; do
    if [ -f "$f" ]; then
      echo "---- last lines of $f" >&2
      tail -n 25 "$f" >&2
    fi
  done
}

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs Debian packages, writes $CONF and starts daemons); \
try: sudo bash $0"

# 1. Packages, only if missing.
export DEBIAN_FRONTEND=noninteractive
export PATH="$PATH:/usr/sbin:/sbin"
missing=0
for b in slurmctld slurmd sinfo squeue sbatch scontrol munged munge unmunge; do
  command -v "$b" >/dev/null 2>&1 || missing=1
done
if [ "$missing" -eq 1 ]; then
  command -v apt-get >/dev/null || die "SLURM is not installed and apt-get is absent: install slurmctld, slurmd, \
slurm-client and munge by hand"
  echo "slurm-up.sh: installing slurmctld slurmd slurm-client munge (apt, about 20 s)"
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null \
    || die "apt-get install slurmctld slurmd slurm-client munge failed"
fi
id slurm >/dev/null 2>&1 || die "the 'slurm' user does not exist (the slurmctld package normally creates it)"
id munge >/dev/null 2>&1 || die "the 'munge' user does not exist (the munge package normally creates it)"

# 2. Directories and the munge key.
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/log/munge /var/lib/munge
chown slurm:slurm /var/spool/slurmctld /var/log/slurm
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if [ ! -s /etc/munge/munge.key ]; then
  echo "slurm-up.sh: creating /etc/munge/munge.key"
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi

# 3. slurm.conf.
H=$(hostname -s)
CPUS=$(nproc)
MEM_MB=$(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024))
REAL_MB=$((MEM_MB * 85 / 100))
[ "$REAL_MB" -ge 4000 ] || die "only ${MEM_MB} MB of memory; the workflow's jobs ask for up to 4000 MB"
if [ -f "$CONF" ] && ! head -n 1 "$CONF" | grep -qxF "$MARKER" && [ "${SLURM_UP_FORCE:-0}" != 1 ]; then
  die "$CONF exists and was not written by this script (a real cluster's?); not touching it. \
Set SLURM_UP_FORCE=1 to overwrite it."
fi
NEW_CONF=$(
  cat <<EOF
$MARKER
# A throw-away single-node cluster for tests: no accounting, no cgroups.
ClusterName=ci
SlurmctldHost=$H(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=3600
NodeName=$H NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$REAL_MB State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
)

alive() { # alive PIDFILE NAME: the pid file names a running process called NAME
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1")
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}

if [ ! -f "$CONF" ] || [ "$(cat "$CONF")" != "$NEW_CONF" ]; then
  if alive /run/slurmctld.pid slurmctld || alive /run/slurmd.pid slurmd; then
    echo "slurm-up.sh: $CONF changes; restarting slurmctld and slurmd"
    bash "$(dirname "$0")/slurm-down.sh" --restart
  fi
  printf '%s\n' "$NEW_CONF" >"$CONF.tmp.$$"
  chmod 644 "$CONF.tmp.$$"
  mv "$CONF.tmp.$$" "$CONF"
fi

# 4. Daemons, by pid file (each one daemonizes and writes its pid file).
if ! alive /run/munge/munged.pid munged; then
  runuser -u munge -- /usr/sbin/munged || { show_logs; die "munged did not start"; }
fi
for i in $(seq 20); do
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
  [ "$i" -eq 20 ] && { show_logs; die "munge does not answer (munge -n | unmunge fails)"; }
  sleep 0.5
done
alive /run/slurmctld.pid slurmctld || /usr/sbin/slurmctld || { show_logs; die "slurmctld did not start"; }
alive /run/slurmd.pid slurmd || /usr/sbin/slurmd || { show_logs; die "slurmd did not start"; }

# 5. Wait for the node. A node left down or drained by an earlier run is resumed once.
resumed=0
state=""
for i in $(seq 60); do
  state=$(sinfo -h -n "$H" -o %t 2>/dev/null | head -n 1 || true)
  case "$state" in
    idle | mix | alloc | comp)
      echo "slurm-up.sh: node $H is $state (CPUs=$CPUS RealMemory=${REAL_MB}M, partition debug)"
      exit 0
      ;;
    down | drain | drng | fail | down\* | drain\*)
      if [ "$resumed" -eq 0 ] && [ "$i" -ge 5 ]; then
        scontrol update NodeName="$H" State=RESUME 2>/dev/null || true
        resumed=1
      fi
      ;;
  esac
  sleep 1
done
echo "slurm-up.sh: the node did not become idle within 60 s (last state: '${state:-none}')" >&2
sinfo -N -l >&2 || true
show_logs
exit 1
