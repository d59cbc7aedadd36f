/*
 * omx_fi_scenarios.c - scenarios of omx_fi_client, one per defect fixed in the provider, each run
 * on its own (omx_fi_client a|b DIR ... SCENARIO, or omx_fi_client cqfail): they need settings of
 * their own (environment, test build of the provider) or leave the endpoint unusable.
 */
#include "omx_fi_client.h"

void settle(double secs)
{
	double end = now() + secs;
	while (now() < end)
		poll_cq();
}

/* Flags between the two peers (files DIR/flag.NAME), for the moments one of them must not call the
 * provider, so cannot take part in a barrier. */
void flag_set(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/flag.%s", dir, name);
	FILE *f = fopen(path, "w");
	if (!f || fclose(f))
		DIE("cannot write %s", path);
}

/* flag_wait makes no progress while it waits: in "close" and "peekerr", b must not send a pull request
 * while a still calls the provider, or one of a's progress passes answers pull after pull as fast
 * as b asks (a pass takes up to 1024 frames, each a request for a 64 KiB block: in stop 25's runs
 * a's second fi_tsend took 39 ms and served both 32 MiB messages of "close", the cause of its
 * "NOT EXERCISED" runs in stops 21-24). b runs without the omx progress thread for the same reason. */
static int flag_wait_how(const char *dir, const char *name, double secs, int polling)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/flag.%s", dir, name);
	double end = now() + secs;
	while (access(path, F_OK) != 0) {
		if (now() > end)
			return 0;
		if (polling)
			poll_cq();
		else
			usleep(10000);
	}
	return 1;
}

int flag_wait(const char *dir, const char *name, double secs)
{
	return flag_wait_how(dir, name, secs, 0);
}

/* The same, making progress meanwhile (the peer's pulls are answered). */
int flag_wait_polling(const char *dir, const char *name, double secs)
{
	return flag_wait_how(dir, name, secs, 1);
}

/* Many pull blocks per message (a's pulls are held off by flag_wait, not by this size). */
#define STALL_LEN (32u << 20)

/* a's half of "close" and "peekerr": send large messages, then stop calling the provider until b
 * says so. Run without the omx progress thread (OMX_PROGRESS_THREAD=0), so nobody answers b's pulls
 * once a is silent: each message stays half-arrived at b. The sends are still in flight when a
 * closes. */
static void stall_sender(const char *dir, int nmsg, const char *wait_for)
{
	uint8_t *big = calloc((size_t)nmsg, STALL_LEN);
	struct op s[3];
	memset(s, 0, sizeof(s));
	if (!big || nmsg > 3)
		DIE("stall_sender");
	barrier();
	settle(0.1); /* acks of the barrier go out before a goes quiet */
	for (int i = 0; i < nmsg; i++) {
		uint8_t *b = big + (size_t)i * STALL_LEN;
		uint64_t tag = 0x41 + (uint64_t)i;
		if (use_data ? fi_tsenddata(ep, b, STALL_LEN, NULL, 0x51, peer, tag, &s[i])
			     : fi_tsend(ep, b, STALL_LEN, NULL, peer, tag, &s[i]))
			DIE("send");
	}
	flag_set(dir, "sent");
	CHECK(flag_wait(dir, wait_for, 60), "peer finished (flag %s)", wait_for);
	int inflight = 1;
	for (int i = 0; i < nmsg; i++)
		inflight &= !s[i].done;
	CHECK(inflight, "the large sends are still in flight when the endpoint closes");
	close_all();
	free(big);
}

/* Defect: ep_close freed only the operations in the provider's own lists. b closes with a receive
 * handed to omx (0x41, matched on arrival), a receive that took a message reserved in omx's queue
 * and is pulling it (0x42) and a reserved message nobody asked for (0x43); a closes with three
 * sends in flight. Every one must be freed: in an ASan build LeakSanitizer fails the process
 * otherwise. */
