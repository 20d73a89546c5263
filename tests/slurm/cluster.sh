#!/usr/bin/env bash
# A one-node SLURM cluster for the workflow's SLURM test, built from Debian's packages (slurm-wlm 22.05).
#
#   tests/slurm/cluster.sh install        apt-get install the packages (root, Debian/Ubuntu)
#   tests/slurm/cluster.sh start STATE    configure and start munged, mariadbd, slurmdbd, slurmctld, slurmd
#   tests/slurm/cluster.sh stop STATE     stop exactly the daemons `start` recorded in STATE/pids
#
# Everything lives in STATE (config, spool, logs, database, munge key and socket, non-default ports), so
# the cluster contacts no other SLURM or MariaDB on the machine. Clients reach it through
# SLURM_CONF=STATE/etc/slurm.conf (`source STATE/env`). One exception: the `srun` that
# snakemake-executor-plugin-slurm-jobstep 0.6 runs inside each job gets an environment without SLURM_CONF,
# so it reads the default /etc/slurm/slurm.conf: `start` links that to STATE's config, only where no
# slurm.conf exists (a machine with its own SLURM is refused), and `stop` removes that link again.
#   partitions: cpu (default) and gpu, on one node with two fake GPUs (gres files, no device behind them)
#   accounting: slurmdbd on a private MariaDB (the plugin validates accounts with sacctmgr and reads job
#               states with sacct); account `debate-audit-test`, enforced like a real site's
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
ACCOUNT=debate-audit-test
CLUSTER=debate-audit-test
# Ports off the defaults (6817-6819, 3306) so a site's own daemons are never contacted.
CTLD_PORT=${DEBATE_AUDIT_SLURM_PORT_BASE:-16817}
SLURMD_PORT=$((CTLD_PORT + 1))
DBD_PORT=$((CTLD_PORT + 2))
DB_PORT=$((CTLD_PORT + 3))
# More CPUs than the GPU jobs take (4 each, cluster.cpus.per_gpu: three would fit): the gres, not the CPUs, must
# be what limits concurrent GPU jobs. Declared, not real: slurmd runs with SlurmdParameters=config_overrides.
NODE_CPUS=16
NODE_GPUS=2
NODE_MEM_MB=12000
SYSTEM_CONF=/etc/slurm/slurm.conf

die() { echo "cluster.sh: $*" >&2; exit 1; }

need_commands() {
    local missing=()
    for cmd in munged mungekey mariadbd mariadb-install-db slurmdbd slurmctld slurmd sbatch sacct sacctmgr scontrol; do
        command -v "$cmd" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin" command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    [ ${#missing[@]} -eq 0 ] || die "missing commands: ${missing[*]} (run: $0 install)"
}

install() {
    [ "$(id -u)" -eq 0 ] || die "install needs root (apt-get)"
    command -v apt-get >/dev/null || die "install needs apt-get (Debian/Ubuntu)"
    # Only update the package lists when a package is not installable from the current ones.
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
    fi
}

# Start a daemon in the foreground under nohup and record its PID (name and PID, one a line).
launch() {
    local name=$1; shift
    nohup "$@" >"$STATE/log/$name.out" 2>&1 &
    echo "$name $!" >>"$STATE/pids"
}

# Wait until `check` succeeds, or fail with the daemon's log.
wait_for() {
    local what=$1 log=$2 check=$3
    local deadline=$((SECONDS + 45))
    while [ $SECONDS -lt $deadline ]; do
        if eval "$check" >/dev/null 2>&1; then return 0; fi
        sleep 0.5
    done
    echo "---- $log" >&2; tail -n 30 "$log" >&2 || true
    die "$what did not come up"
}

