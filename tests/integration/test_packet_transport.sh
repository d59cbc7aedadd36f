#!/bin/bash
# test_packet_transport.sh - the AF_PACKET transport (src/net/packet.c) on real frames between
# network namespaces: echo at MTU 1500 / 9000 / 65535, the per-endpoint kernel filter, that a
# host does not see its own outgoing frames, frames for other hosts (bridge flooding) dropped, and
# the nftables loss / duplication rules of the harness really dropping / duplicating frames.
# Needs root. OMX_BUILD = build directory (net_echo is $OMX_BUILD/tests/net_echo).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OMX_BUILD=${OMX_BUILD:?set OMX_BUILD to the build directory}
ECHO="$OMX_BUILD/tests/net_echo"
# shellcheck source=lib/netns.sh
source "$HERE/lib/netns.sh"
# shellcheck source=lib/omx.sh
source "$HERE/lib/omx.sh" # TMP, ok/ko/check/finish

if [ "$(id -u)" != 0 ]; then
	echo "SKIP: needs root"
	echo "0 passed, 0 failed"
	exit 0
fi
[ -x "$ECHO" ] || {
	ko "net_echo not built at $ECHO"
	finish
}

# --- background servers -------------------------------------------------------------------
# start_server NAME HOST ARGS... : net_echo server in host HOST's namespace, log in $TMP/NAME.log
declare -A SPID
start_server() {
	local name=$1 host=$2
	shift 2
	# A plain command (not a function) so that $! is net_echo itself (ip netns exec execs it).
	ip netns exec "${OMX_NS[host]}" "$ECHO" server "$@" >"$TMP/$name.log" 2>&1 &
	SPID[$name]=$!
	omx_wait_line '^ready' "$TMP/$name.log" 100 "${SPID[$name]}" && return 0
	cat "$TMP/$name.log" >&2
	return 1
}
# stop_server NAME : stop it, then SRV_received / SRV_echoed / SRV_bad / SRV_drops /
# SRV_accepted hold its counters
stop_server() {
	local name=$1 line
	kill -TERM "${SPID[$name]}" 2>/dev/null
	wait "${SPID[$name]}" 2>/dev/null
	line=$(grep '^server:' "$TMP/$name.log" | tail -n1)
	SRV_received=$(sed -n 's/.*received=\([0-9]*\).*/\1/p' <<<"$line")
	SRV_echoed=$(sed -n 's/.*echoed=\([0-9]*\).*/\1/p' <<<"$line")
	SRV_bad=$(sed -n 's/.*bad=\([0-9]*\).*/\1/p' <<<"$line")
	SRV_drops=$(sed -n 's/.*drops=\([0-9]*\).*/\1/p' <<<"$line")
	: "${SRV_received:=missing}" "${SRV_echoed:=missing}" "${SRV_bad:=missing}" "${SRV_drops:=0}"
	# Frames the kernel accepted through the filter: delivered, or lost because the ring was
	# full (a starved sink on a busy machine; the kernel counts those only after the filter).
	SRV_accepted=$((${SRV_received/missing/0} + SRV_drops))
	echo "  [$name] $line"
}
# client HOST EP DSTMAC DSTEP ARGS... : run a client; CL_* = its counters, returns its status
client() {
	local host=$1 rc
	shift
	omx_ns_exec "$host" "$ECHO" client "$@" >"$TMP/client.log" 2>&1
	rc=$?
	sed 's/^/  /' "$TMP/client.log"
	local line
	line=$(grep '^client: sent=' "$TMP/client.log" | tail -n1)
	CL_sent=$(sed -n 's/.*sent=\([0-9]*\).*/\1/p' <<<"$line")
	CL_unique=$(sed -n 's/.*unique=\([0-9]*\).*/\1/p' <<<"$line")
	CL_dups=$(sed -n 's/.*dups=\([0-9]*\).*/\1/p' <<<"$line")
	CL_bad=$(sed -n 's/.*bad=\([0-9]*\).*/\1/p' <<<"$line")
	: "${CL_sent:=0}" "${CL_unique:=0}" "${CL_dups:=0}" "${CL_bad:=0}"
	return $rc
}
in_range() { # in_range VALUE LOW HIGH (integers)
	[ -n "$1" ] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]
}

