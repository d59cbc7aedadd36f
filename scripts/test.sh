#!/usr/bin/env bash
# test.sh - the project's test command (README): installs what is missing, builds the three
# configurations (plain, ASan+UBSan, TSan) and runs their tests, then a bounded fuzzing run. The
# hop-trace build (bench/hop_segments.sh) is only compiled, so that its marks keep building.
#   scripts/test.sh            everything (root needed: network namespaces)
#   OMX_FUZZ_SECONDS=60        fuzzing time (0 to skip)
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh || exit 1
fail=0
run() { echo "=== $*"; "$@" || fail=1; }
run scripts/build.sh default asan tsan trace
[ $fail = 0 ] || { echo "build failed"; exit 1; }
# plain build: every test
run ctest --test-dir build --output-on-failure -j1
# ASan+UBSan: every test (leaks reported at exit by LeakSanitizer)
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run ctest --test-dir build-asan --output-on-failure -j1
# TSan: unit tests (the threaded ones are what it is for)
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  run ctest --test-dir build-tsan --output-on-failure -j1 -L unit
if [ "${OMX_FUZZ_SECONDS:-60}" != 0 ]; then
  run scripts/fuzz.sh "${OMX_FUZZ_SECONDS:-60}"
fi
if [ $fail = 0 ]; then echo "scripts/test.sh: all configurations passed"; else echo "scripts/test.sh: FAILURES (see above)"; fi
exit $fail
