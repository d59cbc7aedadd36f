# netns.sh - network-namespace harness for omx integration tests (bash; source it, run as root).
#
# Builds N "hosts", each a network namespace with one Ethernet interface, joined by a veth pair
# (2 hosts) or by a bridge living in its own namespace (3+ hosts). No IP address, IPv6 disabled:
# the only frames on these links are the ones the tests send. Nothing is connected to the
# machine's own interfaces.
#
#   omx_netns_setup N [MTU]     create hosts 0..N-1 (MTU default 1500); sets, for i in 0..N-1:
#                                 OMX_NS[i]        namespace name (omxt<pid>h<i>)
#                                 OMX_IF[i]        interface name inside it (omx<i>)
#                                 OMX_MAC[i]       its MAC address
#                                 OMX_HOSTNAME[i]  logical host name (omxh<i>)
#                               and OMX_NHOSTS, OMX_BRIDGE_NS ("" for 2 hosts).
#                               Installs the EXIT trap that runs omx_netns_cleanup.
#   omx_netns_set_mtu MTU       change the MTU of every link (1500, 9000, 65535, ...)
#   omx_ns_exec I CMD...        run CMD in host I's namespace
#   omx_host_exec I CMD...      same, plus a private UTS namespace whose hostname is OMX_HOSTNAME[I]
#   omx_netns_peers_file FILE   write "xx:xx:xx:xx:xx:xx omxh<i>:0" lines for every host
#   omx_nft_loss I PCT [HOOK]   drop PCT% (integer) of the 0x86DF frames on host I's interface;
#                               HOOK ingress (default: frames arriving at host I, a silent loss as
#                               on a wire) or egress (leaving host I: the sender's send() then
#                               fails with ENOBUFS, so that is not a silent loss).
#   omx_nft_dup I PCT           duplicate PCT% of the 0x86DF frames leaving host I (egress hook
#                               of its interface, "dup to" the same interface: the peer gets both)
#   omx_nft_count I loss|dup    packets the rule has matched so far
#   omx_nft_clear I [loss|dup]  remove host I's rules (both by default)
#   omx_at_exit CMD             run CMD (eval) at exit, before the namespaces are removed; test
#                               scripts must use this rather than their own EXIT trap
#   omx_netns_cleanup           kill what still runs in our namespaces, remove rules and
#                               namespaces (idempotent; also run by the EXIT trap)
#
# Rules match "meta protocol 0x86df" rather than "ether type 0x86df": on the egress hook a frame
# sent by a packet socket with PACKET_QDISC_BYPASS has no MAC header offset set, so link-layer
# payload matches (ether type) never match it, while skb->protocol is always 0x86DF.

OMX_NETNS_PREFIX="omxt$$"
OMX_NHOSTS=0
OMX_BRIDGE_NS=""
OMX_NS=()
OMX_IF=()
OMX_MAC=()
OMX_HOSTNAME=()
_OMX_NS_CREATED=()
_OMX_AT_EXIT=()
_OMX_TRAP_SET=0

_omx_log() { echo "netns: $*" >&2; }

omx_at_exit() { _OMX_AT_EXIT+=("$*"); }

_omx_exit_trap() {
	local rc=$?
	local c
	for c in "${_OMX_AT_EXIT[@]}"; do
		eval "$c" || true
	done
	omx_netns_cleanup
	exit "$rc"
}

_omx_set_trap() {
	if [ "$_OMX_TRAP_SET" = 0 ]; then
		trap _omx_exit_trap EXIT
		trap 'exit 130' INT
		trap 'exit 143' TERM
		_OMX_TRAP_SET=1
	fi
}

# Remove namespaces left by earlier runs whose creating shell is gone (omxt<pid>...).
omx_netns_reap_stale() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case "$ns" in
		omxt[0-9]*) ;;
		*) continue ;;
		esac
		pid=${ns#omxt}
		pid=${pid%%[!0-9]*}
		[ -n "$pid" ] || continue
		if [ "$pid" != "$$" ] && ! kill -0 "$pid" 2>/dev/null; then
			_omx_log "removing stale namespace $ns"
			_omx_ns_kill_pids "$ns"
			ip netns del "$ns" 2>/dev/null || true
		fi
	done
}

