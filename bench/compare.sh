#!/usr/bin/env bash
# compare.sh - interleaved A/B of omx configurations against TCP over one veth pair (not a test).
#
#   sudo bench/compare.sh ROUNDS MTU "omx_perf size options" MODE...
#
# MODE: "omx" (the build's omx_perf), "omx+VAR=value[+VAR=value...]" (the same with variables on
# both sides, e.g. omx+OMX_RX_SPLIT=pull), "omx@DIR[+VAR=value...]" (the omx_perf of another build
# directory DIR, for an A/B of two libraries), or "tcp" (bench/tcp_pingpong with the same options).
# Each round runs every mode once, in order, server on CPU 1 and client on CPU 0, with the vCPU
# placement probe (bench/lib_quiet.sh) before and after each run. Prints one CSV row per run and
# size (mode,round,probe=before/after,length,iterations,latency_us,bandwidth_MBps), then the median
# bandwidth per size and mode over the runs whose probe was near (all runs if none was), with
# every run's value ("f": that run was far apart).
# Example (stop 24): sudo bench/compare.sh 3 65535 "-S 4096 -E 4194305 -M 4 -N 200 -W 10 -U" \
#                        omx omx+OMX_RX_SPLIT=pull tcp
# Environment: OMX_BUILD [./build].
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
B=${OMX_BUILD:-$SRC/build}
R=${1:?rounds}
MTU=${2:?mtu}
SZ=${3:?omx_perf size options}
shift 3
source "$SRC/tests/integration/lib/netns.sh" || exit 1
source "$HERE/lib_quiet.sh" # placement_probe
TMP=$(mktemp -d /tmp/omx-compare.XXXXXX)
omx_at_exit "rm -rf $TMP"
omx_netns_setup 2 "$MTU" >/dev/null || exit 1
omx_netns_peers_file "$TMP/peers"
mkdir -p "$TMP/l0" "$TMP/l1"
omx_ns_exec 0 ip addr add 10.77.0.1/24 dev "${OMX_IF[0]}"
omx_ns_exec 1 ip addr add 10.77.0.2/24 dev "${OMX_IF[1]}"
for ((r = 0; r < R; r++)); do
	for mode in "$@"; do
		p0=$(placement_probe "$B/bench/local_pingpong")
		if [ "$mode" = tcp ]; then
			omx_host_exec 1 taskset -c 1 "$B/bench/tcp_pingpong" -p 5555 $SZ >"$TMP/srv.log" 2>&1 &
			s=$!
			sleep 0.3
			out=$(omx_host_exec 0 taskset -c 0 "$B/bench/tcp_pingpong" -p 5555 -d 10.77.0.2 $SZ -c /dev/stdout 2>/dev/null)
		else
			ex=()
			[[ $mode == *+* ]] && IFS=+ read -r -a ex <<<"${mode#*+}"
			perf=$B/tools/omx_perf
			if [[ $mode == omx@* ]]; then
				perf=${mode#omx@}
				perf=${perf%%+*}/tools/omx_perf
			fi
			# -w (blocking waits) is the server's option too: until stop 33 only the client
			# slept here, and "blocking" A/Bs measured a busy-polling server.
			srvopt=()
			[[ " $SZ " == *" -w "* ]] && srvopt=(-w)
			omx_host_exec 1 env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[1]}" OMX_LOCK_DIR="$TMP/l1" "${ex[@]}" \
				taskset -c 1 "$perf" "${srvopt[@]}" >"$TMP/srv.log" 2>&1 &
			s=$!
			for ((t = 0; t < 100; t++)); do
				grep -q '^Starting receiver' "$TMP/srv.log" && break
				sleep 0.05
			done
			out=$(omx_host_exec 0 env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/l0" "${ex[@]}" \
				taskset -c 0 "$perf" -d "${OMX_HOSTNAME[1]}:0" $SZ -c - 2>/dev/null)
		fi
		wait "$s"
		p1=$(placement_probe "$B/bench/local_pingpong")
		grep -E '^[0-9]+,' <<<"$out" | sed "s|^|$mode,r$r,probe=$p0/$p1,|"
	done
done | tee "$TMP/rows.csv"
python3 - "$TMP/rows.csv" <<'PY'
import sys, collections, statistics
rows, modes = collections.defaultdict(list), []
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) < 7:
        continue
    probe = max(float(x) for x in f[2].split("=")[1].split("/") if x)
    rows[(int(f[3]), f[0])].append((float(f[6]), probe))
    if f[0] not in modes:
        modes.append(f[0])
near = min((p for v in rows.values() for _, p in v), default=0)
print("median MB/s (runs; f = vCPUs far apart)")
print("length".rjust(9), *[m[-26:].rjust(28) for m in modes])
for l in sorted({k[0] for k in rows}):
    cells = []
    for m in modes:
        v = rows.get((l, m), [])
        if not v:
            cells.append("-".rjust(28))
            continue
        ok = [x for x, p in v if p <= 3 * near] or [x for x, _ in v]
        runs = "/".join("%.0f%s" % (x, "" if p <= 3 * near else "f") for x, p in v)
        cells.append(("%.0f (%s)" % (statistics.median(ok), runs)).rjust(28))
    print(str(l).rjust(9), *cells)
PY
