#!/usr/bin/env bash
# same_host.sh - same-host benchmark (not a test): omx_perf with both ends on one "host" (one
# network namespace, one board), in the modes of the same-host path, against Open MPI's
# shared-memory transport and the kernel's local channels, median of several runs.
#
#   sudo bench/same_host.sh [runs] [omx_perf client options...]
#
# Modes: shm (default: shared-memory rings + single copy above OMX_SHARED_RNDV_THRESHOLD),
# twocopy (OMX_SHARED_SINGLE_COPY=0: large messages pulled through the rings), frames
# (OMX_DISABLE_SHARED=1: frames over Unix datagram sockets, the previous path); pool (shm with
# omx_perf -A: both sides' buffers from omx_shared_alloc, read by the receiver with one memcpy
# from OMX_SHARED_POOL_RNDV on);
# vader-cma / vader-none: Open MPI (ob1, btl vader,self) with btl_vader_single_copy_mechanism
# cma / none (bench/mpi_shm_pingpong.c, compiled with mpicc here; mpirun as root); ucx: the same
# program over Open MPI's pml ucx with UCX's shared-memory transports (UCX_TLS=sm,self); mpi-omx:
# the same program over omx itself (pml cm, mtl ofi, the build's provider: OMX_BUILD/ofi);
# mpi-omx-heap: mpi-omx with the ranks' large mallocs from the shared pool (LD_PRELOAD of the
# build's libomx-shared-heap.so);
# and the baselines of bench/local_pingpong.c: pipe, unix (stream socketpair), flag (a bare
# shared-memory flag + memcpy: the floor of any shared-memory path), and ring (bench/ring_pingpong.c:
# omx's shared-memory ring alone, frames of the message length + 40 header bytes, up to 9176 B:
# what the same-host path costs without the MX protocol on top).
# self: one process, two endpoints, one thread (bench/self_pingpong.c, up to 4 KiB): no second
# CPU, so the figure is the library's own software cost per message (SELF: another binary, e.g.
# built against an older library, for before/after comparisons).
# Every mode runs the lengths of the omx_perf options (-S, -E, -M; -N iterations, -W warm-up
# round trips for omx_perf, by default a tenth of -N as the MPI program does; at most 20000
# for the baselines and shrinking with the length for them and for MPI, at least 20); with -U the
# replies are empty and the bandwidth counts one direction (both otherwise), in every mode; -T
# (omx_perf -T: the sender writes every line of its buffer before each send) applies to the omx
# modes and the MPI ones (vader-*, ucx, mpi-omx), not to the local baselines; so does -H
# (omx_perf -H: buffers of transparent huge pages, both sides; mpi_shm_pingpong -H the same).
# A mode may carry extra variables: "shm+OMX_SHARED_RNDV_THRESHOLD=16384", "twocopy+OMX_SHARED_NT_THRESHOLD=0",
# "mpi-omx+OMX_PROGRESS_THREAD=0" (exported to both ranks).
# Environment: OMX_BUILD [./build], MTU [9000] of the interface, MODES ["shm twocopy frames"],
# PAIRS ("shm/vader-none shm/vader-cma": a ratio line per length, A's time over B's, run by
# run, as for BASE_BUILD; both modes must be in MODES),
# BASE_BUILD (another build tree, e.g. of an earlier commit: every mode also runs as "mode~base"
# with that build's omx_perf, self_pingpong, ring_pingpong and provider, right before or after the
# mode in each run, alternately (ABBA); then a ratio line per length compares the two run by run,
# over the runs where both were near, and over those where both were far apart, if any),
# PLACES ["any"]: any (not pinned), diff (the two processes pinned to cores 0 and 1), same (both
# pinned to core 0; the busy-polling modes then yield between polls: omx_perf -y, Open MPI
# mpi_yield_when_idle=1), PERF (another omx_perf binary, e.g. an older build, for before/after comparisons).
# Runs are interleaved: run r of every mode and placement before run r+1 of any.
# Output: one line per (mode, placement, length): the median latency (us, half a round trip)
# and bandwidth (MB/s) over the runs, and their spread (min-max latency).
# Placement "diff": the host moves the VM's vCPUs, near each other or far apart, for seconds at a
# time (a cache line between them then costs 4-5x more on the VMs measured). Before and after each
# run, a probe (local_pingpong shm: a flag's half round trip between CPU 0 and 1, ~10 ms) says
# which; runs whose probe exceeds 3x the lowest of the invocation are left out of the medians
# when a point has other runs (the line says how many, and a "/far" line gives theirs; or "ALL far apart" when no run was
# near), and each run's probe is on stderr.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${OMX_BUILD:-$SRC/build}
PERF=${PERF:-$BUILD/tools/omx_perf}
RUNS=${1:-5}
shift || true
MODES=${MODES:-"shm twocopy frames"}
PLACES=${PLACES:-any}
# The omx_perf options that the other modes follow.
S=0 E=4194305 M=2 N=1000 U=0 T=0 HP=0 W=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	case ${args[i]} in
	-W) W=${args[i + 1]} ;;
	-S) S=${args[i + 1]} ;;
	-E) E=${args[i + 1]} ;;
	-M) M=${args[i + 1]} ;;
	-N) N=${args[i + 1]} ;;
	-U) U=1 ;;
	-T) T=1 ;;
	-H) HP=1 ;;
	esac
