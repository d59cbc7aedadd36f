#!/usr/bin/env bash
# test_same_host.sh - endpoints of one host (one network namespace, one board) talk to each other
# through the same-host path (shared-memory rings carrying the same frames), at the same time
# as a remote partner over veth; a closed same-host endpoint is NACKed at once.
set -u
source "$(dirname "$0")/lib/netns.sh"
source "$(dirname "$0")/lib/omx.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
S=$OMX_BUILD/tests/omx_stress
P=$OMX_BUILD/tests/omx_faultprog
N=$(omx_scale 3000)
omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
mkdir -p "$TMP/lock0" "$TMP/lock1"
omx_netns_peers_file "$TMP/peers"
H0=${OMX_HOSTNAME[0]}:0
H1=${OMX_HOSTNAME[1]}:0
run0() { omx_host_exec 0 env $(omx_env 0) "$@"; }
run1() { omx_host_exec 1 env $(omx_env 1) "$@"; }
# same-host pair (host 0 endpoints 0 <-> 1) and a remote pair (host 0 endpoint 2 <-> host 1 endpoint 0)
run0 timeout 600 "$S" -d "$H0" -e 0 -r 1 -n "$N" -m 1048576 -s 1 >"$TMP/l0.log" 2>&1 &
A=$!
run0 timeout 600 "$S" -d "$H0" -e 1 -r 0 -n "$N" -m 1048576 -s 2 >"$TMP/l1.log" 2>&1 &
B=$!
run0 timeout 600 "$S" -d "$H1" -e 2 -r 0 -n "$N" -m 262144 -s 3 >"$TMP/r0.log" 2>&1 &
C=$!
run1 timeout 600 "$S" -d "$H0" -e 0 -r 2 -n "$N" -m 262144 -s 4 >"$TMP/r1.log" 2>&1
D=$?
wait $A; A=$?
wait $B; B=$?
wait $C; C=$?
for f in l0 l1 r0 r1; do tail -n 1 "$TMP/$f.log" | sed "s/^/  [$f] /"; done
check "same-host pair: $N messages each way up to 1 MiB, intact and in order" test "$A$B" = 00
check "remote pair on the same board at the same time" test "$C$D" = 00
# Rendezvous-sized messages, one way (endpoint 0 sends, 1 only receives) and both ways at once,
# round after round, completions polled (as MPI does: a blocking wait would flush owed acks). The
# ack of each RNDV must ride on the receiver's NOTIFY: with 10-minute delayed-ack and resend
# timers, a round that needed a delayed ack or a retransmission stalls, and the program gives up
# after 30 s and says so.
X="OMX_ACK_DELAY_MS=600000 OMX_RESEND_DELAY_MS=600000"
for mode in "send recv" "both both"; do
	for len in 8192 65536 1048576; do
		set -- $mode
		run0 env $X timeout 120 "$P" exchange 0 "$H0" 1 "$len" 200 "$1" >"$TMP/x0.log" 2>&1 &
		A=$!
		run0 env $X timeout 120 "$P" exchange 1 "$H0" 0 "$len" 200 "$2" >"$TMP/x1.log" 2>&1
		B=$?
		wait $A; A=$?
		check "same-host rendezvous, 200 rounds of $len B ($1/$2), no delayed ack needed ($(cat "$TMP/x0.log" "$TMP/x1.log" | tr '\n' ' '))" \
			test "$A$B" = 00
	done
done
# Reused large buffers move to huge pages (OMX_SHARED_HUGE_AFTER, src/shm/huge.c): 4 MiB each way,
# 40 rounds, every message compared with its pattern; both ends' counters must show bytes collapsed
# (the sender's buffer, read by the receiver's single copy, and the receiver's, counted whichever
# way the message came). Skipped where the kernel cannot (THP "never", Linux before 6.1).
thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
kv=$(uname -r | awk -F. '{ printf "%d", $1 * 1000 + $2 }')
if [ -z "$thp" ] || [[ $thp == *"[never]"* ]] || [ "$kv" -lt 6001 ]; then
	echo "SKIP: huge-page collapse (THP '$thp', kernel $(uname -r))"
