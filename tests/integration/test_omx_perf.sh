#!/bin/bash
# test_omx_perf.sh - the omx_perf and omx_info tools between two network namespaces:
# ping-pong runs at MTU 1500 and 9000, in the extended and (at 9000) MX-compatible wire modes,
# with polling / omx_wait / synchronous / unidirectional / aligned / touched / huge-page variants; the output format
# (behaviour.md 11.6), one line per expected length, positive and self-consistent numbers, the
# CSV rows; omx_info's board and peer lines (11.1); and clean failures on bad input.
# Needs root. OMX_BUILD = build directory (tools in $OMX_BUILD/tools).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OMX_BUILD=${OMX_BUILD:?set OMX_BUILD to the build directory}
PERF="$OMX_BUILD/tools/omx_perf"
INFO="$OMX_BUILD/tools/omx_info"
# shellcheck source=lib/netns.sh
source "$HERE/lib/netns.sh"
# shellcheck source=lib/omx.sh
source "$HERE/lib/omx.sh" # TMP, ok/ko/check/cond/failed_cleanly/finish

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root"
	echo "0 passed, 0 failed"
	exit 0
fi
for b in "$PERF" "$INFO"; do
	[ -x "$b" ] || {
		ko "tool not built at $b"
		finish
	}
done

# Short runs: lengths 0, 1, 2, 4, ..., 65536 (the eager sizes and a few rendezvous ones).
RUN_ARGS=(-S 0 -E 70000 -N 50 -W 5 -P 0)
EXPECTED_LENGTHS=(0)
for ((l = 1; l < 70000; l *= 2)); do EXPECTED_LENGTHS+=("$l"); done
TOOL_TIMEOUT=120

# Processes in a host: only that host's veth end attached, the common peers file.
host_env() { # host_env I -> words for env(1); each host's lock files in $TMP, not /dev/shm
	mkdir -p "$TMP/lock$1"
	echo "OMX_IFACES=${OMX_IF[$1]} OMX_PEERS=$PEERS OMX_LOCK_DIR=$TMP/lock$1"
}

# --- output checks ------------------------------------------------------------------------

# check_client_output NAME FILE ITER : the whole client stdout, line by line.
check_client_output() {
	local name=$1 f=$2 iter=$3 line n=0 bad=0 want l lat bw bwi
	local re=$'^length +(-?[0-9]+):\t([0-9]+\\.[0-9]{3}) us\t([0-9]+\\.[0-9]{2}) MB/s\t ([0-9]+\\.[0-9]{2}) MiB/s$'
	mapfile -t LINES <"$f"
	check "$name: first line names the client's board" \
		[ "${LINES[0]:-}" = "Successfully open any endpoint for hostname '${OMX_HOSTNAME[0]}:0' iface '${OMX_IF[0]}'" ]
	check "$name: second line announces the sender" \
		[ "${LINES[1]:-}" = "Starting sender to '${OMX_HOSTNAME[1]}:0'..." ]
	check "$name: one line per length (${#EXPECTED_LENGTHS[@]}, got $((${#LINES[@]} - 2)))" \
		[ "$((${#LINES[@]} - 2))" = "${#EXPECTED_LENGTHS[@]}" ]
	RESULTS=()
	for line in "${LINES[@]:2}"; do
		want=${EXPECTED_LENGTHS[n]:-missing}
		n=$((n + 1))
		if ! [[ $line =~ $re ]]; then
			echo "  bad line format: '$line'"
			bad=$((bad + 1))
			continue
		fi
		l=${BASH_REMATCH[1]} lat=${BASH_REMATCH[2]} bw=${BASH_REMATCH[3]} bwi=${BASH_REMATCH[4]}
		if [ "${line%%:*}" != "$(printf 'length % 9d' "$want")" ]; then
			echo "  length field '${line%%:*}' is not 'length % 9d' of $want"
			bad=$((bad + 1))
			continue
		fi
		# latency > 0; bandwidth 0 for length 0, else positive (unless it rounds to 0.00 on a
		# very slow run); bandwidth = length / latency (both derive from the same total time);
		# MiB/s = MB/s / 1.048576. Tolerances cover the rounding of the printed values.
		if ! awk -v l="$l" -v lat="$lat" -v bw="$bw" -v bwi="$bwi" 'BEGIN {
			l += 0; lat += 0; bw += 0; bwi += 0
			if (lat <= 0) exit 1
			if (l == 0) exit !(bw == 0 && bwi == 0)
			want = l / lat
			if (want >= 0.01 && (bw <= 0 || bwi <= 0)) exit 1
			tol = 0.0051 + l / (lat * lat) * 0.00051
			if (bw - want > tol || want - bw > tol) exit 1
			d = bw / 1.048576 - bwi; if (d > 0.0098 || d < -0.0098) exit 1
			exit 0 }'; then
			echo "  inconsistent numbers: '$line'"
			bad=$((bad + 1))
			continue
		fi
		RESULTS+=("$l,$iter,$lat,$bw")
	done
	check "$name: every length line well formed, positive and consistent ($bad bad)" [ "$bad" = 0 ]
}

