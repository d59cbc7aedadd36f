#!/bin/bash
# test_broker.sh - omxd, the privilege broker, with a real unprivileged account (nobody):
#   * nobody really cannot open packet sockets itself;
#   * with omxd running in each namespace, nobody runs an omx_perf ping-pong between two hosts
#     (both ends unprivileged), and an MX-style message exchange with checksums (omx_stress);
#   * without a broker (OMX_BROKER=none) the open fails with a clear error, non-zero exit;
#   * asking for an endpoint whose slot lock it does not hold is refused (and logged by omxd);
#   * a granted socket's filter can be neither replaced nor detached, and it never delivers frames
#     meant for another endpoint (root floods endpoints 3 and 4; the probe owns 3);
#   * omxd answers for closed endpoints (NACK responder) when no privileged process could;
#   * omxd killed (SIGKILL) and restarted over its stale socket file: the running client is unaffected, new clients are served.
# Needs root (to create the namespaces and start omxd).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib/netns.sh"
source "$HERE/lib/omx.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; echo "0 passed, 0 failed"; exit 0; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no 'nobody' account"; echo "0 passed, 0 failed"; exit 0; }
OMXD=$OMX_BUILD/daemon/omxd
# The build tree may not be reachable by nobody (e.g. under a 0700 home): run copies from $TMP.
chmod 755 "$TMP"
mkdir -p "$TMP/bin"
cp "$OMX_BUILD/tools/omx_perf" "$OMX_BUILD/tests/omx_stress" "$OMX_BUILD/tests/omx_brokerprobe" \
	"$OMX_BUILD/tests/omx_faultprog" "$TMP/bin/" &&
	cp -P "$OMX_BUILD"/src/libopen-mx.so* "$TMP/bin/" && chmod -R a+rX "$TMP/bin" ||
	{ ko "copying the programs"; finish; }
PERF=$TMP/bin/omx_perf
STRESS=$TMP/bin/omx_stress
PROBE=$TMP/bin/omx_brokerprobe
FAULT=$TMP/bin/omx_faultprog
NOBODY="setpriv --reuid=nobody --regid=$(id -g nobody) --clear-groups --inh-caps=-all --bounding-set=-all env LD_LIBRARY_PATH=$TMP/bin"
check "nobody can run the test programs" $NOBODY "$PERF" -h

omx_netns_setup 2 9000 || { ko "namespace setup"; finish; }
omx_netns_peers_file "$TMP/peers"
chmod 644 "$TMP/peers"
for i in 0 1; do mkdir -p "$TMP/lock$i"; chmod 1777 "$TMP/lock$i"; done
export -f failed_cleanly # (lib/omx.sh) for the bash -c below
BENV() { echo "$(omx_env "$1") OMX_BROKER=$TMP/omxd.$1.sock"; }

start_omxd() { # start_omxd I : omxd for host I, log in $TMP/omxd.I.log, pid in OMXD_PID[I]
	local i=$1
	ip netns exec "${OMX_NS[i]}" env OMX_PEERS="$TMP/peers" "$OMXD" -f -v -s "$TMP/omxd.$i.sock" -i "${OMX_IF[$i]}" -l "$TMP/lock$i" \
		>>"$TMP/omxd.$i.log" 2>&1 &
	OMXD_PID[i]=$!
	for _ in $(seq 50); do [ -S "$TMP/omxd.$i.sock" ] && return 0; sleep 0.1; done
	return 1
}
stop_omxd() { kill -TERM "${OMXD_PID[$1]}" 2>/dev/null; wait "${OMXD_PID[$1]}" 2>/dev/null; }
omx_at_exit 'kill ${OMXD_PID[@]:-} 2>/dev/null'

check "nobody cannot open a packet socket by itself" \
	omx_host_exec 0 $NOBODY "$PROBE" direct "${OMX_IF[0]}"

# No broker: a clear refusal, not a crash.
omx_host_exec 0 $NOBODY env $(omx_env 0) OMX_BROKER=none "$PERF" >"$TMP/nobroker.log" 2>&1
rc=$?
check "without a broker nobody's omx_perf fails cleanly (rc $rc)" \
	bash -c "failed_cleanly $rc && grep -qi 'denied\|permission\|access' '$TMP/nobroker.log'"

check "omxd starts in namespace 0" start_omxd 0
check "omxd starts in namespace 1" start_omxd 1

# A ping-pong with both ends unprivileged.
omx_host_exec 0 $NOBODY env $(BENV 0) timeout 60 "$PERF" -e 2 >"$TMP/perf.0.log" 2>&1 &
srv=$!
sleep 0.5
omx_host_exec 1 $NOBODY env $(BENV 1) timeout 60 "$PERF" -d "${OMX_HOSTNAME[0]}:0" -r 2 -S 0 -E 70000 -M 4 -N 200 \
	>"$TMP/perf.1.log" 2>&1
rc=$?
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
lines=$(grep -c '^length' "$TMP/perf.1.log")
check "nobody's omx_perf ping-pong through omxd (rc $rc, $lines lengths)" \
	bash -c "[ $rc = 0 ] && [ $lines = 10 ]"
