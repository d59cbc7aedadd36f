#!/usr/bin/env bash
# test_openmpi.sh - Open MPI (pml cm, mtl ofi) over the "omx" libfabric provider: the MPI test
# program mpi_check (point-to-point over every size threshold with verification, ANY_SOURCE /
# ANY_TAG, probes, Ssend, cancel, Barrier, Bcast, Allreduce, Alltoall, Allgather) as one
# MPI_COMM_WORLD of 2 and 4 ranks:
#   - within one host (one namespace: omx same-host path),
#   - across 2 and 4 namespaces joined by a bridge (ranks of other hosts are started by orted
#     daemons launched through an ip-netns-exec agent, see lib_mpi.sh), and 2 ranks per host,
#   - with FI_AV_TABLE, and without remote CQ data (ofi_tag_1, no MPI_Ssend there),
#   - under 5% frame loss (nftables netdev ingress rules on the hosts' interfaces).
# Each job runs under `timeout` (a hanging job's stacks and counters are printed). MPI_JOBS="NAME..."
# runs only the jobs named. SKIP (exit 0) only if mpirun / mpicc are not installed.
set -u
SRC=${OMX_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
source "$SRC/tests/integration/lib/netns.sh"
source "$SRC/tests/integration/lib/omx.sh"
source "$SRC/ofi/tests/lib_ofi.sh"
source "$SRC/ofi/tests/lib_mpi.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
	echo "SKIP: mpirun/mpicc not installed (openmpi-bin, libopenmpi-dev)"
	echo "0 passed, 0 failed"
	exit 0
fi
FIDIR=${OMX_FI_DIR:-$OMX_BUILD/ofi}
P=$FIDIR/mpi_check
[ -x "$P" ] || { ko "MPI test program $P not built (MPI not found by CMake?)"; finish; }
[ -e "$FIDIR/libomx-fi.so" ] || { ko "provider $FIDIR/libomx-fi.so not built"; finish; }
omx_netns_setup 4 1500 || { ko "namespace setup"; finish; }
mpi_setup "$FIDIR" || { ko "MPI setup (addresses, agent)"; finish; }
MPI_ENV="OMX_FI_VERBOSE=1 OMX_DEBUG_SIGNAL=2"
MPI_TIMEOUT=${MPI_TIMEOUT:-45}
TIMEOUTS=0

# job NAME "HOSTS" NP NHOSTS DATA [mpirun args --] [program args]: run, then check the output:
# PASSED, no FAIL line, endpoints on NHOSTS distinct NICs, remote CQ data in use or not (DATA).
job() {
	local name=$1 hosts=$2 np=$3 nh=$4 data=$5 rc nics neps ndata
	shift 5
	if [ -n "${MPI_JOBS:-}" ] && [[ " $MPI_JOBS " != *" $name "* ]]; then
		return
	fi
	if [ "$TIMEOUTS" -ge 2 ]; then
		ko "$name: not run (two jobs timed out already)"
		return
	fi
	local -a margs=() pargs=()
	if [[ " $* " == *" -- "* ]]; then
		while [ "$1" != "--" ]; do margs+=("$1"); shift; done
		shift
	fi
	pargs=("$@")
	mpi_run "$name" "$hosts" "$np" "${margs[@]}" -- "$P" "${pargs[@]}"
	rc=$?
	[ "$rc" != 124 ] && [ "$rc" != 137 ] || TIMEOUTS=$((TIMEOUTS + 1))
	local log=$TMP/$name.log
	nics=$(sed -n 's/^omx-fi: endpoint \([0-9a-f]*\):.*/\1/p' "$log" | sort -u | wc -l)
	neps=$(grep -c '^omx-fi: endpoint' "$log")
	ndata=$(grep -c '^omx-fi: endpoint.*, remote CQ data' "$log")
	local what="$name: $np ranks on $nh host(s), mpi_check"
	if [ "$rc" = 0 ] && grep -q '^PASSED$' "$log" && ! grep -q '^FAIL' "$log"; then
		ok "$what"
	else
		ko "$what (mpirun rc $rc)"
		grep '^FAIL' "$log"
		grep -v '^ok - \|^omx-fi: ' "$log" | tail -n 15 | sed "s/^/  [$name] /"
		grep '^ok - ' "$log" | tail -n 4 | sed "s/^/  [$name last passed] /"
		[ ! -s "$TMP/$name.hang" ] || sed "s/^/  [$name hang] /" "$TMP/$name.hang"
	fi
	check "$name: $neps endpoints (one per rank) on $nics NIC(s)" test "$neps" = "$np" -a "$nics" = "$nh"
	if [ "$data" = data ]; then
		check "$name: Open MPI uses remote CQ data (ofi_tag_full)" [ "$ndata" = "$np" ]
	else
		check "$name: no remote CQ data (ofi_tag_1)" [ "$ndata" = 0 ]
	fi
}

# Within one host, with the endpoints' close summaries (OMX_VERBOSE): MPI's small messages (the
# provider's 16-byte header and the payload, two segments) take the same-host eager path, and
# the receiver takes them from the ring on its fast path (through the provider's unexpected
# handler, which matches every message).
MPI_ENV="OMX_FI_VERBOSE=1 OMX_DEBUG_SIGNAL=2 OMX_VERBOSE=1"
job local2 "0:2" 2 1 data
if [ -z "${MPI_JOBS:-}" ] || [[ " $MPI_JOBS " == *" local2 "* ]]; then
	fast=$(omx_fast_frames "$TMP/local2.log")
	check "local2: same-host MPI messages received on the fast path ($fast frames)" test "$fast" -gt 0
fi
# The same within one host with the shared heap preloaded into the ranks (not built under the
# sanitizers): mpi_check's malloc'ed buffers come from the pools, and its large messages are
# read from the senders' pools with memcpy (the provider's header copied into the pool too).
HEAP=$OMX_BUILD/src/libomx-shared-heap.so
if [ -e "$HEAP" ] && { [ -z "${MPI_JOBS:-}" ] || [[ " $MPI_JOBS " == *" heap2 "* ]]; }; then
	MPI_ENV="OMX_FI_VERBOSE=1 OMX_DEBUG_SIGNAL=2 OMX_VERBOSE=1 LD_PRELOAD=$HEAP"
	job heap2 "0:2" 2 1 data
	pc=$(sed -n 's/.*; \([0-9]*\) single copies read from shared pools;.*/\1/p' "$TMP/heap2.log" | awk '{s += $1} END {print s + 0}')
	check "heap2: large MPI messages read from the senders' pools ($pc single copies)" test "$pc" -gt 0
	# the receive buffers are pooled too, behind the provider's header: senders write their share
	cw=$(sed -n 's/.* \([0-9]*\) bytes written for receivers. single copies.*/\1/p' "$TMP/heap2.log" | awk '{s += $1} END {print s + 0}')
	check "heap2: senders wrote part of those messages into the receivers' pooled buffers ($cw bytes)" test "$cw" -gt 0
fi
MPI_ENV="OMX_FI_VERBOSE=1 OMX_DEBUG_SIGNAL=2"
job local4 "0:4" 4 1 data
job remote2 "0:1 1:1" 2 2 data
job remote4 "0:1 1:1 2:1 3:1" 4 4 data
job mixed4 "0:2 1:2" 4 2 data
job av-table "0:1 1:1" 2 2 data --mca mtl_ofi_av table -- quick
# Without remote CQ data (source rank in the tag). No MPI_Ssend: see docs/mpi.md (Open MPI 4.1).
job tag1 "0:1 1:1" 2 2 nodata --mca mtl_ofi_tag_mode ofi_tag_1 -- quick nossend

# Frame loss: 5% of the omx frames arriving at each host are dropped; short resend timers.
for i in 0 1; do omx_nft_loss "$i" 5 || ko "loss rule on host $i"; done
MPI_ENV="OMX_FI_VERBOSE=1 OMX_DEBUG_SIGNAL=2 OMX_RESEND_DELAY_MS=40 OMX_PULL_RESEND_MS=40"
# Usually about 2 s each; room for a loaded machine.
MPI_TIMEOUT=${MPI_LOSS_TIMEOUT:-100}
job loss2 "0:1 1:1" 2 2 data -- quick
# 4 ranks, 2 per namespace: same-host and remote partners at once, under loss.
job loss4 "0:2 1:2" 4 2 data -- quick
if [ -z "${MPI_JOBS:-}" ] || [[ " $MPI_JOBS " == *" loss"* ]]; then
	d0=$(omx_nft_count 0 loss)
	d1=$(omx_nft_count 1 loss)
	check "loss rules dropped frames on both hosts ($d0, $d1)" test "${d0:-0}" -gt 0 -a "${d1:-0}" -gt 0
fi
finish