void close_scenario(int is_a, const char *dir)
{
	if (is_a) {
		stall_sender(dir, 3, "closed");
		return;
	}
	uint8_t *rb = malloc(2 * (size_t)STALL_LEN);
	struct op r1 = {0}, r2 = {0};
	fi_trecv(ep, rb, STALL_LEN, NULL, FI_ADDR_UNSPEC, 0x41, 0, &r1);
	barrier();
	CHECK(flag_wait(dir, "sent", 60), "peer sent");
	settle(0.3);
	fi_trecv(ep, rb + STALL_LEN, STALL_LEN, NULL, FI_ADDR_UNSPEC, 0x42, 0, &r2);
	settle(0.1);
	CHECK(!r1.done && !r2.done,
	      "receives still arriving when the endpoint closes (done %d %d, err %d %d, len %zu %zu)", r1.done, r2.done,
	      r1.err, r2.err, r1.len, r2.len);
	close_all();
	flag_set(dir, "closed");
	free(rb);
}

/* Defect: FI_PEEK of a buffered message that failed before its 16-byte header arrived decoded the
 * header from bytes never received. b runs with a pull timeout of a few 100 ms (OMX_RESENDS_MAX,
 * OMX_RESEND_DELAY_MS) and fresh heap memory filled with 0xa5 (MALLOC_PERTURB_ / ASan's
 * malloc_fill_byte), so garbage shows as FI_REMOTE_CQ_DATA with data a5a5... Endpoints with data. */
void peekerr_scenario(int is_a, const char *dir)
{
	if (is_a) {
		stall_sender(dir, 1, "peeked");
		return;
	}
	struct op p = {0};
	struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = 0x41, .context = &p};
	barrier();
	CHECK(flag_wait(dir, "sent", 60), "peer sent");
	double end = now() + 30;
	do { /* FI_ENOMSG while the message is arriving; found once its pull has failed */
		memset(&p, 0, sizeof(p));
		fi_trecvmsg(ep, &m, FI_PEEK);
		wait_op(&p, 5);
	} while (p.err == FI_ENOMSG && now() < end);
	CHECK(p.done == 1 && !p.err && p.len == STALL_LEN && !(p.flags & FI_REMOTE_CQ_DATA) && !p.data,
	      "FI_PEEK of a message that failed before its header arrived: found, no data from the missing header "
	      "(err %d len %zu flags %" PRIx64 " data %" PRIx64 ")",
	      p.err, p.len, p.flags, p.data);
	uint8_t *rb = malloc(STALL_LEN);
	struct op r = {0};
	fi_trecv(ep, rb, STALL_LEN, NULL, FI_ADDR_UNSPEC, 0x41, 0, &r);
	CHECK(wait_op(&r, 10) && r.err && r.err != FI_ETRUNC, "receiving it reports the failure (err %d)", r.err);
	flag_set(dir, "peeked");
	close_all();
	free(rb);
}

/* Defect: a connection retry went on with the AV entry of an address fi_av_remove had removed. a
 * sends to an endpoint of b's host that is not open (its connection is refused and retried every
 * 100 ms), removes the address: the queued send must fail with FI_EADDRNOTAVAIL at once. */
void avremove_scenario(int is_a)
{
	barrier();
	if (is_a) {
		char nm[16];
		size_t len = sizeof(nm);
		fi_addr_t fa = FI_ADDR_NOTAVAIL;
		struct op s = {0};
		uint32_t epid;
		CHECK(fi_av_lookup(av, peer, nm, &len) == 0 && len == 16, "fi_av_lookup of the peer");
		memcpy(&epid, nm + 8, 4);
		epid++; /* not open */
		memcpy(nm + 8, &epid, 4);
		CHECK(fi_av_insert(av, nm, 1, &fa, 0, NULL) == 1, "fi_av_insert of an endpoint that is not open");
		CHECK(fi_tsend(ep, "x", 1, NULL, fa, 0x61, &s) == 0, "send to it accepted (queued behind the connection)");
		settle(0.5);
		CHECK(!s.done, "the send waits while the connection is retried");
		CHECK(fi_av_remove(av, &fa, 1, 0) == 0, "fi_av_remove of that address");
		CHECK(wait_op(&s, 5) && s.done == 1 && s.err == FI_EADDRNOTAVAIL,
		      "the queued send fails with FI_EADDRNOTAVAIL (done %d err %d)", s.done, s.err);
		CHECK(fi_tsend(ep, "x", 1, NULL, fa, 0x61, &s) == -FI_EINVAL, "a new send to it -> FI_EINVAL");
	}
	barrier();
}

