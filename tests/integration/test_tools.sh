#!/bin/bash
# test_tools.sh - the operator tools (behaviour.md 11, docs/tools.md) against live endpoints in
# two network namespaces: omx_counters (host-visible counter files: sums, per-endpoint listing,
# stale files of dead processes, reset by the next opener, clearing, privilege), omx_endpoint_info,
# omx_hostname, omx_init_peers, omx_prepare_binding (real and synthetic /proc), and bad input:
# unknown options, missing interface, malformed peers file, unknown board, no privilege.
# Needs root. OMX_BUILD = build directory (tools in $OMX_BUILD/tools).
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
TOOLS=(omx_info omx_counters omx_endpoint_info omx_hostname omx_init_peers omx_prepare_binding omx_doctor omx_perf)
for b in "${TOOLS[@]}"; do
	[ -x "$T/$b" ] || { ko "tool not built: $T/$b"; finish; }
done

# ---- options that need no network ---------------------------------------------------------
for b in "${TOOLS[@]}"; do
	"$T/$b" --help >"$TMP/h.out" 2>&1
	rc=$?
	check "$b --help: usage on stdout, status 0" cond '[ "$rc" = 0 ] && grep -q "^Usage" "$TMP/h.out"'
	"$T/$b" -h >"$TMP/h.out" 2>&1
	rc=$?
	check "$b -h: usage, status 0" cond '[ "$rc" = 0 ] && grep -q "^Usage" "$TMP/h.out"'
	"$T/$b" -Z >"$TMP/z.out" 2>"$TMP/z.err"
	rc=$?
	check "$b -Z: 'Unknown option -Z' then usage on stderr, status 255 (got $rc)" \
		cond '[ "$rc" = 255 ] && [ "$(head -n1 "$TMP/z.err")" = "Unknown option -Z" ] && grep -q "^Usage" "$TMP/z.err" && [ ! -s "$TMP/z.out" ]'
done

omx_netns_setup 2 1500 || { ko "namespace setup"; finish; }
ok "namespace setup: ${OMX_MAC[0]} <-> ${OMX_MAC[1]}"
PEERS="$TMP/peers"
omx_netns_peers_file "$PEERS"
mkdir -p "$TMP/lock0" "$TMP/lock1"
chmod 755 "$TMP" "$TMP/lock0" "$TMP/lock1"
envh() { echo "OMX_IFACES=${OMX_IF[$1]} OMX_PEERS=$PEERS OMX_HOSTNAME=${OMX_HOSTNAME[$1]} OMX_LOCK_DIR=$TMP/lock$1"; }
# run I CMD... : in host I with its environment; stdout/stderr in $TMP/out $TMP/err, status in RC
run() {
	local i=$1
	shift
	# shellcheck disable=SC2046
	omx_ns_exec "$i" env $(envh "$i") timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"
	RC=$?
}
HDR0="${OMX_HOSTNAME[0]}:0 (board #0 name ${OMX_IF[0]} addr ${OMX_MAC[0]})"
HDR1="${OMX_HOSTNAME[1]}:0 (board #0 name ${OMX_IF[1]} addr ${OMX_MAC[1]})"
EQ55=$(printf '=%.0s' {1..55})
EQ46=$(printf '=%.0s' {1..46})
# counter VALUE-OF INDEX FILE : the value printed on the "NNN: value label" line, or 0
counter() { sed -n "s/^$(printf %03d "$1"): *\([0-9]*\) .*/\1/p" "$2" | head -n1 | grep . || echo 0; }

# ---- a server holding endpoint 0 of host 1 (slave mode: stays for several clients) ---------
NSRV=0
start_server() {
	NSRV=$((NSRV + 1))
	# shellcheck disable=SC2046
	omx_ns_exec 1 env $(envh 1) "$T/omx_perf" -s >"$TMP/srv$NSRV.out" 2>&1 &
	SRV=$!
	omx_wait_line '^Starting receiver' "$TMP/srv$NSRV.out" 200
	SRVPID=$(omx_ns_exec 1 sh -c "cut -d' ' -f1 $TMP/lock1/omx-$(echo "${OMX_MAC[1]}" | tr -d :)-0.lock")
}
start_server
check "server up (pid $SRVPID)" cond '[ -n "$SRVPID" ] && [ "$(cat /proc/$SRVPID/comm 2>/dev/null)" = omx_perf ]'