start() {
    [ "$(id -u)" -eq 0 ] || die "start runs the daemons as root (SlurmUser=root); run it as root"
    export PATH="$PATH:/usr/sbin"
    need_commands
    [ ! -s "$STATE/pids" ] || die "$STATE/pids exists: a cluster may still run there ($0 stop $STATE)"
    # A link to a test cluster's config whose daemons are all gone: a killed run never reached `stop`.
    if [ -L "$SYSTEM_CONF" ] && [[ "$(readlink "$SYSTEM_CONF")" == */debate-audit-*slurm*/etc/slurm.conf ]]; then
        local other alive=""
        other=$(dirname "$(dirname "$(readlink "$SYSTEM_CONF")")")
        if [ -f "$other/pids" ]; then
            while read -r _ pid; do kill -0 "$pid" 2>/dev/null && alive=yes; done <"$other/pids"
        fi
        if [ -z "$alive" ]; then
            rm -f "$SYSTEM_CONF"
            echo "cluster.sh: removed the stale link $SYSTEM_CONF (no daemon of $other runs)"
        fi
    fi
    if [ -e "$SYSTEM_CONF" ] || [ -L "$SYSTEM_CONF" ]; then
        die "$SYSTEM_CONF exists (this machine has a SLURM of its own, or another test cluster runs): not starting"
    fi
    rm -rf "$STATE"/{etc,log,munge,ctld,spool,db,dev}  # a previous, stopped cluster in the same folder
    mkdir -p "$STATE"/{etc,log,munge,ctld,spool,db,dev}
    chmod 711 "$STATE/munge"
    local host; host=$(hostname -s)

    # munge: a private key and socket.
    mungekey --create --keyfile="$STATE/munge/munge.key" --force
    chmod 400 "$STATE/munge/munge.key"
    launch munged munged --foreground --force --socket="$STATE/munge/munge.socket.2" \
        --key-file="$STATE/munge/munge.key" --pid-file="$STATE/munge/munged.pid" \
        --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/munged.seed"
    wait_for munged "$STATE/log/munged.out" "test -S '$STATE/munge/munge.socket.2'"

    # MariaDB for slurmdbd: private data directory, loopback only, a throwaway database without grants.
    mariadb-install-db --no-defaults --datadir="$STATE/db" --user=root --skip-test-db \
        >"$STATE/log/mariadb-install.log" 2>&1 || { tail "$STATE/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    launch mariadbd mariadbd --no-defaults --datadir="$STATE/db" --user=root --skip-grant-tables \
        --bind-address=127.0.0.1 --port="$DB_PORT" --socket="$STATE/db/mysql.sock" \
        --pid-file="$STATE/db/mariadbd.pid" --log-error="$STATE/log/mariadbd.log" \
        --innodb-buffer-pool-size=64M --skip-log-bin
    wait_for mariadbd "$STATE/log/mariadbd.log" "test -S '$STATE/db/mysql.sock'"

    local auth="AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket.2"
    cat >"$STATE/etc/slurmdbd.conf" <<EOF
$auth
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=root
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$STATE/etc/slurmdbd.conf"

    # Fake GPU devices: gres/gpu needs a File per device; nothing on this node reads them.
    : >"$STATE/dev/fakegpu0"; : >"$STATE/dev/fakegpu1"
    cat >"$STATE/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$host Name=gpu File=$STATE/dev/fakegpu[0-1]
EOF
    cat >"$STATE/etc/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
$auth
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# For slurmdbd connections this names the munge socket (AuthInfo does not reach them).
AccountingStoragePass=$STATE/munge/munge.socket.2
AccountingStorageEnforce=associations
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment
MinJobAge=600
DefMemPerCPU=1000
NodeName=$host NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=$NODE_MEM_MB Gres=gpu:$NODE_GPUS State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
EOF
    cat >"$STATE/env" <<EOF
export SLURM_CONF=$STATE/etc/slurm.conf
export PATH="\$PATH:/usr/sbin"
EOF
    export SLURM_CONF="$STATE/etc/slurm.conf"
    mkdir -p "$(dirname "$SYSTEM_CONF")"
    ln -s "$SLURM_CONF" "$SYSTEM_CONF"
    echo "$SLURM_CONF" >"$STATE/system-conf-link"

    launch slurmdbd slurmdbd -D
    # slurmdbd 24.11 with MariaDB 11.8 (Debian 13) can exit on its first connection to a fresh server
    # ("5027 Number of columns in result (=1) set execeeds maxmimum ... (=0)"); a second start connects.
    sleep 3
    if ! kill -0 "$(awk '$1 == "slurmdbd" {p = $2} END {print p}' "$STATE/pids")" 2>/dev/null; then
        echo "cluster.sh: slurmdbd exited at once ($(grep -m1 -o 'error: .*' "$STATE/log/slurmdbd.log" || true)); starting it again"
        launch slurmdbd slurmdbd -D
    fi
    wait_for slurmdbd "$STATE/log/slurmdbd.log" "sacctmgr -n list cluster"
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
    sacctmgr -i add account "$ACCOUNT" description=test organization=test >/dev/null
    sacctmgr -i add user root account="$ACCOUNT" >/dev/null

    launch slurmctld slurmctld -D -i
    wait_for slurmctld "$STATE/log/slurmctld.log" "scontrol ping | grep -q UP"
    launch slurmd slurmd -D -N "$host"
    wait_for slurmd "$STATE/log/slurmd.log" "sinfo -h -N -o %T | grep -qE '^(idle|mixed|allocated)'"
    echo "cluster.sh: SLURM cluster $CLUSTER up (node $host: $NODE_CPUS CPUs, $NODE_GPUS fake GPUs; partitions cpu, gpu); source $STATE/env"
}

stop() {
    if [ -f "$STATE/pids" ]; then
        if [ -f "$STATE/env" ]; then
            # Cancel what is still queued or running on this cluster first, so no job outlives it.
            (source "$STATE/env"; scancel --user="$(id -un)" >/dev/null 2>&1 || true)
        fi
        # Reverse start order: slurmd, slurmctld, slurmdbd, mariadbd, munged.
        tac "$STATE/pids" | while read -r name pid; do
            if kill -0 "$pid" 2>/dev/null; then
                kill -TERM "$pid" 2>/dev/null || true
                for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
                if kill -0 "$pid" 2>/dev/null; then
                    echo "cluster.sh: $name ($pid) ignored TERM; killing it" >&2
                    kill -KILL "$pid" 2>/dev/null || true
                fi
            fi
            echo "cluster.sh: stopped $name ($pid)"
        done
        rm -f "$STATE/pids"
    else
        echo "cluster.sh: no daemons recorded in $STATE/pids"
    fi
    # The default-config link, only if it is still the one this cluster made.
    if [ -f "$STATE/system-conf-link" ]; then
        if [ "$(readlink "$SYSTEM_CONF" 2>/dev/null)" = "$(cat "$STATE/system-conf-link")" ]; then
            rm -f "$SYSTEM_CONF"
            echo "cluster.sh: removed the link $SYSTEM_CONF"
        fi
        rm -f "$STATE/system-conf-link"
    fi
}

case "${1:-}" in
    install) install ;;
    start) [ -n "${2:-}" ] || die "usage: $0 start STATE"; STATE=$(realpath -m "$2"); start ;;
    stop) [ -n "${2:-}" ] || die "usage: $0 stop STATE"; STATE=$(realpath -m "$2"); stop ;;
    *) die "usage: $0 install | start STATE | stop STATE" ;;
esac
