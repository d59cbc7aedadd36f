#!/usr/bin/env bash
# stream.sh - one-way same-host streams (bench/stream.c; not a test): a sender that completes each
# send before the next and a receiver with one receive posted at a time, pinned to CPUs 1 and 0,
# in one network namespace. Alternates the build with BASE_BUILD when given (run by run).
#
#   sudo bench/stream.sh [runs] [count] [lengths...]        (defaults: 3, 500000, 8 1024)
# Environment: OMX_BUILD [./build-bench], BASE_BUILD (another build tree, optional).
# Output: build,length,count,ns_per_message,Mmsg_per_s per run.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
RUNS=${1:-3}
COUNT=${2:-500000}
shift 2 2>/dev/null || shift $#
LENGTHS=${*:-8 1024}
BUILDS=("${OMX_BUILD:-$SRC/build-bench}")
[ -n "${BASE_BUILD:-}" ] && BUILDS+=("$BASE_BUILD")
source "$SRC/tests/integration/lib/netns.sh" || exit 1
TMP=$(mktemp -d /tmp/omx-stream.XXXXXX)
omx_at_exit "rm -rf $TMP"
omx_netns_setup 2 9000 >/dev/null || exit 1
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/lock"
E=(env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock")
for ((r = 0; r < RUNS; r++)); do
	for b in "${BUILDS[@]}"; do
		for l in $LENGTHS; do
			omx_host_exec 0 "${E[@]}" taskset -c 0 "$b/bench/stream" r "$COUNT" "$l" &
			sleep 0.3
			echo -n "$b,"
			omx_host_exec 0 "${E[@]}" taskset -c 1 timeout 120 "$b/bench/stream" s "$COUNT" "$l"
			wait
		done
	done
done