# ---- omx_endpoint_info ------------------------------------------------------------------------
run 1 "$T/omx_endpoint_info"
check "endpoint_info: status 0" [ "$RC" = 0 ]
check "endpoint_info: exact output (board line, 46 '=', endpoint 0 owner, count)" \
	[ "$(cat "$TMP/out")" = "$(printf '%s\n%s\n  0\topen by pid %s (omx_perf)\n1 regular endpoints open (out of 32)\n' "$HDR1" "$EQ46" "$SRVPID")" ]
run 1 "$T/omx_endpoint_info" -v
check "endpoint_info -v: raw not open, 0 open, 1..31 not open, 35 lines" \
	cond 'grep -qx "  raw	not open" "$TMP/out" && grep -qx "  0	open by pid $SRVPID (omx_perf)" "$TMP/out" && grep -qx "  31	not open" "$TMP/out" && [ "$(wc -l <"$TMP/out")" = 37 ]'
run 0 "$T/omx_endpoint_info" -b 0
check "endpoint_info in host 0: nothing open" \
	[ "$(cat "$TMP/out")" = "$(printf '%s\n%s\n0 regular endpoints open (out of 32)\n' "$HDR0" "$EQ46")" ]
run 0 "$T/omx_endpoint_info" -b 3
check "endpoint_info -b 3: 'Cannot find board #3', status 255" \
	cond '[ "$RC" = 255 ] && grep -qx "Cannot find board #3" "$TMP/err"'

# ---- a client run, then omx_counters --------------------------------------------------------------
# shellcheck disable=SC2046
omx_ns_exec 0 env $(envh 0) timeout 120 "$T/omx_perf" -d "${OMX_HOSTNAME[1]}:0" -S 0 -E 70000 -N 20 -W 2 -P 0 \
	>"$TMP/cl.out" 2>&1
check "client run: status 0" [ $? = 0 ]

run 0 "$T/omx_counters"
cp "$TMP/out" "$TMP/c0"
sed 's/^/  /' "$TMP/c0" | head -n 30
check "counters host 0: status 0" [ "$RC" = 0 ]
check "counters: shared pseudo-board first, then a blank line" \
	[ "$(head -n3 "$TMP/c0")" = "$(printf 'Shared Communication (addr 00:00:00:00:00:00)\n%s\n' "$EQ55")" ]
check "counters: board header and 55 '='" cond 'grep -qxF "$HDR0" "$TMP/c0" && [ "$(sed -n "/^$HDR0\$/{n;p;}" "$TMP/c0")" = "$EQ55" ]'
check "counters: every counter line is '%03d: % 9ld label'" \
	cond '! grep -vE "^[0-9]{3}: [ 0-9]{8}[0-9] [A-Za-z]" "$TMP/c0" | grep -vxF -e "$HDR0" -e "$EQ55" -e "Shared Communication (addr 00:00:00:00:00:00)" -e "" | grep -q .'
check "counters -q (default): no zero values" cond '! grep -qE "^[0-9]{3}: +0 " "$TMP/c0"'
check "client: 1 connect request sent, 1 reply received" \
	cond '[ "$(counter 6 "$TMP/c0")" = 1 ] && [ "$(counter 22 "$TMP/c0")" = 1 ]'
check "client: tiny, small, medium fragments and rendezvous sent" \
	cond '[ "$(counter 0 "$TMP/c0")" -gt 0 ] && [ "$(counter 1 "$TMP/c0")" -gt 0 ] && [ "$(counter 2 "$TMP/c0")" -gt 0 ] && [ "$(counter 4 "$TMP/c0")" -gt 0 ]'
