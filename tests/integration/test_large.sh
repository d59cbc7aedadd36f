#!/usr/bin/env bash
# test_large.sh - large messages (rendezvous + pull + notify) on real frames between two
# namespaces (issue 3): sizes from the threshold to 64 MiB and odd sizes in both wire modes at
# MTU 1500 and 9000, both directions at once with checksums; many concurrent large messages; the
# same under 5% loss + 1% duplication (nftables) and reordering (OMX_FAULT); a sender that sleeps
# or computes on its only CPU without calling the library (the progress thread answers pulls), and
# the contrast with the thread disabled; a sender killed mid-transfer; 10,000 large messages with
# bounded memory.
set -u
source "$(dirname "$0")/lib/netns.sh"
source "$(dirname "$0")/lib/omx.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
S=$OMX_BUILD/tests/omx_stress
P=$OMX_BUILD/tests/omx_faultprog
SIZES=32769,65536,99999,262144,1000003,4194304,16777216,67108864
[ -n "${OMX_SANITIZE:-}" ] && SIZES=32769,65536,99999,262144,1000003,4194304,16777216

pair() { # pair NAME STRESS-ARGS... : both hosts run omx_stress with these arguments
	local name=$1
	shift
	omx_run_pair "$name" env "${ENVS[@]}" timeout 1200 "$S" -d "${OMX_HOSTNAME[1]}:0" -s 1 "$@" -- \
		env "${ENVS[@]}" timeout 1200 "$S" -d "${OMX_HOSTNAME[0]}:0" -s 2 "$@"
}
ENVS=(OMX_NONE=1)
omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
mkdir -p "$TMP/lock0" "$TMP/lock1"
omx_netns_peers_file "$TMP/peers"

for cfg in "extended 9000" "compat 9000" "extended 1500"; do
	set -- $cfg
	omx_netns_set_mtu "$2"
	ENVS=(OMX_WIRE_MODE=$1)
	check "sizes 32769..64 MiB both ways, $1 wire mode, MTU $2" pair "sizes-$1-$2" -z "$SIZES" -n 8 -w 2
done
check "$(omx_scale 4000) messages of 0-32 KiB both ways (mediums of up to 23 fragments), MTU 1500" \
	pair mediums -n "$(omx_scale 4000)" -m 32768 -w 16
# Nothing was duplicated on the link so far: a duplicate counted by host 1 can only come from a
# retransmission by host 0 (a frame the kernel ring dropped while the CPU was busy elsewhere).
# Without one, the later fragments of a medium must not be counted as duplicates.
for h in 0 1; do
	omx_host_exec $h env $(omx_env $h) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/counters-lossless$h" 2>&1
done
grep -HE "Retransmit|Duplicate|Medium Frag|Out of Window|Full|Drop|Fail" "$TMP"/counters-lossless[01] | sed "s|^$TMP/|  |"
resent=$(omx_counter "$TMP/counters-lossless0" "Retransmit Message")
check "lossless so far: medium fragments received, no duplicate without a retransmission (host 0 resent $resent)" cond \
	'[ "$(omx_counter "$TMP/counters-lossless1" "Recv Medium Frag")" -gt 0 ] &&
	 { [ "$resent" -gt 0 ] || [ "$(omx_counter "$TMP/counters-lossless1" "Drop Duplicate Message")" = 0 ]; }'