_omx_ns_kill_pids() {
	local ns=$1 p pids
	pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
	[ -n "$pids" ] || return 0
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	sleep 0.2
	pids=$(ip netns pids "$ns" 2>/dev/null) || return 0
	for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
}

_omx_ns_create() {
	local ns=$1
	ip netns add "$ns" || return 1
	_OMX_NS_CREATED+=("$ns")
	# Interfaces created in this namespace from now on get no IPv6 (no ND/MLD noise).
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
	ip -n "$ns" link set lo up
	# Same-host endpoints exchange frames over Unix datagram sockets, whose per-socket queue
	# holds max_dgram_qlen datagrams (10 by default): room for a window (docs/tuning.md).
	ip netns exec "$ns" sysctl -qw net.unix.max_dgram_qlen=1024 2>/dev/null || true
}

_omx_if_prepare() {
	local ns=$1 dev=$2 mtu=$3
	ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$dev.disable_ipv6=1" 2>/dev/null || true
	ip -n "$ns" link set "$dev" mtu "$mtu" || return 1
	ip -n "$ns" link set "$dev" up || return 1
}

omx_netns_setup() {
	local n=${1:?number of hosts} mtu=${2:-1500} i
	if [ "$(id -u)" != 0 ]; then
		_omx_log "needs root"
		return 1
	fi
	if [ "$OMX_NHOSTS" != 0 ]; then
		_omx_log "already set up"
		return 1
	fi
	[ "$n" -ge 2 ] || { _omx_log "need at least 2 hosts"; return 1; }
	_omx_set_trap
	omx_netns_reap_stale
	for ((i = 0; i < n; i++)); do
		OMX_NS[i]="${OMX_NETNS_PREFIX}h$i"
		OMX_IF[i]="omx$i"
		OMX_HOSTNAME[i]="omxh$i"
		_omx_ns_create "${OMX_NS[i]}" || return 1
	done
	if [ "$n" = 2 ]; then
		ip link add "${OMX_IF[0]}" netns "${OMX_NS[0]}" type veth \
			peer name "${OMX_IF[1]}" netns "${OMX_NS[1]}" || return 1
	else
		OMX_BRIDGE_NS="${OMX_NETNS_PREFIX}br"
		_omx_ns_create "$OMX_BRIDGE_NS" || return 1
		ip -n "$OMX_BRIDGE_NS" link add br0 type bridge stp_state 0 forward_delay 0 \
			mcast_snooping 0 || return 1
		for ((i = 0; i < n; i++)); do
			ip link add "${OMX_IF[i]}" netns "${OMX_NS[i]}" type veth \
				peer name "p$i" netns "$OMX_BRIDGE_NS" || return 1
			ip -n "$OMX_BRIDGE_NS" link set "p$i" master br0 || return 1
		done
	fi
	OMX_NHOSTS=$n
	omx_netns_set_mtu "$mtu" || return 1
	for ((i = 0; i < n; i++)); do
		OMX_MAC[i]=$(ip -n "${OMX_NS[i]}" -o link show "${OMX_IF[i]}" |
			sed -n 's/.*link\/ether \([0-9a-f:]\{17\}\).*/\1/p')
		[ -n "${OMX_MAC[i]}" ] || { _omx_log "no MAC for host $i"; return 1; }
	done
	omx_netns_wait_up || return 1
}

# Set the MTU of every link (host interfaces, bridge ports, bridge) and bring them up.
omx_netns_set_mtu() {
	local mtu=${1:?mtu} i
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		_omx_if_prepare "${OMX_NS[i]}" "${OMX_IF[i]}" "$mtu" || return 1
		if [ -n "$OMX_BRIDGE_NS" ]; then
			_omx_if_prepare "$OMX_BRIDGE_NS" "p$i" "$mtu" || return 1
		fi
	done
	if [ -n "$OMX_BRIDGE_NS" ]; then
		_omx_if_prepare "$OMX_BRIDGE_NS" br0 "$mtu" || return 1
	fi
	OMX_MTU=$mtu
}