run 1 "$T/omx_counters" -b 0
cp "$TMP/out" "$TMP/c1"
check "counters -b 0: the board only (no shared section)" cond '! grep -q "^Shared" "$TMP/c1" && grep -qxF "$HDR1" "$TMP/c1"'
check "server: 1 connect request received (live endpoint)" [ "$(counter 21 "$TMP/c1")" = 1 ]
check "server received no more tiny messages than the client sent ($(counter 16 "$TMP/c1") <= $(counter 0 "$TMP/c0"))" \
	cond '[ "$(counter 16 "$TMP/c1")" -gt 0 ] && [ "$(counter 16 "$TMP/c1")" -le "$(counter 0 "$TMP/c0")" ]'
check "server pulled the rendezvous data (pull requests sent = $(counter 11 "$TMP/c1"), replies received)" \
	cond '[ "$(counter 11 "$TMP/c1")" -gt 0 ] && [ "$(counter 27 "$TMP/c1")" -gt 0 ]'
run 1 "$T/omx_counters" -v -b 0
check "counters -v: all $((85 + 26 - 15)) board slots listed (shared ones apart)" \
	[ "$(grep -cE '^[0-9]{3}: ' "$TMP/out")" = $((85 + 26 - 15)) ]
check "counters -v: zero lines printed as '% 9ld'" grep -qxE '069:         0 Drop Not Implemented Packet Type' "$TMP/out"
run 1 "$T/omx_counters" -s
check "counters -s: shared pseudo-board only" \
	[ "$(cat "$TMP/out")" = "$(printf 'Shared Communication (addr 00:00:00:00:00:00)\n%s\n' "$EQ55")" ]
run 0 "$T/omx_counters" -e
check "counters -e: the client's endpoint file, closed, same Send Tiny" \
	cond 'grep -qE "^  endpoint [0-9]+ opened by pid [0-9]+ \(omx_perf\), closed$" "$TMP/out" && grep -qE "^  000: +$(counter 0 "$TMP/c0") Send Tiny$" "$TMP/out"'
run 1 "$T/omx_counters" -e -b 0
check "counters -e in host 1: server endpoint open, owner pid" \
	grep -qx "  endpoint 0 opened by pid $SRVPID (omx_perf), open" "$TMP/out"

# Clearing: not the owner -> refused; the owner (root) -> zeroed.
omx_ns_exec 1 env $(envh 1) setpriv --reuid=nobody --regid=nogroup --clear-groups timeout 30 "$T/omx_counters" -c -b 0 \
	>"$TMP/out" 2>"$TMP/err"
rc=$?
check "counters -c as nobody: 'Clearing counters: Permission denied', status 255 (got $rc)" \
	cond '[ "$rc" = 255 ] && grep -qx "Clearing counters: Permission denied" "$TMP/err" && grep -qxF "$HDR1" "$TMP/out"'
run 1 "$T/omx_counters" -b 0
check "counters still there after the refused clear" [ "$(counter 21 "$TMP/out")" = 1 ]
run 1 "$T/omx_counters" -c -b 0
check "counters -c as root: status 0, values shown before clearing" cond '[ "$RC" = 0 ] && [ "$(counter 21 "$TMP/out")" = 1 ]'
run 1 "$T/omx_counters" -b 0
check "counters after -c: none left" [ "$(grep -cE '^[0-9]{3}: ' "$TMP/out")" = 0 ]

# A dead process's file: stale, then reset by the next opener of the slot.
omx_ns_exec 0 env $(envh 0) timeout 120 "$T/omx_perf" -d "${OMX_HOSTNAME[1]}:0" -S 0 -E 2 -N 5 -W 0 -P 0 >/dev/null 2>&1
kill -KILL "$SRVPID" 2>/dev/null
wait "$SRV" 2>/dev/null
run 1 "$T/omx_counters" -e -b 0
check "killed server: its file is listed as stale, counts kept" \
	cond 'grep -qx "  endpoint 0 opened by pid $SRVPID (omx_perf), stale (process exited)" "$TMP/out" && [ "$(counter 21 "$TMP/out")" = 1 ]'
