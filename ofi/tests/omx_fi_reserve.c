/*
 * omx_fi_reserve.c - scenarios of omx_fi_client for unexpected large messages, which the provider
 * leaves in omx's queue (reserved) until a receive takes them, so that their data is pulled once,
 * straight into the receive's buffer (ofi/ofx_match.c).
 */
#include "omx_fi_client.h"

/* Larger than any medium, in either wire mode: a rendezvous. */
#define RLEN (1u << 20)

static int peek_until_found(struct op *p, uint64_t tag, uint64_t flags, double secs)
{
	struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = tag, .context = p};
	double end = now() + secs;
	int tries = 0;
	do { /* FI_ENOMSG while a peeked message with a header is being received (see recv_peek) */
		memset(p, 0, sizeof(*p));
		tries++;
		if (fi_trecvmsg(ep, &m, flags))
			continue;
		wait_op(p, 5);
	} while ((!p->done || p->err == FI_ENOMSG) && now() < end);
	return tries;
}

/* b has OMX_FI_RESERVE_US long enough that nothing it reserves is buffered during the run. a's
 * large send waits for b's receive (its data is not pulled into a buffer of b's), and b's receive
 * gets the data; then a truncated receive, FI_PEEK | FI_CLAIM and FI_PEEK | FI_DISCARD of such a
 * message. */
void reserve_scenario(int is_a, const char *dir)
{
	uint8_t *buf = malloc(4 * (size_t)RLEN);
	if (!buf)
		DIE("malloc");
	barrier();
	if (is_a) {
		struct op s[4];
		memset(s, 0, sizeof(s));
		for (int i = 0; i < 4; i++)
			fill(buf + (size_t)i * RLEN, RLEN, 0x71 + (uint64_t)i);
		if (fi_tsend(ep, buf, RLEN, NULL, peer, 0x71, &s[0]))
			DIE("tsend");
		flag_set(dir, "sent");
		CHECK(flag_wait_polling(dir, "looked", 30), "b made progress with no receive posted");
		CHECK(!s[0].done, "a large send to a peer with no receive for it waits (nothing pulled yet: done %d)",
		      s[0].done);
		flag_set(dir, "checked");
		CHECK(wait_op(&s[0], 30) && !s[0].err, "it completes once the receive is posted (done %d err %d)",
		      s[0].done, s[0].err);
		int ok = 1;
		for (int i = 1; i < 4; i++) {
			if (fi_tsend(ep, buf + (size_t)i * RLEN, RLEN, NULL, peer, 0x71 + (uint64_t)i, &s[i]))
				DIE("tsend");
			ok &= wait_op(&s[i], 30) && s[i].done == 1 && !s[i].err;
		}
		CHECK(ok, "sends received truncated, claimed and discarded complete, without error");
	} else {
		CHECK(flag_wait(dir, "sent", 30), "a sent");
		settle(0.3);
		flag_set(dir, "looked");
		CHECK(flag_wait_polling(dir, "checked", 30), "a looked at its send");
		struct op r = {0};
		fi_trecv(ep, buf, RLEN, NULL, FI_ADDR_UNSPEC, 0x71, 0, &r);
		CHECK(wait_op(&r, 30) && !r.err && r.len == RLEN && r.tag == 0x71 && r.src == peer &&
			      verify(buf, RLEN, 0x71),
		      "a receive of a reserved message gets it intact (done %d err %d len %zu)", r.done, r.err, r.len);

		settle(0.3); /* 0x72 arrives and waits */
		memset(&r, 0, sizeof(r));
		memset(buf, 0, RLEN);
		fi_trecv(ep, buf, RLEN / 2, NULL, FI_ADDR_UNSPEC, 0x72, 0, &r);
		CHECK(wait_op(&r, 30) && r.err == FI_ETRUNC && r.len == RLEN / 2 && r.olen == RLEN / 2 &&
			      verify(buf, RLEN / 2, 0x72) && buf[RLEN / 2] == 0,
		      "a shorter receive of one: FI_ETRUNC, the first half intact, nothing past it (err %d len %zu olen %zu)",
		      r.err, r.len, r.olen);

		settle(0.3);
		struct op p = {0};
		int tries = peek_until_found(&p, 0x73, FI_PEEK | FI_CLAIM, 30);
		CHECK(p.done == 1 && !p.err && p.len == RLEN && p.tag == 0x73,
		      "FI_PEEK | FI_CLAIM finds one (%d tries%s; err %d len %zu)", tries,
		      use_data ? ", the header's data read first" : "", p.err, p.len);
		if (!use_data)
			CHECK(tries == 1, "without a header to read, at the first peek (%d tries)", tries);
		struct iovec iov = {buf, RLEN};
		struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 0x73,
					  .context = &p}; /* the peek's context: it names the claimed message */
		p.done = 0;
		ssize_t rc = fi_trecvmsg(ep, &m, FI_CLAIM);
		CHECK(rc == 0 && wait_op(&p, 30) && !p.err && p.len == RLEN && verify(buf, RLEN, 0x73),
		      "the claiming receive gets it intact (rc %zd err %d len %zu)", rc, p.err, p.len);

		settle(0.3);
		tries = peek_until_found(&p, 0x74, FI_PEEK | FI_DISCARD, 30);
		CHECK(p.done == 1 && !p.err && p.len == RLEN, "FI_PEEK | FI_DISCARD finds one and drops it (err %d)",
		      p.err);
		struct op late = {0};
		fi_trecv(ep, buf, RLEN, NULL, FI_ADDR_UNSPEC, 0x74, 0, &late);
		settle(0.3);
		CHECK(!late.done, "a receive after the discard finds nothing");
		fi_cancel(&ep->fid, &late);
		wait_op(&late, 5);
	}
	barrier();
	free(buf);
}

