#!/usr/bin/env bash
# same_host.sh - same-host benchmark (not a test): omx_perf with both ends on one "host" (one
# network namespace, one board), in the modes of the same-host path, median of several runs.
#
#   sudo bench/same_host.sh [runs] [omx_perf client options...]
#
# Modes: shm (default: shared-memory rings + single copy above OMX_SHARED_RNDV_THRESHOLD),
# twocopy (OMX_SHARED_SINGLE_COPY=0: large messages pulled through the rings), frames
# (OMX_DISABLE_SHARED=1: frames over Unix datagram sockets, the previous path), and the
# baselines of bench/local_pingpong.c: pipe, unix (stream socketpair), flag (a bare shared-memory
# flag + memcpy: the floor of any shared-memory path), at the lengths of $LENGTHS; their
# bandwidth counts one direction per round trip, like omx_perf -U.
# A mode may carry extra variables: "shm+OMX_SHARED_RNDV_THRESHOLD=16384", "twocopy+OMX_SHARED_NT_THRESHOLD=0".
# Environment: OMX_BUILD [./build], MODES ["shm twocopy frames"], PERF (another omx_perf binary,
# e.g. an older build, for before/after comparisons).
# Output: one line per (mode, length): the median latency (us) and bandwidth (MB/s) over the runs.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${OMX_BUILD:-$SRC/build}
PERF=${PERF:-$BUILD/tools/omx_perf}
RUNS=${1:-5}
shift || true
MODES=${MODES:-"shm twocopy frames"}
source "$SRC/tests/integration/lib/netns.sh" || exit 1
TMP=$(mktemp -d /tmp/omx-samehost.XXXXXX)
omx_at_exit "rm -rf $TMP"
omx_netns_setup 2 9000 || exit 1
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/lock"
H=${OMX_HOSTNAME[0]}
MEDIAN='
import sys, statistics, collections
lat = collections.defaultdict(list); bw = collections.defaultdict(list)
for line in sys.stdin:
    l, n, us, mb = line.strip().split(",")[:4]
    lat[int(l)].append(float(us)); bw[int(l)].append(float(mb))
for l in sorted(lat):
    print("%-8s %9d  %9.2f us  %9.1f MB/s  (%d runs)" % (sys.argv[1], l, statistics.median(lat[l]), statistics.median(bw[l]), len(lat[l])))
'
LENGTHS=${LENGTHS:-"0 64 1024 4096 65536 1048576 4194304"}
LP=$BUILD/bench/local_pingpong
for mode in $MODES; do
	case $mode in
	pipe | unix | flag)
		for ((r = 0; r < RUNS; r++)); do
			for l in $LENGTHS; do
				n=$((200000000 / (l + 1)))
				[ $n -gt 20000 ] && n=20000
				[ $n -lt 20 ] && n=20
				"$LP" "${mode/flag/shm}" "$l" "$n" | awk -F, '{print $2","$3","$4","$5}'
			done
		done >"$TMP/$mode.0.csv"
		cat "$TMP/$mode.0.csv" | python3 -c "$MEDIAN" "$mode"
		continue
		;;
	shm*) extra=() ;;
	twocopy*) extra=(OMX_SHARED_SINGLE_COPY=0) ;;
	frames*) extra=(OMX_DISABLE_SHARED=1) ;;
	*) echo "unknown mode $mode" >&2; exit 2 ;;
	esac
	# "mode+VAR=value+VAR2=value": extra variables for this mode
	[[ $mode == *+* ]] && IFS=+ read -r -a more <<<"${mode#*+}" && extra+=("${more[@]}")
	envs=(env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock" "${extra[@]}")
	for ((r = 0; r < RUNS; r++)); do
		omx_host_exec 0 "${envs[@]}" timeout 300 "$PERF" -e 0 >"$TMP/server.log" 2>&1 &
		srv=$!
		for ((t = 0; t < 100; t++)); do
			grep -q '^Starting receiver' "$TMP/server.log" 2>/dev/null && break
			sleep 0.05
		done
		omx_host_exec 0 "${envs[@]}" timeout 300 "$PERF" -d "$H:0" -e 1 -P 0 -c - "$@" 2>/dev/null |
			grep -E '^[0-9]+,' >"$TMP/$mode.$r.csv"
		wait $srv
	done
	cat "$TMP/$mode".*.csv | python3 -c "$MEDIAN" "$mode"
done
exit 0
