# omx.sh - helpers shared by integration tests (source after netns.sh).
#   omx_env I          environment (as "env" arguments) configuring host I for the library
#   omx_run_pair NAME CMD0 -- CMD1   run CMD0 in host 0 and CMD1 in host 1 concurrently (with
#                      omx_env), logs in $TMP/NAME.{0,1}.log; returns non-zero if either fails
#   ok / ko / check / finish        counting assertions; finish prints "N passed, M failed"
#   cond 'SHELL CONDITION'           a compound condition as one command, for check
#   failed_cleanly RC                non-zero, not a timeout (124) and not a death by signal (129..192)
OMX_BUILD=${OMX_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/build}
PASS=0
FAILS=0
TMP=$(mktemp -d /tmp/omx-it.XXXXXX)
omx_at_exit "[ -n \"${OMX_KEEP_TMP:-}\" ] || rm -rf $TMP"
# Nothing a test starts writes to the host's /dev/shm: every process inherits a private ring
# directory (OMX_SHM_DIR: endpoints the tests kill or time out leave their ring files there, and
# they went to /dev/shm) and a default lock directory (OMX_LOCK_DIR, for slot locks, counters and
# omx-discovered.peers of a process started without omx_env; omx_env's per-host one wins).
# World-writable (sticky) for test_broker's processes running as nobody. Not for the benchmarks
# that source this file (bench/mpi.sh): their rings stay on tmpfs.
case "$0" in
bench/* | */bench/*) ;;
*)
	mkdir -p "$TMP/shm" "$TMP/lock" && chmod 1777 "$TMP/shm" "$TMP/lock"
	export OMX_SHM_DIR="$TMP/shm" OMX_LOCK_DIR="$TMP/lock"
	;;
esac
ok() { PASS=$((PASS + 1)); echo "ok   - $*"; }
ko() { FAILS=$((FAILS + 1)); echo "FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else ko "$what"; fi; }
finish() { echo "$PASS passed, $FAILS failed"; [ "$FAILS" = 0 ]; exit $?; }
cond() { eval "$1"; }
failed_cleanly() { [ "$1" != 0 ] && [ "$1" != 124 ] && { [ "$1" -lt 129 ] || [ "$1" -gt 192 ]; }; }
# Slower under sanitizers: scale message counts down there.
omx_scale() { case "${OMX_SANITIZE:-}" in address) echo $(($1 / 4));; thread) echo $(($1 / 10));; *) echo "$1";; esac; }
# omx_wait_line PATTERN FILE TRIES [PID]: wait (at most TRIES x 50 ms) until FILE has a line
# matching PATTERN (grep); gives up at once when PID, if given, has exited. 0 if the line came.
omx_wait_line() {
	local t
	for ((t = 0; t < $3; t++)); do
		grep -q "$1" "$2" 2>/dev/null && return 0
		[ -z "${4:-}" ] || kill -0 "$4" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
# omx_counter FILE LABEL: the value of counter LABEL (exact label) in FILE, a saved omx_counters
# listing ("NNN:  value Label" lines; counters at 0 are not listed: 0 then).
omx_counter() {
	awk -v l="$2" '{ v = $2; sub(/^[0-9]+: +[0-9]+ /, "") } $0 == l { print v; f = 1; exit } END { if (!f) print 0 }' "$1"
}
# omx_fast_frames FILE: the frames received on the fast path, summed over the endpoints' close
# summaries (OMX_VERBOSE) in FILE; 0 without any.
omx_fast_frames() {
	sed -n "s/.*; \([0-9]*\) frames received on the fast path.*/\1/p" "$1" | awk '{s += $1} END {print s + 0}'
}
omx_env() {
	local i=$1
	echo "OMX_IFACES=${OMX_IF[$i]} OMX_PEERS=$TMP/peers OMX_HOSTNAME=${OMX_HOSTNAME[$i]} OMX_LOCK_DIR=$TMP/lock$i"
}
omx_run_pair() {
	local name=$1 rc0 rc1 p0
	shift
	local -a c0=() c1=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do c0+=("$1"); shift; done
	shift
	c1=("$@")
	mkdir -p "$TMP/lock0" "$TMP/lock1"
	omx_netns_peers_file "$TMP/peers"
	omx_host_exec 0 env $(omx_env 0) "${c0[@]}" >"$TMP/$name.0.log" 2>&1 &
	p0=$!
	omx_host_exec 1 env $(omx_env 1) "${c1[@]}" >"$TMP/$name.1.log" 2>&1
	rc1=$?
	wait $p0
	rc0=$?
	sed "s/^/  [$name h0] /" "$TMP/$name.0.log" | tail -n 5
	sed "s/^/  [$name h1] /" "$TMP/$name.1.log" | tail -n 5
	[ $rc0 = 0 ] && [ $rc1 = 0 ]
}
# omx_pkill I SIGNAL PATTERN : signal the processes of host I (its network namespace) whose
# command line matches PATTERN (grep -E). Unlike a plain pkill -f, it never touches processes of
# another test running at the same time.
omx_pkill() {
	local i=$1 sig=$2 pat=$3 p
	for p in $(ip netns pids "${OMX_NS[i]}" 2>/dev/null); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qE -- "$pat" && kill "-$sig" "$p" 2>/dev/null
	done
	return 0
}
