# lib_quiet.sh - machine load for the benchmark drivers (run.sh, mpi.sh): on 2 cores any other
# busy process ruins busy-polling figures, so each block of measurements waits for an idle
# machine first. Source it; the driver defines log() and QUIET_WAIT (seconds, 0 = do not wait).
#   machine_busy                 busy jiffies of the whole machine (user nice system irq softirq steal)
#   wait_quiet NOTE_FILE NOTE HINT   wait (up to QUIET_WAIT s) until < 0.25 CPU was busy over 1 s;
#                                if it never was, say so (HINT: where the load shows) and append
#                                "NOTE: started while other processes were busy" to NOTE_FILE
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