run 1 "$T/omx_endpoint_info"
check "killed server: endpoint_info shows no open endpoint" grep -qx "0 regular endpoints open (out of 32)" "$TMP/out"
start_server
run 1 "$T/omx_counters" -e -b 0
check "next opener of the slot resets the file (open, no connect request counted)" \
	cond 'grep -qx "  endpoint 0 opened by pid $SRVPID (omx_perf), open" "$TMP/out" && [ "$(counter 21 "$TMP/out")" = 0 ]'
kill "$SRVPID" 2>/dev/null
wait "$SRV" 2>/dev/null

# ---- omx_hostname ------------------------------------------------------------------------------
run 0 "$T/omx_hostname"
check "hostname: 'Board #0 (iface mac) hostname was name'" \
	[ "$(cat "$TMP/out")" = "Board #0 (${OMX_IF[0]} ${OMX_MAC[0]}) hostname was ${OMX_HOSTNAME[0]}:0" ]
cp "$PEERS" "$TMP/peers2"
run 0 "$T/omx_hostname" -f "$TMP/peers2" -v -n renamed0
check "hostname -n -v: was/changing lines, status 0" \
	cond '[ "$RC" = 0 ] && [ "$(cat "$TMP/out")" = "$(printf "Board #0 (%s %s) hostname was %s:0\nChanging board #0 (%s %s) hostname into renamed0" "${OMX_IF[0]}" "${OMX_MAC[0]}" "${OMX_HOSTNAME[0]}" "${OMX_IF[0]}" "${OMX_MAC[0]}")" ]'
check "hostname -n: peers file line replaced in place" \
	[ "$(sed -n 1p "$TMP/peers2")" = "${OMX_MAC[0]} renamed0" ]
run 0 env OMX_PEERS="$TMP/peers2" "$T/omx_hostname"
check "hostname: the new name is used" grep -qx "Board #0 (${OMX_IF[0]} ${OMX_MAC[0]}) hostname was renamed0" "$TMP/out"
run 0 "$T/omx_hostname" -b 4
check "hostname -b 4: 'Cannot find board #4', status 255" cond '[ "$RC" = 255 ] && grep -qx "Cannot find board #4" "$TMP/err"'
run 0 "$T/omx_hostname" -f "$TMP/peers2" -n "bad name"
check "hostname -n 'bad name': refused, one line, status 255" \
	cond '[ "$RC" = 255 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "^Failed to change hostname" "$TMP/err"'
run 0 env -u OMX_PEERS "$T/omx_hostname" -n x
check "hostname -n without a peers file: refused, status 255" \
	cond '[ "$RC" = 255 ] && grep -q "^Failed to change hostname, no peers file" "$TMP/err"'

# ---- omx_init_peers ----------------------------------------------------------------------------
P3="$TMP/peers3"
run 0 "$T/omx_init_peers" -f "$P3" 02:00:00:00:00:AA nodeA:0
check "init_peers address hostname: message and new file" \
	cond '[ "$RC" = 0 ] && grep -qx "Adding peer nodeA:0 address 02:00:00:00:00:AA" "$TMP/out" && [ "$(cat "$P3")" = "02:00:00:00:00:aa nodeA:0" ]'
printf '# cluster\n\n2:0:0:0:0:bb nodeB:0\n02:00:00:00:00:aa nodeA-renamed:0\n' >"$TMP/src"
run 0 "$T/omx_init_peers" -f "$P3" -d "$TMP/src"
check "init_peers file: messages, rename keeps the index, new peer appended" \
	cond '[ "$RC" = 0 ] && grep -qx "Adding peers from file $TMP/src..." "$TMP/out" && grep -qx "Marking the peer table configured as done..." "$TMP/out" && [ "$(cat "$P3")" = "$(printf "02:00:00:00:00:aa nodeA-renamed:0\n02:00:00:00:00:bb nodeB:0")" ]'
cp "$PEERS" "$TMP/peers4"
echo "02:00:00:00:00:cc nodeC:0" >>"$TMP/peers4"
run 0 "$T/omx_init_peers" -f "$TMP/peers4" -c
check "init_peers -c: 'Clearing peers...', 'Not adding any peer', only the local board kept" \
	cond '[ "$RC" = 0 ] && [ "$(cat "$TMP/out")" = "$(printf "Clearing peers...\nNot adding any peer")" ] && [ "$(cat "$TMP/peers4")" = "${OMX_MAC[0]} ${OMX_HOSTNAME[0]}:0" ]'
