#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, started by hand, for testing
# `go-train prepare` as a Slurm array job (scripts/slurm-array-prepare.sh).
#
#   scripts/slurm-local.sh start    write the config, start munged, slurmctld
#                                   and slurmd, wait until the node is idle
#   scripts/slurm-local.sh stop     stop the three daemons
#   scripts/slurm-local.sh status   the daemons' pids, sinfo and squeue
#   scripts/slurm-local.sh env      print `export SLURM_CONF=...` (eval it to
#                                   use sinfo, sbatch, squeue by hand)
#
# Why by hand: containers and CI machines run no systemd, so the Debian
# packages' units never start, and the stock config names no node. Everything
# here lives under ${SLURM_LOCAL_DIR:-/tmp/go-train-slurm}: slurm.conf (found
# through SLURM_CONF, so /etc/slurm is neither read nor changed), a munge key
# and a private munged socket (so a system munged, if any, is left alone),
# state, spool, pid and log files. No cgroups are needed: processes are
# tracked with proctrack/linuxproc and tasks are not confined (task/none).
# The daemons and the jobs run as root, so this must be run as root.
#
# It installs nothing. It needs the Debian packages slurm-wlm and munge
# (Slurm 22.05 on Debian 12):  apt-get install -y slurm-wlm munge
#
# Environment: SLURM_LOCAL_DIR (where everything goes), SLURM_LOCAL_TIMEOUT
# (seconds to wait for the node, default 60), SLURM_LOCAL_CTLD_PORT and
# SLURM_LOCAL_SLURMD_PORT (default 6817 and 6818, change them if a system
# Slurm already runs here).
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/go-train-slurm}
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-60}
CTLD_PORT=${SLURM_LOCAL_CTLD_PORT:-6817}
SLURMD_PORT=${SLURM_LOCAL_SLURMD_PORT:-6818}
CONF=$DIR/slurm.conf
SOCKET=$DIR/munge/munge.socket
export SLURM_CONF=$CONF

say() { echo "slurm-local: $*"; }
die() {
    local code=$1
    shift
    echo "slurm-local: $*" >&2
    exit "$code"
}