# MTU 65535, whole frames in the receive ring, then split receive (OMX_RX_SPLIT: the ring keeps
# 4 KiB of each frame, pull-reply payloads are read from the socket straight into the receive
# buffer). The lossy runs below repeat with split receive at MTU 9000 (2 KiB kept in the ring).
omx_netns_set_mtu 65535
ENVS=(OMX_NONE=1)
counters() { # counters NAME: board 0's counters of both hosts into $TMP/NAME0 and NAME1
	for h in 0 1; do
		omx_host_exec $h env $(omx_env $h) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/$1$h" 2>&1
	done
}
clear_counters() {
	for h in 0 1; do omx_host_exec $h env $(omx_env $h) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 -c >/dev/null 2>&1; done
}
# The default at this MTU (OMX_RX_SPLIT=auto): a pull's replies are read split while the receiver
# itself sends pull replies (traffic both ways), whole into the ring otherwise.
check "sizes 32769..64 MiB both ways, extended wire mode, MTU 65535" pair "sizes-65535" -z "$SIZES" -n 8 -w 2
# Both ways all along (1 MiB messages, two in flight each way): pulls move to the split lane.
clear_counters
check "$(omx_scale 40) messages of 1 MiB both ways (auto split receive)" pair auto-both -z 1048576 -n "$(omx_scale 40)" -w 2
counters counters-auto
placed=$(($(omx_counter "$TMP/counters-auto0" "Split Receive Placed Bytes") + $(omx_counter "$TMP/counters-auto1" "Split Receive Placed Bytes")))
check "both ways: pulls moved to the split lane ($(omx_counter "$TMP/counters-auto0" "Split Receive Lane Switches") and $(omx_counter "$TMP/counters-auto1" "Split Receive Lane Switches") switches, $placed bytes placed)" \
	test "$placed" -gt 0
oneway() { # oneway NAME SIZE COUNT: omx_perf -U (empty answers) from host 0 to host 1, counters
	# cleared first and read into $TMP/NAME0 and NAME1
	clear_counters
	omx_host_exec 1 env $(omx_env 1) timeout 120 "$OMX_BUILD/tools/omx_perf" >"$TMP/$1.srv" 2>&1 &
	local srv=$!
	omx_wait_line '^Starting receiver' "$TMP/$1.srv" 200 "$srv"
	check "one way: $3 messages of $2 bytes streamed" omx_host_exec 0 env $(omx_env 0) timeout 120 \
		"$OMX_BUILD/tools/omx_perf" -d "${OMX_HOSTNAME[1]}:0" -S "$2" -E "$(($2 + 1))" -N "$3" -W 2 -U
	wait "$srv"
	counters "$1"
}
# One way (omx_perf -U: the answers are empty): the receiver's pulls stay whole.
oneway counters-oneway 4194304 20
check "one way: the receiver's pulls stayed whole ($(omx_counter "$TMP/counters-oneway1" "Recv Pull Reply") replies, $(omx_counter "$TMP/counters-oneway1" "Split Receive Lane Switches") switches)" \
	cond '[ "$(omx_counter "$TMP/counters-oneway1" "Recv Pull Reply")" -gt 0 ] &&
	      [ "$(omx_counter "$TMP/counters-oneway1" "Split Receive Lane Switches")" = 0 ] &&
	      [ "$(omx_counter "$TMP/counters-oneway1" "Split Receive Placed Bytes")" = 0 ]'
ENVS=(OMX_RX_SPLIT=4096)
check "same with split receive" pair "sizes-65535-split" -z "$SIZES" -n 8 -w 2
omx_host_exec 1 env $(omx_env 1) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/counters-split" 2>&1
check "split receive placed payloads itself ($(grep 'Split Receive' "$TMP/counters-split" | tr -s ' '))" \
	grep -qE "^[0-9]{3}: +[1-9][0-9]* Split Receive Placed Bytes" "$TMP/counters-split"
# Pull replies only split (OMX_RX_SPLIT=pull: a second socket takes them, with small slots; every
# other frame arrives whole in the first), mediums of up to 64 KiB among them.
ENVS=(OMX_RX_SPLIT=pull)
check "same with pull replies split" pair "sizes-65535-pullsplit" -z "4096,16384,$SIZES" -n 10 -w 2
omx_host_exec 1 env $(omx_env 1) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/counters-pullsplit" 2>&1
check "pull replies split: payloads placed from their socket ($(grep 'Split Receive' "$TMP/counters-pullsplit" | tr -s ' '))" \
	grep -qE "^[0-9]{3}: +[1-9][0-9]* Split Receive Placed Bytes" "$TMP/counters-pullsplit"
