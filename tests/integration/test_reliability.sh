#!/usr/bin/env bash
# test_reliability.sh - eager messages across two namespaces on real frames (issue 2):
# 100,000 messages of log-uniform random sizes from 0 to the medium maximum, random match values,
# checksums and ordering verified by omx_stress on both sides at once, in both wire modes and
# at MTU 1500 and 9000; then the same traffic with 5% loss + 1% duplication on the links
# (nftables netdev rules) and frames reordered/delayed by the transport's fault-injection knob; a
# receiver whose unexpected queue overflows (its share for one partner, or the whole endpoint's)
# gets the refused messages on its resend requests.
set -u
source "$(dirname "$0")/lib/netns.sh"
source "$(dirname "$0")/lib/omx.sh"
STRESS=$OMX_BUILD/tests/omx_stress
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
N=$(omx_scale ${OMX_RELIABILITY_MESSAGES:-100000})
NL=$(omx_scale ${OMX_RELIABILITY_LOSSY_MESSAGES:-10000})

stress() { # stress NAME COUNT MAXLEN [VAR=VALUE...]: both hosts send and receive COUNT messages
	local name=$1 n=$2 max=$3
	shift 3
	omx_run_pair "$name" env "$@" timeout 900 "$STRESS" -d "${OMX_HOSTNAME[1]}:0" -n "$n" -m "$max" -s 1 -- \
		env "$@" timeout 900 "$STRESS" -d "${OMX_HOSTNAME[0]}:0" -n "$n" -m "$max" -s 2
}

omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
# medium maximum per (mode, MTU): extended 9000 -> 32 x 8192; extended 1500 -> 32 x 1452; compat -> 32768
for cfg in "extended 9000 262144" "compat 9000 32768" "extended 1500 46464"; do
	set -- $cfg
	omx_netns_set_mtu "$2"
	check "$N eager messages, $1 wire mode, MTU $2 (sizes 0..$3, all medium or smaller)" \
		stress "eager-$1-$2" "$N" "$3" OMX_WIRE_MODE=$1 OMX_RNDV_THRESHOLD=$3
done

# compat mode cannot run on a 1500-byte link (its frames are 4144 bytes): a clear error, no hang
omx_netns_set_mtu 1500
omx_host_exec 0 env $(omx_env 0) OMX_WIRE_MODE=compat timeout 20 "$STRESS" -d "${OMX_HOSTNAME[1]}:0" -n 1 \
	>"$TMP/compat1500.log" 2>&1
rc=$?
check "compat wire mode on MTU 1500 fails cleanly (exit 1, message)" \
	bash -c "[ $rc = 1 ] && grep -q 'too small for the MX-compatible wire mode' $TMP/compat1500.log"

# wire mode mismatch between hosts: refused with a clear message
omx_netns_set_mtu 9000
omx_run_pair mismatch env OMX_WIRE_MODE=compat timeout 30 "$STRESS" -d "${OMX_HOSTNAME[1]}:0" -n 10 -- \
	env OMX_WIRE_MODE=extended timeout 30 "$STRESS" -d "${OMX_HOSTNAME[0]}:0" -n 10
check "wire mode mismatch is refused with a clear error" grep -q "wire mode mismatch" "$TMP/mismatch.0.log" "$TMP/mismatch.1.log"

# a receiver out of the library while mediums stream to it: past its unexpected room (256 KiB per
# partner here) it refuses them (not acked), and asks for them again once its application has
# consumed half of what it queued; with the retransmission timer at an hour, only that request
# (and the sender's bound on medium bytes in flight, half that room) gets them through
P=$OMX_BUILD/tests/omx_faultprog
mkdir -p "$TMP/lock0" "$TMP/lock1"
omx_netns_peers_file "$TMP/peers"
ASK=(OMX_RESEND_DELAY_MS=3600000 OMX_UNEXP_PEER_MAX_KB=256)
omx_host_exec 1 env $(omx_env 1) "${ASK[@]}" timeout 120 "$P" exchange 0 "${OMX_HOSTNAME[0]}:0" 0 32768 300 recvlate \
	>"$TMP/ask.1.log" 2>&1 &
