#!/usr/bin/env bash
# Fuzz with libFuzzer for a bounded time: the wire decoder, then the receive state machine
# (frames into a live endpoint, tests/fuzz/fuzz_recv.c), half of the time each.
#   scripts/fuzz.sh [seconds=60]
# Environment: FUZZ_BUILD_DIR (default <repo>/build-fuzz), CC (default clang).
# Builds tests/fuzz/fuzz_wire_decode with clang and OMX_FUZZ=ON, seeds it from
# tests/fuzz/corpus/wire (read-only; new inputs go to $FUZZ_BUILD_DIR/fuzz-corpus/wire) and
# exits non-zero if the fuzzer finds a crash; the crashing input is left in
# $FUZZ_BUILD_DIR/fuzz-artifacts/ (copy it into tests/fuzz/corpus/wire/ as a regression file).
set -euo pipefail

secs=${1:-60}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
cc=${CC:-clang}
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)

if [ ! -f "$build/CMakeCache.txt" ]; then
	cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_C_COMPILER="$cc" -DOMX_FUZZ=ON \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target fuzz_wire_decode fuzz_recv -j 2
half=$(( (secs + 1) / 2 ))
status=0
# run_fuzzer NAME CORPUS-NAME MAX-LEN
run_fuzzer() {
	local name=$1 cname=$2 maxlen=$3
	local corpus="$build/fuzz-corpus/$cname" artifacts="$build/fuzz-artifacts/$cname/"
	mkdir -p "$corpus" "$artifacts"
	set +e
	"$build/tests/fuzz/$name" -max_total_time="$half" -max_len="$maxlen" -timeout=10 -rss_limit_mb=4096 \
		-artifact_prefix="$artifacts" -print_final_stats=1 "$corpus" "$src/tests/fuzz/corpus/$cname"
	local rc=$?
	set -e
	if [ "$rc" -ne 0 ]; then
		echo "fuzz.sh: $name failed (exit $rc); crashing inputs:" >&2
		ls -l "$artifacts" >&2 || true
		status=$rc
	else
		echo "fuzz.sh: $name: no crash in ${half}s"
	fi
}
run_fuzzer fuzz_wire_decode wire 9100
run_fuzzer fuzz_recv recv 400000
exit $status