# With OMX_RX_SPLIT_MEDIUM, the fragments of mediums longer than that go to that socket too and are
# read straight into the matched receive: mediums only here (the rendezvous threshold is 128 KiB
# at this MTU), counters cleared first, so the placed bytes are mediums'.
clear_counters
ENVS=(OMX_RX_SPLIT=pull OMX_RX_SPLIT_MEDIUM=32768)
check "$(omx_scale 2000) mediums of 32-128 KiB both ways, their fragments split" \
	pair mediums-pullsplit -n "$(omx_scale 2000)" -l 32769 -m 131072 -w 4
counters counters-medsplit
placed=$(($(omx_counter "$TMP/counters-medsplit0" "Split Receive Placed Bytes") + $(omx_counter "$TMP/counters-medsplit1" "Split Receive Placed Bytes")))
check "medium fragments placed from their socket ($placed bytes; the rest arrived before their receive was posted)" \
	test "$placed" -gt 0
# The default at this MTU (OMX_RX_SPLIT_MEDIUM=auto, 65472-byte fragments): mediums longer than
# 32 KiB take the split lane too while the receiver itself sends such mediums (both ways), and stay
# whole into the ring otherwise (one way: omx_perf -U, empty answers). omx_stress ends with
# a synchronous send (a rendezvous whatever its size): more bytes placed than pull replies carry.
clear_counters
ENVS=(OMX_NONE=1)
check "$(omx_scale 2000) mediums of 32-256 KiB both ways, default settings" \
	pair mediums-auto -n "$(omx_scale 2000)" -l 32769 -m 262144 -w 4
counters counters-medauto
placed=$(($(omx_counter "$TMP/counters-medauto0" "Split Receive Placed Bytes") + $(omx_counter "$TMP/counters-medauto1" "Split Receive Placed Bytes")))
check "both ways: mediums moved to the split lane ($(omx_counter "$TMP/counters-medauto0" "Split Receive Lane Switches") and $(omx_counter "$TMP/counters-medauto1" "Split Receive Lane Switches") switches, $placed bytes placed, $(omx_counter "$TMP/counters-medauto1" "Recv Pull Reply") pull replies)" \
	cond '[ "$placed" -gt $((65503 * ($(omx_counter "$TMP/counters-medauto0" "Recv Pull Reply") + $(omx_counter "$TMP/counters-medauto1" "Recv Pull Reply")))) ] &&
	      [ "$(omx_counter "$TMP/counters-medauto0" "Split Receive Lane Switches")" -gt 0 ]'
oneway counters-medoneway 131072 200
check "one way: the receiver's mediums stayed whole ($(omx_counter "$TMP/counters-medoneway1" "Recv Medium Frag") fragments, $(omx_counter "$TMP/counters-medoneway1" "Split Receive Lane Switches") switches)" \
	cond '[ "$(omx_counter "$TMP/counters-medoneway1" "Recv Medium Frag")" -ge 600 ] &&
	      [ "$(omx_counter "$TMP/counters-medoneway1" "Split Receive Lane Switches")" = 0 ] &&
	      [ "$(omx_counter "$TMP/counters-medoneway1" "Split Receive Placed Bytes")" = 0 ]'
omx_netns_set_mtu 9000
ENVS=(OMX_NONE=1)
check "$(omx_scale 2000) concurrent large messages both ways (16 in flight each way)" \
	pair concurrent -n "$(omx_scale 2000)" -l 32769 -m 1048576 -w 16