A=$!
omx_host_exec 0 env $(omx_env 0) "${ASK[@]}" timeout 120 "$P" exchange 0 "${OMX_HOSTNAME[1]}:0" 0 32768 300 send \
	>"$TMP/ask.0.log" 2>&1
B=$?
wait $A
A=$?
sed 's/^/  [resend ask] /' "$TMP/ask.0.log" "$TMP/ask.1.log" | grep -v "^  \[resend ask\] OMX:"
check "300 mediums to a receiver that refused some: all through, on its resend requests alone" \
	cond '[ "$A$B" = 00 ] && grep -q "exchanged 300" "$TMP/ask.0.log" && grep -q "exchanged 300" "$TMP/ask.1.log"'
omx_host_exec 1 env $(omx_env 1) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/ask.counters" 2>&1
check "the receiver refused mediums and asked for them again ($(grep -E 'Unexpected Event Queue Full|Resend Asked' "$TMP/ask.counters" | tr -s ' ' | tr '\n' ';'))" \
	cond 'grep -qE "^[0-9]{3}: +[1-9][0-9]* Unexpected Event Queue Full" "$TMP/ask.counters" &&
	      grep -qE "^[0-9]{3}: +[1-9][0-9]* Resend Asked" "$TMP/ask.counters"'

# the same when the room that ran out is the endpoint's (512 KiB here), filled by another partner:
# a second sender that starts once the first has filled it has every message refused and nothing
# queued of its own, so only the endpoint falling back to half its room can ask it to resend (the
# senders finish at once, eager sends complete as they leave: closing, they linger until acked)
GATHER=(OMX_RESEND_DELAY_MS=3600000 OMX_UNEXP_MAX_KB=512 OMX_CLOSE_LINGER_MS=60000)
omx_host_exec 1 env $(omx_env 1) "${GATHER[@]}" timeout 120 "$P" gather 0 32768 100 2 3 >"$TMP/gather.r.log" 2>&1 &
R=$!
omx_host_exec 0 env $(omx_env 0) "${GATHER[@]}" timeout 120 "$P" exchange 0 "${OMX_HOSTNAME[1]}:0" 0 32768 100 send \
	>"$TMP/gather.0.log" 2>&1 &
S0=$!
sleep 1
omx_host_exec 0 env $(omx_env 0) "${GATHER[@]}" timeout 120 "$P" exchange 1 "${OMX_HOSTNAME[1]}:0" 0 32768 100 send \
	>"$TMP/gather.1.log" 2>&1
S1=$?
wait $S0
S0=$?
wait $R
R=$?
sed 's/^/  [gather] /' "$TMP/gather.r.log" "$TMP/gather.0.log" "$TMP/gather.1.log" | grep -v "^  \[gather\] OMX:"
omx_host_exec 1 env $(omx_env 1) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/gather.counters" 2>&1
check "2 x 100 mediums past the endpoint's unexpected room: all through, on resend requests alone ($(grep -E 'Unexpected Event Queue Full|Resend Asked' "$TMP/gather.counters" | tr -s ' ' | tr '\n' ';'))" \
	cond '[ "$R$S0$S1" = 000 ] && grep -q "gathered 100 from each of 2" "$TMP/gather.r.log" &&
	      grep -qE "^[0-9]{3}: +[2-9][0-9]* Resend Asked|^[0-9]{3}: +[1-9][0-9]{1,} Resend Asked" "$TMP/gather.counters"'

