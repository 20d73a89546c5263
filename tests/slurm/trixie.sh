#!/usr/bin/env bash
# The SLURM test cluster (tests/slurm/cluster.sh) on SLURM >= 23.11: Debian 13's slurm-wlm (24.11) in a chroot,
# for a host whose own packages are older (Debian 12: 22.05). SLURM 23.11 changed how a job step inherits
# --cpus-per-task (SLURM_TRES_PER_TASK), which is what the GPU jobs' job steps must survive (issue 46).
#
#   tests/slurm/trixie.sh build ROOT               debootstrap Debian 13 into ROOT with cluster.sh's packages
#                                                  and the shared libraries the host's Python needs (root, network)
#   tests/slurm/trixie.sh start ROOT STATE         bind-mount what the workflow needs into ROOT, then start
#                                                  cluster.sh's cluster inside it (STATE: a path inside ROOT)
#   tests/slurm/trixie.sh exec ROOT [CMD...]       run CMD inside ROOT, in the current directory (default: a shell)
#   tests/slurm/trixie.sh stop ROOT STATE          stop the cluster, then undo exactly the mounts `start` made
#
# Everything runs inside the chroot: the daemons, the client commands (sbatch, squeue, sacct, srun, scancel) and
# Snakemake itself, from the project's own .venv (the host's Python runs on Debian 13's newer glibc). The chroot
# sees the same paths as the host: the repository's parent folder (the checkout, ../shared, .venv) and the
# prefix the .venv's Python comes from are bind-mounted at their own paths. /tmp is the chroot's own, so STATE
# and pytest's scratch folders live there. The ports default to 26817-26820, off the host cluster's 16817.
#
#   tests/slurm/trixie.sh start /srv/trixie /tmp/slurm-trixie
#   tests/slurm/trixie.sh exec /srv/trixie bash -c 'source /tmp/slurm-trixie/env && sinfo'
#   tests/slurm/trixie.sh stop /srv/trixie /tmp/slurm-trixie
#
# slurmdbd 24.11 against Debian 13's MariaDB 11.8 usually exits on its first connection to the fresh server
# ("5027 Number of columns in result (=1) set execeeds maxmimum allowed number of columns (=0)") and connects on
# a second start: cluster.sh starts it again when it exits at once.
#
# `exec` mounts nothing: run it between `start` and `stop`. The SLURM test's smoke DAG was run this way (issue 46)
# by a script calling tests/test_slurm.py's helpers (site_profile, snakemake, sacct_jobs) and its slow tests
# against STATE; the test module's own fixture would start a second cluster.sh cluster instead.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER=$REPO/tests/slurm/cluster.sh
export DEBATE_AUDIT_SLURM_PORT_BASE=${DEBATE_AUDIT_SLURM_PORT_BASE:-26817}
# cluster.sh's packages, and what the host's pyenv-built Python links against beyond libc.
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server libssl3t64 libffi8 libsqlite3-0 libbz2-1.0
    liblzma5 libreadline8t64 libncursesw6 libuuid1 zlib1g libexpat1 libgomp1 procps hostname)

die() { echo "trixie.sh: $*" >&2; exit 1; }

need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root (chroot, mount)"; }

# A clean environment inside the chroot, /usr/sbin on PATH for the daemons.
in_root() {
    local root=$1; shift
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
        PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
        DEBATE_AUDIT_SLURM_PORT_BASE="$DEBATE_AUDIT_SLURM_PORT_BASE" "$@"
}

build() {
    need_root build
    command -v debootstrap >/dev/null || die "build needs debootstrap (apt-get install debootstrap)"
    [ ! -e "$ROOT/etc/debian_version" ] || die "$ROOT already holds a system"
    debootstrap --variant=minbase trixie "$ROOT" http://deb.debian.org/debian
    chroot "$ROOT" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
    in_root "$ROOT" slurmctld -V
}

