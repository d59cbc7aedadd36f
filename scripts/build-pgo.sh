#!/bin/bash
# build-pgo.sh - build the library and tools with GCC profile-guided optimisation (optional).
#
#   sudo scripts/build-pgo.sh [build directory, default ./build-pgo]
#
# 1. configures and builds with -fprofile-generate (profiles written to DIR/profile);
# 2. trains it on this machine: bench/self_pingpong (one process, 0-1024 B), same-host omx_perf
#    ping-pongs (bench/same_host.sh, mode shm, 0 B-64 KiB) and omx_perf over a veth pair
#    (bench/compare.sh, MTU 9000, 0 B-64 KiB): the message paths whose instructions decide small-
#    message latency;
# 3. reconfigures the same directory with -fprofile-use (the object paths, which name the
#    profiles, stay the same) and rebuilds. Code the training did not run keeps its ordinary
#    optimisation (-fprofile-partial-training).
# Measured on the AMD EPYC VM (docs/performance.md, stop 31): same-host 0-64 B half round trip
# 0.15-0.16 us against 0.16-0.17, network 0-64 B 2-3% lower, bench/self_pingpong 8% lower.
# Needs root for the training (network namespaces, raw sockets) and GCC 10 or later. Nothing is
# installed: use the binaries of DIR, or `cmake --install DIR`.
set -eu

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
DIR=$(realpath -m "${1:-$SRC/build-pgo}")
PROFILE=$DIR/profile

[ "$(id -u)" = 0 ] || { echo "build-pgo.sh: the training needs root (network namespaces)" >&2; exit 1; }
command -v gcc >/dev/null || { echo "build-pgo.sh: needs GCC" >&2; exit 1; }
log() { echo "build-pgo.sh: $*" >&2; }

rm -rf "$PROFILE"
mkdir -p "$PROFILE"
log "instrumented build in $DIR"
cmake -S "$SRC" -B "$DIR" -G Ninja -DCMAKE_C_COMPILER=gcc \
	-DCMAKE_C_FLAGS="-fprofile-generate=$PROFILE -fprofile-update=atomic" >/dev/null
ninja -C "$DIR" >/dev/null

log "training (a few minutes)"
train() { "$@" >/dev/null 2>&1 || log "training step failed (continuing): $*"; }
for l in 0 8 64 1024; do
	train bash -c "source '$SRC/tests/integration/lib/netns.sh' && T=\$(mktemp -d) && omx_at_exit \"rm -rf \$T\" &&
		omx_netns_setup 2 9000 && omx_netns_peers_file \$T/peers && mkdir -p \$T/lock &&
		omx_host_exec 0 env OMX_PEERS=\$T/peers OMX_IFACES=\${OMX_IF[0]} OMX_LOCK_DIR=\$T/lock \
			OMX_PROGRESS_THREAD=0 '$DIR/bench/self_pingpong' $l 200000"
done
train env OMX_BUILD="$DIR" MODES=shm PLACES=diff "$SRC/bench/same_host.sh" 1 -S 0 -E 65537 -M 4 -N 20000
train env OMX_BUILD="$DIR" "$SRC/bench/compare.sh" 1 9000 "-S 0 -E 65537 -M 4 -N 20000 -W 100" omx
n=$(find "$PROFILE" -name '*.gcda' | wc -l)
[ "$n" -gt 0 ] || { log "no profile written: stopping"; exit 1; }
log "$n profiles; optimised build"
cmake -S "$SRC" -B "$DIR" -G Ninja -DCMAKE_C_COMPILER=gcc \
	-DCMAKE_C_FLAGS="-fprofile-use=$PROFILE -fprofile-partial-training -Wno-missing-profile" >/dev/null
ninja -C "$DIR" >/dev/null
log "done: $DIR (e.g. OMX_BUILD=$DIR scripts/omx-pingpong.sh)"
