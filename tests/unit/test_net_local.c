/*
 * test_net_local.c - the same-host transport's receive side around sleeps (net/local.c): frames
 * through the ring, the doorbell, and frames from a sender without our ring (socket only). Rings
 * live in a private OMX_SHM_DIR; the sockets are abstract, named after a MAC of our own.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/net.h"
#include "unit_check.h"
#include "wire/wire.h"

/* Locally administered, with the pid in it: runs in parallel do not share socket names. */
static uint8_t mac[6] = { 0x02, 0x6c, 0x6f, 0, 0, 0 };

struct rx {
	unsigned n;
	uint64_t match[64];
};

static void collect(void *arg, const uint8_t *frame, size_t len)
{
	struct rx *r = arg;
	struct omx_pkt p;
	if (!omx_wire_decode_eager(frame, len, &p) || r->n >= 64)
		return;
	r->match[r->n++] = p.u.msg.match;
}

static int seen(const struct rx *r, uint64_t match)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->match[i] == match)
			return 1;
	return 0;
}

/* A TINY frame from endpoint `from` to endpoint `to` of our MAC, told apart by its match. */
static int send_tiny(struct omx_net *n, uint8_t from, uint8_t to, uint64_t match)
{
	struct omx_pkt p;
	memset(&p, 0, sizeof(p));
	memcpy(p.dst_mac, mac, 6);
	memcpy(p.src_mac, mac, 6);
	p.ptype = OMX_PT_TINY;
	p.u.msg.dst_endpoint = to;
	p.u.msg.src_endpoint = from;
	p.u.msg.match = match;
	uint8_t buf[128];
	size_t len = omx_wire_encode_eager(&p, buf, sizeof(buf));
	if (!len)
		return -1;
	struct iovec iov = { buf, len };
	return n->ops->send(n, &iov, 1);
}

static struct omx_net *open_ep(uint8_t ep, int shared)
{
	struct omx_net_local_opts o = { .shared = shared, .ring_bytes = 1u << 20, .session = 7, .lock = 0 };
	int err = 0;
	struct omx_net *n = omx_net_local_open(mac, 1500, ep, &o, &err);
	if (!n)
		fprintf(stderr, "omx_net_local_open(%u): %s\n", ep, strerror(-err));
	return n;
}

/*
 * A receiver woken by a doorbell delivers the ring's frames first and leaves the socket for the
 * next pass (its answer goes out first); that next pass reads the socket even if the ring has
 * frames again, so a frame queued there by a sender without our ring waits one pass, no more.
 */
static void deferred_drain(void)
{
	struct omx_net *a = open_ep(1, 1), *b = open_ep(2, 1), *c = open_ep(3, 0);
	CHECK(a && b && c);
	if (!a || !b || !c)
		goto out;
	struct rx r = { 0 };
	CHECK(send_tiny(b, 2, 1, 100) == 0); /* b attaches a's ring */
	CHECK(a->ops->recv_burst(a, collect, &r, 64) == 1 && seen(&r, 100));

	/* a sleeps: b's next frame rings the doorbell; c (no rings) queues a frame on a's socket. */
	CHECK(a->ops->prepare_sleep(a, 1, 0) == 0);
	CHECK(send_tiny(b, 2, 1, 101) == 0);
	CHECK(send_tiny(c, 3, 1, 300) == 0);
	CHECK(a->ops->prepare_sleep(a, 0, 1) == 0); /* woken, the socket readable */

	r.n = 0;
	CHECK(a->ops->recv_burst(a, collect, &r, 64) == 1);
	CHECK(seen(&r, 101));
	CHECK(!seen(&r, 300)); /* deferred: the socket waits for the next pass */

	r.n = 0;
	CHECK(send_tiny(b, 2, 1, 102) == 0); /* the ring has a frame again */
	CHECK(a->ops->recv_burst(a, collect, &r, 64) == 2);
	CHECK(seen(&r, 102) && seen(&r, 300)); /* ... and the socket is read all the same */

	/* Nothing left: the doorbell was drained with c's frame. */
	r.n = 0;
	CHECK(a->ops->recv_burst(a, collect, &r, 64) == 0);

	/* Woken with nothing in the ring: the socket is read at once. */
	CHECK(a->ops->prepare_sleep(a, 1, 0) == 0);
	CHECK(send_tiny(c, 3, 1, 301) == 0);
	CHECK(a->ops->prepare_sleep(a, 0, 1) == 0);
	r.n = 0;
	CHECK(a->ops->recv_burst(a, collect, &r, 64) == 1 && seen(&r, 301));
out:
	if (c)
		c->ops->close(c);
	if (b)
		b->ops->close(b);
	if (a)
		a->ops->close(a);
}

int main(void)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/tmp/omx-test-local.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	setenv("OMX_SHM_DIR", dir, 1);
	pid_t pid = getpid();
	mac[3] = (uint8_t)(pid >> 16);
	mac[4] = (uint8_t)(pid >> 8);
	mac[5] = (uint8_t)pid;
	deferred_drain();
	return unit_finish(dir);
}
