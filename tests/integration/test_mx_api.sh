#!/usr/bin/env bash
# test_mx_api.sh - an MX application (tests/mx/mx_exercise.c: MX headers only, linked with
# -lmyriexpress) run on two namespaces joined by veth, in both wire modes and at MTU 1500/9000.
set -u
source "$(dirname "$0")/lib/netns.sh"
source "$(dirname "$0")/lib/omx.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
X=$OMX_BUILD/tests/mx_exercise
check "mx_exercise links libopen-mx.so.0 only through the MX name" \
	bash -c "readelf -d $X | grep -q 'NEEDED.*libopen-mx.so.0'"
omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
for cfg in "extended 9000" "compat 9000" "extended 1500"; do
	set -- $cfg
	omx_netns_set_mtu "$2"
	check "MX API across hosts, $1 wire mode, MTU $2" \
		omx_run_pair "mx-$1-$2" env OMX_WIRE_MODE=$1 timeout 300 "$X" a "${OMX_HOSTNAME[1]}:0" -- \
		env OMX_WIRE_MODE=$1 timeout 300 "$X" b "${OMX_HOSTNAME[0]}:0"
done
finish