# ===========================================================================================
echo "== 2 hosts, MTU 1500"
omx_netns_setup 2 1500 || {
	ko "namespace setup"
	finish
}
ok "namespace setup: ${OMX_NS[0]}/${OMX_IF[0]} ${OMX_MAC[0]} <-> ${OMX_NS[1]}/${OMX_IF[1]} ${OMX_MAC[1]}"
A=0 B=1
MAC_A=${OMX_MAC[A]} MAC_B=${OMX_MAC[B]}

info=$(omx_ns_exec "$A" "$ECHO" info "${OMX_IF[A]}")
echo "  $info"
check "omx_iface_query: MAC, MTU, up, not loopback" \
	grep -q "mac=$MAC_A mtu=1500 up=1 loopback=0" <<<"$info"
info=$(omx_ns_exec "$A" "$ECHO" info lo)
check "omx_iface_query: lo is loopback" grep -q "loopback=1" <<<"$info"
info=$(omx_ns_exec "$A" "$ECHO" info omx-nosuch)
check "omx_iface_query: missing interface gives ENODEV" grep -q "error=-19" <<<"$info"

# --- echo at MTU 1500, plus kernel filter checks ------------------------------------------
start_server srv "$B" "${OMX_IF[B]}" 3 || ko "server start"
start_server sinkB "$B" "${OMX_IF[B]}" 200 -a -x -r 4096 || ko "sink B start"
start_server sinkA "$A" "${OMX_IF[A]}" 200 -a -x -r 4096 || ko "sink A start"

check "echo 2000 frames, sizes 60..1514, MTU 1500 (+ oversize frame refused)" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 3 -n 2000 -O
expect_srv=2000 expect_sinkB=2000

check "filter: TINY for endpoint 4 not delivered to endpoint 3" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 4 -n 50 -E -T 100 -L 200
expect_sinkB=$((expect_sinkB + 50))
check "filter: NACK_LIB (endpoint at byte 25) for endpoint 3 delivered" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 3 -n 50 -p 44
check "filter: NACK_LIB for endpoint 4 not delivered" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 4 -n 50 -p 44 -E -T 100 -L 200
check "filter: PULL_REPLY (byte 31 ^ 0x80) for endpoint 3 delivered" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 3 -n 50 -p 42
check "filter: PULL_REPLY for endpoint 4 not delivered" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 4 -n 50 -p 42 -E -T 100 -L 200
check "filter: HOST_QUERY reaches every endpoint (sent without qdisc bypass)" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 77 -n 50 -p 3 -b
check "filter: RAW reaches every endpoint" \
	client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 77 -n 50 -p 1
check "filter: broadcast HOST_REPLY delivered" \
	client "$A" "${OMX_IF[A]}" 5 ff:ff:ff:ff:ff:ff 77 -n 50 -p 4
expect_srv=$((expect_srv + 5 * 50))
expect_sinkB=$((expect_sinkB + 7 * 50))
expect_sinkA=$expect_srv # host A's all-endpoints sink sees the echoes only, not A's own frames

stop_server srv
check "endpoint 3 received exactly the $expect_srv frames meant for it (got $SRV_received)" \
	[ "$SRV_received" = "$expect_srv" ]
stop_server sinkB
check "all-endpoints socket on B took every frame sent to B ($expect_sinkB, got $SRV_accepted)" \
	[ "$SRV_accepted" = "$expect_sinkB" ]
stop_server sinkA
check "A does not see its own outgoing frames: A's sink took only the $expect_sinkA echoes (got $SRV_accepted)" \
	[ "$SRV_accepted" = "$expect_sinkA" ]

# --- MTU 9000 and 65535 ------------------------------------------------------------------
for mtu in 9000 65535; do
	echo "== MTU $mtu"
	if ! omx_netns_set_mtu "$mtu"; then
		ko "set MTU $mtu"
		continue
	fi
	check "omx_iface_query sees MTU $mtu" grep -q " mtu=$mtu " <<<"$(omx_ns_exec "$B" "$ECHO" info "${OMX_IF[B]}")"
	start_server srv "$B" "${OMX_IF[B]}" 3 || ko "server start"
	n=1000
	[ "$mtu" = 65535 ] && n=300
	check "echo $n frames up to $((mtu + 14)) bytes at MTU $mtu (+ oversize frame refused)" \
		client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 3 -n "$n" -O
	if [ "$mtu" = 65535 ]; then
		check "a single 65549-byte frame round trip" \
			client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 3 -n 20 -s max
	fi
	stop_server srv
	check "server at MTU $mtu: no bad frame" [ "$SRV_bad" = 0 ]
