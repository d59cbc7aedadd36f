#!/usr/bin/env bash
# deps.sh - install what omx needs on a fresh Debian machine (root). Idempotent: installs
# only what is missing. Used by scripts/test.sh, scripts/omx-pingpong.sh and .ci/run.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have cmake || need+=(cmake)
have ninja || need+=(ninja-build)
have gcc || need+=(gcc)
have g++ || need+=(g++)
have clang || need+=(clang)
have nft || need+=(nftables)
have ip || need+=(iproute2)
have python3 || need+=(python3)
have pkill || need+=(procps)
have unshare || need+=(util-linux)
have timeout || need+=(coreutils)
have readelf || need+=(binutils)
have pkg-config || need+=(pkg-config)
# libfabric provider (ofi/) and Open MPI over it
pkg-config --exists libfabric 2>/dev/null || need+=(libfabric-dev)
have fi_info || need+=(libfabric-bin)
have mpirun || need+=(openmpi-bin)
have mpicc || need+=(libopenmpi-dev)
# Wireshark dissector test (tools/wireshark), omx_doctor's interface checks
have tshark || need+=(tshark)
have tcpdump || need+=(tcpdump)
have ethtool || need+=(ethtool)
# libFuzzer and the sanitizer runtimes for clang
if have clang && ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  need+=("libclang-rt-$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p')-dev")
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "deps.sh: missing ${need[*]}; run as root to install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # clang may have just been installed: its runtime package name depends on its version
  if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
    v=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p')
    apt-get install -y -qq --no-install-recommends "libclang-rt-$v-dev" >/dev/null 2>&1 || true
  fi
fi