done
# omx_perf warms up with the MPI program's rule (a tenth of the iterations, at least 10) unless -W
# is given: with its own default (10 round trips) the first length of a run, 0 B, read
# 0.01-0.02 us slower than the next ones (stop 36).
WARM=()
[ -z "$W" ] && WARM=(-W $((N / 10 < 10 ? 10 : N / 10)))
LENGTHS=""
for ((l = S; l < E; l = l ? l * M : 1)); do LENGTHS+=" $l"; done
source "$SRC/tests/integration/lib/netns.sh" || exit 1
TMP=$(mktemp -d /tmp/omx-samehost.XXXXXX)
omx_at_exit "rm -rf $TMP"
omx_netns_setup 2 "${MTU:-9000}" || exit 1
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/lock"
# Every omx process of the run: the one namespace's interface, its peers file, a private lock dir.
OMXENV=(OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock")
H=${OMX_HOSTNAME[0]}
MEDIAN='
import sys, statistics, collections
near = float(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] else 0.0
rows = collections.defaultdict(list)
for line in sys.stdin:
    f = line.strip().split(",")
    probe = float(f[4]) if len(f) > 4 and f[4] else 0.0
    rows[int(f[0])].append((float(f[2]), float(f[3]), near > 0 and probe > 3 * near))
for l in sorted(rows):
    near_rows = [r for r in rows[l] if not r[2]]
    keep = near_rows or rows[l]
    lat = [r[0] for r in keep]; bw = [r[1] for r in keep]
    far = len(rows[l]) - len(near_rows)
    note = (", %d far apart left out" % far if near_rows else ", ALL far apart") if far else ""
    print("%-18s %9d  %9.3f us  %9.1f MB/s  (%d runs%s, %.3f-%.3f us)" % (sys.argv[1], l, statistics.median(lat),
          statistics.median(bw), len(keep), note, min(lat), max(lat)))
    far_rows = [r for r in rows[l] if r[2]]
    if near_rows and far_rows:
        lat = [r[0] for r in far_rows]; bw = [r[1] for r in far_rows]
        print("%-18s %9d  %9.3f us  %9.1f MB/s  (%d far apart runs, %.3f-%.3f us)" % (sys.argv[1] + "/far", l,
              statistics.median(lat), statistics.median(bw), len(far_rows), min(lat), max(lat)))
'
LP=$BUILD/bench/local_pingpong
RP=$BUILD/bench/ring_pingpong
MPIPP=$TMP/mpi_shm_pingpong
if [[ " $MODES " == *" vader-"* || " $MODES " == *" ucx "* || " $MODES " == *" mpi-omx"* ]]; then
	mpicc -O2 -o "$MPIPP" "$HERE/mpi_shm_pingpong.c" || exit 1
fi
# pin PLACE SIDE: the command prefix pinning side 0 (server / rank 0) or 1 of a placement
pin() {
	case $1 in
	diff) echo "taskset -c $2" ;;
	same) echo "taskset -c 0" ;;
	*) echo "" ;;
	esac
}
run_once() { # mode place run
	local mode=$1 place=$2 r=$3 out="$TMP/$1@$2.$3.csv" extra=() yield=() popt=()
	local b=$BUILD perf=$PERF self=${SELF:-$BUILD/bench/self_pingpong}
	if [[ $mode == *"~base" ]]; then
		mode=${mode%~base} b=$BASE_BUILD perf=$BASE_BUILD/tools/omx_perf self=$BASE_BUILD/bench/self_pingpong
	fi
	local RP=$b/bench/ring_pingpong
	shift 3
	[ "$place" = same ] && yield=(-y)
	case $mode in
	pipe | unix | flag | ring)
		local cpus=() kind=oneway
		[ "$place" = diff ] && cpus=(0,1)
		[ "$place" = same ] && cpus=(0,0)
		[ $U = 0 ] && kind=echo
		for l in $LENGTHS; do
			n=$((200000000 / (l + 1)))
			[ $n -gt 20000 ] && n=20000
			[ $n -gt "$N" ] && n=$N
			[ $n -lt 20 ] && n=20
			if [ "$mode" = ring ]; then
				[ "$l" -le 9176 ] && "$RP" "$l" "$n" $kind "${cpus[@]}" # one frame per message
			else
				"$LP" "${mode/flag/shm}" "$l" "$n" $kind "${cpus[@]}"
			fi | awk -F, '{print $2","$3","$4","$5}'
		done >"$out"
		return
		;;
	vader-* | ucx | mpi-omx | mpi-omx+* | mpi-omx-heap | mpi-omx-heap+*)
		local mca pre=()
		if [[ $mode == mpi-omx* ]]; then
			# Open MPI over omx itself (pml cm, mtl ofi, our provider from the build), both ranks
			# in the one namespace: what an MPI job sees of omx's same-host path
			# ("mpi-omx+VAR=value+...": those variables too, exported to the ranks; mpi-omx-heap:
			# the ranks' mallocs from the shared pool, LD_PRELOAD=libomx-shared-heap.so)
			local more=() v
			[[ $mode == *+* ]] && IFS=+ read -r -a more <<<"${mode#*+}"
			[[ $mode == mpi-omx-heap* ]] && more+=(LD_PRELOAD="$b/src/libomx-shared-heap.so")
			pre=(omx_host_exec 0 env "${OMXENV[@]}" FI_PROVIDER_PATH="$b/ofi" "${more[@]}")
			mca=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include omx --mca btl self
				-x OMX_PEERS -x OMX_IFACES -x OMX_LOCK_DIR -x FI_PROVIDER_PATH)
			for v in "${more[@]}"; do mca+=(-x "${v%%=*}"); done
		elif [ "$mode" = ucx ]; then
			# UCX (Debian's libucx0 under Open MPI's pml ucx): its shared-memory transports only
			# (posix/sysv eager, cma for large messages); Open MPI selects pml ucx only over RDMA
			# devices unless told otherwise (pml_ucx_tls / pml_ucx_devices any)
			mca=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca osc ^ucx
				-x UCX_TLS=sm,self -x UCX_WARN_UNUSED_ENV_VARS=n)
		else
			mca=(--mca pml ob1 --mca btl vader,self --mca btl_vader_single_copy_mechanism "${mode#vader-}")
		fi
		[ "$place" = same ] && mca+=(--mca mpi_yield_when_idle 1)
		local pp=("$MPIPP" "$S" "$E" "$M" "$N")
		[ $U = 1 ] && pp+=(-U)
		[ $T = 1 ] && pp+=(-T)
		[ $HP = 1 ] && pp+=(-H)
		"${pre[@]}" timeout 600 mpirun --allow-run-as-root --bind-to none "${mca[@]}" -np 1 $(pin "$place" 0) "${pp[@]}" : \
			-np 1 $(pin "$place" 1) "${pp[@]}" 2>/dev/null | grep -E '^[0-9]+,' >"$out"
		return
		;;
	self*)
		# One process, two endpoints, one thread: the library's instructions per message only
		# (bench/self_pingpong.c); the placement does not apply. "self+VAR=value" as below.
		local senv=(env "${OMXENV[@]}" OMX_PROGRESS_THREAD=0)
		[[ $mode == *+* ]] && IFS=+ read -r -a more <<<"${mode#*+}" && senv+=("${more[@]}")
		for l in $LENGTHS; do
			[ "$l" -le 4096 ] || continue
			omx_host_exec 0 "${senv[@]}" timeout 120 "$self" "$l" "$N" |
				awk -F, '{printf "%s,%s,%.4f,0\n", $1, $2, $3 / 1000}'
		done >"$out"
		return
		;;
	shm*) ;;
	pool*) popt=(-A) ;;
	twocopy*) extra=(OMX_SHARED_SINGLE_COPY=0) ;;
	frames*) extra=(OMX_DISABLE_SHARED=1) ;;
	*) echo "unknown mode $mode" >&2; exit 2 ;;
	esac
	# "mode+VAR=value+VAR2=value": extra variables for this mode
	[[ $mode == *+* ]] && IFS=+ read -r -a more <<<"${mode#*+}" && extra+=("${more[@]}")
	local envs=(env "${OMXENV[@]}" "${extra[@]}")
	omx_host_exec 0 "${envs[@]}" timeout 300 $(pin "$place" 0) "$perf" -e 0 "${yield[@]}" >"$TMP/server.log" 2>&1 &
	local srv=$!
	for ((t = 0; t < 100; t++)); do
		grep -q '^Starting receiver' "$TMP/server.log" 2>/dev/null && break
		sleep 0.05
	done
	omx_host_exec 0 "${envs[@]}" timeout 300 $(pin "$place" 1) "$perf" -d "$H:0" -e 1 -P 0 -c - "${yield[@]}" "${popt[@]}" "${WARM[@]}" "$@" \
		2>/dev/null | grep -E '^[0-9]+,' >"$out"
	wait $srv
}
# shellcheck source=lib_quiet.sh
source "$HERE/lib_quiet.sh" # placement_probe, placement_of
# With BASE_BUILD, each mode's twin runs next to it, first in every other run.
ab_modes() { # run
	local m
	for m in $MODES; do
		if [ -z "${BASE_BUILD:-}" ]; then echo "$m"
		elif (($1 % 2)); then echo "$m~base $m"
		else echo "$m $m~base"; fi
	done
}
for ((r = 0; r < RUNS; r++)); do
	for place in $PLACES; do
		for mode in $(ab_modes $r); do
			p0="" p1=""
			[ "$place" = diff ] && p0=$(placement_probe "$LP")
			run_once "$mode" "$place" "$r" "$@"
			[ "$place" = diff ] && p1=$(placement_probe "$LP")
			p=$(placement_of "$p0" "$p1")
			echo "$p" >"$TMP/$mode@$place.$r.probe"
			[ -n "$p" ] && echo "same_host: $mode@$place run $r: placement probe $p0 / $p1 us" >&2
		done
	done
