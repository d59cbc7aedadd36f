#!/bin/bash
# mpi.sh - Open MPI over omx against Open MPI over TCP, interleaved in one run (issues 6 and 7).
#
#   sudo bench/mpi.sh [--quick | --small] [--runs N] [--out DIR]
#   sudo bench/run.sh --mpi | --mpi-only ...     (run.sh calls this script)
#
# Two network namespaces ("hosts" omxh0, omxh1) joined by a veth pair, MTU 1500
# (tests/integration/lib/netns.sh), private addresses 10.211.0.1/24, 10.211.0.2/24 on the veth
# ends, one MPI_COMM_WORLD across both through the launch agent of ofi/tests/lib_mpi.sh (mpirun in
# omxh0, ranks of omxh1 started by an orted launched with ip netns exec + unshare --uts). The
# program is build-bench/bench/mpi_bench (bench/mpi_bench.c). Two MPI configurations over the
# same link, alternating (odd runs omx first, even runs tcp first):
#   omx   --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include omx --mca btl self
#         (FI_PROVIDER_PATH=<build>/ofi: the libomx-fi.so provider)
#   tcp   --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.211.0.0/24 (the veth pair:
#         its interface names differ between the namespaces, the subnet selects both ends)
# Jobs, each run:
#   pingpong   2 ranks, one per namespace: rank 0 pinned to CPU 0, rank 1 to CPU 1 (as the suite's
#              client and server); 0 B - 64 MiB (--quick: 4 MiB)
#   alltoall, allreduce   4 ranks, 2 per namespace (--map-by node: ranks 0, 2 in omxh0 pinned to
#              CPU 0, ranks 1, 3 in omxh1 to CPU 1); 4 B - 1 MiB (Open MPI returns at once
#              for 0 B). Two ranks share each CPU, so
#              both configurations get --mca mpi_yield_when_idle 1 (a waiting rank yields its CPU).
#              With omx, the two ranks of a namespace talk through omx's same-host path; with
#              btl tcp,self, through TCP on the veth address (no shared-memory BTL: the brief's
#              "MPI over TCP").
# --small: ping-pong only, 0 B - 1 KiB, more iterations (the issue-7 target), 10 runs by default.
# Open MPI's own binding is off (--bind-to none); mpi_bench pins itself (-a 0,1) before MPI_Init.
# Each job runs under `timeout` (OMX_BENCH_MPI_TIMEOUT, default 300 s). mpi_bench records, per
# length, the CPU time the machine spent outside the ranks (other_cpus, from /proc/stat and the
# ranks' getrusage) so report.py can mark disturbed points, as for the socket benchmarks.
# Before each job it waits (up to OMX_BENCH_QUIET_WAIT s, default 30) for the machine to be idle.
#
# Output: DIR/mpi.csv (run,transport,test,np,length,iterations,reps,time_us,time_us_min,
# time_us_max,bandwidth_MBps,other_cpus), DIR/mpi_meta.txt, DIR/logs/mpi-*; without --out, a new
# bench/results/<timestamp>-mpi/ with report.md (bench/report.py). Everything (namespaces, MPI
# processes, temporary files) is removed on exit, also on Ctrl-C.
# Environment: OMX_BENCH_BUILD build directory [./build-bench], built first (cmake + ninja)
# unless OMX_BENCH_NOBUILD=1 (run.sh has built it already); OMX_BENCH_MPI_ENV="VAR=value ..."
# exports more variables to the ranks (e.g. OMX_FI_RESERVE_US=0).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${OMX_BENCH_BUILD:-$SRC/build-bench}
QUICK=0
SMALL=0
RUNS=""
OUT=""
ARGS="$*"

die() {
	echo "bench-mpi: $*" >&2
	exit 1
}
log() { echo "bench-mpi: $*" >&2; }

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--small) SMALL=1 ;;
	--runs) RUNS=${2:?}; shift ;;
	--out) OUT=${2:?}; shift ;;
	-h | --help)
		sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
		exit 0
		;;
	*) die "unknown argument '$1' (--help)" ;;
	esac
	shift
done

