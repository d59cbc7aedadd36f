#!/usr/bin/env bash
# test_ofi_provider.sh - the "omx" libfabric provider (libomx-fi.so): fi_info lists it, fi_getinfo
# refuses what it does not support, and a plain libfabric client (omx_fi_client) runs tagged,
# untagged, directed, truncation, peek/claim, cancel, inject, remote CQ data and streaming checks
# between two network namespaces joined by veth, with FI_AV_MAP and FI_AV_TABLE; then scenarios
# for specific defects (one client pair each): endpoints closed with operations in flight, FI_PEEK
# of a message that failed before its header arrived, sends queued to an address fi_av_remove
# removed, unexpected large messages left in omx's queue for their receive (reserved: pulled once,
# straight into the receive's buffer; a closed sender; more of them than a sender may have in
# flight); and completions when the CQ cannot grow (one client, with the test build of the provider).
#
# Every step runs under `timeout`, so a hang fails the step instead of the whole CI job.
# In a sanitizer build (OMX_SANITIZE=address) the provider is instrumented but fi_info is not:
# the ASan runtime is preloaded for fi_info (see ofi_sanitizer_env in lib_ofi.sh).
set -u
SRC=${OMX_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
source "$SRC/tests/integration/lib/netns.sh"
source "$SRC/tests/integration/lib/omx.sh"
source "$SRC/ofi/tests/lib_ofi.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
FIDIR=${OMX_FI_DIR:-$OMX_BUILD/ofi}
X=$FIDIR/omx_fi_client
[ -x "$X" ] || { ko "test client $X not built"; finish; }
command -v fi_info >/dev/null || { echo "SKIP: fi_info missing (libfabric-bin)"; echo "0 passed, 0 failed"; exit 0; }
omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/lock0" "$TMP/lock1"
export FI_PROVIDER_PATH=$FIDIR
# Uninstrumented programs (fi_info) loading the instrumented provider: preload the runtime.
PRE=$(ofi_sanitizer_env "$FIDIR/libomx-fi.so")

fi_info0() { omx_ns_exec 0 env $(omx_env 0) FI_PROVIDER_PATH="$FIDIR" $PRE timeout 20 fi_info "$@"; }

fi_info0 -p omx >"$TMP/fi_info.out" 2>&1
rc=$?
check "fi_info -p omx exits 0 (rc $rc)" [ "$rc" = 0 ]
check "fi_info -p omx lists the provider on host 0's interface" \
	grep -q "domain: ${OMX_IF[0]}" "$TMP/fi_info.out"
check "fi_info -p omx shows an RDM endpoint" grep -q 'type: *FI_EP_RDM' "$TMP/fi_info.out"
[ "$rc" = 0 ] || sed 's/^/  [fi_info] /' "$TMP/fi_info.out" | tail -n 20
fi_info0 -p omx -c FI_RMA >"$TMP/fi_info_rma.out" 2>&1
check "fi_info -p omx -c FI_RMA finds nothing" bash -c "! grep -q 'provider: omx' '$TMP/fi_info_rma.out'"
check "fi_info -p omx -c FI_RMA did not crash" bash -c "! grep -q 'Sanitizer\|runtime does not come first' '$TMP/fi_info_rma.out'"

# AV type, then "data" for endpoints opened with FI_REMOTE_CQ_DATA (16-byte header per message)
for mode in ${OFI_MODES:-map table map+data}; do
	av=${mode%%+*}
	data=
	[ "$mode" = "$av" ] || data=${mode#*+}
	rm -f "$TMP"/name.*
	check "libfabric client across namespaces, FI_AV_${av^^}${data:+, FI_REMOTE_CQ_DATA}" \
		omx_run_pair "fi-$mode" env FI_PROVIDER_PATH="$FIDIR" timeout -k 5 60 "$X" a "$TMP" "$av" $data -- \
		env FI_PROVIDER_PATH="$FIDIR" timeout -k 5 60 "$X" b "$TMP" "$av" $data
	grep -h '^FAIL\|^omx_fi_client\|ERROR' "$TMP/fi-$mode".*.log
	[ -z "${OFI_VERBOSE:-}" ] || cat "$TMP/fi-$mode".*.log
done

# scenario NAME "A ENV" "B ENV" ARGS...: one scenario of the client (a and b), see omx_fi_client.c.
# In an ASan build LeakSanitizer makes a client that leaks exit non-zero, failing the check.
scenario() {
	local name=$1 ea=$2 eb=$3
	shift 3
	rm -f "$TMP"/name.* "$TMP"/flag.*
	omx_run_pair "fi-$name" env FI_PROVIDER_PATH="$FIDIR" $ea timeout -k 5 60 "$X" a "$TMP" "$@" -- \
		env FI_PROVIDER_PATH="$FIDIR" $eb timeout -k 5 60 "$X" b "$TMP" "$@"
	local rc=$?
	grep -h '^FAIL\|^omx_fi_client\|ERROR\|SUMMARY' "$TMP/fi-$name".*.log
	[ -z "${OFI_VERBOSE:-}" ] || cat "$TMP/fi-$name".*.log
	return $rc
}
# The sender of "close" and "peekerr" runs without the omx progress thread and stops calling the
# provider once it has sent, so that its large messages stay half-arrived at b. b too runs without
# the thread and does not progress while a sends (its pulls would otherwise be served by a's last
# fi_tsend calls, see flag_wait in omx_fi_scenarios.c).
check "endpoints closed with operations in flight free them all" \
	scenario close "OMX_PROGRESS_THREAD=0" "OMX_PROGRESS_THREAD=0" map close
# b: pulls given up after 5 x 100 ms; new heap memory filled with 0xa5 (glibc and ASan).
asan_b=${ASAN_OPTIONS:+$ASAN_OPTIONS:}malloc_fill_byte=165
check "FI_PEEK of a message that failed before its header arrived reads no header" \
	scenario peekerr "OMX_PROGRESS_THREAD=0" \
	"OMX_PROGRESS_THREAD=0 OMX_RESENDS_MAX=5 OMX_RESEND_DELAY_MS=100 OMX_PULL_RESEND_MS=100 MALLOC_PERTURB_=90 ASAN_OPTIONS=$asan_b" \
	map data peekerr
check "sends queued to an address fi_av_remove removed fail with FI_EADDRNOTAVAIL" \
	scenario avremove "" "" table avremove
# Unexpected large messages wait in omx's queue (reserved) for their receive: b keeps them there
# for the whole run (OMX_FI_RESERVE_US=30 s), with and without the 16-byte header.
for data in "" data; do
	check "unexpected large messages are pulled only by their receive: intact, truncated, claimed, discarded${data:+ (FI_REMOTE_CQ_DATA)}" \
		scenario reserve "" "OMX_FI_RESERVE_US=30000000" map $data reserve
done
# Pulled into the provider's two segments (header, payload) with split receive: the replies are
# still read straight into the payload (they lie wholly in it; before stop 53 only one-segment
# receives were, and MPI's large messages over the network went through the receive ring).
omx_host_exec 1 env $(omx_env 1) timeout 30 "$OMX_BUILD/tools/omx_counters" -c >/dev/null 2>&1
check "reserved messages pulled with split receive (OMX_RX_SPLIT=pull, FI_REMOTE_CQ_DATA)" \
	scenario reserve "" "OMX_FI_RESERVE_US=30000000 OMX_RX_SPLIT=pull" map data reserve
omx_host_exec 1 env $(omx_env 1) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/counters-split" 2>&1
placed=$(omx_counter "$TMP/counters-split" "Split Receive Placed Bytes")
# The two peeked messages are buffered (one segment: 2 MiB placed either way); the received ones
# (1 MiB, and half of one truncated) count only when two-segment receives are placed too.
check "their pull replies were read straight into the payload segment ($placed bytes, over 3 MB)" test "$placed" -gt 3000000
check "a reserved message whose sender closed: its receive fails, no hang" \
	scenario reserveclose "" "OMX_FI_RESERVE_US=30000000 OMX_RESENDS_MAX=5 OMX_RESEND_DELAY_MS=100 OMX_PULL_RESEND_MS=100" \
	map reserveclose
# More large sends than omx lets one endpoint have in flight (128), received newest first: the
# oldest must leave omx's queue, after OMX_FI_RESERVE_US (the cap out of the way) or past the cap
# of reserved messages (OMX_FI_RESERVE_MAX, default 64), or with no reservation at all.
check "140 large messages received newest first: reserved ones buffered after OMX_FI_RESERVE_US" \
	scenario reverse "" "OMX_FI_RESERVE_MAX=100000" map reverse
check "140 large messages received newest first: past OMX_FI_RESERVE_MAX (expiry out of the way)" \
	scenario reverse "" "OMX_FI_RESERVE_US=30000000" map reverse
check "140 large messages received newest first: no reservation (OMX_FI_RESERVE_US=0)" \
	scenario reverse "" "OMX_FI_RESERVE_US=0" map reverse
# One process, the test build of the provider (failure injection): its first 20 CQ writes fail.
cqfail() {
	omx_host_exec 0 env $(omx_env 0) FI_PROVIDER_PATH="$FIDIR/testhooks" OMX_FI_TEST_CQ_ENOMEM=20 \
		timeout -k 5 60 "$X" cqfail >"$TMP/fi-cqfail.log" 2>&1
	local rc=$?
	grep -h '^FAIL\|^omx_fi_client\|ERROR\|SUMMARY' "$TMP/fi-cqfail.log"
	[ -z "${OFI_VERBOSE:-}" ] || cat "$TMP/fi-cqfail.log"
	return $rc
}
check "no completion lost when the CQ cannot grow (OMX_FI_TEST_CQ_ENOMEM=20)" cqfail
# One process, the provider as installed: its CQ's ring grows while wrapped.
cqgrow() {
	omx_host_exec 0 env $(omx_env 0) FI_PROVIDER_PATH="$FIDIR" timeout -k 5 60 "$X" cqgrow >"$TMP/fi-cqgrow.log" 2>&1
	local rc=$?
	grep -h '^FAIL\|^omx_fi_client\|ERROR\|SUMMARY' "$TMP/fi-cqgrow.log"
	[ -z "${OFI_VERBOSE:-}" ] || cat "$TMP/fi-cqgrow.log"
	return $rc
}
check "a CQ that grows while wrapped keeps every completion, in order (600 at once)" cqgrow
# The same build: unexpected messages that find no memory stay in omx's queue and are received
# from there (memory back after 1 failure: adopted, peekable; never back: received directly).
unexpfail() {
	omx_host_exec 0 env $(omx_env 0) FI_PROVIDER_PATH="$FIDIR/testhooks" OMX_FI_TEST_UNEXP_ENOMEM=$1 \
		timeout -k 5 60 "$X" unexpfail ${2:-} >"$TMP/fi-unexpfail$1.log" 2>&1
	local rc=$?
	grep -h '^FAIL\|^omx_fi_client\|ERROR\|SUMMARY' "$TMP/fi-unexpfail$1.log"
	[ -z "${OFI_VERBOSE:-}" ] || cat "$TMP/fi-unexpfail$1.log"
	return $rc
}
check "unexpected messages without memory: received once memory is back (OMX_FI_TEST_UNEXP_ENOMEM=1)" \
	unexpfail 1 back
check "unexpected messages without memory: received while memory stays short (OMX_FI_TEST_UNEXP_ENOMEM=100000)" \
	unexpfail 100000
finish