# a sender that closes while its eager sends (complete as they left) are still refused: after its
# linger they are abandoned, counted (Sends Unacked at Close) and said under OMX_VERBOSE
rm -rf "$TMP/lock0" "$TMP/lock1"
mkdir -p "$TMP/lock0" "$TMP/lock1"
omx_host_exec 1 env $(omx_env 1) OMX_UNEXP_MAX_KB=512 timeout 60 "$P" idle -t 4 >"$TMP/abandon.r.log" 2>&1 &
R=$!
omx_host_exec 0 env $(omx_env 0) OMX_RESEND_DELAY_MS=3600000 OMX_CLOSE_LINGER_MS=300 OMX_VERBOSE=1 timeout 60 \
	"$P" exchange 0 "${OMX_HOSTNAME[1]}:0" 0 32768 100 send >"$TMP/abandon.s.log" 2>&1
S=$?
wait $R
omx_host_exec 0 env $(omx_env 0) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/abandon.counters" 2>&1
check "a sender closing with refused sends counts and reports them ($(grep -E 'Unacked at Close' "$TMP/abandon.counters" | tr -s ' '); $(grep -o 'closed with [0-9]* sends unacked' "$TMP/abandon.s.log"))" \
	cond '[ "$S" = 0 ] && grep -qE "^[0-9]{3}: +[1-9][0-9]* Sends Unacked at Close" "$TMP/abandon.counters" &&
	      grep -qE "closed with [1-9][0-9]* sends unacked" "$TMP/abandon.s.log"'

# frames the transport refuses (OMX_FAULT refuse: -EAGAIN, as a full transmit queue, or a full
# same-host ring and socket, answers): they never left, so they go again within milliseconds
# instead of at the resend timer, here 10 minutes, where a single refused message, ack or connect
# request would stall its round (omx_faultprog gives up after 30 s). Rounds in which both sides
# send to each other at once keep one message in flight each way: a stream would run more than
# the receiver's 255-message early window ahead of a refused message, and what falls out of that
# window waits for the resend timer whatever the sender knows.
RF=(OMX_RESEND_DELAY_MS=600000 OMX_FAULT=refuse=0.03)
for len in 8 65536; do
	omx_run_pair "refuse$len" env "${RF[@]}" timeout 120 "$P" exchange 0 "${OMX_HOSTNAME[1]}:0" 0 $len 300 both -- \
		env "${RF[@]}" timeout 120 "$P" exchange 0 "${OMX_HOSTNAME[0]}:0" 0 $len 300 both
	rc=$?
	for h in 0 1; do
		omx_host_exec $h env $(omx_env $h) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/refuse.$h.counters" 2>&1
	done
	refused=$(grep -hE 'Transmit Failed' "$TMP"/refuse.*.counters | awk '{s += $2} END {print s + 0}')
	again=$(grep -hE 'Retransmit Message' "$TMP"/refuse.*.counters | awk '{s += $2} END {print s + 0}')
	check "300 rounds of $len B both ways with 3% of frames refused by the transport, resend timer at 10 minutes: all through ($refused refused, $again messages sent again)" \
		cond '[ "$rc" = 0 ] && grep -q "^exchanged 300" "$TMP/refuse$len.0.log" "$TMP/refuse$len.1.log" && [ "$refused" -gt 5 ] && [ "$again" -gt 0 ]'
done

# lossy links: 5% loss on arrival and 1% duplication on departure, both hosts, plus reordering
for mtu in 9000 1500; do
	omx_netns_set_mtu $mtu
	max=$([ $mtu = 9000 ] && echo 262144 || echo 46464)
	for h in 0 1; do omx_nft_loss $h 5; omx_nft_dup $h 1; done
	check "$NL messages over 5% loss + 1% dup + reorder, MTU $mtu (eager and large)" \
		stress "lossy-$mtu" "$NL" "$max" OMX_RESEND_DELAY_MS=40 OMX_PULL_RESEND_MS=80 \
		"OMX_FAULT=reorder=0.05,delay=0.01,delay_us=2000"
	check "loss rule really dropped frames (MTU $mtu)" test "$(omx_nft_count 1 loss)" -gt 100
	check "dup rule really duplicated frames (MTU $mtu)" test "$(omx_nft_count 0 dup)" -gt 10
	omx_nft_clear 0; omx_nft_clear 1
done
finish
