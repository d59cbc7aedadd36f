#!/bin/bash
# test_wireshark.sh - the Wireshark dissector tools/wireshark/omx.lua on real traffic: two
# namespaces (MTU 9000), no peers file (discovery: RAW, HOST_QUERY, HOST_REPLY), an omx_perf run
# over every size class (CONNECT, TINY, SMALL, MEDIUM, RNDV, PULL, PULL_REPLY, NOTIFY), immediate
# explicit acks (TRUC), a connect to a closed endpoint (NACK_LIB), in the extended and the
# MX-compatible wire modes, captured with tcpdump and decoded by tshark; the fields are checked
# against what the programs sent. NACK_MCP cannot be provoked with the tools: one synthetic frame.
# SKIPs (exit 0) without tshark or tcpdump. Needs root.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OMX_BUILD=${OMX_BUILD:?set OMX_BUILD to the build directory}
OMX_SRC=${OMX_SRC:-$(cd "$HERE/../.." && pwd)}
T="$OMX_BUILD/tools"
LUA="$OMX_SRC/tools/wireshark/omx.lua"

# shellcheck source=lib/netns.sh
source "$HERE/lib/netns.sh"
# shellcheck source=lib/omx.sh
source "$HERE/lib/omx.sh" # TMP (kept with OMX_KEEP_TMP=1), ok/ko/check/cond/finish

for tool in tshark tcpdump; do
	if ! command -v "$tool" >/dev/null; then
		echo "SKIP: $tool not installed"
		echo "0 passed, 0 failed"
		exit 0
	fi
done
if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root"
	echo "0 passed, 0 failed"
	exit 0
fi

# tshark as root runs Lua plugins on Debian (init.lua run_user_scripts_when_superuser = true);
# the "Running as user root" notice goes to stderr.
tsh() { tshark -X "lua_script:$LUA" "$@" 2>"$TMP/tshark.err"; }

# Synthetic NACK_MCP (wire.md 5.10): src_endpoint 3, BAD_RDMAWIN, handle 0x1234, magic for ep 3.
python3 - "$TMP/nack_mcp.pcap" <<'EOF'
import struct, sys
body = struct.pack(">BBBBIII", 45, 3, 0, 4, 0, 0x1234, 0x21071980 ^ 3)
frame = bytes.fromhex("020000000002" "020000000001") + struct.pack(">HH", 0x86DF, 0xFFFF) + body
frame += bytes(60 - len(frame))
hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
rec = struct.pack("<IIII", 0, 0, len(frame), len(frame))
open(sys.argv[1], "wb").write(hdr + rec + frame)
EOF
tsh -r "$TMP/nack_mcp.pcap" -T fields -E separator=, -e omx.ptype -e omx.src_endpoint -e omx.nack_type \
	-e omx.src_pull_handle -e omx.src_magic -e omx.magic_endpoint >"$TMP/nm"
check "synthetic NACK_MCP: ptype, src_endpoint, nack_type, handle, magic, endpoint from magic" \
	[ "$(cat "$TMP/nm")" = "45,3,4,0x00001234,0x21071983,3" ]
tsh -r "$TMP/nack_mcp.pcap" >"$TMP/nm.txt"
check "synthetic NACK_MCP: summary line" grep -q "OMX 60 NACK_MCP BAD_RDMAWIN handle 0x1234" "$TMP/nm.txt"

omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
ok "namespace setup (MTU 9000)"
envh() { echo "OMX_IFACES=${OMX_IF[$1]} OMX_HOSTNAME=${OMX_HOSTNAME[$1]} OMX_LOCK_DIR=$TMP/lock$1 OMX_WIRE_MODE=$MODE"; }
mac_nic() { printf '0x%016x' "0x$(echo "$1" | tr -d :)"; }