printf '02:00:00:00:00:dd nodeD:0\nthis is not a peer line\n' >"$TMP/badsrc"
cp "$P3" "$TMP/p3.before"
run 0 "$T/omx_init_peers" -f "$P3" "$TMP/badsrc"
check "init_peers malformed file: names file and line, status 255, target untouched" \
	cond '[ "$RC" = 255 ] && grep -q "badsrc:2: malformed peer line" "$TMP/err" && cmp -s "$P3" "$TMP/p3.before"'
run 0 "$T/omx_init_peers" -f "$P3" 02:00:00:00:00 nodeE
check "init_peers bad address: one line, status 255" cond '[ "$RC" = 255 ] && [ "$(wc -l <"$TMP/err")" = 1 ]'
run 0 env -u OMX_PEERS "$T/omx_init_peers" 02:00:00:00:00:ee nodeE
check "init_peers without a peers file: says so, status 255" cond '[ "$RC" = 255 ] && grep -q "no peers file" "$TMP/err"'
chmod 755 "$TMP"
omx_ns_exec 0 env $(envh 0) setpriv --reuid=nobody --regid=nogroup --clear-groups "$T/omx_init_peers" -f "$P3" \
	02:00:00:00:00:ee nodeE >"$TMP/out" 2>"$TMP/err"
rc=$?
check "init_peers as nobody: cannot write the file, status 255 (got $rc)" \
	cond '[ "$rc" = 255 ] && grep -q "cannot write" "$TMP/err" && cmp -s "$P3" "$TMP/p3.before"'

# ---- omx_prepare_binding ------------------------------------------------------------------------
run 0 "$T/omx_prepare_binding" "$TMP/bind.real"
check "prepare_binding (veth: no IRQ): 'Generated bindings in', empty file, mode 0644" \
	cond '[ "$RC" = 0 ] && grep -qx "Generated bindings in $TMP/bind.real" "$TMP/out" && [ ! -s "$TMP/bind.real" ] && [ "$(stat -c %a "$TMP/bind.real")" = 644 ]'
FP="$TMP/fakeproc"
mkdir -p "$FP/irq/40" "$FP/irq/41" "$FP/irq/42" "$FP/irq/43"
cat >"$FP/interrupts" <<EOF
           CPU0       CPU1
  40:        10         20   PCI-MSI 1-edge      ${OMX_IF[0]}-rx-0
  41:        10         20   PCI-MSI 2-edge      ${OMX_IF[0]}-rx-1
  42:        10         20   PCI-MSI 3-edge      ${OMX_IF[0]}-TX-0
  43:        10         20   PCI-MSI 4-edge      other0-rx-0
 NMI:         0          0   Non-maskable interrupts
EOF
echo 1 >"$FP/irq/40/smp_affinity"
echo 2 >"$FP/irq/41/smp_affinity"
echo 3 >"$FP/irq/42/smp_affinity"
run 0 env OMX_PROC_DIR="$FP" "$T/omx_prepare_binding" "$TMP/bind.fake"
check "prepare_binding (2 rx slices): 32 lines, slices alternate, tx and other NICs skipped" \
	cond '[ "$RC" = 0 ] && [ "$(wc -l <"$TMP/bind.fake")" = 32 ] && [ "$(sed -n 1p "$TMP/bind.fake")" = "board ${OMX_MAC[0]} ep 0 irq 40 mask 1" ] && [ "$(sed -n 2p "$TMP/bind.fake")" = "board ${OMX_MAC[0]} ep 1 irq 41 mask 2" ] && [ "$(sed -n 32p "$TMP/bind.fake")" = "board ${OMX_MAC[0]} ep 31 irq 41 mask 2" ] && ! grep -q "irq 4[23]" "$TMP/bind.fake"'