# check_csv NAME FILE : header + the same rows as the text output (RESULTS).
check_csv() {
	local name=$1 f=$2
	mapfile -t ROWS <"$f"
	check "$name: CSV header" [ "${ROWS[0]:-}" = "length,iterations,latency_us,bandwidth_MBps" ]
	check "$name: CSV rows equal the text lines (${#RESULTS[@]} rows)" \
		[ "$(printf '%s\n' "${ROWS[@]:1}")" = "$(printf '%s\n' "${RESULTS[@]}")" ]
}

# run_pair NAME ENV_WORDS CLIENT_ARGS... : server in host 1, client in host 0, both with the
# extra environment ENV_WORDS (e.g. "OMX_WIRE_MODE=compat"); checks both outputs.
SERVER_ARGS=()
run_pair() {
	local name=$1 extra=$2 t srv rc src
	shift 2
	# shellcheck disable=SC2046
	omx_ns_exec 1 env $(host_env 1) OMX_HOSTNAME="${OMX_HOSTNAME[1]}" $extra timeout "$TOOL_TIMEOUT" \
		"$PERF" "${SERVER_ARGS[@]}" >"$TMP/$name.srv" 2>"$TMP/$name.srv.err" &
	srv=$!
	omx_wait_line '^Starting receiver' "$TMP/$name.srv" 100 "$srv"
	# shellcheck disable=SC2046
	omx_ns_exec 0 env $(host_env 0) OMX_HOSTNAME="${OMX_HOSTNAME[0]}" $extra timeout "$TOOL_TIMEOUT" \
		"$PERF" -d "${OMX_HOSTNAME[1]}:0" "$@" -c "$TMP/$name.csv" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	wait $!
	rc=$?
	sed 's/^/  /' "$TMP/$name.out"
	[ -s "$TMP/$name.err" ] && sed 's/^/  stderr: /' "$TMP/$name.err"
	check "$name: client exit status 0 (got $rc)" [ "$rc" = 0 ]
	# Without -s the server leaves after its client.
	for ((t = 0; t < 100; t++)); do
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$srv" 2>/dev/null; then
		kill "$srv" 2>/dev/null
		ko "$name: server still running after its client"
	fi
	wait "$srv"
	src=$?
	[ -s "$TMP/$name.srv.err" ] && sed 's/^/  server stderr: /' "$TMP/$name.srv.err"
	check "$name: server exit status 0 after one client (got $src)" [ "$src" = 0 ]
	check "$name: server output" [ "$(cat "$TMP/$name.srv")" = "$(printf '%s\n%s' \
		"Successfully open endpoint 0 for hostname '${OMX_HOSTNAME[1]}:0' iface '${OMX_IF[1]}'" \
		"Starting receiver...")" ]
	check_client_output "$name" "$TMP/$name.out" "$ITER"
	check_csv "$name" "$TMP/$name.csv"
}
ITER=50