[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, raw sockets)"
for cmd in ip unshare timeout mpirun; do
	command -v "$cmd" >/dev/null 2>&1 || die "'$cmd' not found (Open MPI: openmpi-bin)"
done

if [ "${OMX_BENCH_NOBUILD:-0}" != 1 ]; then
	log "building into $BUILD"
	{ cmake -S "$SRC" -B "$BUILD" -G Ninja >/dev/null && ninja -C "$BUILD" >/dev/null; } >&2 ||
		die "build failed"
fi
PROG=$BUILD/bench/mpi_bench
FIDIR=$BUILD/ofi
[ -x "$PROG" ] || die "missing $PROG (no MPI found by CMake? libopenmpi-dev)"
[ -e "$FIDIR/libomx-fi.so" ] || die "missing $FIDIR/libomx-fi.so (libfabric-dev missing at build time?)"
FIDIR=$(cd "$FIDIR" && pwd)

if [ "$SMALL" = 1 ]; then
	: "${RUNS:=10}"
	PP=(-S 0 -E 1025 -M 4 -N 3000 -W 300 -R 5)
	COLL=()
elif [ "$QUICK" = 1 ]; then
	: "${RUNS:=1}"
	PP=(-S 0 -E 4194305 -M 4 -N 300 -W 30 -R 3)
	COLL=(-S 4 -E 1048577 -M 16 -N 50 -W 5 -R 3)
else
	: "${RUNS:=3}"
	PP=(-S 0 -E 67108865 -M 4 -N 1000 -W 100 -R 5)
	COLL=(-S 4 -E 1048577 -M 4 -N 100 -W 10 -R 5)
fi
MPI_TIMEOUT=${OMX_BENCH_MPI_TIMEOUT:-300}

STANDALONE=0
if [ -z "$OUT" ]; then
	STANDALONE=1
	STAMP=$(date +%Y%m%d-%H%M%S)-mpi
	OUT=$SRC/bench/results/$STAMP
fi
mkdir -p "$OUT/logs" || die "cannot create $OUT"
CSV=$OUT/mpi.csv
FAIL=$OUT/mpi_failures.txt
: >"$FAIL"
echo "run,transport,test,np,length,iterations,reps,time_us,time_us_min,time_us_max,bandwidth_MBps,other_cpus" >"$CSV"

# The namespace harness, the test helpers (TMP, omx_env) and the MPI launch helpers (mpi_setup:
# addresses, launch agent, peers file; mpi_reap). They install the EXIT trap that removes it all.
# shellcheck source=../tests/integration/lib/netns.sh
source "$SRC/tests/integration/lib/netns.sh" || die "cannot load the namespace harness"
# shellcheck source=../tests/integration/lib/omx.sh
source "$SRC/tests/integration/lib/omx.sh" || die "cannot load the test helpers"
# shellcheck source=../ofi/tests/lib_ofi.sh
source "$SRC/ofi/tests/lib_ofi.sh" || die "cannot load lib_ofi.sh"
# shellcheck source=../ofi/tests/lib_mpi.sh
source "$SRC/ofi/tests/lib_mpi.sh" || die "cannot load lib_mpi.sh"

omx_netns_setup 2 1500 || die "cannot create the namespaces"
omx_at_exit mpi_reap
mpi_setup "$FIDIR" || die "cannot set up addresses and the launch agent"

{
	echo "command: sudo bench/mpi.sh $ARGS"
	echo "date: $(date -Is)"
	echo "git: $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null) $(git -C "$SRC" status --porcelain 2>/dev/null | grep -qv '^??' && echo '(modified tree)')"
	echo "kernel: $(uname -r)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
	echo "build: $BUILD ($(grep -m1 '^CMAKE_BUILD_TYPE' "$BUILD/CMakeCache.txt" | cut -d= -f2))"
	echo "mpi: $(mpirun --version 2>/dev/null | head -n 1); libfabric $(pkg-config --modversion libfabric 2>/dev/null)"
	echo "runs: $RUNS quick: $QUICK small: $SMALL veth MTU 1500"
	echo "pingpong: ${PP[*]}"
	echo "collectives: ${COLL[*]}"
} >"$OUT/mpi_meta.txt"