run 0 "$T/omx_prepare_binding" /nonexistent/dir/bind
check "prepare_binding unwritable file: one line, status 255" cond '[ "$RC" = 255 ] && [ "$(wc -l <"$TMP/err")" = 1 ]'
run 0 "$T/omx_prepare_binding" a b
check "prepare_binding two files: refused, status 255" [ "$RC" = 255 ]

# ---- omx_doctor ----------------------------------------------------------------------------------
run 0 "$T/omx_doctor"
sed 's/^/  /' "$TMP/out"
check "doctor (root, veth, MTU 1500): status 0, summary last" \
	cond '[ "$RC" = 0 ] && tail -n1 "$TMP/out" | grep -qE "^0 failed, [0-9]+ warnings$"'
check "doctor: every line is 'pass|warn|fail|skip <check>: <detail>'" \
	cond '! sed "\$d" "$TMP/out" | grep -vqE "^(pass|warn|fail|skip) [a-z][a-z0-9 /._-]*: .+"'
check "doctor: link up, MTU 1500 is a warning (no jumbo frames), CAP_NET_RAW passes" \
	cond 'grep -qx "pass link ${OMX_IF[0]}: board #0 up" "$TMP/out" && grep -q "^warn mtu ${OMX_IF[0]}: MTU 1500: " "$TMP/out" && grep -q "^pass privilege: CAP_NET_RAW" "$TMP/out"'
check "doctor: veth has no IRQ and no coalescing: skipped" \
	cond 'grep -q "^skip irq affinity ${OMX_IF[0]}: " "$TMP/out" && grep -q "^skip interrupt coalescing ${OMX_IF[0]}: " "$TMP/out"'
run 0 env OMX_WIRE_MODE=compat "$T/omx_doctor" -q
check "doctor, compat wire mode at MTU 1500: MTU fails, status 255" \
	cond '[ "$RC" = 255 ] && grep -q "^fail mtu ${OMX_IF[0]}: MTU 1500 too small for the MX-compatible wire mode" "$TMP/out" && ! grep -q "^pass" "$TMP/out"'
omx_ns_exec 0 env $(envh 0) setpriv --reuid=nobody --regid=nogroup --clear-groups timeout 30 "$T/omx_doctor" -q \
	>"$TMP/out" 2>"$TMP/err"
rc=$?
check "doctor as nobody: privilege fails (no CAP_NET_RAW, no broker), status 255 (got $rc)" \
	cond '[ "$rc" = 255 ] && grep -q "^fail privilege: no CAP_NET_RAW" "$TMP/out"'
FS="$TMP/fakesys"
mkdir -p "$FS/devices/system/cpu/cpu0/cpuidle/state0" "$FS/devices/system/cpu/cpu0/cpuidle/state1" \
	"$FS/devices/system/cpu/cpu0/cpufreq" "$FS/class/net/${OMX_IF[0]}/queues/rx-0" "$FP/sys/kernel/yama"
echo 0 >"$FS/devices/system/cpu/cpu0/cpuidle/state0/latency"
echo POLL >"$FS/devices/system/cpu/cpu0/cpuidle/state0/name"
echo 100 >"$FS/devices/system/cpu/cpu0/cpuidle/state1/latency"
echo C6 >"$FS/devices/system/cpu/cpu0/cpuidle/state1/name"
echo 0 >"$FS/devices/system/cpu/cpu0/cpuidle/state1/disable"
echo powersave >"$FS/devices/system/cpu/cpu0/cpufreq/scaling_governor"
echo 3 >"$FS/class/net/${OMX_IF[0]}/queues/rx-0/rps_cpus"
echo 1 >"$FP/sys/kernel/yama/ptrace_scope"
run 0 env OMX_PROC_DIR="$FP" OMX_SYS_DIR="$FS" "$T/omx_doctor"
sed 's/^/  /' "$TMP/out"
check "doctor (synthetic): IRQs without OMX_PROCESS_BINDING warned" \
	grep -q "^warn irq affinity ${OMX_IF[0]}: 2 receive IRQs but OMX_PROCESS_BINDING unset" "$TMP/out"