done
omx_netns_set_mtu 1500 || ko "set MTU 1500"

# --- nftables loss (ingress of B: silent, as on a wire) ------------------------------------
echo "== loss rule: 20% on B's ingress"
N=3000
omx_nft_loss "$B" 20 || ko "add loss rule"
start_server srv "$B" "${OMX_IF[B]}" 3
client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 3 -n $N -w 64 -T 50 -L 200 -S
check "loss run: no bad frame, no send error" [ $? = 0 ]
stop_server srv
dropped=$(omx_nft_count "$B" loss)
echo "  nft counter: $dropped dropped; server got $SRV_received of $N; client got $CL_unique echoes"
check "loss: nft counter ($dropped) = frames that never reached the server ($((N - SRV_received)))" \
	[ "$dropped" = $((N - SRV_received)) ]
check "loss: echoes = frames the server got ($CL_unique = $SRV_received)" [ "$CL_unique" = "$SRV_received" ]
check "loss: observed rate $((100 * (N - CL_unique) / N))% within 14..26%" \
	in_range $((N - CL_unique)) $((N * 14 / 100)) $((N * 26 / 100))
omx_nft_clear "$B" loss
check "loss rule removed" [ -z "$(omx_nft_count "$B" loss)" ]

# --- nftables duplication (egress of A, dup to the same device) ------------------------------
echo "== dup rule: 20% on A's egress"
omx_nft_dup "$A" 20 || ko "add dup rule"
start_server srv "$B" "${OMX_IF[B]}" 3
client "$A" "${OMX_IF[A]}" 5 "$MAC_B" 3 -n $N -w 64 -T 50 -L 300 -S
check "dup run: no bad frame, no send error" [ $? = 0 ]
stop_server srv
duped=$(omx_nft_count "$A" dup)
echo "  nft counter: $duped duplicated; server got $SRV_received for $N sent; client saw $CL_dups dups"
check "dup: every frame arrived ($CL_unique of $N)" [ "$CL_unique" = "$N" ]
check "dup: server got $((SRV_received - N)) extra copies, the nft counter says $duped (>= 98% of it)" \
	in_range $((SRV_received - N)) $((duped * 98 / 100)) "$duped"
check "dup: client saw the duplicates echoed ($CL_dups = $((SRV_received - N)))" [ "$CL_dups" = $((SRV_received - N)) ]
check "dup: observed rate $((100 * CL_dups / N))% within 14..26%" \
	in_range "$CL_dups" $((N * 14 / 100)) $((N * 26 / 100))
omx_nft_clear "$A" dup
check "dup rule removed" [ -z "$(omx_nft_count "$A" dup)" ]

# ===========================================================================================
echo "== 3 hosts on a bridge, MTU 9000"
omx_netns_cleanup
if omx_netns_setup 3 9000; then
	ok "bridge setup ($OMX_BRIDGE_NS)"
	start_server srv 0 "${OMX_IF[0]}" 3 || ko "server start"
	start_server sink0 0 "${OMX_IF[0]}" 200 -a -x -r 4096 || ko "sink start"
	check "echo host 2 -> host 0 across the bridge" \
		client 2 "${OMX_IF[2]}" 5 "${OMX_MAC[0]}" 3 -n 500
	check "echo host 1 -> host 0 across the bridge" \
		client 1 "${OMX_IF[1]}" 6 "${OMX_MAC[0]}" 3 -n 500
	# Unknown unicast: the bridge floods it to every port; host 0 must not take it.
	check "frames for an unknown MAC (flooded by the bridge) are not delivered" \
		client 2 "${OMX_IF[2]}" 5 02:00:00:00:00:99 3 -n 50 -E -T 100 -L 200
	stop_server srv
	check "host 0 endpoint 3 got exactly the 1000 frames for it (got $SRV_received)" [ "$SRV_received" = 1000 ]
	stop_server sink0
	check "host 0 all-endpoints socket took 1000 frames, no flooded one (got $SRV_accepted)" \
		[ "$SRV_accepted" = 1000 ]
	omx_netns_peers_file "$TMP/peers"
	check "peers file has 3 'mac host:0' lines" \
		[ "$(grep -cE '^([0-9a-f]{2}:){5}[0-9a-f]{2} omxh[0-9]+:0$' "$TMP/peers")" = 3 ]
else
	ko "bridge setup"
fi

finish
