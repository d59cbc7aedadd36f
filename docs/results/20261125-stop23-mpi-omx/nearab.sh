#!/bin/bash
# nearab.sh RUNS "client args" "env1|opts1" "env2|opts2" ... : same-host omx_perf A/B, probes around each run
# "vader:cma" / "vader:none" run the MPI program instead (args: S E M N from client args)
RUNS=$1; ARGS=($2); shift 2
B=/work/main/build-bench
source /work/main/tests/integration/lib/netns.sh || exit 1
source /work/main/bench/lib_quiet.sh
TMP=$(mktemp -d /tmp/omx-nab.XXXXXX)
omx_at_exit "rm -rf $TMP"
omx_netns_setup 2 9000 >/dev/null || exit 1
omx_netns_peers_file "$TMP/peers"
mkdir -p $TMP/lock
S=0 E=0 M=2 N=100 T=
for ((i=0;i<${#ARGS[@]};i++)); do case ${ARGS[i]} in -S) S=${ARGS[i+1]};; -E) E=${ARGS[i+1]};; -M) M=${ARGS[i+1]};; -N) N=${ARGS[i+1]};; -T) T=-T;; esac; done
for r in $(seq $RUNS); do
 for m in "$@"; do
  p0=$(placement_probe $B/bench/local_pingpong)
  if [[ $m == mpiomx:* ]]; then
   FB=${m#mpiomx:}; XE=OMX_NOTHING=1; [[ $FB == *:* ]] && XE=${FB#*:} && FB=${FB%%:*}
   v=$(omx_host_exec 0 env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock" FI_PROVIDER_PATH=$FB/ofi OMX_PROGRESS_THREAD=${PT:-1} $XE mpirun --allow-run-as-root --bind-to none --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include omx --mca btl self -x OMX_PEERS -x OMX_IFACES -x OMX_LOCK_DIR -x FI_PROVIDER_PATH -x OMX_PROGRESS_THREAD -x ${XE%%=*} -np 1 taskset -c 0 /tmp/mpipp $S $E $M $N $T : -np 1 taskset -c 1 /tmp/mpipp $S $E $M $N $T 2>/dev/null | grep -E '^[0-9]' | awk -F, '{printf "%s:%s ", $1, $3}')
  elif [[ $m == vader:* ]]; then
   v=$(mpirun --allow-run-as-root --bind-to none --mca pml ob1 --mca btl vader,self --mca btl_vader_single_copy_mechanism ${m#vader:} -np 1 taskset -c 0 /tmp/mpipp $S $E $M $N $T : -np 1 taskset -c 1 /tmp/mpipp $S $E $M $N $T 2>/dev/null | grep -E '^[0-9]' | awk -F, '{printf "%s:%s ", $1, $3}')
  else
  e=${m%%|*}; o=(${m#*|})
  E2=(); [ -n "$e" ] && E2=($e)
  PB=$B; E3=(); for x in "${E2[@]}"; do case $x in BIN=*) PB=${x#BIN=};; *) E3+=("$x");; esac; done; E2=("${E3[@]}")
  envs=(env OMX_PEERS="$TMP/peers" OMX_IFACES="${OMX_IF[0]}" OMX_LOCK_DIR="$TMP/lock" "${E2[@]}")
  omx_host_exec 0 "${envs[@]}" taskset -c 0 $PB/tools/omx_perf -e 0 "${o[@]}" >$TMP/srv.log 2>&1 &
  for i in $(seq 100); do grep -q '^Starting receiver' $TMP/srv.log 2>/dev/null && break; sleep 0.05; done
  v=$(omx_host_exec 0 "${envs[@]}" taskset -c 1 $PB/tools/omx_perf -d "${OMX_HOSTNAME[0]}:0" -e 1 -P 0 "${o[@]}" "${ARGS[@]}" -c - 2>/dev/null | grep -E '^[0-9]' | awk -F, '{printf "%s:%s ", $1, $3}')
  wait
  fi
  p1=$(placement_probe $B/bench/local_pingpong)
  echo "$m#$p0#$p1#$v"
 done
done