check "doctor (synthetic): RPS, deep C-state, powersave governor, ptrace_scope 1 warned" \
	cond 'grep -q "^warn rps/xps ${OMX_IF[0]}: RPS on 1 of 1 receive queues" "$TMP/out" && grep -q "^warn cpu idle states: 1 enabled idle states with exit latency >= 20 us (deepest C6, 100 us)" "$TMP/out" && grep -q "^warn cpu frequency: governor powersave" "$TMP/out" && grep -q "^warn ptrace_scope: 1: " "$TMP/out"'
check "doctor (synthetic): warnings only, status 0" [ "$RC" = 0 ]
run 0 env OMX_PROC_DIR="$FP" OMX_SYS_DIR="$FS" OMX_PROCESS_BINDING="file:$TMP/bind.fake" "$T/omx_doctor" -q
check "doctor: binding file matching /proc/irq: no irq warning" cond '! grep -q "irq affinity" "$TMP/out"'
echo 4 >"$FP/irq/41/smp_affinity"
run 0 env OMX_PROC_DIR="$FP" OMX_SYS_DIR="$FS" OMX_PROCESS_BINDING="file:$TMP/bind.fake" "$T/omx_doctor" -q
check "doctor: IRQ 41 moved since the binding file: 16 of 32 masks differ" \
	grep -q "^warn irq affinity ${OMX_IF[0]}: 16 of 32 IRQ masks in $TMP/bind.fake differ" "$TMP/out"
run 0 env OMX_PROC_DIR="$FP" OMX_PROCESS_BINDING="file:$TMP/nosuchbind" "$T/omx_doctor" -q
check "doctor: missing binding file fails, status 255" \
	cond '[ "$RC" = 255 ] && grep -q "^fail irq affinity ${OMX_IF[0]}: .*unreadable" "$TMP/out"'

# ---- host configuration file (OMX_CONFIG), environment overriding it ---------------------------
cat >"$TMP/omx.conf" <<EOF
# host configuration
OMX_IFACES=${OMX_IF[0]}
OMX_RNDV_THRESHOLD = 8192
OMX_SPIN_US="7"
this line is malformed
EOF
omx_ns_exec 0 env OMX_CONFIG="$TMP/omx.conf" OMX_SPIN_US=9 OMX_LOCK_DIR="$TMP/lock0" OMX_PEERS="$PEERS" \
	timeout 30 "$T/omx_info" -v >"$TMP/out" 2>"$TMP/err"
rc=$?
check "config file: omx_info status 0, interface taken from the file" \
	cond '[ "$rc" = 0 ] && grep -qF "(board #0 name ${OMX_IF[0]} addr ${OMX_MAC[0]})" "$TMP/out"'
check "config file: header names the file as loaded" \
	grep -qF "configuration file $TMP/omx.conf loaded):" "$TMP/out"
check "config file: value from the file, source file" \
	cond 'grep -qx "  OMX_RNDV_THRESHOLD = 8192" "$TMP/out" && grep -qx "  OMX_RNDV_THRESHOLD=8192 (file)" "$TMP/out" && grep -qx "  OMX_IFACES=${OMX_IF[0]} (file)" "$TMP/out"'
check "config file: the environment overrides it" grep -qx "  OMX_SPIN_US=9 (env)" "$TMP/out"
check "omx_info -v says which same-host mode is in force" \
	grep -qE "^Shared communication: shared-memory rings, (single|two)-copy large messages" "$TMP/out"
# The ring's way of taking a producer's next slot: empty-mask stores where the CPU has AVX-512 VL
# and BW (not under TSan), else PREFETCHW; OMX_SHARED_OWN_LINES=0 forces the latter.
own=PREFETCHW
if grep -qw avx512vl /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && [ "${OMX_SANITIZE:-}" != thread ]; then
	own="empty-mask stores"
fi
check "omx_info -v: ring slots taken by $own (this CPU, default)" grep -qF "; ring slots taken by $own; " "$TMP/out"
omx_ns_exec 0 env OMX_CONFIG="$TMP/omx.conf" OMX_SHARED_OWN_LINES=0 OMX_LOCK_DIR="$TMP/lock0" OMX_PEERS="$PEERS" \
	timeout 30 "$T/omx_info" -v >"$TMP/out2" 2>/dev/null