else
	HX="OMX_SHARED_HUGE_AFTER=4"
	run0 env $HX timeout 120 "$P" exchange 0 "$H0" 1 4194304 40 both >"$TMP/h0.log" 2>&1 &
	A=$!
	run0 env $HX timeout 120 "$P" exchange 1 "$H0" 0 4194304 40 both >"$TMP/h1.log" 2>&1
	B=$?
	wait $A; A=$?
	run0 "$OMX_BUILD/tools/omx_counters" -e -v >"$TMP/hc.txt" 2>&1
	huge=$(grep -cE "^ +110: +[1-9][0-9]* Huge-Page Bytes Collapsed$" "$TMP/hc.txt")
	check "reused 4 MiB buffers moved to huge pages, 40 rounds each way intact ($(cat "$TMP/h0.log" "$TMP/h1.log" | tr '\n' ' '); $huge endpoint files with bytes collapsed)" \
		test "$A$B" = 00 -a "$huge" -ge 2
fi
# Eager messages one way to a receiver that comes late: the sender fills the window of unacked
# messages (the receiver's ring slots) and its next sends wait, throttled; released by the acks,
# they must complete as eager sends do, not wait for acks of their own (with the 10-minute delayed
# ack above, the last of them stalled the sender).
for len in 64 1024; do
	run0 env $X timeout 120 "$P" exchange 0 "$H0" 1 "$len" 300 send >"$TMP/x0.log" 2>&1 &
	A=$!
	run0 env $X timeout 120 "$P" exchange 1 "$H0" 0 "$len" 300 recvlate >"$TMP/x1.log" 2>&1
	B=$?
	wait $A; A=$?
	check "eager sends of $len B released from the window complete without their own ack ($(cat "$TMP/x0.log" "$TMP/x1.log" | tr '\n' ' '))" \
		test "$A$B" = 00
done
# A receiver that stops calling the library for 0.5 s (omx_stress -p) while its peer keeps 1024
# small messages in flight to it, with a socket queue of 8 datagrams (net.unix.max_dgram_qlen).
# Without a progress thread nothing takes the frames meanwhile: senders keep no more unacked
# messages in flight than the receiver's ring holds, so nothing is refused and lost. With it (the
# default) the thread takes over the receiving after OMX_PROGRESS_IDLE_US and hands it back when
# the application returns. With 10-minute resend timers a lost frame holds the run until the
# timeout; a run that hangs is told to dump its state (OMX_DEBUG_SIGNAL: partners, sequence
# numbers, frames refused) before it is killed, so a failure says where it stood.
omx_ns_exec 0 sysctl -qw net.unix.max_dgram_qlen=8
for pt in 0 1; do
	D="OMX_DEBUG_SIGNAL=1 OMX_PROGRESS_THREAD=$pt"
	run0 env $X $D timeout -s USR1 -k 5 60 "$S" -d "$H0" -e 0 -r 1 -n 20000 -m 128 -w 1024 -s 5 -p 100:500 >"$TMP/st0.log" 2>&1 &
	A=$!
	run0 env $X $D timeout -s USR1 -k 5 60 "$S" -d "$H0" -e 1 -r 0 -n 20000 -m 128 -w 1024 -s 6 >"$TMP/st1.log" 2>&1
	B=$?
	wait $A; A=$?
	check "a receiver stalled for 0.5 s under 1024 small messages in flight, progress thread $pt: nothing lost, no retransmission needed ($(for f in st0 st1; do grep "^omx_stress" "$TMP/$f.log" | tail -n 1; done | tr '\n' ' '))" \
		test "$A$B" = 00
	[ "$A$B" = 00 ] || for f in st0:$A st1:$B; do echo "  [${f%%:*} exit ${f#*:}]"; sed "s/^/  [${f%%:*}] /" "$TMP/${f%%:*}.log"; done
done
omx_ns_exec 0 sysctl -qw net.unix.max_dgram_qlen=1024
out=$(run0 timeout 30 "$P" connect "$H0" 9 -t 5000)
check "connect to a closed same-host endpoint: NACKed at once ($out)" grep -q "Remote Endpoint is Closed" <<<"$out"
finish