# check_info NAME MTU_WARNING EXTRA_ENV : omx_info -v in host 0.
check_info() {
	local name=$1 warn=$2 extra=$3 rc
	# shellcheck disable=SC2046
	omx_ns_exec 0 env $(host_env 0) OMX_HOSTNAME="${OMX_HOSTNAME[0]}" $extra timeout 30 "$INFO" \
		>"$TMP/info.out" 2>"$TMP/info.err"
	rc=$?
	sed 's/^/  /' "$TMP/info.out"
	sed 's/^/  stderr: /' "$TMP/info.err"
	check "$name: omx_info exit status 0 (got $rc)" [ "$rc" = 0 ]
	local out
	out=$(cat "$TMP/info.out")
	check "$name: version line" grep -qE '^Open-MX version [0-9]+\.[0-9]+' <<<"$out"
	check "$name: build line" grep -qE '^ build: .+' <<<"$out"
	check "$name: board count line" grep -qxF "Found 1 boards (32 max) supporting 32 endpoints each:" <<<"$out"
	check "$name: board line" grep -qxF " ${OMX_HOSTNAME[0]}:0 (board #0 name ${OMX_IF[0]} addr ${OMX_MAC[0]})" <<<"$out"
	check "$name: peer table state" grep -qxF "Peer table is ready, mapper is ff:ff:ff:ff:ff:ff" <<<"$out"
	check "$name: 48 '=' line" grep -qxE '={48}' <<<"$out"
	check "$name: peer 0 line" grep -qxF "  0) ${OMX_MAC[0]} ${OMX_HOSTNAME[0]}:0" <<<"$out"
	check "$name: peer 1 line" grep -qxF "  1) ${OMX_MAC[1]} ${OMX_HOSTNAME[1]}:0" <<<"$out"
	check "$name: exactly 2 peers listed" [ "$(grep -cE '^  [0-9]+\) ' <<<"$out")" = 2 ]
	check "$name: peers listed right after the '=' line" \
		[ "$(sed -n '/^=\{48\}$/{n;p;}' <<<"$out")" = "  0) ${OMX_MAC[0]} ${OMX_HOSTNAME[0]}:0" ]
	check "$name: configuration lines" grep -qE '^  OMX_WIRE_MODE = (extended|compat)$' <<<"$out"
	check "$name: rendezvous threshold shown" grep -qE '^  OMX_RNDV_THRESHOLD = [0-9]+( \(auto[^)]*\))?$' <<<"$out"
	if [ "$warn" = warn ]; then
		check "$name: MTU warning on stderr" grep -qxE '   WARNING: MTU=[0-9]+ invalid' "$TMP/info.err"
	else
		check "$name: no MTU warning" cond '! grep -q "MTU=" "$TMP/info.err"'
	fi
}

# ===========================================================================================
echo "== 2 hosts, MTU 1500"
omx_netns_setup 2 1500 || {
	ko "namespace setup"
	finish
}
ok "namespace setup: ${OMX_NS[0]}/${OMX_IF[0]} ${OMX_MAC[0]} <-> ${OMX_NS[1]}/${OMX_IF[1]} ${OMX_MAC[1]}"
PEERS="$TMP/peers"
omx_netns_peers_file "$PEERS"

check_info "info MTU 1500" nowarn ""
check "info MTU 1500: wire mode extended by default" grep -qxF "  OMX_WIRE_MODE = extended" "$TMP/info.out"