for h in 0 1; do omx_nft_loss $h 5; omx_nft_dup $h 1; done
ENVS=(OMX_RESEND_DELAY_MS=40 OMX_PULL_RESEND_MS=80 "OMX_FAULT=reorder=0.05,delay=0.01,delay_us=2000")
check "large messages over 5% loss + 1% dup + reordering" pair lossy -n "$(omx_scale 200)" -l 32769 -m 8388608 -w 4
ENVS=(OMX_RESEND_DELAY_MS=40 OMX_PULL_RESEND_MS=80 OMX_RX_SPLIT=2048)
check "same loss and duplication with split receive" pair lossy-split -n "$(omx_scale 200)" -l 32769 -m 8388608 -w 4
ENVS=(OMX_RESEND_DELAY_MS=40 OMX_PULL_RESEND_MS=80 OMX_RX_SPLIT=pull)
check "same loss and duplication with pull replies split" pair lossy-pullsplit -n "$(omx_scale 200)" -l 32769 -m 8388608 -w 4
omx_netns_set_mtu 65535
ENVS=(OMX_RESEND_DELAY_MS=40 OMX_RX_SPLIT=pull OMX_RX_SPLIT_MEDIUM=32768)
lost0=$(($(omx_nft_count 0 loss) + $(omx_nft_count 1 loss)))
check "mediums of 32-128 KiB over the same loss and duplication, their fragments split (MTU 65535)" \
	pair lossy-medsplit -n "$(omx_scale 400)" -l 32769 -m 131072 -w 4
lost1=$(($(omx_nft_count 0 loss) + $(omx_nft_count 1 loss)))
check "the loss rule dropped frames of those mediums ($((lost1 - lost0)))" test $((lost1 - lost0)) -gt 0
# The defaults there (OMX_RX_SPLIT=auto, OMX_RX_SPLIT_MEDIUM=auto): the lanes switch while frames
# are lost and duplicated (a frame caught by both sockets during a switch is a duplicate).
ENVS=(OMX_RESEND_DELAY_MS=40 OMX_PULL_RESEND_MS=80)
clear_counters
check "mediums of 32-256 KiB and large messages over the same loss and duplication, default split lanes (MTU 65535)" \
	pair lossy-auto -n "$(omx_scale 400)" -l 32769 -m 1048576 -w 4
counters counters-lossyauto
check "the lanes switched under loss ($(omx_counter "$TMP/counters-lossyauto0" "Split Receive Lane Switches") and $(omx_counter "$TMP/counters-lossyauto1" "Split Receive Lane Switches") switches)" \
	cond '[ "$(omx_counter "$TMP/counters-lossyauto0" "Split Receive Lane Switches")" -gt 0 ] ||
	      [ "$(omx_counter "$TMP/counters-lossyauto1" "Split Receive Lane Switches")" -gt 0 ]'
omx_netns_set_mtu 9000
check "the loss rule dropped frames" test "$(omx_nft_count 1 loss)" -gt 100
omx_nft_clear 0; omx_nft_clear 1

# a sender computing (no library calls) for 4 s right after posting 32 MiB
for thread in 1 0; do
	rm -f "$TMP/woke"
	omx_host_exec 1 env $(omx_env 1) OMX_PROGRESS_THREAD=$thread timeout 120 "$P" recvcheck 33554432 "$TMP/woke" \
		>"$TMP/recv$thread.log" 2>&1 &
	R=$!
	for _ in $(seq 100); do grep -q ready "$TMP/recv$thread.log" && break; sleep 0.05; done
	omx_host_exec 0 env $(omx_env 0) OMX_PROGRESS_THREAD=$thread timeout 120 "$P" sleepsend "${OMX_HOSTNAME[1]}:0" 0 \
		33554432 4 "$TMP/woke" >"$TMP/send$thread.log" 2>&1
	wait $R
	sed "s/^/  [thread=$thread] /" "$TMP/recv$thread.log" "$TMP/send$thread.log"