/* self: our own address in the AV (the one-process scenarios send to themselves). */
static void insert_self(void)
{
	char me[16];
	size_t len = sizeof(me);
	if (fi_getname(&ep->fid, me, &len) || fi_av_insert(av, me, 1, &self, 0, NULL) != 1)
		DIE("own address");
}

/* Defect: a completion the CQ had no memory for was dropped. Run with the test build of the provider
 * (ofi/testhooks/libomx-fi.so) and OMX_FI_TEST_CQ_ENOMEM=N: its first N CQ writes fail as if out of
 * memory. Sends to self, receives, a truncated receive, a cancel and a peek must each still complete
 * exactly once, with the right contents. */
void cqfail_run(void)
{
	enum { N = 8 };
	char sb[N][8], rb[N][8], small[2], cb[8];
	struct op s[N], r[N], rt = {0}, st = {0}, rc = {0}, p = {0};
	memset(s, 0, sizeof(s));
	memset(r, 0, sizeof(r));
	insert_self();
	for (int i = 0; i < N; i++)
		fi_trecv(ep, rb[i], sizeof(rb[i]), NULL, self, 0x60 + (uint64_t)i, 0, &r[i]);
	fi_trecv(ep, small, sizeof(small), NULL, self, 0x70, 0, &rt);
	fi_trecv(ep, cb, sizeof(cb), NULL, self, 0x71, 0, &rc);
	fi_cancel(&ep->fid, &rc);
	for (int i = 0; i < N; i++) {
		snprintf(sb[i], sizeof(sb[i]), "m%d", i);
		if (fi_tsend(ep, sb[i], sizeof(sb[i]), NULL, self, 0x60 + (uint64_t)i, &s[i]))
			DIE("fi_tsend");
	}
	if (fi_tsend(ep, "toolong", 8, NULL, self, 0x70, &st))
		DIE("fi_tsend");
	struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = 0x72, .context = &p};
	ssize_t rc_peek;
	int again = 0;
	while ((rc_peek = fi_trecvmsg(ep, &m, FI_PEEK)) == -FI_EAGAIN && again++ < 1000)
		poll_cq();
	CHECK(rc_peek == 0 && again > 0, "FI_PEEK returns -FI_EAGAIN while the CQ cannot take its report (%d times), "
	      "then is accepted", again);
	double end = now() + 10;
	int all = 0;
	while (!all && now() < end) {
		poll_cq();
		all = rt.done && st.done && rc.done && p.done;
		for (int i = 0; i < N; i++)
			all &= s[i].done && r[i].done;
	}
	settle(0.2); /* a duplicate would show now */
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= s[i].done == 1 && !s[i].err && r[i].done == 1 && !r[i].err && r[i].len == sizeof(rb[i]) &&
		      r[i].tag == 0x60 + (uint64_t)i && !strcmp(rb[i], sb[i]);
	CHECK(ok, "%d sends and receives each completed once, intact", N);
	CHECK(rt.done == 1 && rt.err == FI_ETRUNC && rt.olen == 6 && st.done == 1 && !st.err,
	      "truncated receive: one FI_ETRUNC error entry (done %d err %d olen %zu), its send completed once "
	      "without error (done %d err %d)",
	      rt.done, rt.err, rt.olen, st.done, st.err);
	CHECK(rc.done == 1 && rc.err == FI_ECANCELED, "cancelled receive: one FI_ECANCELED error entry (done %d err %d)",
	      rc.done, rc.err);
	CHECK(p.done == 1 && p.err == FI_ENOMSG, "peek of nothing: one FI_ENOMSG error entry (done %d err %d)", p.done,
	      p.err);
}