# Terse mode, one board, absent board.
# shellcheck disable=SC2046
omx_ns_exec 0 env $(host_env 0) OMX_HOSTNAME="${OMX_HOSTNAME[0]}" "$INFO" -q >"$TMP/q.out" 2>&1
check "info -q: count and board lines only" [ "$(cat "$TMP/q.out")" = "$(printf '%s\n%s' \
	"Found 1 boards (32 max) supporting 32 endpoints each:" \
	" ${OMX_HOSTNAME[0]}:0 (board #0 name ${OMX_IF[0]} addr ${OMX_MAC[0]})")" ]
# shellcheck disable=SC2046
omx_ns_exec 0 env $(host_env 0) "$INFO" -q -b 0 >"$TMP/b0.out" 2>&1
check "info -b 0: board 0 shown" grep -qF "(board #0 name ${OMX_IF[0]} addr ${OMX_MAC[0]})" "$TMP/b0.out"
# shellcheck disable=SC2046
omx_ns_exec 0 env $(host_env 0) "$INFO" -b 1 >"$TMP/b1.out" 2>&1
rc=$?
check "info -b 1 (absent board): fails (status $rc) with a message" \
	cond 'failed_cleanly "$rc" && grep -qi "board #1" "$TMP/b1.out"'
# MX-compatible mode needs MTU >= 4144: omx_info warns.
check_info "info compat MTU 1500" warn "OMX_WIRE_MODE=compat"

SERVER_ARGS=()
run_pair "mtu1500-poll" "" "${RUN_ARGS[@]}"
SERVER_ARGS=(-w)
run_pair "mtu1500-wait-sync-aligned" "" "${RUN_ARGS[@]}" -w -Y -a
SERVER_ARGS=(-y)
run_pair "mtu1500-unidir-yield" "" "${RUN_ARGS[@]}" -U -y
# run_flag_pair NAME FLAG PARAMS_REGEX : a short run (two lengths, five iterations, the server
# tracing with -v) with client option FLAG, then the server's "Received parameters" line must
# match PARAMS_REGEX: the option reached the server through the parameter block.
run_flag_pair() {
	local name=$1 flag=$2 re=$3 saved=("${EXPECTED_LENGTHS[@]}")
	SERVER_ARGS=(-v)
	EXPECTED_LENGTHS=(65536 262144)
	ITER=5
	run_pair "$name" "" -S 65536 -E 262145 -M 4 -N 5 -W 1 -P 0 "$flag"
	ITER=50
	EXPECTED_LENGTHS=("${saved[@]}")
	check "$name: the server received $flag" grep -q "^Received parameters: $re" "$TMP/$name.srv.err"
}
# -T (an omx extension, parameter byte 43): the server must see it too (it writes its replies)
run_flag_pair "mtu1500-touch" -T ".* touch 1$"
# -H (huge-page buffers, alignment byte 2): the server allocates its buffers the same way
run_flag_pair "mtu1500-huge" -H ".* align 2 "

# --- bad input ------------------------------------------------------------------------------

# shellcheck disable=SC2046
omx_ns_exec 0 env $(host_env 0) timeout 30 "$PERF" -d nosuchhost:0 >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
sed 's/^/  stderr: /' "$TMP/bad.err"
check "omx_perf -d nosuchhost:0: non-zero exit, no crash (status $rc)" failed_cleanly "$rc"
check "omx_perf -d nosuchhost:0: exactly one line on stderr naming the host" \
	cond '[ "$(wc -l <"$TMP/bad.err")" = 1 ] && grep -q "nosuchhost:0" "$TMP/bad.err"'
check "omx_perf -d nosuchhost:0: nothing on stdout" [ ! -s "$TMP/bad.out" ]

omx_ns_exec 0 env OMX_IFACES=doesnotexist OMX_PEERS="$PEERS" timeout 30 "$INFO" >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
sed 's/^/  stderr: /' "$TMP/bad.err"
check "OMX_IFACES=doesnotexist omx_info: non-zero exit, no crash (status $rc)" failed_cleanly "$rc"
check "OMX_IFACES=doesnotexist omx_info: says why" grep -q "failed to initialize" "$TMP/bad.err"
check "OMX_IFACES=doesnotexist omx_info: nothing on stdout" [ ! -s "$TMP/bad.out" ]

omx_ns_exec 0 env OMX_IFACES=doesnotexist OMX_PEERS="$PEERS" timeout 30 "$PERF" >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "OMX_IFACES=doesnotexist omx_perf: non-zero exit, no crash (status $rc)" failed_cleanly "$rc"

"$PERF" -Q >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "omx_perf -Q: 'Unknown option -Q' and usage, status $rc" \
	cond 'failed_cleanly "$rc" && grep -qx "Unknown option -Q" "$TMP/bad.err" && grep -q "^Usage" "$TMP/bad.err"'
"$PERF" --help >"$TMP/help.out" 2>&1
rc=$?
check "omx_perf --help: usage on stdout, status 0" cond '[ "$rc" = 0 ] && grep -q "^Usage" "$TMP/help.out"'
"$INFO" -h >"$TMP/help.out" 2>&1
rc=$?
check "omx_info -h: usage, status 0" cond '[ "$rc" = 0 ] && grep -q "^Usage" "$TMP/help.out"'
"$PERF" -d x -S 3 -M 1 >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "omx_perf -S 3 -M 1 (length would not grow): refused, status $rc" \
	cond 'failed_cleanly "$rc" && [ "$(wc -l <"$TMP/bad.err")" = 1 ]'
"$PERF" -N abc -d x >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "omx_perf -N abc: refused, status $rc" cond 'failed_cleanly "$rc" && [ "$(wc -l <"$TMP/bad.err")" = 1 ]'
"$PERF" -S 4 >"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
check "omx_perf -S without -d: refused as a client option, status $rc" \
	cond 'failed_cleanly "$rc" && grep -q "client option" "$TMP/bad.err"'
# Compat mode at MTU 1500: the endpoint cannot open; clear failure.
# shellcheck disable=SC2046
omx_ns_exec 0 env $(host_env 0) OMX_WIRE_MODE=compat timeout 30 "$PERF" -d "${OMX_HOSTNAME[1]}:0" \
	>"$TMP/bad.out" 2>"$TMP/bad.err"
rc=$?
sed 's/^/  stderr: /' "$TMP/bad.err"
check "omx_perf compat at MTU 1500: fails cleanly (status $rc)" \
	cond 'failed_cleanly "$rc" && grep -q "cannot open" "$TMP/bad.err"'

# ===========================================================================================
echo "== MTU 9000"
omx_netns_set_mtu 9000 || ko "MTU 9000"
omx_netns_wait_up
check_info "info MTU 9000" nowarn ""
check_info "info compat MTU 9000" nowarn "OMX_WIRE_MODE=compat"
check "info compat MTU 9000: wire mode compat" grep -qxF "  OMX_WIRE_MODE = compat" "$TMP/info.out"

SERVER_ARGS=()
run_pair "mtu9000-poll" "" "${RUN_ARGS[@]}"
SERVER_ARGS=()
run_pair "mtu9000-compat-poll" "OMX_WIRE_MODE=compat" "${RUN_ARGS[@]}"
SERVER_ARGS=(-w)
run_pair "mtu9000-compat-wait-sync-unidir" "OMX_WIRE_MODE=compat" "${RUN_ARGS[@]}" -w -Y -U

# CSV on stdout: then stdout is exactly the CSV (the other lines go to stderr).
SERVER_ARGS=()
# shellcheck disable=SC2046
omx_ns_exec 1 env $(host_env 1) timeout "$TOOL_TIMEOUT" "$PERF" >"$TMP/csv.srv" 2>&1 &
srv=$!
omx_wait_line '^Starting receiver' "$TMP/csv.srv" 100
# shellcheck disable=SC2046
omx_ns_exec 0 env $(host_env 0) timeout "$TOOL_TIMEOUT" "$PERF" -d "${OMX_HOSTNAME[1]}:0" -S 1000 -E 100000 \
	-M 3 -I 7 -N 20 -W 2 -P 0 -c - >"$TMP/csv.out" 2>"$TMP/csv.err" &
wait $!
rc=$?
wait "$srv"
sed 's/^/  /' "$TMP/csv.out"
check "-c -: client status 0 (got $rc)" [ "$rc" = 0 ]
check "-c -: stdout is the CSV (lengths 1000 3007 9028 27091 81280)" \
	[ "$(cut -d, -f1,2 "$TMP/csv.out" | tr '\n' ' ')" = "length,iterations 1000,20 3007,20 9028,20 27091,20 81280,20 " ]
check "-c -: informational lines on stderr" grep -q "^Starting sender to" "$TMP/csv.err"

# Blocking mode (OMX_SPIN_US=0) with large messages: while a transfer is in flight omx_wait keeps
# polling (OMX_XFER_SPIN_US) instead of sleeping between its steps. With a 10 s window every wait
# for a large send (RNDV out, PULL in, replies out, NOTIFY in) is done without sleeping; only
# waits for an incoming RNDV may sleep. Then, for contrast (not asserted: it depends on timing),
# the same with the window off.
for xs in 10000000 0; do
	# shellcheck disable=SC2046
	omx_ns_exec 1 env $(host_env 1) OMX_SPIN_US=0 OMX_XFER_SPIN_US=$xs timeout "$TOOL_TIMEOUT" "$PERF" -w \
		>"$TMP/xs$xs.srv" 2>&1 &
	srv=$!
	omx_wait_line '^Starting receiver' "$TMP/xs$xs.srv" 100 "$srv"
	# shellcheck disable=SC2046
	omx_ns_exec 0 env $(host_env 0) OMX_SPIN_US=0 OMX_XFER_SPIN_US=$xs timeout "$TOOL_TIMEOUT" "$PERF" \
		-d "${OMX_HOSTNAME[1]}:0" -w -S 1048576 -E 1048577 -N 20 -W 2 -P 0 >"$TMP/xs$xs.out" 2>&1
	rc=$?
	wait "$srv"
	# shellcheck disable=SC2046
	omx_ns_exec 0 env $(host_env 0) timeout 30 "$OMX_BUILD/tools/omx_counters" -b 0 >"$TMP/xs$xs.counters" 2>&1
	spins=$(omx_counter "$TMP/xs$xs.counters" "Wait Done While Spinning")
	echo "  OMX_XFER_SPIN_US=$xs: client waits done spinning $spins," \
		"after sleeping $(omx_counter "$TMP/xs$xs.counters" "Wait Done After Sleeping")"
	[ "$xs" != 0 ] && spins_window=$spins
	sed 's/^/  /' "$TMP/xs$xs.out"
	check "blocking 1 MiB ping-pong, OMX_XFER_SPIN_US=$xs: client status 0 (got $rc)" [ "$rc" = 0 ]
done
check "blocking 1 MiB ping-pong with a 10 s transfer window: the 22 send waits never slept ($spins_window done spinning)" \
	test "$spins_window" -ge 22

finish