done
check "progress thread: 32 MiB received intact while the sender slept" grep -q "Success, data intact, while the sender slept" "$TMP/recv1.log"
check "without it (OMX_PROGRESS_THREAD=0): only after the sender woke" grep -q "Success, data intact, after the sender woke" "$TMP/recv0.log"
# the same with a sender busy on its CPU (pinned with its progress thread to one CPU), with batch
# naps (OMX_PROGRESS_BATCH=1): the thread waits for the CPU under SCHED_BATCH while it only checks
# on the application, and must still get it, take over and answer the pulls (as a normal thread)
# while the application computes
rm -f "$TMP/woke"
omx_host_exec 1 env $(omx_env 1) timeout 120 "$P" recvcheck 33554432 "$TMP/woke" >"$TMP/recvspin.log" 2>&1 &
R=$!
for _ in $(seq 100); do grep -q ready "$TMP/recvspin.log" && break; sleep 0.05; done
omx_host_exec 0 env $(omx_env 0) OMX_PROGRESS_BATCH=1 timeout 120 taskset -c 0 "$P" sleepsend "${OMX_HOSTNAME[1]}:0" 0 33554432 4 \
	"$TMP/woke" spin >"$TMP/sendspin.log" 2>&1
wait $R
sed "s/^/  [spinning sender] /" "$TMP/recvspin.log" "$TMP/sendspin.log"
check "progress thread (batch naps): 32 MiB received intact while the sender computed on its only CPU" \
	grep -q "Success, data intact, while the sender slept" "$TMP/recvspin.log"

# sender killed mid-transfer, a keeper on its host answers for the closed endpoint: the pull fails
omx_host_exec 0 env $(omx_env 0) timeout 60 "$P" serve -e 5 -t 30 >"$TMP/keeper.log" 2>&1 &
for _ in $(seq 200); do grep -q ready "$TMP/keeper.log" && break; sleep 0.05; done # it answers for host 0
omx_host_exec 1 env $(omx_env 1) OMX_PULL_RESEND_MS=200 timeout 120 "$P" recvcheck 268435456 "$TMP/never" >"$TMP/recvkill.log" 2>&1 &
R=$!
for _ in $(seq 100); do grep -q ready "$TMP/recvkill.log" && break; sleep 0.05; done
omx_host_exec 0 env $(omx_env 0) OMX_PROGRESS_THREAD=0 timeout 60 "$P" sleepsend "${OMX_HOSTNAME[1]}:0" 0 268435456 30 "$TMP/x" >"$TMP/sendkill.log" 2>&1 &
for _ in $(seq 200); do grep -q posted "$TMP/sendkill.log" && break; sleep 0.05; done
sleep 1 # the rendezvous is in, pulls are going unanswered (no progress thread in the sender)
omx_pkill 0 KILL "omx_faultprog sleepsend"
wait $R
sed 's/^/  [killed sender] /' "$TMP/recvkill.log" "$TMP/sendkill.log" "$TMP/keeper.log"
check "receive from a sender killed mid-transfer fails with a clear status" \
	grep -q -e "received Remote Endpoint is Closed" -e "received Remote Endpoint Unreachable" "$TMP/recvkill.log"
omx_pkill 0 TERM "omx_faultprog serve -e 5"

# Blocking waits keep polling while a transfer moves (OMX_XFER_SPIN_US) as long as its steps come
# within the window, whichever lane the pull replies take (OMX_RX_SPLIT=pull: all of them split;
# stop 35 found split replies not counted as steps). Host 0 sends 16 MiB messages with every frame
# it sends held 20 ms (OMX_FAULT), so host 1's pulls take a few hundred ms in steps of ~20 ms; with
# a 150 ms window no wait with a transfer in flight may sleep on either host (Wait Slept During
# Transfer). Host 1's waits for the next message, nothing in flight, sleep as usual.
omx_netns_set_mtu 9000
clear_counters
XENV=(OMX_SPIN_US=0 OMX_XFER_SPIN_US=150000 OMX_RX_SPLIT=pull)
omx_host_exec 1 env $(omx_env 1) "${XENV[@]}" timeout 120 "$OMX_BUILD/tools/omx_perf" -w >"$TMP/xspin.srv" 2>&1 &
R=$!
omx_wait_line '^Starting receiver' "$TMP/xspin.srv" 100 "$R"
omx_host_exec 0 env $(omx_env 0) "${XENV[@]}" "OMX_FAULT=delay=1,delay_us=20000,seed=7" timeout 120 \
	"$OMX_BUILD/tools/omx_perf" -d "${OMX_HOSTNAME[1]}:0" -w -U -S 16777216 -E 16777217 -N 2 -W 0 -P 0 \
	>"$TMP/xspin.out" 2>&1