QUIET_WAIT=${OMX_BENCH_QUIET_WAIT:-30}
# shellcheck source=lib_quiet.sh
source "$HERE/lib_quiet.sh" # machine_busy, wait_quiet (as bench/run.sh)

SEQ=0
# job RUN TRANSPORT TEST NP HOSTS [mpi_bench args]: one mpirun; its CSV rows go to mpi.csv.
job() {
	local run=$1 t=$2 test=$3 np=$4 hosts=$5 hs h
	shift 5
	SEQ=$((SEQ + 1))
	local tag
	tag=$(printf 'mpi-%03d-%s-%s' "$SEQ" "$t" "$test")
	local L=$OUT/logs/$tag
	wait_quiet "$OUT/mpi_meta.txt" "run $run $t $test" "see other_cpus in mpi.csv"
	: >"$TMP/$tag.hosts"
	for hs in $hosts; do
		h=${hs%%:*}
		echo "${OMX_HOSTNAME[h]} slots=${hs##*:}" >>"$TMP/$tag.hosts"
	done
	local -a mca=()
	case "$t" in
	omx) mca=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include omx --mca btl self) ;;
	tcp) mca=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include 10.211.0.0/24) ;;
	esac
	[ "$np" -gt 2 ] && mca+=(--mca mpi_yield_when_idle 1)
	local -a xenv=(-x FI_PROVIDER_PATH="$FIDIR")
	local kv
	for kv in $MPI_PRE ${OMX_BENCH_MPI_ENV:-}; do xenv+=(-x "$kv"); done
	local rc
	omx_host_exec 0 env $(omx_env 0) OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
		timeout -k 5 "$MPI_TIMEOUT" \
		mpirun -np "$np" --hostfile "$TMP/$tag.hosts" --map-by node --bind-to none \
		--mca plm_rsh_agent "$TMP/agent.sh" --mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include 10.211.0.0/24 --mca orte_base_help_aggregate 0 \
		"${mca[@]}" "${xenv[@]}" "$PROG" "$test" "$@" -a 0,1 -c "$L.csv" >"$L.log" 2>&1
	rc=$?
	if [ "$rc" != 0 ] || [ ! -s "$L.csv" ]; then
		echo "$tag: mpirun exit $rc: $(grep -v '^ *$' "$L.log" | tail -n 3 | tr '\n' ' ')" | tee -a "$FAIL" >&2
		mpi_reap
	fi
	[ -s "$L.csv" ] && tail -n +2 "$L.csv" | sed -e "s/^/$run,$t,/" >>"$CSV"
	return 0
}

T0=$(date +%s)
for ((r = 1; r <= RUNS; r++)); do
	log "run $r/$RUNS ($(($(date +%s) - T0)) s so far)"
	if [ $((r % 2)) = 1 ]; then order="omx tcp"; else order="tcp omx"; fi
	for t in $order; do job "$r" "$t" pingpong 2 "0:1 1:1" "${PP[@]}"; done
	[ "$SMALL" = 1 ] && continue
	for t in $order; do job "$r" "$t" alltoall 4 "0:2 1:2" "${COLL[@]}"; done
	for t in $order; do job "$r" "$t" allreduce 4 "0:2 1:2" "${COLL[@]}"; done
done
log "MPI measurements done in $(($(date +%s) - T0)) s; $(wc -l <"$FAIL") failed job(s)"

if [ "$STANDALONE" = 1 ]; then
	echo "run,mtu,transport,mode,pattern,length,iterations,latency_us,bandwidth_MBps" >"$OUT/results.csv"
	echo "bench/mpi.sh only: see the MPI section" >"$OUT/meta.txt"
	PY=/usr/bin/python3
	[ -x "$PY" ] || PY=python3
	"$PY" "$HERE/report.py" "$OUT" >&2 || log "report.py failed (the CSV files are in $OUT)"
	if [ -n "${SUDO_UID:-}" ]; then
		chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$OUT" 2>/dev/null || true
	fi
	log "results in $OUT"
	echo "$OUT"
fi
