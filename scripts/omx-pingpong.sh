#!/bin/bash
# omx-pingpong.sh - run the omx_perf ping-pong between two network namespaces on this machine.
#
#   sudo scripts/omx-pingpong.sh [omx_perf client options...]
#
# Creates two namespaces ("hosts" omxh0 and omxh1) joined by a veth pair, writes a peers file,
# starts the omx_perf server in omxh1 and the client in omxh0 (-d omxh1:0), prints the client's
# output, and removes everything on exit (also on Ctrl-C). Frames only travel on that veth pair:
# nothing is sent on the machine's own interfaces. Exit status: the client's.
#
# Arguments are passed to the client after the defaults "-S 0 -E 4194305 -N 200", so they
# override them (e.g. "-E 65536 -N 1000", "-U", "-Y", "-c -" for CSV on stdout).
# On a fresh machine (no omx_perf in the build directory yet) it first installs what is missing
# (scripts/deps.sh) and builds (scripts/build.sh), with that output on standard error. Standard
# output is exactly the client's; the script's own messages go to standard error.
#
# Environment:
#   OMX_BUILD              build directory [./build]; omx_perf is $OMX_BUILD/tools/omx_perf
#   MTU                    MTU of the veth pair [9000]
#   OMX_WIRE_MODE          extended (default) or compat (needs MTU >= 4144), for both sides
#   OMX_PINGPONG_TIMEOUT   seconds before the run is aborted [900]; 0 = no limit
# Needs root (network namespaces, raw sockets), iproute2 and util-linux (unshare).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${OMX_BUILD:-$SRC/build}
PERF="$BUILD/tools/omx_perf"
MTU=${MTU:-9000}
TIMEOUT=${OMX_PINGPONG_TIMEOUT:-900}

die() {
	echo "omx-pingpong: $*" >&2
	exit 1
}

case "${1:-}" in
-h | --help)
	sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
	exit 0
	;;
esac

[ "$(id -u)" = 0 ] || die "must run as root (network namespaces and raw sockets)"
if [ ! -x "$PERF" ] && [ -z "${OMX_BUILD:-}" ]; then
	echo "omx-pingpong: first run: installing dependencies and building (output on stderr)" >&2
	{ "$SRC/scripts/deps.sh" && "$SRC/scripts/build.sh" default; } >&2 || die "set-up failed"
fi
[ -x "$PERF" ] || die "no omx_perf at $PERF: build first (scripts/build.sh) or set OMX_BUILD"
case "$MTU" in
'' | *[!0-9]*) die "MTU must be a number (got '$MTU')" ;;
esac
case "$TIMEOUT" in
'' | *[!0-9]*) die "OMX_PINGPONG_TIMEOUT must be a number of seconds (got '$TIMEOUT')" ;;
esac
for cmd in ip unshare timeout; do
	command -v "$cmd" >/dev/null 2>&1 || die "'$cmd' not found"
done
PERF=$(cd "$(dirname "$PERF")" && pwd)/omx_perf

# shellcheck source=../tests/integration/lib/netns.sh
source "$SRC/tests/integration/lib/netns.sh" || die "cannot load the namespace harness"

TMP=$(mktemp -d /tmp/omx-pingpong.XXXXXX) || die "mktemp failed"
omx_at_exit 'rm -rf "$TMP"'

omx_netns_setup 2 "$MTU" || die "cannot create the namespaces (MTU $MTU)"
PEERS="$TMP/peers"
omx_netns_peers_file "$PEERS" || die "cannot write the peers file"

TO=()
[ "$TIMEOUT" != 0 ] && TO=(timeout "$TIMEOUT")
# Only the veth end of each namespace is attached; names come from the peers file. Each "host"
# keeps its endpoint lock and counter files in its own directory under $TMP: the veth MACs are
# new every run, so files in the default /dev/shm would pile up run after run.
mkdir -p "$TMP/lock0" "$TMP/lock1" || die "cannot create the lock directories"
envs=(env OMX_PEERS="$PEERS")
[ -n "${OMX_WIRE_MODE:-}" ] && envs+=(OMX_WIRE_MODE="$OMX_WIRE_MODE")

echo "omx-pingpong: ${OMX_HOSTNAME[1]} (${OMX_IF[1]} ${OMX_MAC[1]}) <-> ${OMX_HOSTNAME[0]} (${OMX_IF[0]} ${OMX_MAC[0]}), MTU $MTU" >&2

omx_host_exec 1 "${envs[@]}" OMX_IFACES="${OMX_IF[1]}" OMX_LOCK_DIR="$TMP/lock1" "${TO[@]}" "$PERF" >"$TMP/server.log" 2>&1 &
SERVER=$!
for ((t = 0; t < 100; t++)); do
	grep -q '^Starting receiver' "$TMP/server.log" 2>/dev/null && break
	kill -0 "$SERVER" 2>/dev/null || break
	sleep 0.05
done
if ! grep -q '^Starting receiver' "$TMP/server.log" 2>/dev/null; then
	echo "omx-pingpong: the server did not start:" >&2
	cat "$TMP/server.log" >&2
	exit 1
fi

# In the background so that Ctrl-C / SIGTERM interrupt the wait at once (the EXIT trap then
# kills everything still running in the namespaces and removes them).
omx_host_exec 0 "${envs[@]}" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock0" "${TO[@]}" "$PERF" -d "${OMX_HOSTNAME[1]}:0" \
	-S 0 -E 4194305 -N 200 "$@" &
CLIENT=$!
wait "$CLIENT"
rc=$?
if [ "$rc" = 124 ] && [ "$TIMEOUT" != 0 ]; then
	echo "omx-pingpong: the client did not finish within $TIMEOUT s" >&2
fi

# The server leaves after its client; give it a moment, then show what it said if it failed.
for ((t = 0; t < 40; t++)); do
	kill -0 "$SERVER" 2>/dev/null || break
	sleep 0.05
done
if ! kill -0 "$SERVER" 2>/dev/null; then
	wait "$SERVER"
	src=$?
	if [ "$src" != 0 ]; then
		echo "omx-pingpong: server exited with status $src:" >&2
		cat "$TMP/server.log" >&2
	fi
fi
exit "$rc"