rc=$?
wait $R
sed 's/^/  [transfer window] /' "$TMP/xspin.out"
for h in 0 1; do # -v: zero counters listed too, so that a 0 read below is one
	omx_host_exec $h env $(omx_env $h) timeout 30 "$OMX_BUILD/tools/omx_counters" -v -b 0 >"$TMP/xspin$h" 2>&1
done
check "blocking 16 MiB messages, frames delayed 20 ms, split pull replies: sender status 0 (got $rc)" [ "$rc" = 0 ]
check "... the receiver read the pull replies split ($(omx_counter "$TMP/xspin1" "Split Receive Placed Bytes") bytes placed)" \
	test "$(omx_counter "$TMP/xspin1" "Split Receive Placed Bytes")" -ge 33554432
check "... no wait slept with a transfer in flight ($(omx_counter "$TMP/xspin0" "Wait Slept During Transfer") and $(omx_counter "$TMP/xspin1" "Wait Slept During Transfer")), the receiver's between messages did ($(omx_counter "$TMP/xspin1" "Wait Done After Sleeping"))" \
	cond 'grep -q " Wait Slept During Transfer$" "$TMP/xspin0" && grep -q " Wait Slept During Transfer$" "$TMP/xspin1" &&
	      [ "$(omx_counter "$TMP/xspin0" "Wait Slept During Transfer")" = 0 ] &&
	      [ "$(omx_counter "$TMP/xspin1" "Wait Slept During Transfer")" = 0 ] &&
	      [ "$(omx_counter "$TMP/xspin1" "Wait Done After Sleeping")" -gt 0 ]'

# 10,000 large messages (above the 128 KiB eager limit of MTU 9000): memory stays bounded (and
# LeakSanitizer checks exit in the ASan build)
N=$(omx_scale 10000)
ENVS=(OMX_NONE=1)
check "$N large messages both ways" pair longrun -n "$N" -l 131073 -m 262144 -w 8
# mem_bounded NAME SLACK_KB: each host's RSS at the end within 25% + SLACK_KB of its RSS at 10%
mem_bounded() {
	local h early late
	for h in 0 1; do
		read -r early late < <(sed -n 's/.*rss_kb after 10% \([0-9]*\), at the end \([0-9]*\).*/\1 \2/p' "$TMP/$1.$h.log")
		check "$1: host $h memory bounded over the run (RSS ${early:-?} kB at 10%, ${late:-?} kB at the end)" \
			test -n "${early:-}" -a "${late:-0}" -le $(( ${early:-0} + ${early:-0} / 4 + $2 ))
	done
}
mem_bounded longrun 4096
# 10,000 mediums of 4-128 KiB, 8 in flight both ways: a receiver falling behind queues them
# unexpected up to OMX_UNEXP_PEER_MAX_KB (4 MiB here), refuses the rest and asks for them again once
# it has room (counter Resend Asked); memory stays within that bound
# (AddressSanitizer keeps freed blocks in a quarantine of 256 MiB by default: a small one here, or
# the RSS would measure the quarantine; the plain build ignores the variable)
ENVS=(OMX_UNEXP_PEER_MAX_KB=4096 "ASAN_OPTIONS=${ASAN_OPTIONS:-}:quarantine_size_mb=1")
check "$N mediums both ways, unexpected queue of 4 MiB per partner" pair mediums -n "$N" -l 4097 -m 131072 -w 8
mem_bounded mediums 8192
finish