done
# The label of a mode's lines at a placement (the medians' and the ratios').
mode_label() {
	if [ "$PLACES" != any ]; then echo "$1@$2"; else echo "$1"; fi
}
NEAR=$(cat "$TMP"/*.probe 2>/dev/null | awk 'NF && (m == "" || $1 < m) {m = $1} END {print m}')
for place in $PLACES; do
	for mode in $(ab_modes 0); do
		label=$(mode_label "$mode" "$place")
		for ((r = 0; r < RUNS; r++)); do
			[ -f "$TMP/$mode@$place.$r.csv" ] || continue
			p=$(cat "$TMP/$mode@$place.$r.probe" 2>/dev/null)
			awk -v p="$p" -F, 'NF {print $1","$2","$3","$4","p}' "$TMP/$mode@$place.$r.csv"
		done | python3 -c "$MEDIAN" "$label" "$NEAR"
	done
done
# mode / mode~base, run by run: "run,length,latency,probe,0|1" lines (1: the base's)
RATIO='
import sys, statistics, collections
near = float(sys.argv[2]) if sys.argv[2] else 0.0
runs = collections.defaultdict(dict)
for line in sys.stdin:
    r, l, lat, probe, base = line.strip().split(",")
    runs[(int(r), int(l))][int(base)] = (float(lat), float(probe) if probe else 0.0)
printed = 0
for state in (("near", "far apart") if near > 0 else ("unprobed",)):
    by_len = collections.defaultdict(list)
    for (r, l), v in runs.items():
        if 0 not in v or 1 not in v:
            continue
        far = [near > 0 and v[i][1] > 3 * near for i in (0, 1)]
        if far[0] != far[1] or far[0] != (state == "far apart"):
            continue
        by_len[l].append(v[0][0] / v[1][0])
    printed += len(by_len)
    for l in sorted(by_len):
        q = sorted(by_len[l])
        print("%-18s %9d  %9.3f x %s (%d runs both %s, %.3f-%.3f; lower is faster)" % (sys.argv[1], l,
              statistics.median(q), sys.argv[3], len(q), state, q[0], q[-1]))
# Run by run needs both in one state in some run: say so rather than print nothing.
if not printed and runs:
    print("%-18s no run had both it and %s near, or both far apart: no run-by-run ratio" % (sys.argv[1], sys.argv[3]))
'
# ratio_feed A B PLACE: A's and B's runs as RATIO reads them (B flagged 1), run by run
ratio_feed() {
	local r m p
	for ((r = 0; r < RUNS; r++)); do
		for m in "$1" "$2"; do
			[ -f "$TMP/$m@$3.$r.csv" ] || continue
			p=$(cat "$TMP/$m@$3.$r.probe" 2>/dev/null)
			awk -v r="$r" -v p="$p" -v b="$([ "$m" = "$2" ] && echo 1 || echo 0)" -F, \
				'NF {print r","$1","$3","p","b}' "$TMP/$m@$3.$r.csv"
		done
	done
}
if [ -n "${BASE_BUILD:-}" ]; then
	for place in $PLACES; do
		for mode in $MODES; do
			ratio_feed "$mode" "$mode~base" "$place" | python3 -c "$RATIO" "$(mode_label "$mode" "$place")" "$NEAR" base
		done
	done
fi
# PAIRS: A's time over B's, run by run (the two run next to each other in a run: the same state
# of the VM far more often than two medians over the whole invocation are).
for pair in ${PAIRS:-}; do
	for place in $PLACES; do
		ratio_feed "${pair%/*}" "${pair#*/}" "$place" |
			python3 -c "$RATIO" "$(mode_label "${pair%/*}" "$place")" "$NEAR" "${pair#*/}"
	done
done
exit 0
