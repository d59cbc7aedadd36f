#!/usr/bin/env bash
# hop_segments.sh - where a same-host omx hop's time goes (not a test): bench/side_by_side.sh
# with a build configured with -DOMX_HOP_TRACE=ON, whose library time-stamps each message's
# steps (src/core/hop_trace.h); bench/hop_segments.py splits each hop into transfer, receive,
# return, app and send. The MPI blocks of side_by_side run as usual (their figures, printed too,
# tell the run's placement: ~0.03 / ~0.06 / ~0.25 us a flag hop).
#
#   sudo OMX_BUILD=build-trace bench/hop_segments.sh [runs] [length] [blocks]
#
# Defaults: 3 runs, 0-byte messages, 100 blocks of 1000 round trips. Each mark costs ~10 ns, so a
# traced hop is ~40 ns longer than an untraced one: compare segments, not totals, with other builds.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BUILD=${OMX_BUILD:-}
[ -n "$BUILD" ] && grep -q '^OMX_HOP_TRACE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null ||
	{ echo "hop_segments: OMX_BUILD must name a build configured with -DOMX_HOP_TRACE=ON" >&2; exit 2; }
RUNS=${1:-3}
LEN=${2:-0}
BLOCKS=${3:-100}
for ((r = 0; r < RUNS; r++)); do
	dir=$(mktemp -d /tmp/omx-hops.XXXXXX)
	echo "== run $r"
	OMX_HOP_TRACE_DIR=$dir OMX_BUILD=$BUILD TRANSPORTS=${TRANSPORTS:-vader-cma} \
		"$HERE/side_by_side.sh" 1 "$LEN" 1000 "$BLOCKS" 2>/dev/null
	python3 "$HERE/hop_segments.py" "$dir"
	rm -rf "$dir"
done
