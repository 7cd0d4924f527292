#!/usr/bin/env bash
# A real single-node SLURM cluster on localhost (munged + slurmctld + slurmd, no slurmdbd), for
# trying `snakemake --profile slurm` and for tests/workflow/test_slurm.py. Root only.
#
#   tools/slurm-localhost.sh install          apt-get slurmctld slurmd slurm-client munge, if missing
#   tools/slurm-localhost.sh start  [DIR]     write the config into DIR, start the daemons, wait for the node
#   tools/slurm-localhost.sh stop   [DIR]     cancel our jobs, stop the daemons by their recorded PIDs
#   tools/slurm-localhost.sh status [DIR]     exit 0 if all three daemons run and the node is up
#   tools/slurm-localhost.sh env    [DIR]     print `export SLURM_CONF=...` (needed only where /etc/slurm/slurm.conf is not our link)
#
# DIR (default $CONDEVAL_SLURM_DIR, else /tmp/condeval-slurm) holds everything: slurm.conf, gres.conf,
# munge key and socket, spool, logs and PID files. Outside DIR, `start` links /etc/slurm/slurm.conf to
# DIR/etc/slurm.conf and `stop` removes that link: the `srun` inside each job finds its configuration
# only there (the executor plugin's job step drops SLURM_CONF from its environment). An
# /etc/slurm/slurm.conf that this script did not write is never replaced: `start` fails instead.
# Environment knobs: SLURM_LOCALHOST_CPUS (default: nproc), SLURM_LOCALHOST_MEM_MB (20000),
# SLURM_LOCALHOST_PORT (6817; slurmd uses PORT+1), SLURM_LOCALHOST_TIMEOUT (seconds to wait, 90).
# start and stop are idempotent; stop only signals the PIDs that start recorded (checked by name).
set -euo pipefail

ACTION=${1:-}
DIR=${2:-${CONDEVAL_SLURM_DIR:-/tmp/condeval-slurm}}
CPUS=${SLURM_LOCALHOST_CPUS:-$(nproc)}
MEM_MB=${SLURM_LOCALHOST_MEM_MB:-20000}
PORT=${SLURM_LOCALHOST_PORT:-6817}
TIMEOUT=${SLURM_LOCALHOST_TIMEOUT:-90}
PARTITION=localtest
NODE=$(hostname -s)
DAEMONS=(munged slurmctld slurmd)
export SLURM_CONF=$DIR/etc/slurm.conf

die() {
    echo "slurm-localhost: $*" >&2
    exit 1
}

