#!/usr/bin/env bash
# test_link_faults.sh - link faults under running transfers (issue: hardening), with checksums:
#   * the link goes down for 2 s in the middle of checksummed two-way traffic (eager and large
#     messages): everything arrives once it is back up;
#   * a server sleeping in omx_wait across the flap does not turn into a busy loop afterwards
#     (the socket error the kernel leaves behind is read);
#   * the MTU drops from 9000 to 1500 under endpoints opened at 9000 (their frames no longer
#     fit) for 2 s, then comes back: the transfers stall, then complete intact.
# Outcomes are documented in docs/reliability.md.
set -u
source "$(dirname "$0")/lib/netns.sh"
source "$(dirname "$0")/lib/omx.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
S=$OMX_BUILD/tests/omx_stress
PERF=$OMX_BUILD/tools/omx_perf
omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
mkdir -p "$TMP/lock0" "$TMP/lock1"
omx_netns_peers_file "$TMP/peers"
# Not scaled down under sanitizers: the traffic must outlast the 2 s faults.
N=3000
ENVS=(OMX_RESEND_DELAY_MS=100 OMX_PULL_RESEND_MS=200)

stress_bg() { # stress_bg NAME : both hosts run omx_stress in the background; pids in SP0 SP1
	local name=$1
	omx_host_exec 0 env $(omx_env 0) "${ENVS[@]}" timeout 300 "$S" -d "${OMX_HOSTNAME[1]}:0" -s 3 -n "$N" \
		-m 1048576 -w 8 >"$TMP/$name.0.log" 2>&1 &
	SP0=$!
	omx_host_exec 1 env $(omx_env 1) "${ENVS[@]}" timeout 300 "$S" -d "${OMX_HOSTNAME[0]}:0" -s 4 -n "$N" \
		-m 1048576 -w 8 >"$TMP/$name.1.log" 2>&1 &
	SP1=$!
}
stress_wait() { # stress_wait NAME : both exit 0 and report no errors
	local rc0 rc1
	wait "$SP0"; rc0=$?
	wait "$SP1"; rc1=$?
	sed "s/^/  [$1 h0] /" "$TMP/$1.0.log" | tail -n 2
	sed "s/^/  [$1 h1] /" "$TMP/$1.1.log" | tail -n 2
	[ $rc0 = 0 ] && [ $rc1 = 0 ] && grep -q "received $N .*errors 0" "$TMP/$1.0.log" &&
		grep -q "received $N .*errors 0" "$TMP/$1.1.log"
}
running() { kill -0 "$SP0" 2>/dev/null && kill -0 "$SP1" 2>/dev/null; }
# started NAME: wait (up to 30 s) until both sides have received 10% of their messages, so that
# the fault lands in the middle of the traffic whatever the start-up time (after a fixed 0.3 s,
# one CI run saw the traffic finish in 1.03 s without stalling, as if its endpoints had opened
# after the MTU drop; traffic alone takes ~1 s here)
started() {
	for _ in $(seq 300); do
		grep -q "10% received" "$TMP/$1.0.log" && grep -q "10% received" "$TMP/$1.1.log" && return 0
		sleep 0.1
	done
	return 1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# An idle server blocked in omx_wait, to watch its CPU time across the flap.
omx_host_exec 0 env $(omx_env 0) OMX_SPIN_US=0 timeout 120 "$PERF" -w -e 5 >"$TMP/idle.log" 2>&1 &
IDLE=$!
sleep 0.5
IDLE_PID=$(pgrep -f "omx_perf -w -e 5" | head -n 1)

stress_bg flap
started flap
check "traffic running when the link goes down" running
ip -n "${OMX_NS[0]}" link set "${OMX_IF[0]}" down
sleep 2
ip -n "${OMX_NS[0]}" link set "${OMX_IF[0]}" up
check "traffic still running (stalled) when the link comes back" running
omx_netns_wait_up
check "link down 2 s under $N messages both ways (eager + large): all arrive intact" stress_wait flap

t0=$(cpu_ticks "$IDLE_PID")
sleep 3
t1=$(cpu_ticks "$IDLE_PID")
hz=$(getconf CLK_TCK)
echo "  idle server used $((t1 - t0)) ticks of $((3 * hz)) in 3 s after the flap"
check "a server sleeping in omx_wait does not spin after the flap" test $((t1 - t0)) -lt $((3 * hz / 2))
kill "$IDLE" 2>/dev/null; wait "$IDLE" 2>/dev/null

stress_bg mtu
started mtu
check "traffic running when the MTU drops" running
check "MTU set to 1500 on both ends" omx_netns_set_mtu 1500
sleep 2
check "traffic still running (stalled) when the MTU is restored" running
omx_netns_set_mtu 9000
check "MTU 9000 -> 1500 for 2 s under endpoints opened at 9000, then back: all arrive intact" stress_wait mtu
finish
