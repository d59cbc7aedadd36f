#!/usr/bin/env bash
# Fuzz the wire codec with libFuzzer for a bounded time.
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
cmake --build "$build" --target fuzz_wire_decode -j 2

corpus="$build/fuzz-corpus/wire"
artifacts="$build/fuzz-artifacts/"
mkdir -p "$corpus" "$artifacts"

set +e
"$build/tests/fuzz/fuzz_wire_decode" -max_total_time="$secs" -max_len=9100 -timeout=10 \
	-artifact_prefix="$artifacts" -print_final_stats=1 "$corpus" "$src/tests/fuzz/corpus/wire"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
	echo "fuzz.sh: fuzzer failed (exit $rc); crashing inputs:" >&2
	ls -l "$artifacts" >&2 || true
	exit "$rc"
fi
echo "fuzz.sh: no crash in ${secs}s"
