#!/bin/bash
# test_discovery.sh - dynamic discovery (docs/configuration.md OMX_DISCOVERY, wire.md 12): three
# namespaces on a bridge, no peers file. Servers on hosts 1 and 2, a client on host 0 finds them
# by hostname (omx_perf -d omxh<i>:0); omx_info shows the discovered, named peers and a complete
# table with mapper 00:00:00:00:00:00; the host-wide discovered file keeps the indexes of every
# process of a host alike; the counters show the discovery frames; OMX_DISCOVERY=0 finds nobody.
# Needs root. OMX_BUILD = build directory.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OMX_BUILD=${OMX_BUILD:?set OMX_BUILD to the build directory}
T="$OMX_BUILD/tools"
# shellcheck source=lib/netns.sh
source "$HERE/lib/netns.sh"
# shellcheck source=lib/omx.sh
source "$HERE/lib/omx.sh" # TMP, ok/ko/check/cond/failed_cleanly/finish

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root"
	echo "0 passed, 0 failed"
	exit 0
fi
omx_netns_setup 3 1500 || { ko "namespace setup (3 hosts on a bridge)"; finish; }
ok "3 hosts on a bridge: ${OMX_MAC[*]}"
for i in 0 1 2; do mkdir -p "$TMP/lock$i"; done
# No OMX_PEERS: discovery is on by default ("auto").
envh() { echo "OMX_IFACES=${OMX_IF[$1]} OMX_HOSTNAME=${OMX_HOSTNAME[$1]} OMX_LOCK_DIR=$TMP/lock$1"; }

SRVS=()
for i in 1 2; do
	# shellcheck disable=SC2046
	omx_ns_exec "$i" env $(envh "$i") timeout 300 "$T/omx_perf" -s >"$TMP/srv$i.out" 2>&1 &
	SRVS+=($!)
done
omx_at_exit 'kill ${SRVS[*]} 2>/dev/null'
for i in 1 2; do
	omx_wait_line '^Starting receiver' "$TMP/srv$i.out" 200
done

for i in 1 2; do
	# shellcheck disable=SC2046
	omx_ns_exec 0 env $(envh 0) timeout 120 "$T/omx_perf" -d "${OMX_HOSTNAME[$i]}:0" -S 0 -E 5000 -N 10 -W 1 -P 0 \
		>"$TMP/cl$i.out" 2>"$TMP/cl$i.err"
	rc=$?
	sed 's/^/  /' "$TMP/cl$i.out" | head -n 4
	sed 's/^/  stderr: /' "$TMP/cl$i.err"
	check "client on host 0 finds ${OMX_HOSTNAME[$i]}:0 with no peers file (status $rc)" \
		cond '[ "$rc" = 0 ] && grep -qx "Starting sender to '"'"'${OMX_HOSTNAME[$i]}:0'"'"'..." "$TMP/cl$i.out" && [ "$(grep -c "^length " "$TMP/cl$i.out")" = 14 ]'
done

# shellcheck disable=SC2046
omx_ns_exec 0 env $(envh 0) timeout 30 "$T/omx_info" >"$TMP/info0" 2>&1
sed 's/^/  /' "$TMP/info0" | sed -n '/^  Peer table/,/^  Dynamic/p'
check "omx_info: table configured by discovery (mapper 00:00:00:00:00:00)" \
	grep -qx "Peer table is ready, mapper is 00:00:00:00:00:00" "$TMP/info0"
check "omx_info: own board is peer 0" grep -qx "  0) ${OMX_MAC[0]} ${OMX_HOSTNAME[0]}:0" "$TMP/info0"
for i in 1 2; do
	check "omx_info: host $i discovered with its name" grep -qE "^  [12]\) ${OMX_MAC[$i]} ${OMX_HOSTNAME[$i]}:0$" "$TMP/info0"
done
check "omx_info: exactly 3 peers" [ "$(grep -cE '^  [0-9]+\) ' "$TMP/info0")" = 3 ]
check "omx_info: table complete" grep -qx "Dynamic discovery is on: peer table complete (every peer named)" "$TMP/info0"

