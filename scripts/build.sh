#!/usr/bin/env bash
# build.sh [default|asan|tsan|trace]... - configure and build omx (build/, build-asan/, build-tsan/;
# trace: build-trace/, the library and the benchmarks only, with the hop marks of bench/hop_segments.sh compiled in).
set -euo pipefail
cd "$(dirname "$0")/.."
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(default)
for c in "${configs[@]}"; do
  case "$c" in
    default) dir=build; opt=() ;;
    asan) dir=build-asan; opt=(-DOMX_SANITIZE=address) ;;
    tsan) dir=build-tsan; opt=(-DOMX_SANITIZE=thread) ;;
    trace) dir=build-trace; opt=(-DOMX_HOP_TRACE=ON) ;;
    *) echo "build.sh: unknown configuration $c" >&2; exit 2 ;;
  esac
  cmake -S . -B "$dir" -G Ninja "${opt[@]}" >/dev/null
  if [ "$c" = trace ]; then
    ninja -C "$dir" -j"$(nproc)" open-mx bench/all
  else
    ninja -C "$dir" -j"$(nproc)"
  fi
done
