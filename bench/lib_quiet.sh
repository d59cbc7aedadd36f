# lib_quiet.sh - machine state for the benchmark drivers (run.sh, mpi.sh; same_host.sh for the
# placement): on 2 cores any other busy process ruins busy-polling figures, so each block of
# measurements waits for an idle machine first. Source it; the driver defines log() and
# QUIET_WAIT (seconds, 0 = do not wait) for wait_quiet.
#   machine_busy                 busy jiffies of the whole machine (user nice system irq softirq steal)
#   wait_quiet NOTE_FILE NOTE HINT   wait (up to QUIET_WAIT s) until < 0.25 CPU was busy over 1 s;
#                                if it never was, say so (HINT: where the load shows) and append
#                                "NOTE: started while other processes were busy" to NOTE_FILE
# And where the host has put the two vCPUs (near each other or far apart; see run.sh):
#   placement_probe LOCAL_PINGPONG   half round trip (us) of a shared-memory flag between CPU 0
#                                and CPU 1 (the build's bench/local_pingpong); empty if it failed
#   placement_of P0 P1           the larger of two probes (before and after a run), empty if
#                                either is
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)
machine_busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
wait_quiet() {
	local t b0 b1
	for ((t = 0; t < QUIET_WAIT; t++)); do
		b0=$(machine_busy)
		sleep 1
		b1=$(machine_busy)
		if [ $(((b1 - b0) * 4)) -lt "$HZ" ]; then
			[ "$t" = 0 ] || log "machine idle after $t s"
			return 0
		fi
		[ "$t" = 0 ] && log "other processes busy ($(((b1 - b0) * 100 / HZ))% of a CPU): waiting up to $QUIET_WAIT s"
	done
	log "machine still busy after $QUIET_WAIT s: measuring anyway ($3)"
	echo "$2: started while other processes were busy" >>"$1"
}
placement_probe() {
	"$1" shm 0 20000 echo 0,1 2>/dev/null | awk -F, 'NF >= 4 {v = $4} END {print v}'
}
placement_of() {
	awk -v a="$1" -v b="$2" 'BEGIN {if (a != "" && b != "") print (a + 0 > b + 0 ? a : b)}'
}