check "omx_info -v: OMX_SHARED_OWN_LINES=0 gives PREFETCHW" \
	cond 'grep -qF "; ring slots taken by PREFETCHW; " "$TMP/out2" && grep -qx "  OMX_SHARED_OWN_LINES=0 (env)" "$TMP/out2"'
check "omx_info names the split-receive defaults (auto), not off" \
	cond 'grep -q "^  OMX_RX_SPLIT = auto (" "$TMP/out" && grep -q "^  OMX_RX_SPLIT_MEDIUM = auto (32768 " "$TMP/out"'
check "config file: untouched knobs are defaults" \
	cond 'grep -qx "  OMX_MTU=0 (default)" "$TMP/out" && grep -qx "  OMX_WIRE_MODE=extended (default)" "$TMP/out" && grep -qx "  OMX_PEERS=$PEERS (env)" "$TMP/out"'
NKNOBS=$(grep -cE '^  OMX_[A-Z_]+=.* \((default|file|env)\)$' "$TMP/out")
check "config file: every documented knob listed ($NKNOBS)" [ "$NKNOBS" -ge 36 ]
check "config file: the malformed line is named on stderr (file:line)" grep -qF "omx.conf:5: malformed line" "$TMP/err"
omx_ns_exec 0 env OMX_CONFIG="$TMP/nosuch.conf" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock0" OMX_PEERS="$PEERS" \
	timeout 30 "$T/omx_info" -q >"$TMP/out" 2>"$TMP/err"
rc=$?
check "OMX_CONFIG naming a missing file: one warning, still works (status $rc)" \
	cond '[ "$rc" = 0 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "nosuch.conf" "$TMP/err"'

# ---- bad environment ----------------------------------------------------------------------------
for b in omx_info omx_counters omx_endpoint_info omx_hostname omx_prepare_binding omx_doctor; do
	omx_ns_exec 0 env OMX_IFACES=doesnotexist OMX_LOCK_DIR="$TMP/lock0" timeout 30 "$T/$b" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	check "$b with a missing interface: fails cleanly (status $rc), says why, nothing on stdout" \
		cond 'failed_cleanly "$rc" && grep -q "failed to initialize" "$TMP/err" && [ ! -s "$TMP/out" ]'
done
printf '%s omxh0:0\nnot a mac line\n' "${OMX_MAC[0]}" >"$TMP/badpeers"
for b in omx_info omx_counters omx_endpoint_info; do
	omx_ns_exec 0 env OMX_IFACES="${OMX_IF[0]}" OMX_PEERS="$TMP/badpeers" OMX_LOCK_DIR="$TMP/lock0" timeout 30 "$T/$b" \
		>"$TMP/out" 2>"$TMP/err"
	rc=$?
	check "$b with a malformed peers file: fails cleanly (status $rc), names file:line" \
		cond 'failed_cleanly "$rc" && grep -q "badpeers:2" "$TMP/err"'
done
mkdir -m 1777 "$TMP/lockn"
omx_ns_exec 0 env $(envh 0) OMX_LOCK_DIR="$TMP/lockn" setpriv --reuid=nobody --regid=nogroup --clear-groups timeout 30 "$T/omx_perf" \
	-d "${OMX_HOSTNAME[1]}:0" >"$TMP/out" 2>"$TMP/err"
rc=$?
sed 's/^/  stderr: /' "$TMP/err"
check "omx_perf as nobody (no CAP_NET_RAW): fails cleanly (status $rc) with a message" \
	cond 'failed_cleanly "$rc" && [ "$(wc -l <"$TMP/err")" -ge 1 ] && grep -qi "permission\|access" "$TMP/err"'
run 0 "$T/omx_counters" -b 999
check "counters -b 999: invalid board number, status 255" cond '[ "$RC" = 255 ] && grep -q "invalid board number" "$TMP/err"'
run 0 "$T/omx_counters" -b
check "counters -b without a value: 'requires an argument', status 255" cond '[ "$RC" = 255 ] && grep -q "requires an argument" "$TMP/err"'

finish