# Wait until every host interface reports carrier (LOWER_UP), at most ~5 s.
omx_netns_wait_up() {
	local i t
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		for ((t = 0; t < 50; t++)); do
			ip -n "${OMX_NS[i]}" link show "${OMX_IF[i]}" | grep -q 'LOWER_UP' && break
			sleep 0.1
		done
		[ "$t" -lt 50 ] || { _omx_log "${OMX_IF[i]} in ${OMX_NS[i]} not up"; return 1; }
	done
	if [ -n "$OMX_BRIDGE_NS" ]; then
		for ((t = 0; t < 50; t++)); do
			[ "$(ip -n "$OMX_BRIDGE_NS" -o link show master br0 | grep -c 'state UP')" = "$OMX_NHOSTS" ] &&
				break
			sleep 0.1
		done
	fi
}

omx_ns_exec() {
	local i=$1
	shift
	ip netns exec "${OMX_NS[i]}" "$@"
}

omx_host_exec() {
	local i=$1
	shift
	ip netns exec "${OMX_NS[i]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "${OMX_HOSTNAME[i]}" "$@"
}

omx_netns_peers_file() {
	local f=${1:?file} i
	: >"$f" || return 1
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		echo "${OMX_MAC[i]} ${OMX_HOSTNAME[i]}:0" >>"$f"
	done
}

# The copy made by "dup to" goes through the egress hook again; without a mark it would be
# duplicated again (rate p/(1-p) instead of p, and chains cut by the netfilter recursion limit).
_OMX_DUP_MARK=0x4f4d5801

_omx_nft_table() { echo "omxt_$1"; } # omxt_loss / omxt_dup

_omx_pct_ok() {
	case "$1" in
	'' | *[!0-9]*) return 1 ;;
	esac
	[ "$1" -le 100 ]
}

omx_nft_loss() {
	local i=${1:?host} pct=${2:?percent} hook=${3:-ingress}
	local ns=${OMX_NS[i]} dev=${OMX_IF[i]} t
	t=$(_omx_nft_table loss)
	_omx_pct_ok "$pct" || { _omx_log "bad percent $pct"; return 1; }
	case "$hook" in ingress | egress) ;; *) _omx_log "bad hook $hook"; return 1 ;; esac
	ip netns exec "$ns" nft delete table netdev "$t" 2>/dev/null
	ip netns exec "$ns" nft -f - <<EOF
table netdev $t {
	chain c {
		type filter hook $hook device "$dev" priority 0; policy accept;
		meta protocol 0x86df numgen random mod 100 < $pct counter drop
	}
}
EOF
}

omx_nft_dup() {
	local i=${1:?host} pct=${2:?percent}
	local ns=${OMX_NS[i]} dev=${OMX_IF[i]} t
	t=$(_omx_nft_table dup)
	_omx_pct_ok "$pct" || { _omx_log "bad percent $pct"; return 1; }
	ip netns exec "$ns" nft delete table netdev "$t" 2>/dev/null
	ip netns exec "$ns" nft -f - <<EOF
table netdev $t {
	chain c {
		type filter hook egress device "$dev" priority 0; policy accept;
		meta protocol 0x86df meta mark != $_OMX_DUP_MARK numgen random mod 100 < $pct meta mark set $_OMX_DUP_MARK counter dup to "$dev"
	}
}
EOF
}

omx_nft_count() {
	local i=${1:?host} kind=${2:?loss or dup}
	ip netns exec "${OMX_NS[i]}" nft list table netdev "$(_omx_nft_table "$kind")" 2>/dev/null |
		sed -n 's/.*counter packets \([0-9]*\).*/\1/p' | head -n1
}

omx_nft_clear() {
	local i=${1:?host} kinds=${2:-"loss dup"} k
	for k in $kinds; do
		ip netns exec "${OMX_NS[i]}" nft delete table netdev "$(_omx_nft_table "$k")" 2>/dev/null || true
	done
}

omx_netns_cleanup() {
	local ns i
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		omx_nft_clear "$i"
	done
	for ns in "${_OMX_NS_CREATED[@]}"; do
		_omx_ns_kill_pids "$ns"
		ip netns del "$ns" 2>/dev/null || true
	done
	_OMX_NS_CREATED=()
	OMX_NHOSTS=0
	OMX_BRIDGE_NS=""
	OMX_NS=()
	OMX_IF=()
	OMX_MAC=()
}