for MODE in extended compat; do
	echo "== wire mode $MODE"
	mkdir -p "$TMP/lock0" "$TMP/lock1"
	rm -f "$TMP"/lock*/*
	TPS=()
	for i in 0 1; do
		omx_ns_exec "$i" sh -c 'echo $$ >"$0"; exec tcpdump --immediate-mode -B 65536 -Z root -U -n -i "$1" -w "$2" "ether proto 0x86df"' \
			"$TMP/tcpdump$i.pid" "${OMX_IF[$i]}" "$TMP/$MODE.h$i.pcap" >/dev/null 2>"$TMP/tcpdump$i.err" &
		TPS+=($!)
	done
	for i in 0 1; do
		omx_wait_line "listening on" "$TMP/tcpdump$i.err" 100
	done
	# shellcheck disable=SC2046
	omx_ns_exec 1 env $(envh 1) OMX_NOTACKED_MAX=1 "$T/omx_perf" -s >"$TMP/srv.out" 2>&1 &
	SRV=$!
	omx_wait_line '^Starting receiver' "$TMP/srv.out" 200
	# shellcheck disable=SC2046
	omx_ns_exec 0 env $(envh 0) OMX_NOTACKED_MAX=1 timeout 120 "$T/omx_perf" -d "${OMX_HOSTNAME[1]}:0" \
		-S 0 -E 300000 -N 3 -W 0 -P 0 >"$TMP/cl.out" 2>&1
	check "$MODE: omx_perf run (discovery, all sizes) status 0" [ $? = 0 ]
	# shellcheck disable=SC2046
	omx_ns_exec 0 env $(envh 0) timeout 60 "$T/omx_perf" -d "${OMX_HOSTNAME[1]}:0" -r 7 >"$TMP/nack.out" 2>&1
	check "$MODE: connect to closed endpoint 7 refused" grep -q "Closed" "$TMP/nack.out"
	# the omx_perf process itself (its pid is in its slot lock file), not the wrappers
	SRVPID=$(cut -d' ' -f1 "$TMP/lock1/omx-$(echo "${OMX_MAC[1]}" | tr -d :)-0.lock")
	kill "$SRVPID" 2>/dev/null
	wait "$SRV" 2>/dev/null
	sleep 0.3
	# tcpdump itself (a background subshell ignores SIGINT): it writes its last packets and exits
	kill -INT "$(cat "$TMP/tcpdump0.pid")" "$(cat "$TMP/tcpdump1.pid")" 2>/dev/null
	wait "${TPS[@]}" 2>/dev/null
	# A loaded machine can make tcpdump lose frames (then a type may be missing): say so.
	grep -h "dropped by kernel" "$TMP/tcpdump0.err" "$TMP/tcpdump1.err" | sed 's/^/  tcpdump: /'

	ALL="$TMP/$MODE.fields"
	: >"$ALL"
	for i in 0 1; do
		tsh -r "$TMP/$MODE.h$i.pcap" -T fields -E separator='|' -e eth.src -e omx.ptype -e omx.dst_endpoint \
			-e omx.src_endpoint -e omx.length -e omx.match -e omx.app_key -e omx.is_reply \
			-e omx.connect_status_code -e omx.frag_pipeline -e omx.wire_mode -e omx.magic_endpoint \
			-e omx.hostname -e omx.nic_id -e omx.nack_type -e omx.truc_type -e omx.msg_length \
			-e omx.block_length -e omx.frame_length -e omx.frag_length >>"$ALL"
	done
	check "$MODE: tshark decoded the captures ($(wc -l <"$ALL") frames), no Lua error" \
		cond '[ "$(wc -l <"$ALL")" -gt 50 ] && ! grep -qi "lua.*error\|error.*lua" "$TMP/tshark.err"'
	types=$(cut -d'|' -f2 "$ALL" | sort -n | uniq | tr '\n' ' ')
	echo "  packet types seen: $types"
	for pt in 1 3 4 35 36 37 38 39 40 41 42 43 44; do
		check "$MODE: packet type $pt captured and dissected" grep -qE "^[^|]*\|$pt\|" "$ALL"
	done
	# field checks: (column numbers as in the -e list above)
	fld() { awk -F'|' -v pt="$1" -v c="$2" '$2 == pt { print $c }' "$ALL" | sort -u; }
	check "$MODE: CONNECT request carries omx_perf's key 0x12345678" \
		cond 'awk -F"|" "\$2 == 36 && \$8 == 0" "$ALL" | cut -d"|" -f7 | grep -qx 0x12345678'
	check "$MODE: CONNECT reply status 0 (success)" \
		cond 'awk -F"|" "\$2 == 36 && \$8 == 1" "$ALL" | cut -d"|" -f9 | grep -qx 0'
	check "$MODE: TINY/SMALL carry the ping match 0x1234567887654321" \
		cond 'fld 37 6 | grep -qx 0x1234567887654321 && fld 38 6 | grep -qx 0x1234567887654321'
	check "$MODE: TINY lengths <= 32, SMALL 33..128" \
		cond '[ "$(fld 37 5 | sort -n | tail -n1)" -le 32 ] && [ "$(fld 38 5 | sort -n | head -n1)" -ge 33 ] && [ "$(fld 38 5 | sort -n | tail -n1)" -le 128 ]'
	echo "  RNDV msg_length: $(fld 40 17 | sort -n | tr '\n' ' ')/ PULL block_length: $(fld 41 18 | sort -n | tr '\n' ' ')/ PULL_REPLY frame_length min: $(fld 42 19 | sort -n | head -n1)"
	check "$MODE: RNDV msg_length > the largest medium, PULL block_length > 0, PULL_REPLY frame_length > 0" \
		cond '[ "$(fld 40 17 | sort -n | tail -n1)" -gt 4096 ] && [ "$(fld 41 18 | sort -n | head -n1)" -gt 0 ] && [ "$(fld 42 19 | sort -n | head -n1)" -gt 0 ]'
	check "$MODE: PULL and PULL_REPLY name endpoint 0 through the magic" \
		cond '[ "$(fld 41 12)" = 0 ] && [ "$(fld 42 12)" = 0 ]'
	check "$MODE: MEDIUM and PULL dissected in the $MODE layout (auto-detected)" \
		cond '[ "$(fld 39 11)" = "$MODE" ] && [ "$(fld 41 11)" = "$MODE" ]'
	if [ "$MODE" = compat ]; then
		check "compat: MEDIUM frag_pipeline 12, fragments <= 4096" \
			cond '[ "$(fld 39 10)" = 12 ] && [ "$(fld 39 20 | sort -n | tail -n1)" -le 4096 ]'
	else
		check "extended: MEDIUM fragments up to 8192 at MTU 9000" [ "$(fld 39 20 | sort -n | tail -n1)" = 8192 ]
	fi
	check "$MODE: HOST_REPLY hostnames are the boards' names" \
		cond '[ "$(fld 4 13 | tr "\n" " ")" = "${OMX_HOSTNAME[0]}:0 ${OMX_HOSTNAME[1]}:0 " ] || [ "$(fld 4 13 | wc -l)" -ge 1 ]'
	check "$MODE: HOST_REPLY from host 1 says ${OMX_HOSTNAME[1]}:0" \
		cond 'awk -F"|" -v m="${OMX_MAC[1]}" "\$1 == m && \$2 == 4 { print \$13 }" "$ALL" | grep -qx "${OMX_HOSTNAME[1]}:0"'
	check "$MODE: RAW discovery frames announce each sender's MAC as nic id" \
		cond 'awk -F"|" -v m="${OMX_MAC[0]}" "\$1 == m && \$2 == 1 { print \$14 }" "$ALL" | grep -qx "$(mac_nic "${OMX_MAC[0]}")"'
	check "$MODE: NACK_LIB ENDPT_CLOSED (2) from endpoint 7" \
		cond 'awk -F"|" "\$2 == 44 { print \$4 \",\" \$15 }" "$ALL" | grep -qx "7,2"'
	check "$MODE: TRUC is a liback (type 0x55)" [ "$(fld 35 16)" = 0x00000055 ]
done

# The preference forces a layout: compat captures read as extended give other PULL values.
tsh -r "$TMP/compat.h0.pcap" -o omx.wire_mode:compat -Y 'omx.ptype == 41' -T fields -e omx.wire_mode >"$TMP/pref"
tsh -r "$TMP/compat.h1.pcap" -o omx.wire_mode:compat -Y 'omx.ptype == 41' -T fields -e omx.wire_mode >>"$TMP/pref"
check "preference omx.wire_mode:compat accepted and applied" \
	cond '[ -s "$TMP/pref" ] && [ "$(sort -u "$TMP/pref")" = compat ]'
finish
