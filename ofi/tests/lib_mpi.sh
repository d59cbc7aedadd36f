# lib_mpi.sh - Open MPI jobs over the omx libfabric provider, in the network namespaces of
# tests/integration/lib/netns.sh (source netns.sh, omx.sh and lib_ofi.sh first).
#
#   mpi_setup FIDIR          after omx_netns_setup: IP addresses 10.211.0.(i+1)/24 on the test
#                            interfaces (Open MPI's own TCP traffic: daemons and mpirun), the
#                            launch agent, the peers file. FIDIR holds libomx-fi.so.
#   mpi_run NAME HOSTS NP [mpirun args --] PROGRAM ARGS...
#                            run one MPI job of NP ranks: mpirun runs in host 0 (hostname
#                            omxh0); HOSTS is a space-separated list of "host:slots" (host
#                            indexes, e.g. "0:2" or "0:1 1:1"); ranks on other hosts are started
#                            by an orted launched through the agent (ip netns exec + that host's
#                            omx environment). Output in $TMP/NAME.log (on standard output if
#                            MPI_OUT=-), rc of mpirun returned. Bounded by MPI_TIMEOUT seconds
#                            (default 90). MPI_ENV: more "VAR=value" exported to the ranks.
#                            A job still running 4 s (20 s if MPI_TIMEOUT > 40) before its time is up gets its ranks'
#                            stacks (gdb, if installed) and counters written to $TMP/NAME.hang.
#   mpi_reap                 kill whatever is left in the namespaces (after a failed job)
#
# The MPI layer: --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include omx; BTLs self only
# (cm does not use them for point-to-point). OOB traffic restricted to 10.211.0.0/24.

MPI_TIMEOUT=${MPI_TIMEOUT:-90}

mpi_setup() {
	MPI_FIDIR=${1:?provider directory}
	local i
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		ip -n "${OMX_NS[i]}" addr add "10.211.0.$((i + 1))/24" dev "${OMX_IF[i]}" || return 1
	done
	omx_netns_peers_file "$TMP/peers" || return 1
	: >"$TMP/agent.map"
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		mkdir -p "$TMP/lock$i"
		echo "${OMX_HOSTNAME[i]} ${OMX_NS[i]} $(omx_env "$i")" >>"$TMP/agent.map"
	done
	# The rsh agent mpirun runs as "agent HOST COMMAND...": run COMMAND (a shell command line)
	# in HOST's namespace, under its hostname, with its omx environment.
	cat >"$TMP/agent.sh" <<'EOF'
#!/usr/bin/env bash
map=$(dirname "$0")/agent.map
host=$1
shift
line=$(grep "^$host " "$map") || { echo "agent: unknown host $host" >&2; exit 1; }
set -- "$host" "$*"
read -r _ ns envs <<<"$line"
exec ip netns exec "$ns" unshare --uts /bin/sh -c 'hostname "$1" && exec env '"$envs"' /bin/sh -c "$2"' agent "$@"
EOF
	chmod +x "$TMP/agent.sh"
	MPI_PRE=$(ofi_sanitizer_env "$MPI_FIDIR/libomx-fi.so")
}

mpi_reap() {
	local ns p
	for ns in "${OMX_NS[@]}"; do
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
	done
}

mpi_run() {
	local name=$1 hosts=$2 np=$3 hs h rc
	shift 3
	local -a margs=()
	if [[ " $* " == *" -- "* ]]; then
		while [ "$1" != "--" ]; do margs+=("$1"); shift; done
		shift
	fi
	: >"$TMP/$name.hosts"
	for hs in $hosts; do
		h=${hs%%:*}
		echo "${OMX_HOSTNAME[h]} slots=${hs##*:}" >>"$TMP/$name.hosts"
	done
	local -a xenv=(-x FI_PROVIDER_PATH="$MPI_FIDIR")
	local kv
	for kv in $MPI_PRE ${MPI_ENV:-}; do xenv+=(-x "$kv"); done
	local -a cmd=(omx_host_exec 0 env $(omx_env 0) OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
		timeout -k 5 "$MPI_TIMEOUT" mpirun -np "$np" --hostfile "$TMP/$name.hosts"
		--mca plm_rsh_agent "$TMP/agent.sh" --mca plm_rsh_no_tree_spawn 1
		--mca oob_tcp_if_include 10.211.0.0/24
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include omx --mca btl self
		--mca orte_base_help_aggregate 0
		"${xenv[@]}" "${margs[@]}" "$@")
	if [ "${MPI_OUT:-}" = - ]; then
		"${cmd[@]}" 2>&1 &
	else
		"${cmd[@]}" >"$TMP/$name.log" 2>&1 &
	fi
	local job=$! dog=
	# A job about to time out: its stacks and counters, while it still hangs (in $TMP/NAME.hang).
	# 20 s ahead where the job has time for it: gdb on four ranks and the counters take over 4 s,
	# and the endpoints' state comes last.
	local lead=4
	[ "$MPI_TIMEOUT" -le 40 ] || lead=20
	if command -v gdb >/dev/null && [ "$MPI_TIMEOUT" -gt 10 ]; then
		(
			for ((t = 0; t < MPI_TIMEOUT - lead; t++)); do
				sleep 1
				kill -0 "$job" 2>/dev/null || exit 0
			done
			mpi_hang_dump "$TMP/$name.log" "$1"
		) >"$TMP/$name.hang" 2>&1 &
		dog=$!
	fi
	wait "$job"
	rc=$?
	[ -z "$dog" ] || wait "$dog"
	[ "$rc" = 0 ] || mpi_reap
	return "$rc"
}

# mpi_ranks I PROGRAM: pids of PROGRAM's processes in host I's namespace.
mpi_ranks() {
	local comm p
	comm=$(basename "$2")
	comm=${comm:0:15} # /proc/PID/comm keeps 15 characters
	for p in $(ip netns pids "${OMX_NS[$1]}" 2>/dev/null); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" != "$comm" ] || echo "$p"
	done
}

# mpi_hang_dump LOG PROGRAM: every rank's threads' stacks (gdb), each host's endpoint counters,
# then the ranks' endpoint state (SIGUSR1: printed into LOG by ranks run with OMX_DEBUG_SIGNAL;
# it ends the others, hence last).
mpi_hang_dump() {
	local log=$1 prog=$2 i p
	local -a ranks=()
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		ranks[i]=$(mpi_ranks "$i" "$prog")
		for p in ${ranks[i]}; do
			echo "== host $i rank process $p"
			timeout 20 gdb -p "$p" -batch -nx -ex "thread apply all bt" 2>/dev/null |
				grep -E '^(#|Thread )' | sed -E 's/ \(.{60,}\)/ (...)/'
		done
		echo "== host $i counters"
		omx_host_exec "$i" env $(omx_env "$i") "$OMX_BUILD/tools/omx_counters" -e 2>&1 | head -n 120
	done
	for ((i = 0; i < OMX_NHOSTS; i++)); do
		for p in ${ranks[i]}; do kill -USR1 "$p"; done
	done
	sleep 2
	echo "== endpoint state (OMX_DEBUG_SIGNAL)"
	sed -n '/^OMX debug:/,$p' "$log" | grep -v '^ok - \|^omx-fi: '
}
