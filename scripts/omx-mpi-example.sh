#!/bin/bash
# omx-mpi-example.sh - run an Open MPI job over omx (libfabric provider "omx", pml cm + mtl ofi)
# across two network namespaces on this machine, in one command.
#
#   sudo scripts/omx-mpi-example.sh [-n NP] [PROGRAM [ARGS...]]
#
# Creates two namespaces ("hosts" omxh0 and omxh1) joined by a veth pair (MTU 1500), gives the
# veth ends private addresses (10.211.0.1/24, 10.211.0.2/24) for Open MPI's own TCP traffic
# (mpirun <-> orted), runs mpirun in omxh0 with NP ranks (default 2) spread over both hosts
# (--map-by node), the ranks of omxh1 being started by an orted launched through
# "ip netns exec" (see docs/mpi.md), prints the job's output, and removes everything on exit
# (also on Ctrl-C). MPI messages travel as omx (0x86DF) frames on the veth pair; nothing is
# sent on the machine's own interfaces. Exit status: mpirun's.
#
# PROGRAM defaults to the build's MPI test program (ofi/mpi_check: point-to-point over every
# size threshold, probes, collectives, all verified; "quick" as argument for a shorter run).
# Any MPI program built against Debian's Open MPI works (mpicc prog.c -o prog).
# On a fresh machine (no provider in the build directory yet) it first installs what is missing
# (scripts/deps.sh: libfabric, Open MPI, ...) and builds (scripts/build.sh), with that output on
# standard error.
#
# Environment:
#   OMX_BUILD          build directory [./build]; the provider is $OMX_BUILD/ofi/libomx-fi.so
#   OMX_MPI_TIMEOUT    seconds before the job is aborted [300]
#   OMX_FI_VERBOSE     1: each rank prints its endpoint (NIC, index, capabilities)
# Needs root (network namespaces, raw sockets), iproute2, util-linux (unshare), Open MPI.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
BUILD=${OMX_BUILD:-$SRC/build}
NP=2

die() {
	echo "omx-mpi-example: $*" >&2
	exit 1
}

case "${1:-}" in
-h | --help)
	sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
	exit 0
	;;
-n)
	NP=${2:-}
	shift 2 || die "-n needs a number of ranks"
	;;
esac
case "$NP" in
'' | *[!0-9]* | 0 | 1) die "the number of ranks must be at least 2 (got '$NP')" ;;
esac
TIMEOUT=${OMX_MPI_TIMEOUT:-300}
case "$TIMEOUT" in
'' | *[!0-9]* | 0) die "OMX_MPI_TIMEOUT must be a positive number of seconds (got '$TIMEOUT')" ;;
esac

[ "$(id -u)" = 0 ] || die "must run as root (network namespaces and raw sockets)"
FIDIR=$BUILD/ofi
if { [ ! -e "$FIDIR/libomx-fi.so" ] || [ ! -x "$FIDIR/mpi_check" ]; } && [ -z "${OMX_BUILD:-}" ]; then
	echo "omx-mpi-example: first run: installing dependencies and building (output on stderr)" >&2
	{ "$SRC/scripts/deps.sh" && "$SRC/scripts/build.sh" default; } >&2 || die "set-up failed"
fi
[ -e "$FIDIR/libomx-fi.so" ] || die "no provider at $FIDIR/libomx-fi.so (libfabric-dev missing at build time?)"
for cmd in ip unshare timeout mpirun; do
	command -v "$cmd" >/dev/null 2>&1 || die "'$cmd' not found (scripts/deps.sh installs it)"
done
FIDIR=$(cd "$FIDIR" && pwd)

PROG=("$@")
if [ ${#PROG[@]} = 0 ]; then
	[ -x "$FIDIR/mpi_check" ] || die "no $FIDIR/mpi_check (Open MPI missing at build time?); name a program"
	PROG=("$FIDIR/mpi_check")
else
	p=$(command -v "${PROG[0]}") || die "program '${PROG[0]}' not found"
	PROG[0]=$(cd "$(dirname "$p")" && pwd)/$(basename "$p")
fi

# shellcheck source=../tests/integration/lib/netns.sh
source "$SRC/tests/integration/lib/netns.sh" || die "cannot load the namespace harness"
# shellcheck source=../tests/integration/lib/omx.sh
source "$SRC/tests/integration/lib/omx.sh" || die "cannot load the test helpers"
# shellcheck source=../ofi/tests/lib_ofi.sh
source "$SRC/ofi/tests/lib_ofi.sh" || die "cannot load lib_ofi.sh"
# shellcheck source=../ofi/tests/lib_mpi.sh
source "$SRC/ofi/tests/lib_mpi.sh" || die "cannot load lib_mpi.sh"

omx_netns_setup 2 1500 || die "cannot create the namespaces"
mpi_setup "$FIDIR" || die "cannot set up addresses and the launch agent"
per=$(((NP + 1) / 2))
echo "omx-mpi-example: $NP ranks over ${OMX_HOSTNAME[0]} (${OMX_IF[0]} ${OMX_MAC[0]}) and ${OMX_HOSTNAME[1]} (${OMX_IF[1]} ${OMX_MAC[1]}): ${PROG[*]}" >&2
MPI_TIMEOUT=$TIMEOUT
MPI_OUT=-
MPI_ENV=
[ -z "${OMX_FI_VERBOSE:-}" ] || MPI_ENV="OMX_FI_VERBOSE=$OMX_FI_VERBOSE"
mpi_run example "0:$per 1:$per" "$NP" --map-by node -- "${PROG[@]}"
rc=$?
[ "$rc" = 124 ] && echo "omx-mpi-example: aborted after $TIMEOUT s" >&2
exit "$rc"
