#!/usr/bin/env bash
# side_by_side.sh - omx against Open MPI's shared memory in the same two processes (not a test):
# bench/side_by_side.c under mpirun, both ranks pinned to cores 0 and 1 in one network namespace
# with an omx interface, MPI and omx ping-pong blocks in turn. See side_by_side.c for why; in
# short, separate runs of each stack (bench/same_host.sh) see the host move the VM's vCPUs near
# and far between them, and here both stacks share every placement.
#
#   sudo bench/side_by_side.sh [runs] [lengths] [round trips a block] [blocks]
#
# Defaults: 5 runs per MPI transport; lengths 0,1,8,64; 1000 round trips a block; 400 blocks.
# Environment: OMX_BUILD [./build]; TRANSPORTS ["vader-cma vader-none"]: Open MPI's ob1 over
# btl vader,self with btl_vader_single_copy_mechanism cma / none, or "ucx" (pml ucx,
# UCX_TLS=sm,self); MTU [9000]; any OMX_* variable is passed to both ranks (the progress thread
# stays on by default, as for any omx program); PAIRS_CSV=<file> keeps every pair of blocks
# (transport,run,pair,length,MPI us,omx us,probe us), for analyses the summary does not make;
# SIDE_BY_SIDE_PREPOST=1: omx's loop posts each receive before the send it answers (side_by_side.c).
# Output: each run's per-length CSV lines on stderr (side_by_side.c), then one line per
# (transport, length, placement) over the pairs of blocks of all runs, sorted by the shared-flag
# probe taken right before each pair, against the lowest probe of the invocation: up to 1.4x
# "nearest", up to 3x "near", beyond "far" (the host puts the two vCPUs on one core's two threads,
# on two cores, or far apart, for seconds at a time: a flag's hop then reads ~0.03, ~0.05 or
# ~0.25 us here). For each: the median omx/MPI ratio (< 1: omx is faster), its quartiles, the
# pairs' count, and the medians of the probe's, MPI's and omx's half round trips (us). The nearer
# the vCPUs, the more of a hop is software.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${OMX_BUILD:-$SRC/build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RUNS=${1:-5}
LENGTHS=${2:-0,1,8,64}
BLOCK=${3:-1000}
BLOCKS=${4:-400}
TRANSPORTS=${TRANSPORTS:-"vader-cma vader-none"}
command -v mpicc >/dev/null || { echo "side_by_side: mpicc not found (scripts/deps.sh installs Open MPI)" >&2; exit 2; }
source "$SRC/tests/integration/lib/netns.sh" || exit 1
TMP=$(mktemp -d /tmp/omx-sidebyside.XXXXXX)
omx_at_exit "rm -rf $TMP"
omx_netns_setup 2 "${MTU:-9000}" >/dev/null || exit 1
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/lock"
# The build's (bench/CMakeLists.txt builds it where an MPI is installed), else compiled here.
PROG=$BUILD/bench/side_by_side
if [ ! -x "$PROG" ]; then
	PROG=$TMP/side_by_side
	mpicc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$SRC/include" -o "$PROG" "$HERE/side_by_side.c" \
		-L"$BUILD/src" -lopen-mx -Wl,-rpath,"$BUILD/src" || exit 1
fi
export OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock"
xs=()
for v in $(compgen -e | grep '^OMX_'); do xs+=(-x "$v"); done
[ -n "${SIDE_BY_SIDE_PREPOST:-}" ] && xs+=(-x SIDE_BY_SIDE_PREPOST)
for ((r = 0; r < RUNS; r++)); do
	for t in $TRANSPORTS; do
		case $t in
		vader-*) mca=(--mca pml ob1 --mca btl vader,self --mca btl_vader_single_copy_mechanism "${t#vader-}") ;;
		ucx) mca=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ^ucx
			-x UCX_TLS=sm,self -x UCX_WARN_UNUSED_ENV_VARS=n) ;;
		*) echo "side_by_side: unknown transport $t" >&2; exit 2 ;;
		esac
		omx_host_exec 0 timeout 600 mpirun --allow-run-as-root --bind-to none "${mca[@]}" "${xs[@]}" \
			-np 1 taskset -c 0 "$PROG" "$LENGTHS" "$BLOCK" "$BLOCKS" : \
			-np 1 taskset -c 1 "$PROG" "$LENGTHS" "$BLOCK" "$BLOCKS" 2>/dev/null |
			grep -E '^(pair,)?[0-9]+,' | sed "s/^/$t,$r,/" >"$TMP/run.csv"
		grep -v ',pair,' "$TMP/run.csv" >&2
		grep ',pair,' "$TMP/run.csv" >>"$TMP/all.csv"
	done
done
[ -s "$TMP/all.csv" ] || { echo "side_by_side: no results" >&2; exit 1; }
[ -n "${PAIRS_CSV:-}" ] && cp "$TMP/all.csv" "$PAIRS_CSV"
python3 - "$TMP/all.csv" <<'EOF'
import sys, collections
pairs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, r, _, length, mpi, omx, probe = line.strip().split(",")
    pairs[(t, int(length))].append((float(mpi), float(omx), float(probe)))
def q(v, f):
    v = sorted(v)
    return v[int(len(v) * f)]
lowest = min(x[2] for v in pairs.values() for x in v)
for (t, length) in sorted(pairs):
    v = pairs[(t, length)]
    for kind, lo, hi in (("nearest", 0, 1.4), ("near", 1.4, 3), ("far", 3, float("inf"))):
        sel = [x for x in v if lo * lowest < x[2] <= hi * lowest]
        if not sel:
            continue
        ratios = [o / m for m, o, p in sel]
        print("%-12s %7d B  %-7s omx/MPI %.3f [%.3f-%.3f] (%5d pairs)  flag %.3f  MPI %.3f  omx %.3f us" % (t, length,
              kind, q(ratios, 0.5), q(ratios, 0.25), q(ratios, 0.75), len(sel), q([x[2] for x in sel], 0.5),
              q([x[0] for x in sel], 0.5), q([x[1] for x in sel], 0.5)))
EOF
