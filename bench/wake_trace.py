#!/usr/bin/env python3
"""wake_trace.py PERF_SCRIPT_OUTPUT COMM SEND_NR (bench/wake_trace.sh)

From `perf script` output of sched:sched_waking, sched:sched_switch and raw_syscalls events,
over the tasks named COMM: medians of (1) the time from entering the send system call (number
SEND_NR) to the sched_waking of the peer it wakes, (2) the time from a sched_waking to the woken
task being switched in, (3) from that switch to the task entering its next send call (the rest of
its wait, its receive and its answer), (4) the send call's whole duration."""
import re
import statistics
import sys

LINE = re.compile(r'\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)')


def main():
    path, comm, nr = sys.argv[1], sys.argv[2], sys.argv[3]
    woken, in_send, switched_in = {}, {}, {}
    to_waking, wake_delay, to_send, send_len = [], [], [], []
    with open(path, errors='replace') as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            task, pid, t, ev, rest = m.group(1), int(m.group(2)), float(m.group(4)), m.group(5), m.group(6)
            if ev == 'sched:sched_waking':
                w = re.search(r'comm=(\S+) pid=(\d+)', rest)
                if w and w.group(1) == comm:
                    woken[int(w.group(2))] = t
                    if pid in in_send:
                        to_waking.append(t - in_send[pid])
            elif ev == 'sched:sched_switch':
                w = re.search(r'next_pid=(\d+)', rest)
                if w and int(w.group(1)) in woken:
                    wake_delay.append(t - woken.pop(int(w.group(1))))
                    switched_in[int(w.group(1))] = t
            elif task == comm and ev == 'raw_syscalls:sys_enter' and rest.startswith('NR %s ' % nr):
                in_send[pid] = t
                if pid in switched_in:
                    to_send.append(t - switched_in.pop(pid))
            elif task == comm and ev == 'raw_syscalls:sys_exit' and rest.startswith('NR %s ' % nr) and pid in in_send:
                send_len.append(t - in_send.pop(pid))

    def med(v):
        return '%.2f us (%d)' % (statistics.median(v) * 1e6, len(v)) if v else 'none seen'

    print('  send call entered -> peer sched_waking: ' + med(to_waking))
    print('  sched_waking -> woken task switched in: ' + med(wake_delay))
    print('  switched in -> its next send call:      ' + med(to_send))
    print('  whole send call:                        ' + med(send_len))
    return 0 if wake_delay else 1


if __name__ == '__main__':
    sys.exit(main())
