#!/usr/bin/env bash
# build.sh [default|asan|tsan]... - configure and build omx (build/, build-asan/, build-tsan/).
set -euo pipefail
cd "$(dirname "$0")/.."
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=(default)
for c in "${configs[@]}"; do
  case "$c" in
    default) dir=build; opt=() ;;
    asan) dir=build-asan; opt=(-DOMX_SANITIZE=address) ;;
    tsan) dir=build-tsan; opt=(-DOMX_SANITIZE=thread) ;;
    *) echo "build.sh: unknown configuration $c" >&2; exit 2 ;;
  esac
  cmake -S . -B "$dir" -G Ninja "${opt[@]}" >/dev/null
  ninja -C "$dir" -j"$(nproc)"
done