/* The CQ is a ring of 256 entries that doubles when full, its indexes masked (ofx_cq.c): a ring
 * that grows while wrapped must keep every completion, in order. The first round leaves the ring's
 * head at 200 (its completions read 8 at a time); the second piles up 2 x 300 completions without
 * taking any (reads of count 0 only progress), so the ring wraps and grows from that head. One read
 * then takes more than 256 entries at once: each completion once, intact, the receives in the
 * order of their sends. */
void cqgrow_run(void)
{
	enum { WARM = 100, N = 300, MAXE = 1024 };
	static char sb[N][8], rb[N][8];
	static struct op s[N], r[N];
	static struct fi_cq_tagged_entry e[MAXE];
	insert_self();
	for (int i = 0; i < WARM; i++) {
		snprintf(sb[i], sizeof(sb[i]), "w%d", i);
		if (fi_trecv(ep, rb[i], sizeof(rb[i]), NULL, self, 0x100 + (uint64_t)i, 0, &r[i]) ||
		    fi_tsend(ep, sb[i], sizeof(sb[i]), NULL, self, 0x100 + (uint64_t)i, &s[i]))
			DIE("first round");
	}
	int warm_done = 1;
	for (int i = 0; i < WARM; i++)
		warm_done &= wait_op(&s[i], 10) && wait_op(&r[i], 10);
	CHECK(warm_done, "first round: %d messages to self completed", WARM);
	memset(s, 0, sizeof(s));
	memset(r, 0, sizeof(r));
	memset(rb, 0, sizeof(rb));
	for (int i = 0; i < N; i++)
		if (fi_trecv(ep, rb[i], sizeof(rb[i]), NULL, self, 0x1000 + (uint64_t)i, 0, &r[i]))
			DIE("fi_trecv");
	for (int i = 0; i < N; i++) {
		snprintf(sb[i], sizeof(sb[i]), "m%d", i);
		ssize_t rc;
		double end = now() + 10;
		while ((rc = fi_tsend(ep, sb[i], sizeof(sb[i]), NULL, self, 0x1000 + (uint64_t)i, &s[i])) == -FI_EAGAIN &&
		       now() < end)
			(void)fi_cq_read(cq, NULL, 0);
		if (rc)
			DIE("fi_tsend: %zd", rc);
	}
	for (int i = 0; i < 100; i++)
		(void)fi_cq_read(cq, NULL, 0);
	ssize_t first = fi_cq_read(cq, e, MAXE);
	CHECK(first > 256, "one read took %zd completions (more than the ring's first 256)", first);
	int total = 0, dup = 0, bad = 0, misordered = 0, last_r = -1;
	double end = now() + 10;
	for (ssize_t n = first; total < 2 * N && now() < end; n = fi_cq_read(cq, e, MAXE)) {
		for (ssize_t k = 0; k < n; k++) {
			struct op *o = e[k].op_context;
			int is_r = o >= r && o < r + N;
			if (!is_r && !(o >= s && o < s + N)) {
				bad++;
				continue;
			}
			int i = (int)(o - (is_r ? r : s));
			dup += o->done++ != 0;
			total++;
			if (is_r) {
				bad += e[k].tag != 0x1000 + (uint64_t)i || e[k].len != sizeof(rb[i]) || strcmp(rb[i], sb[i]);
				misordered += i < last_r;
				last_r = i;
			}
		}
	}
	CHECK(total == 2 * N && !dup && !bad, "%d completions of %d, %d twice, %d wrong", total, 2 * N, dup, bad);
	CHECK(!misordered, "receives completed in the order of their sends (%d out of order)", misordered);
}

