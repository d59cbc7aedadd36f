#!/usr/bin/env python3
"""hop_segments.py - where a same-host hop's time goes, from the marks of a build with
OMX_HOP_TRACE (src/core/hop_trace.h) left by the two processes of a ping-pong (not a test).

    hop_segments.py DIR        (DIR holds hop.<pid> of exactly two processes)

A hop is a message from one process to the other and the other's answer up to its publication:
  transfer   PUBLISHED (sender) -> SEEN (receiver): the ring slot's line crossing, and the poll
  receive    SEEN -> DELIVERED: decode, partner, sequence and acks, match, copy, completion
  return     DELIVERED -> COLLECTED: the rest of the progress call and omx_test's return
  app        COLLECTED -> SEND: the application's loop, into omx_isend
  send       SEND -> PUBLISHED: the answer's send up to its publication
Each segment includes one mark's own cost (the marks are rdtsc reads). Only hops that passed
all five steps in this order count: a message taken by a progress pass's general poll of the ring
(it arrived while the pass ran) has no SEEN mark. Printed: the hops counted of all messages, and per segment the mean of its fastest 90% and the median, in ns. The time stamp counter must
be synchronised across the CPUs: a hop whose receiver saw the frame before it was published
counts as skewed and is left out (their count is printed). Last, over every answer (a
publication to the other process's next one, whatever call took the message, up to 20 us): mean,
median, 99th percentile, and what the answers slower than twice the median add to the mean."""
import struct
import sys
import os

SEND, PUBLISHED, SEEN, DELIVERED, COLLECTED = 1, 2, 3, 4, 5
NAMES = ("transfer", "receive", "return", "app", "send", "hop")


def load(path):
    with open(path, "rb") as f:
        head = f.readline().split()
        if len(head) != 3 or head[0] != b"omx-hop-trace":
            sys.exit("hop_segments: %s is not a hop trace" % path)
        data = f.read()
    marks = [(v >> 4, v & 15) for (v,) in struct.iter_unpack("<Q", data[: len(data) // 8 * 8])]
    return float(head[1]), marks


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    files = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("hop."))
    if len(files) != 2:
        sys.exit("hop_segments: %d traces in %s, not 2" % (len(files), d))
    rate = None
    events = []
    for proc, path in enumerate(files):
        r, marks = load(path)
        rate = rate or r
        events.extend((t, proc, step) for t, step in marks)
    events.sort()
    seg = {n: [] for n in NAMES}
    published = {}  # process -> ticks of its last publication
    hop = {}        # process -> marks of the hop it is answering
    skewed = 0
    messages = sum(1 for e in events if e[2] == PUBLISHED)
    for t, proc, step in events:
        other = 1 - proc
        h = hop.get(proc)
        if step == SEEN and h is None and other in published:
            hop[proc] = {"pub": published.pop(other), SEEN: t}
        elif h is not None and step == SEEN and DELIVERED not in h:
            h[SEEN] = t  # an earlier look found another frame (an ack): this one is the message
        elif h is not None and step not in h and step in (DELIVERED, COLLECTED, SEND):
            h[step] = t
        elif h is not None and step == PUBLISHED:
            del hop[proc]
            if all(k in h for k in (DELIVERED, COLLECTED, SEND)):
                order = [h["pub"], h[SEEN], h[DELIVERED], h[COLLECTED], h[SEND], t]
                if any(b < a for a, b in zip(order, order[1:])):
                    skewed += 1
                else:
                    for name, a, b in zip(NAMES, order, order[1:]):
                        seg[name].append((b - a) / rate)
                    seg["hop"].append((t - h["pub"]) / rate)
        if step == PUBLISHED:
            published[proc] = t
    # Every answer, whatever call took its message: the tail the five-step hops leave out.
    answers = []
    last = None
    for t, proc, step in events:
        if step == PUBLISHED:
            if last and last[1] != proc and t - last[0] < 20000 * rate:  # longer: between blocks
                answers.append((t - last[0]) / rate)
            last = (t, proc)
    n = len(seg["hop"])
    print("hops %d of %d messages published (the others were taken by a pass's general poll, or"
          " their receive or answer took another call; out of order: %d)" % (n, messages, skewed))
    if not n:
        return
    if answers:
        answers.sort()
        med = answers[len(answers) // 2]
        slow = [a for a in answers if a > 2 * med]
        print("all %d answers (publication to publication): mean %.1f ns, median %.1f, 99th percentile %.1f;"
              " %.2f%% above twice the median add %.1f ns to the mean" % (len(answers), sum(answers) / len(answers),
              med, answers[int(len(answers) * 0.99)], 100.0 * len(slow) / len(answers),
              (sum(slow) - med * len(slow)) / len(answers)))
    for name in NAMES:
        v = sorted(seg[name])
        fast = v[: max(1, int(len(v) * 0.9))]
        print("%-9s mean of fastest 90%% %7.1f ns   median %7.1f ns" % (name, sum(fast) / len(fast), v[len(v) // 2]))


main()