# Bind-mount $1 (host) at the same path inside ROOT, unless something is mounted there already; record it.
# rec: with the mounts below it (slurmd needs /sys/fs/cgroup, sbatch /dev/pts), kept from propagating back.
bind() {
    local src=$1 mode=${2:-rw} dst="$ROOT$1"
    mountpoint -q "$dst" && return 0
    mkdir -p "$dst"
    if [ "$mode" = rec ]; then
        mount --rbind "$src" "$dst"
        mount --make-rslave "$dst"
    else
        mount --bind "$src" "$dst"
        [ "$mode" = rw ] || mount -o remount,bind,ro "$dst"
    fi
    echo "$dst" >>"$MOUNTS"
}

mount_all() {
    local python prefix
    python=$(readlink -f "$REPO/.venv/bin/python") || die "no $REPO/.venv/bin/python (make install)"
    prefix=$(dirname "$(dirname "$python")")  # e.g. /root/.pyenv/versions/3.11.7
    mountpoint -q "$ROOT/proc" || { mount -t proc proc "$ROOT/proc"; echo "$ROOT/proc" >>"$MOUNTS"; }
    bind /sys rec
    bind /dev rec
    bind "$(dirname "$REPO")"  # the checkout, ../shared and the .venv, at their host paths
    case "$prefix" in "$(dirname "$REPO")"/*) ;; *) bind "$prefix" ro ;; esac
    in_root "$ROOT" "$REPO/.venv/bin/python" -c "import snakemake_executor_plugin_slurm" \
        || die "the project's .venv does not run inside $ROOT (missing shared libraries? see $0 build)"
}

unmount_all() {
    [ -f "$MOUNTS" ] || return 0
    tac "$MOUNTS" | while read -r dst; do
        umount -R "$dst" && echo "trixie.sh: unmounted $dst" || echo "trixie.sh: could not unmount $dst" >&2
    done
    rm -f "$MOUNTS"
}

start() {
    need_root start
    in_root "$ROOT" slurmctld -V >/dev/null 2>&1 || die "$ROOT has no slurmctld ($0 build $ROOT)"
    mkdir -p "$ROOT$STATE"
    MOUNTS=$ROOT$STATE.mounts
    mount_all
    if ! in_root "$ROOT" bash "$CLUSTER" start "$STATE"; then
        # the daemons it did start hold the mounts: stop them first
        in_root "$ROOT" bash "$CLUSTER" stop "$STATE" || true
        unmount_all
        die "the cluster did not start (logs: $ROOT$STATE/log)"
    fi
    echo "trixie.sh: $(in_root "$ROOT" slurmctld -V) in $ROOT; clients: $0 exec $ROOT bash -c 'source $STATE/env && ...'"
}

stop() {
    need_root stop
    MOUNTS=$ROOT$STATE.mounts
    in_root "$ROOT" bash "$CLUSTER" stop "$STATE" || true
    unmount_all
}

run_in_root() {
    need_root exec
    [ $# -gt 0 ] || set -- bash
    chroot "$ROOT" /usr/bin/env HOME=/root PATH="$REPO/.venv/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" \
        DEBATE_AUDIT_SLURM_PORT_BASE="$DEBATE_AUDIT_SLURM_PORT_BASE" bash -c 'cd "$0" && exec "$@"' "$PWD" "$@"
}

case "${1:-}" in
    build) [ -n "${2:-}" ] || die "usage: $0 build ROOT"; ROOT=$(realpath -m "$2"); build ;;
    start | stop)
        [ -n "${2:-}" ] && [ -n "${3:-}" ] || die "usage: $0 $1 ROOT STATE"
        [[ "$3" == /* ]] || die "STATE is a path inside ROOT: give it absolute (/tmp/slurm-trixie)"
        ROOT=$(realpath -m "$2"); STATE=$3; "$1" ;;
    exec) [ -n "${2:-}" ] || die "usage: $0 exec ROOT [CMD...]"; ROOT=$(realpath -m "$2"); shift 2; run_in_root "$@" ;;
    *) die "usage: $0 build ROOT | start ROOT STATE | exec ROOT [CMD...] | stop ROOT STATE" ;;
esac