log_tails() {
    local f
    for f in "$DIR"/log/*.log "$DIR"/log/*.out; do
        [[ -s $f ]] || continue
        echo "---- $f (last 25 lines)" >&2
        tail -n 25 "$f" >&2
    done
}

fail_start() {
    echo "slurm-localhost: $*" >&2
    log_tails
    exit 1
}

install() {
    local missing=()
    command -v slurmctld >/dev/null || [[ -x /usr/sbin/slurmctld ]] || missing+=(slurmctld)
    command -v slurmd >/dev/null || [[ -x /usr/sbin/slurmd ]] || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || [[ -x /usr/sbin/munged ]] || missing+=(munge)
    if ((${#missing[@]} == 0)); then
        echo "slurm-localhost: slurmctld, slurmd, slurm-client and munge are installed"
        return
    fi
    [[ $(id -u) == 0 ]] || die "installing ${missing[*]} needs root (apt-get)"
    command -v apt-get >/dev/null || die "no apt-get: install ${missing[*]} with your package manager"
    echo "slurm-localhost: apt-get install ${missing[*]}"
    apt-get update -qq
    # The packages' init scripts try to start system daemons; on a machine without an init they
    # are refused, which is fine: `start` runs private ones.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

# PID recorded for a daemon if that process still runs the daemon, else nothing.
live_pid() {
    local name=$1 file=$DIR/pids/$1.pid pid
    [[ -f $file ]] || return 0
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ ]] || return 0
    [[ -r /proc/$pid/comm ]] || return 0
    local comm
    comm=$(<"/proc/$pid/comm")
    if [[ $comm == "$name" || $comm == "$name-wlm" ]]; then
        echo "$pid"
    fi
}

write_config() {
    mkdir -p "$DIR"/{etc,run,log,pids,spool/ctld,spool/d}
    chmod 0755 "$DIR" "$DIR"/{etc,run,log}
    if [[ ! -s $DIR/etc/munge.key ]]; then
        (umask 077 && dd if=/dev/urandom of="$DIR/etc/munge.key" bs=1024 count=1 status=none)
    fi
    chmod 0600 "$DIR/etc/munge.key"
    cat >"$DIR/etc/slurm.conf" <<EOF
$MARK: one node, no slurmdbd, every file under $DIR.
ClusterName=localtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/run/munge.socket
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# The node's CPUs and memory are taken from this file, not probed: small test machines still accept
# the workflow's memory requests.
SlurmdParameters=config_overrides
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol for an hour: the executor plugin reads job states from
# squeue, and tests check every job of a run (SLURM's default is 300 s).
MinJobAge=3600
MpiDefault=none
# Jobs without --mem (the executor plugin always sends one) must not take the whole node.
DefMemPerCPU=1000
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
# The same node again, for trying GPU routing: set-resources <rule>: {slurm_partition: gpu, gpu: 1}.
PartitionName=gpu Nodes=$NODE MaxTime=INFINITE State=UP
EOF
    # A fake GPU, so that jobs asking for --gpus=1 / --gres=gpu:1 are scheduled on this GPU-less node.
    echo "Name=gpu File=/dev/null" >"$DIR/etc/gres.conf"
}

launch() {
    local name=$1
    shift
    # setsid: the daemon leaves our session (a Ctrl-C to a test does not reach it); it execs in place,
    # so $! is the daemon's own PID.
    setsid "$@" </dev/null >>"$DIR/log/$name.out" 2>&1 &
    local pid=$! i
    echo "$pid" >"$DIR/pids/$name.pid"
    # Until the exec, /proc/PID/comm still names this shell: wait for the daemon's name.
    for ((i = 0; i < 200; i++)); do
        [[ -n $(live_pid "$name") ]] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    fail_start "$name did not start"
}

SYSTEM_CONF=/etc/slurm/slurm.conf
MARK="# Written by tools/slurm-localhost.sh"

link_system_conf() {
    if [[ -L $SYSTEM_CONF ]]; then
        local target
        target=$(readlink "$SYSTEM_CONF")
        [[ $target == "$SLURM_CONF" ]] && return 0
        if [[ -e $target ]]; then
            head -n 1 "$target" | grep -qF "$MARK" ||
                fail_start "$SYSTEM_CONF links to $target, not written by this script; not replacing it"
            local other=${target%/etc/slurm.conf}
            if [[ -n $(DIR=$other live_pid slurmctld) ]]; then
                fail_start "another localhost cluster runs from $other: run '$0 stop $other' first"
            fi
        fi
        rm -f "$SYSTEM_CONF"
    elif [[ -e $SYSTEM_CONF ]]; then
        fail_start "$SYSTEM_CONF exists (another SLURM setup on this machine); not replacing it"
    fi
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -s "$SLURM_CONF" "$SYSTEM_CONF"
}

unlink_system_conf() {
    if [[ -L $SYSTEM_CONF && $(readlink "$SYSTEM_CONF") == "$SLURM_CONF" ]]; then
        rm -f "$SYSTEM_CONF"
    fi
}

node_state() {
    sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1
}

# wait_until WHAT DEADLINE DAEMON CMD...: poll CMD; fail at once if DAEMON exits, or at DEADLINE.
wait_until() {
    local what=$1 deadline=$2 daemon=$3
    shift 3
    until "$@"; do
        [[ -n $(live_pid "$daemon") ]] || fail_start "$daemon exited before $what (state dir $DIR)"
        ((SECONDS < deadline)) || fail_start "$what did not happen within ${TIMEOUT}s (state dir $DIR)"
        sleep 1
    done
}

munge_ok() {
    munge -n -S "$DIR/run/munge.socket" 2>/dev/null | unmunge -S "$DIR/run/munge.socket" >/dev/null 2>&1
}

node_ready() {
    local state
    state=$(node_state)
    case $state in
    idle | mixed | allocated | completing) return 0 ;;
    drained | draining | down) scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
    esac
    return 1
}

start() {
    [[ $(id -u) == 0 ]] || die "start needs root (SlurmUser=root, private munged)"
    command -v slurmctld >/dev/null || [[ -x /usr/sbin/slurmctld ]] || die "SLURM is not installed: run '$0 install'"
    export PATH=$PATH:/usr/sbin:/sbin
    local deadline=$((SECONDS + TIMEOUT)) t0=$SECONDS
    link_system_conf
    if [[ -z $(live_pid munged) && -z $(live_pid slurmctld) && -z $(live_pid slurmd) ]]; then
        write_config
        : >"$DIR/log/munged.log"
    fi
    if [[ -z $(live_pid munged) ]]; then
        launch munged munged --foreground --force --key-file="$DIR/etc/munge.key" \
            --socket="$DIR/run/munge.socket" --pid-file="$DIR/run/munged.pid" \
            --log-file="$DIR/log/munged.log" --seed-file="$DIR/run/munged.seed"
    fi
    wait_until "munged answering on $DIR/run/munge.socket" "$deadline" munged munge_ok
    if [[ -z $(live_pid slurmctld) ]]; then
        # -c: a fresh controller state; jobs of an earlier run of this cluster are gone anyway.
        launch slurmctld slurmctld -D -c -f "$SLURM_CONF"
    fi
    wait_until "slurmctld answering 'scontrol ping'" "$deadline" slurmctld \
        bash -c 'scontrol ping 2>/dev/null | grep -q "is UP"'
    if [[ -z $(live_pid slurmd) ]]; then
        launch slurmd slurmd -D -f "$SLURM_CONF"
    fi
    wait_until "node $NODE idle in sinfo" "$deadline" slurmd node_ready
    local name
    for name in "${DAEMONS[@]}"; do
        [[ -n $(live_pid "$name") ]] || fail_start "$name exited"
    done
    echo "slurm-localhost: cluster up in $((SECONDS - t0))s (node $NODE: $CPUS CPUs, ${MEM_MB} MB, 1 fake GPU;" \
        "partitions $PARTITION (default) and gpu)"
    echo "export SLURM_CONF=$SLURM_CONF"
}

stop() {
    export PATH=$PATH:/usr/sbin:/sbin
    if [[ -n $(live_pid slurmctld) ]]; then
        # Jobs run under slurmstepd, which outlives slurmd: cancel ours first (this cluster only).
        scancel --user="$(id -un)" >/dev/null 2>&1 || true
        local deadline=$((SECONDS + 30))
        while [[ -n $(squeue -h -t pending,running,completing -o %i 2>/dev/null) ]] && ((SECONDS < deadline)); do
            sleep 1
        done
    fi
    local name pid i
    for name in slurmd slurmctld munged; do
        pid=$(live_pid "$name")
        if [[ -n $pid ]]; then
            kill -TERM "$pid" 2>/dev/null || true
            for ((i = 0; i < 300; i++)); do
                [[ -n $(live_pid "$name") ]] || break
                sleep 0.1
            done
            if [[ -n $(live_pid "$name") ]]; then
                echo "slurm-localhost: $name ($pid) ignored SIGTERM for 30s, sending SIGKILL" >&2
                kill -KILL "$pid" 2>/dev/null || true
                sleep 0.5
            fi
            [[ -z $(live_pid "$name") ]] || die "$name ($pid) still runs"
            echo "slurm-localhost: stopped $name ($pid)"
        fi
        rm -f "$DIR/pids/$name.pid"
    done
    unlink_system_conf
}

status() {
    local name pid ok=0
    for name in "${DAEMONS[@]}"; do
        pid=$(live_pid "$name")
        if [[ -n $pid ]]; then
            echo "$name: running ($pid)"
        else
            echo "$name: not running"
            ok=1
        fi
    done
    if ((ok == 0)); then
        local state
        state=$(node_state)
        echo "node $NODE: ${state:-unknown}"
        case $state in idle | mixed | allocated | completing) ;; *) ok=1 ;; esac
    fi
    return $ok
}

case $ACTION in
install) install ;;
start) start ;;
stop) stop ;;
status) status ;;
env) echo "export SLURM_CONF=$SLURM_CONF" ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
    ;;
esac