sed 's/^/  [perf h1] /' "$TMP/perf.1.log" | tail -n 3
check "omxd logged the grants" grep -q "granted ${OMX_IF[0]} endpoint 2 to uid $(id -u nobody)" "$TMP/omxd.0.log"

# With only unprivileged processes on host 0, omxd answers for its closed endpoints.
out=$(omx_host_exec 1 $NOBODY env $(BENV 1) timeout 30 "$FAULT" connect "${OMX_HOSTNAME[0]}:0" 7 -t 10000 2>&1)
check "a connect to a closed endpoint of a host with only unprivileged users is NACKed by omxd ($out)" \
	grep -q "Remote Endpoint is Closed" <<<"$out"

# Random traffic with checksums, both unprivileged (large messages included: pulls over the broker's sockets).
N=$(omx_scale 2000)
check "nobody's checksummed random traffic both ways through omxd ($N messages each way)" \
	omx_run_pair stress $NOBODY env OMX_BROKER="$TMP/omxd.0.sock" timeout 120 "$STRESS" -e 1 -r 1 -n "$N" -m 300000 -d "${OMX_HOSTNAME[1]}:0" -- \
	$NOBODY env OMX_BROKER="$TMP/omxd.1.sock" timeout 120 "$STRESS" -e 1 -r 1 -n "$N" -m 300000 -d "${OMX_HOSTNAME[0]}:0"

# Endpoint 5 of host 0 not locked by the asker: refused and logged.
check "a request for an endpoint whose slot nobody holds is refused" \
	omx_host_exec 0 $NOBODY "$PROBE" steal "$TMP/omxd.0.sock" "${OMX_IF[0]}" 5
check "omxd logged the refusal with its reason" grep -q "refused uid $(id -u nobody) .*endpoint 5.*slot lock" "$TMP/omxd.0.log"

# The probe owns endpoint 3 for 3 s while root on host 1 sends to endpoints 3 and 4 of host 0.
omx_host_exec 0 $NOBODY "$PROBE" own "$TMP/omxd.0.sock" "${OMX_IF[0]}" 3 "$TMP/lock0" 3 >"$TMP/own.log" 2>&1 &
own=$!
sleep 0.5
omx_host_exec 1 "$PROBE" send "${OMX_IF[1]}" "${OMX_MAC[0]}" 3 4 1000 >"$TMP/send.log" 2>&1
wait "$own"
rc=$?
sed 's/^/  [probe] /' "$TMP/own.log"
check "granted filter is locked and only delivers the endpoint's own frames" \
	bash -c "[ $rc = 0 ] && grep -q 'replace filter Operation not permitted, detach filter Operation not permitted' '$TMP/own.log'"

# Broker restart: a running client keeps working, a new client is served by the new broker.
omx_host_exec 0 $NOBODY env $(BENV 0) timeout 60 "$PERF" -s -e 2 >"$TMP/perf2.0.log" 2>&1 &
srv=$!
sleep 0.5
kill -KILL "${OMXD_PID[0]}"; wait "${OMXD_PID[0]}" 2>/dev/null # a crash: its socket file stays behind
omx_host_exec 1 $NOBODY env $(BENV 1) timeout 60 "$PERF" -d "${OMX_HOSTNAME[0]}:0" -r 2 -S 0 -E 5000 -M 8 -N 100 \
	>"$TMP/perf2.1.log" 2>&1
rc=$?
check "with host 0's omxd killed, its already-open server still answers (rc $rc)" bash -c "[ $rc = 0 ]"
omx_host_exec 0 $NOBODY env $(BENV 0) timeout 10 "$PERF" -e 3 >"$TMP/perf3.0.log" 2>&1
rc=$?
check "with omxd dead, a new unprivileged endpoint is refused (rc $rc)" failed_cleanly $rc
check "omxd restarts over its stale socket" start_omxd 0
omx_host_exec 1 $NOBODY env $(BENV 1) timeout 60 "$PERF" -d "${OMX_HOSTNAME[0]}:0" -r 2 -S 0 -E 5000 -M 8 -N 100 \
	>"$TMP/perf4.1.log" 2>&1
rc=$?
check "after omxd restarts the old server still answers (rc $rc)" bash -c "[ $rc = 0 ]"
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
omx_host_exec 0 $NOBODY env $(BENV 0) timeout 60 "$PERF" -e 4 >"$TMP/perf5.0.log" 2>&1 &
srv=$!
sleep 0.5
omx_host_exec 1 $NOBODY env $(BENV 1) timeout 60 "$PERF" -d "${OMX_HOSTNAME[0]}:0" -r 4 -S 0 -E 5000 -M 8 -N 100 \
	>"$TMP/perf5.1.log" 2>&1
rc=$?
kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
check "the restarted omxd serves a new unprivileged endpoint (rc $rc)" bash -c "[ $rc = 0 ]"
stop_omxd 0
stop_omxd 1
check "omxd removes its socket on exit" bash -c "[ ! -e '$TMP/omxd.0.sock' ]"
finish