/* a closes its endpoint while its large send is reserved at b: b's receive of it then fails (with
 * pulls given up after a few 100 ms, OMX_RESENDS_MAX...), it does not wait for ever. */
void reserveclose_scenario(int is_a, const char *dir)
{
	uint8_t *buf = calloc(1, RLEN);
	if (!buf)
		DIE("calloc");
	barrier();
	if (is_a) {
		struct op s = {0};
		if (fi_tsend(ep, buf, RLEN, NULL, peer, 0x75, &s))
			DIE("tsend");
		flag_set(dir, "sent");
		CHECK(flag_wait_polling(dir, "reserved", 30), "b looked");
		CHECK(!s.done, "the send is still waiting for b's receive when a closes");
		close_all();
		flag_set(dir, "closed");
	} else {
		CHECK(flag_wait(dir, "sent", 30), "a sent");
		settle(0.3);
		flag_set(dir, "reserved");
		CHECK(flag_wait_polling(dir, "closed", 30), "a closed");
		struct op r = {0};
		fi_trecv(ep, buf, RLEN, NULL, FI_ADDR_UNSPEC, 0x75, 0, &r);
		CHECK(wait_op(&r, 30) && r.done == 1 && r.err && r.err != FI_ETRUNC,
		      "the receive of a reserved message whose sender closed fails (done %d err %d)", r.done, r.err);
	}
	free(buf);
}

/* a posts more large sends than it may have in flight (128 per endpoint, omx's large-send slots);
 * b receives them newest first, each before posting the next. The last ones can only leave once
 * b has taken earlier ones out of omx's queue: after OMX_FI_RESERVE_US, or past OMX_FI_RESERVE_MAX
 * reserved at once. Without that, b would wait for ever for the newest. */
void reverse_scenario(int is_a)
{
	enum { N = 140 };
	uint8_t *buf = malloc((size_t)N * RLEN);
	struct op *o = calloc(N, sizeof(*o));
	if (!buf || !o)
		DIE("malloc");
	barrier();
	int ok = 1;
	if (is_a) {
		for (int i = 0; i < N; i++) {
			fill(buf + (size_t)i * RLEN, RLEN, 0x200 + (uint64_t)i);
			if (fi_tsend(ep, buf + (size_t)i * RLEN, RLEN, NULL, peer, 0x200 + (uint64_t)i, &o[i]))
				DIE("tsend %d", i);
		}
		for (int i = 0; i < N; i++)
			ok &= wait_op(&o[i], 60) && !o[i].err;
		CHECK(ok, "%d large sends completed", N);
	} else {
		for (int i = N - 1; i >= 0; i--) {
			uint8_t *b = buf + (size_t)i * RLEN;
			fi_trecv(ep, b, RLEN, NULL, FI_ADDR_UNSPEC, 0x200 + (uint64_t)i, 0, &o[i]);
			int good = wait_op(&o[i], 60) && !o[i].err && o[i].len == RLEN && verify(b, RLEN, 0x200 + (uint64_t)i);
			if (!good) {
				printf("# message %d: done %d err %d len %zu\n", i, o[i].done, o[i].err, o[i].len);
				ok = 0;
				break;
			}
		}
		CHECK(ok, "%d large messages received newest first, each intact", N);
	}
	barrier();
	free(o);
	free(buf);
}