usage() {
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

need_tools() {
    local missing=()
    for tool in munged mungekey munge slurmctld slurmd sinfo scontrol squeue sbatch; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    if ((${#missing[@]})); then
        die 2 "missing ${missing[*]}: install Slurm and MUNGE first (Debian/Ubuntu: apt-get install -y slurm-wlm munge)"
    fi
    [[ $(id -u) == 0 ]] || die 2 "run this as root (slurmd starts jobs as their user, and here the daemons run as root)"
}

# The pid in a pid file when that process is alive and is the named program.
alive() {
    local pidfile=$1 name=$2 pid
    [[ -s $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/comm && $(</proc/"$pid"/comm) == "$name" ]] || return 1
    echo "$pid"
}

write_config() {
    local host node tmp
    host=$(hostname -s)
    # The node as slurmd sees it (CPUs, sockets, cores, threads, memory),
    # under this host's short name; jobs reach it on the loopback address.
    node=$(slurmd -C | head -n 1 | sed -E "s/^NodeName=[^ ]+/NodeName=$host NodeAddr=127.0.0.1/")
    [[ $node == NodeName=* ]] || die 1 "slurmd -C printed no NodeName line"
    tmp=$(mktemp "$DIR/slurm.conf.XXXXXX")
    cat >"$tmp" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster, no cgroups, no accounting.
ClusterName=go-train-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
KillWait=5
$node State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    if [[ -e $CONF ]] && cmp -s "$tmp" "$CONF"; then
        rm -f "$tmp"
        return
    fi
    if alive "$DIR/run/slurmctld.pid" slurmctld >/dev/null || alive "$DIR/run/slurmd.pid" slurmd >/dev/null; then
        rm -f "$tmp"
        say "warning: $CONF would change but Slurm is running with the old one; run '$0 stop' then '$0 start' to use the new one" >&2
        return
    fi
    mv "$tmp" "$CONF"
    chmod 644 "$CONF"
    say "wrote $CONF"
}

start_munged() {
    if alive "$DIR/munge/munged.pid" munged >/dev/null; then
        return
    fi
    if [[ ! -s $DIR/munge/munge.key ]]; then
        mungekey --create --keyfile="$DIR/munge/munge.key" >/dev/null
        chmod 600 "$DIR/munge/munge.key"
    fi
    munged --socket="$SOCKET" --key-file="$DIR/munge/munge.key" --pid-file="$DIR/munge/munged.pid" \
        --seed-file="$DIR/munge/munged.seed" --log-file="$DIR/log/munged.log" ||
        die 1 "munged did not start; see $DIR/log/munged.log"
    local i
    for ((i = 0; i < 50; i++)); do
        if munge --socket="$SOCKET" --no-input 2>/dev/null | unmunge --socket="$SOCKET" >/dev/null 2>&1; then
            say "munged started (socket $SOCKET)"
            return
        fi
        sleep 0.1
    done
    die 1 "munged does not answer on $SOCKET; see $DIR/log/munged.log"
}

node_state() {
    sinfo --noheader --nodes="$(hostname -s)" --format=%t 2>/dev/null | head -n 1
}

start() {
    need_tools
    umask 022
    mkdir -p "$DIR"/{munge,state,spool,run,log}
    # munged insists that everyone can reach its socket's folder.
    chmod 755 "$DIR" "$DIR/munge"
    write_config
    start_munged
    if ! alive "$DIR/run/slurmctld.pid" slurmctld >/dev/null; then
        slurmctld || die 1 "slurmctld did not start; see $DIR/log/slurmctld.log"
        say "slurmctld started"
    fi
    if ! alive "$DIR/run/slurmd.pid" slurmd >/dev/null; then
        slurmd || die 1 "slurmd did not start; see $DIR/log/slurmd.log"
        say "slurmd started"
    fi
    local state="" t0=$SECONDS resumed=0
    while ((SECONDS - t0 < TIMEOUT)); do
        state=$(node_state || true)
        case $state in
            idle | mix | alloc | comp)
                say "node $(hostname -s) is $state ($((SECONDS - t0)) s); use it with: export SLURM_CONF=$CONF"
                return 0
                ;;
            drain | drng | down)
                # Left drained or down by an earlier run: slurmd answers now.
                if ((!resumed)); then
                    scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 || true
                    resumed=1
                fi
                ;;
        esac
        sleep 1
    done
    {
        echo "slurm-local: the node is not idle after $TIMEOUT s (sinfo state: '${state:-no answer}')"
        sinfo --Node --long 2>&1 || true
        for log in munged slurmctld slurmd; do
            echo "--- last lines of $DIR/log/$log.log"
            tail -n 8 "$DIR/log/$log.log" 2>/dev/null || true
        done
    } >&2
    exit 1
}

# Waits up to 20 s for a pid to go.
wait_gone() {
    local pid=$1 i
    for ((i = 0; i < 200; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}

stop() {
    local ctld slurmd_pid munged_pid
    ctld=$(alive "$DIR/run/slurmctld.pid" slurmctld || true)
    slurmd_pid=$(alive "$DIR/run/slurmd.pid" slurmd || true)
    munged_pid=$(alive "$DIR/munge/munged.pid" munged || true)
    if [[ -z $ctld$slurmd_pid$munged_pid ]]; then
        say "not running (nothing under $DIR)"
        return 0
    fi
    # slurmctld, asked to shut down, stops the slurmd too.
    if [[ -n $ctld ]]; then
        scontrol shutdown >/dev/null 2>&1 || kill "$ctld" 2>/dev/null || true
    fi
    for pid in $ctld $slurmd_pid; do
        if ! wait_gone "$pid"; then
            kill "$pid" 2>/dev/null || true
            wait_gone "$pid" || die 1 "pid $pid does not stop"
        fi
    done
    # slurmd alone (slurmctld already gone) gets a TERM.
    slurmd_pid=$(alive "$DIR/run/slurmd.pid" slurmd || true)
    if [[ -n $slurmd_pid ]]; then
        kill "$slurmd_pid" 2>/dev/null || true
        wait_gone "$slurmd_pid" || die 1 "slurmd (pid $slurmd_pid) does not stop"
    fi
    if [[ -n $munged_pid ]]; then
        munged --socket="$SOCKET" --stop >/dev/null 2>&1 || kill "$munged_pid" 2>/dev/null || true
        wait_gone "$munged_pid" || die 1 "munged (pid $munged_pid) does not stop"
    fi
    say "stopped"
}

status() {
    local pid any=0
    for d in munged:"$DIR/munge/munged.pid" slurmctld:"$DIR/run/slurmctld.pid" slurmd:"$DIR/run/slurmd.pid"; do
        if pid=$(alive "${d#*:}" "${d%%:*}"); then
            echo "${d%%:*}: running (pid $pid)"
            any=1
        else
            echo "${d%%:*}: not running"
        fi
    done
    ((any)) || return 1
    echo "SLURM_CONF=$CONF"
    sinfo
    squeue
}

case ${1:-} in
    start) start ;;
    stop) stop ;;
    status) status ;;
    env) printf 'export SLURM_CONF=%q\n' "$CONF" ;;
    *) usage ;;
esac