# Two processes of host 0 number peers alike: indexes come from the host-wide file, in order.
# shellcheck disable=SC2046
omx_ns_exec 0 env $(envh 0) timeout 30 "$T/omx_info" >"$TMP/info0b" 2>&1
check "a second process of host 0 has the same table" \
	[ "$(grep -E '^  [0-9]+\) ' "$TMP/info0")" = "$(grep -E '^  [0-9]+\) ' "$TMP/info0b")" ]
check "host-wide discovered file lists hosts 1 and 2" \
	cond 'grep -q "^${OMX_MAC[1]}" "$TMP/lock0/omx-discovered.peers" && grep -q "^${OMX_MAC[2]}" "$TMP/lock0/omx-discovered.peers"'
check "host 1 discovered host 0 too" grep -q "^${OMX_MAC[0]}" "$TMP/lock1/omx-discovered.peers"

# shellcheck disable=SC2046
omx_ns_exec 0 env $(envh 0) timeout 30 "$T/omx_counters" -b 0 >"$TMP/cnt0" 2>&1
# shellcheck disable=SC2046
omx_ns_exec 1 env $(envh 1) timeout 30 "$T/omx_counters" -b 0 >"$TMP/cnt1" 2>&1
counter() { sed -n "s/^$(printf %03d "$1"): *\([0-9]*\) .*/\1/p" "$2" | head -n1 | grep . || echo 0; }
check "counters host 0: discovery frames sent and received ($(counter 97 "$TMP/cnt0"), $(counter 98 "$TMP/cnt0"))" \
	cond '[ "$(counter 97 "$TMP/cnt0")" -gt 0 ] && [ "$(counter 98 "$TMP/cnt0")" -gt 0 ]'
# (A peer first heard of through a host query, not a broadcast, counts as well: board.c.)
check "counters host 1 (one live server): 2 hosts added by discovery (got $(counter 99 "$TMP/cnt1"))" \
	[ "$(counter 99 "$TMP/cnt1")" = 2 ]

mkdir -p "$TMP/lockoff"
# Discovery off and no peers file: nobody to find; a clean, quick failure.
# shellcheck disable=SC2046
omx_ns_exec 0 env $(envh 0) OMX_LOCK_DIR="$TMP/lockoff" OMX_DISCOVERY=0 timeout 60 "$T/omx_perf" \
	-d "${OMX_HOSTNAME[1]}:0" >"$TMP/off.out" 2>"$TMP/off.err"
rc=$?
sed 's/^/  stderr: /' "$TMP/off.err"
check "OMX_DISCOVERY=0: host not found, one line, status $rc" \
	cond 'failed_cleanly "$rc" && [ "$(wc -l <"$TMP/off.err")" = 1 ] && grep -q "${OMX_HOSTNAME[1]}:0" "$TMP/off.err"'
# shellcheck disable=SC2046
omx_ns_exec 0 env $(envh 0) OMX_DISCOVERY=0 timeout 30 "$T/omx_info" >"$TMP/infooff" 2>&1
check "OMX_DISCOVERY=0: omx_info says discovery is off, only the own board" \
	cond 'grep -qx "Dynamic discovery is off: peers come from the peers file" "$TMP/infooff" && [ "$(grep -cE "^  [0-9]+\) " "$TMP/infooff")" = 1 ]'
# Unknown name with discovery on: bounded wait, then a clean failure.
# shellcheck disable=SC2046
omx_ns_exec 0 env $(envh 0) OMX_DISCOVERY_WAIT_MS=500 timeout 60 "$T/omx_perf" -d nosuchhost:0 \
	>"$TMP/nh.out" 2>"$TMP/nh.err"
rc=$?
check "discovery on, unknown host: fails cleanly with one line (status $rc)" \
	cond 'failed_cleanly "$rc" && [ "$(wc -l <"$TMP/nh.err")" = 1 ] && grep -q nosuchhost "$TMP/nh.err"'
finish
