#!/usr/bin/env bash
# test_ofi_provider.sh - the "omx" libfabric provider (libomx-fi.so): fi_info lists it, fi_getinfo
# refuses what it does not support, and a plain libfabric client (omx_fi_client) runs tagged,
# untagged, directed, truncation, peek/claim, cancel, inject and streaming checks between two
# network namespaces joined by veth, with FI_AV_MAP and FI_AV_TABLE.
set -u
SRC=${OMX_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
source "$SRC/tests/integration/lib/netns.sh"
source "$SRC/tests/integration/lib/omx.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
FIDIR=${OMX_FI_DIR:-$OMX_BUILD/ofi}
X=$FIDIR/omx_fi_client
command -v fi_info >/dev/null || { echo "SKIP: fi_info missing (libfabric-bin)"; echo "0 passed, 0 failed"; exit 0; }
omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/lock0" "$TMP/lock1"
export FI_PROVIDER_PATH=$FIDIR
check "fi_info -p omx lists the provider on host 0's interface" \
	bash -c "ip netns exec ${OMX_NS[0]} env $(omx_env 0) FI_PROVIDER_PATH=$FIDIR fi_info -p omx | grep -q 'domain: ${OMX_IF[0]}'"
check "fi_info -p omx -c FI_RMA finds nothing" \
	bash -c "! ip netns exec ${OMX_NS[0]} env $(omx_env 0) FI_PROVIDER_PATH=$FIDIR fi_info -p omx -c FI_RMA 2>&1 | grep -q 'provider: omx'"
for av in map table; do
	rm -f "$TMP"/name.*
	check "libfabric client across namespaces, FI_AV_${av^^}" \
		omx_run_pair "fi-$av" env FI_PROVIDER_PATH=$FIDIR timeout 300 "$X" a "$TMP" $av -- \
		env FI_PROVIDER_PATH=$FIDIR timeout 300 "$X" b "$TMP" $av
	grep -h '^FAIL' "$TMP/fi-$av".*.log
done
finish