/* Defect: a message that arrived while the provider had no memory to buffer it stayed in omx's
 * queue and was never matched. Test build of the provider, OMX_FI_TEST_UNEXP_ENOMEM=N: the first
 * N buffer allocations for unexpected messages fail. Messages to self arrive before any receive:
 * eager ones and one rendezvous, two of them with the same tag (order), then (memory back once N
 * is used up) a peek finds one, and receives in another order get each one, intact, once, the
 * same-tag pair in arrival order. With a large N memory never comes back: the receives still get
 * every message, straight from omx's queue (peeks find nothing then). */
void unexpfail_run(int memory_back)
{
	enum { N = 6, BIG = 256 * 1024 };
	static char big[BIG], bigr[BIG];
	char sb[N][16], rb[N][16];
	struct op s[N + 1], r[N + 1], p = {0};
	memset(s, 0, sizeof(s));
	memset(r, 0, sizeof(r));
	memset(rb, 0, sizeof(rb));
	insert_self();
	for (int i = 0; i < BIG; i++)
		big[i] = (char)(i * 7 + 1);
	/* tags: 0x80, 0x81, 0x82, 0x83, 0x84, 0x84 (the last two: the same tag, in this order) */
	for (int i = 0; i < N; i++) {
		snprintf(sb[i], sizeof(sb[i]), "msg-%d", i);
		if (fi_tsend(ep, sb[i], sizeof(sb[i]), NULL, self, 0x80 + (uint64_t)(i < 5 ? i : 4), &s[i]))
			DIE("fi_tsend");
	}
	if (fi_tsend(ep, big, BIG, NULL, self, 0x90, &s[N]))
		DIE("fi_tsend");
	settle(0.3); /* all of them arrive, unexpected */
	if (memory_back) {
		struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = 0x82, .context = &p};
		CHECK(fi_trecvmsg(ep, &m, FI_PEEK) == 0 && wait_op(&p, 5) && !p.err && p.len == sizeof(sb[2]),
		      "FI_PEEK finds a message that arrived while memory was short (err %d len %zu)", p.err, p.len);
	}
	int order[N] = {3, 0, 4, 5, 2, 1}; /* receive i gets message i; posted out of order */
	for (int k = 0; k < N; k++) {
		int i = order[k];
		if (fi_trecv(ep, rb[i], sizeof(rb[i]), NULL, FI_ADDR_UNSPEC, 0x80 + (uint64_t)(i < 5 ? i : 4), 0, &r[i]))
			DIE("fi_trecv");
	}
	if (fi_trecv(ep, bigr, BIG, NULL, FI_ADDR_UNSPEC, 0x90, 0, &r[N]))
		DIE("fi_trecv");
	double end = now() + 10;
	int all = 0;
	while (!all && now() < end) {
		poll_cq();
		all = 1;
		for (int i = 0; i <= N; i++)
			all &= s[i].done && r[i].done;
	}
	settle(0.2);
	int ok = 1;
	for (int i = 0; i < N; i++)
		ok &= r[i].done == 1 && !r[i].err && s[i].done == 1 && !s[i].err;
	CHECK(ok, "every message received once, every send completed once");
	/* the two with tag 0x84: the receive posted first gets the one sent first */
	int same_order = 0;
	for (int i = 0; i < 5; i++)
		same_order += !strcmp(rb[i], sb[i]);
	CHECK(same_order == 5 && !strcmp(rb[5], sb[5]), "contents right, the same-tag pair in arrival order (%s, %s)",
	      rb[4], rb[5]);
	CHECK(r[N].done == 1 && !r[N].err && r[N].len == BIG && !memcmp(big, bigr, BIG),
	      "the rendezvous message (256 KiB) intact");
}
