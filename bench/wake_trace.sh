#!/usr/bin/env bash
# wake_trace.sh - where a blocking small-message hop goes, omx against TCP (not a test).
#
#   sudo bench/wake_trace.sh [ROUND_TRIPS]
#
# Over one veth pair (MTU 9000, server on CPU 1, client on CPU 0), a blocking 0-byte ping-pong of
# omx_perf (-w on both sides, OMX_SPIN_US=0) and then of bench/tcp_pingpong -w, each traced for 1 s
# with `perf record -a` (scheduler wake-ups and switches, system-call entries and exits). Prints
# per transport the medians bench/wake_trace.py takes from the trace: send call entered -> the
# receiver's sched_waking, sched_waking -> the receiver switched in, switched in -> its own send
# call (the end of its wait, its receive, its answer), the whole send call.
# Tracing slows every hop a little; compare the two transports, not these figures with untraced
# ones. Needs perf (Debian: linux-perf). Environment: OMX_BUILD [./build].
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
B=${OMX_BUILD:-$SRC/build}
N=${1:-50000}
command -v perf >/dev/null || { echo "wake_trace: perf not found (apt-get install linux-perf)" >&2; exit 1; }
source "$SRC/tests/integration/lib/netns.sh" || exit 1
TMP=$(mktemp -d /tmp/omx-wake.XXXXXX)
omx_at_exit "rm -rf $TMP"
omx_netns_setup 2 9000 >/dev/null || exit 1
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/l0" "$TMP/l1"
omx_ns_exec 0 ip addr add 10.77.0.1/24 dev "${OMX_IF[0]}"
omx_ns_exec 1 ip addr add 10.77.0.2/24 dev "${OMX_IF[1]}"
SZ=(-S 0 -E 1 -N "$N" -W 1000)
EV=(-e sched:sched_waking -e sched:sched_switch -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit)

trace() { # OUT: perf record for 1 s, started once the ping-pong runs
	sleep 0.3
	perf record "${EV[@]}" -o "$1" -a -- sleep 1 >/dev/null 2>&1
}

omx_host_exec 1 env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[1]}" OMX_LOCK_DIR="$TMP/l1" OMX_SPIN_US=0 \
	taskset -c 1 "$B/tools/omx_perf" -w >"$TMP/srv.log" 2>&1 &
s=$!
for ((t = 0; t < 100; t++)); do grep -q '^Starting receiver' "$TMP/srv.log" && break; sleep 0.05; done
trace "$TMP/omx.data" &
p=$!
omx_host_exec 0 env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/l0" OMX_SPIN_US=0 \
	taskset -c 0 "$B/tools/omx_perf" -w -d "${OMX_HOSTNAME[1]}:0" "${SZ[@]}" -c - 2>/dev/null | grep -E '^[0-9]+,' |
	awk -F, '{print "omx: half round trip " $3 " us (whole run)"}'
wait "$s" "$p"

omx_host_exec 1 taskset -c 1 "$B/bench/tcp_pingpong" -p 5556 -w "${SZ[@]}" >/dev/null 2>&1 &
s=$!
sleep 0.3
trace "$TMP/tcp.data" &
p=$!
omx_host_exec 0 taskset -c 0 "$B/bench/tcp_pingpong" -p 5556 -d 10.77.0.2 -w "${SZ[@]}" -c /dev/stdout 2>/dev/null |
	grep -E '^[0-9]+,' | awk -F, '{print "tcp: half round trip " $3 " us (whole run)"}'
wait "$s" "$p"

for t in omx tcp; do
	comm=omx_perf nr=46 # sendmsg
	[ $t = tcp ] && comm=tcp_pingpong nr=44 # sendto
	perf script --ns -i "$TMP/$t.data" 2>/dev/null >"$TMP/$t.txt"
	echo "$t, under the trace:"
	python3 "$HERE/wake_trace.py" "$TMP/$t.txt" "$comm" "$nr"
done
