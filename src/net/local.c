/*
 * local.c - frames between endpoints of the same host. An AF_PACKET socket never sees frames
 * sent out of its own interface, so same-host partners cannot talk through the wire. Each endpoint
 * also binds a Unix datagram socket in the abstract namespace ("\0omx-<board mac>-<endpoint>"),
 * which belongs to the network namespace, i.e. to the host, and frames for a same-host endpoint
 * are sent there unchanged: the whole protocol (sequence numbers, acks, pulls) is reused.
 * A send to an endpoint that nobody has open fails at once (-ECONNREFUSED / -ENOENT), which
 * the core turns into the NACK a remote driver would have sent.
 *
 * With the shared-memory path (the default), each endpoint also owns a receive ring in shared
 * memory (shm/ring.c) and senders put frames there instead; the socket then only carries the
 * doorbell byte that wakes a sleeping owner, and frames whose ring is unavailable: receiver
 * without a ring (OMX_DISABLE_SHARED, another user), full ring, frame larger than its slots. Frames
 * may thus arrive in a different order than sent, which the protocol absorbs (early frames).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/net.h"
#include "shm/shm.h"
#include "wire/wire.h"
#include "hot_path.h"

#define LOCAL_FRAME_MAX (65535 + 64)
#define PEER_RINGS 64
#define PEER_CHECK_NS 20000000ull   /* owner liveness probe of a cached peer ring */
#define PEER_RETRY_NS 50000000ull   /* a peer without a ring is asked again after this */
#define FULL_WAIT_NS 200000ull      /* full ring: wait this long before the socket fallback */

struct peer_ring {
	uint8_t mac[6];
	uint8_t endpoint;
	uint8_t used;
	uint32_t gen; /* bumped when the entry is given to another peer: routes to it lapse */
	struct omx_shm_ring *ring; /* NULL: none (retry_ns) */
	uint64_t check_ns, retry_ns, last_use;
};

struct omx_net_local {
	struct omx_net base;
	struct omx_shm_ring *own; /* NULL: frames over the socket only */
	struct peer_ring peers[PEER_RINGS];
	struct peer_ring *last;
	uint64_t use_clock;
	uint32_t sock_hint;  /* last seen hint of our ring */
	unsigned sock_skip;  /* polls since we last looked at the socket */
	unsigned sock_every; /* polls between unprompted looks (SOCK_LOOK_MIN..MAX) */
	unsigned sock_empty; /* unprompted looks in a row that found no frame */
	int sock_force;      /* look at it on the next poll (after a sleep); 2: deferred once already */
	struct omx_net_local_stats stats;
	uint8_t buf[LOCAL_FRAME_MAX];
};

static socklen_t local_name(struct sockaddr_un *a, const uint8_t mac[6], uint8_t endpoint)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "omx-%02x%02x%02x%02x%02x%02x-%u", mac[0], mac[1],
			 mac[2], mac[3], mac[4], mac[5], endpoint);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int sock_send(struct omx_net *n, const struct iovec *iov, unsigned iovcnt, const uint8_t *mac, int ep)
{
	struct sockaddr_un a;
	struct msghdr msg;
	memset(&msg, 0, sizeof(msg));
	msg.msg_name = &a;
	msg.msg_namelen = local_name(&a, mac, (uint8_t)ep);
	msg.msg_iov = (struct iovec *)iov;
	msg.msg_iovlen = iovcnt;
	/* The receiver's queue holds net.unix.max_dgram_qlen datagrams (10 by default): when it is
	 * full, give its owner a moment to drain it rather than losing the frame at once (bounded,
	 * so two endpoints sending to each other never wait on each other for long). */
	uint64_t give_up = 0;
	for (;;) {
		ssize_t r = sendmsg(n->fd, &msg, MSG_DONTWAIT);
		if (r >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		uint64_t now = omx_now_ns();
		if (!give_up)
			give_up = now + 1000000;
		else if (now >= give_up)
			return -EAGAIN;
		sched_yield();
	}
}

static void doorbell(struct omx_net *n, const uint8_t *mac, int ep)
{
	struct sockaddr_un a;
	socklen_t alen = local_name(&a, mac, (uint8_t)ep);
	uint8_t b = 0;
	(void)sendto(n->fd, &b, 1, MSG_DONTWAIT, (struct sockaddr *)&a, alen);
}

static struct peer_ring *peer_lookup(struct omx_net_local *l, const uint8_t *mac, uint8_t ep)
{
	struct peer_ring *p = l->last, *victim = NULL;
	if (p && p->endpoint == ep && omx_wire_mac_eq(p->mac, mac))
		return p;
	for (unsigned i = 0; i < PEER_RINGS; i++) {
		p = &l->peers[i];
		if (p->used && p->endpoint == ep && omx_wire_mac_eq(p->mac, mac))
			return l->last = p;
		if (!victim || !p->used || (victim->used && p->last_use < victim->last_use))
			victim = p;
	}
	if (victim->ring)
		omx_shm_ring_close(victim->ring);
	uint32_t gen = victim->gen + 1;
	memset(victim, 0, sizeof(*victim));
	victim->gen = gen;
	memcpy(victim->mac, mac, 6);
	victim->endpoint = ep;
	victim->used = 1;
	return l->last = victim;
}

/* The peer's ring, attached or re-attached as needed; NULL if it has none now. now: omx_now_coarse_ns(). */
static struct omx_shm_ring *peer_ring_get(struct omx_net_local *l, const uint8_t *mac, uint8_t ep, uint64_t now)
{
	struct peer_ring *p = peer_lookup(l, mac, ep);
	p->last_use = ++l->use_clock;
	if (p->ring && (omx_shm_ring_closed(p->ring) || (now >= p->check_ns && !omx_shm_ring_owner_alive(p->ring)))) {
		omx_shm_ring_close(p->ring); /* closed or owner gone: the slot may have a new owner */
		p->ring = NULL;
		p->retry_ns = 0;
	}
	if (p->ring) {
		if (now >= p->check_ns)
			p->check_ns = now + PEER_CHECK_NS;
		return p->ring;
	}
	if (now < p->retry_ns)
		return NULL;
	int err = 0;
	p->ring = omx_shm_ring_attach(mac, ep, &err);
	p->check_ns = now + PEER_CHECK_NS;
	if (!p->ring)
		p->retry_ns = now + PEER_RETRY_NS;
	return p->ring;
}

static int local_send(struct omx_net *n, const struct iovec *iov, unsigned iovcnt)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	const uint8_t *frame = iov[0].iov_base;
	size_t first = iov[0].iov_len;
	if (first < OMX_HEAD_LEN + 1)
		return -EINVAL;
	int ep = omx_wire_frame_endpoint(frame, first);
	if (ep < 0)
		return 0; /* host queries etc. are for the wire only */
	if (l->own) {
		uint64_t now, give_up = 0;
		struct omx_shm_ring *r = peer_ring_get(l, frame, (uint8_t)ep, n->coarse_ns ? n->coarse_ns : omx_now_coarse_ns());
		while (r) {
			int bell = 0;
			int e = omx_shm_ring_push(r, iov, iovcnt, &bell);
			if (e == 0) {
				l->stats.ring_frames++;
				if (bell)
					doorbell(n, frame, ep);
				return 0;
			}
			if (e != -EAGAIN)
				break;
			/* Full: give the owner a moment, then use the socket. */
			now = omx_now_ns();
			if (!give_up)
				give_up = now + FULL_WAIT_NS;
			else if (now >= give_up)
				break;
			sched_yield();
		}
	}
	int e = sock_send(n, iov, iovcnt, frame, ep);
	if (e == 0) {
		l->stats.socket_frames++;
		struct peer_ring *p = l->own ? l->last : NULL;
		if (p && p->ring && p->endpoint == ep && omx_wire_mac_eq(p->mac, frame))
			omx_shm_ring_hint_bump(p->ring);
	}
	return e;
}

/* The peer a route names, while the route holds: its entry not given to another peer, its ring
 * attached and open, its owner's liveness checked within the last check interval. NULL otherwise. */
static inline struct peer_ring *route_peer(struct omx_net *n, const struct omx_net_local_route *rt)
{
	struct peer_ring *p = rt->peer;
	if (p && p->gen == rt->gen && p->ring && !omx_shm_ring_closed(p->ring) &&
	    (n->coarse_ns ? n->coarse_ns : omx_now_coarse_ns()) < p->check_ns)
		return p;
	return NULL;
}

/* The same-host eager sends' way in: ~75 of the ~320 instructions between the send call and the
 * frame in the peer's ring went to parsing the destination back out of the frame and looking its
 * ring up (bench/self_pingpong under callgrind). */
OMX_HOT_PATH int omx_net_local_send_routed(struct omx_net *n, struct omx_net_local_route *rt, const uint8_t mac[6], uint8_t endpoint,
			      const struct iovec *iov, unsigned iovcnt)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	struct peer_ring *p = route_peer(n, rt);
	if (p) {
		int bell = 0;
		p->last_use = ++l->use_clock;
		if (omx_shm_ring_push(p->ring, iov, iovcnt, &bell) == 0) {
			l->stats.ring_frames++;
			if (bell)
				doorbell(n, mac, endpoint);
			return 0;
		}
		/* Full or refused: the general way waits for room or uses the socket. */
	}
	int e = local_send(n, iov, iovcnt);
	p = l->last;
	if (l->own && p && p->endpoint == endpoint && omx_wire_mac_eq(p->mac, mac)) {
		rt->peer = p;
		rt->gen = p->gen;
	}
	return e;
}

/*
 * The socket carries doorbells and the frames of senders that could not use our ring; those with
 * our ring mapped bump its hint when they had to use the socket. Senders without it cannot say
 * so, and only an unprompted look (a recv system call) finds their frames. One every 128 polls
 * kept a busy-polling receiver in the kernel a tenth of its time on the AMD VM and cost 0.015 us
 * of a 0.155 us same-host hop (docs/performance.md, stop 34). So the interval grows while the
 * looks find nothing (doubling after SOCK_EMPTY_LOOKS empty ones, up to SOCK_LOOK_MAX polls:
 * ~0.1 ms of polling, reached after ~15 ms without such a sender) and falls back to
 * SOCK_LOOK_MIN at the first frame such a look finds.
 */
#define SOCK_LOOK_MIN 128u
#define SOCK_LOOK_MAX 8192u
#define SOCK_EMPTY_LOOKS 64u

static int local_recv_burst(struct omx_net *n, omx_net_rx_fn fn, void *arg, unsigned max)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	int count = l->own ? omx_shm_ring_poll(l->own, fn, arg, max) : 0;
	int unprompted = 0;
	if (l->own) {
		uint32_t hint = omx_shm_ring_hint(l->own);
		unprompted = hint == l->sock_hint && !l->sock_force;
		if (unprompted && ++l->sock_skip < l->sock_every)
			return count;
		/* Woken by a doorbell whose frame this poll found in the ring: the doorbell (and the
		 * failed recv that ends the drain) can wait for the next pass, after the application
		 * has answered, instead of delaying its answer by two system calls. One pass only: a
		 * sender without our ring (which cannot bump the hint) may have a frame behind it. */
		if (l->sock_force == 1 && count && hint == l->sock_hint) {
			l->sock_force = 2;
			return count;
		}
		l->sock_hint = hint;
		l->sock_force = 0;
		l->sock_skip = 0;
	}
	int before = count;
	while ((unsigned)count < max) {
		ssize_t r = recv(n->fd, l->buf, sizeof(l->buf), MSG_DONTWAIT);
		if (r < 0)
			break;
		if (r < OMX_HEAD_LEN)
			continue; /* doorbell */
		fn(arg, l->buf, (size_t)r);
		count++;
	}
	if (unprompted) {
		if (count > before) {
			l->sock_every = SOCK_LOOK_MIN;
			l->sock_empty = 0;
		} else if (++l->sock_empty >= SOCK_EMPTY_LOOKS && l->sock_every < SOCK_LOOK_MAX) {
			l->sock_every *= 2;
			l->sock_empty = 0;
		}
	}
	return count;
}

static int local_prepare_sleep(struct omx_net *n, int sleeping, int fd_ready)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	if (!l->own)
		return 0;
	if (!sleeping) {
		omx_shm_ring_disarm(l->own);
		/* Doorbells woke us: drain them on the next poll. Not otherwise (a failed recv per
		 * wake-up, ~4% of a blocking hop between namespaces): a doorbell rung after the
		 * sleep ended makes the next sleep return at once and is drained then. */
		l->sock_force = fd_ready;
		return 0;
	}
	return omx_shm_ring_arm(l->own);
}

static void local_close(struct omx_net *n)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	for (unsigned i = 0; i < PEER_RINGS; i++)
		if (l->peers[i].ring)
			omx_shm_ring_close(l->peers[i].ring);
	omx_shm_ring_close(l->own);
	close(n->fd);
	free(n);
}

static const struct omx_net_ops local_ops = {
	.send = local_send,
	.recv_burst = local_recv_burst,
	.next_deadline = NULL,
	.close = local_close,
	.prepare_sleep = local_prepare_sleep,
};

struct omx_shm_ring *omx_net_local_own_ring(struct omx_net *n)
{
	return ((struct omx_net_local *)n)->own;
}

struct omx_shm_ring *omx_net_local_peer_ring(struct omx_net *n, const uint8_t mac[6], uint8_t endpoint)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	return l->own ? peer_ring_get(l, mac, endpoint, omx_now_coarse_ns()) : NULL;
}

struct omx_shm_ring *omx_net_local_peer_ring_routed(struct omx_net *n, const struct omx_net_local_route *rt,
						   const uint8_t mac[6], uint8_t endpoint)
{
	const struct peer_ring *p = route_peer(n, rt);
	return p ? p->ring : omx_net_local_peer_ring(n, mac, endpoint);
}

int omx_net_local_peer_gone(struct omx_net *n, const uint8_t mac[6], uint8_t endpoint, uint32_t session)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	if (l->own) {
		struct omx_shm_ring *r = peer_ring_get(l, mac, endpoint, omx_now_coarse_ns());
		if (r)
			return omx_shm_ring_session(r) != session;
	}
	/* No ring (or a peer without one): is anybody bound to its socket? */
	struct sockaddr_un a;
	socklen_t alen = local_name(&a, mac, endpoint);
	uint8_t b = 0;
	if (sendto(n->fd, &b, 1, MSG_DONTWAIT, (struct sockaddr *)&a, alen) < 0)
		return errno == ECONNREFUSED || errno == ENOENT;
	return 0;
}

void omx_net_local_stats(struct omx_net *n, struct omx_net_local_stats *out)
{
	struct omx_net_local *l = (struct omx_net_local *)n;
	*out = l->stats;
	out->ring_skipped = l->own ? omx_shm_ring_skipped(l->own) : 0;
}

struct omx_net *omx_net_local_open(const uint8_t mac[6], uint32_t mtu, uint8_t endpoint,
				   const struct omx_net_local_opts *opts, int *err)
{
	struct omx_net_local *l = calloc(1, sizeof(*l));
	if (!l) {
		*err = -ENOMEM;
		return NULL;
	}
	l->sock_every = SOCK_LOOK_MIN;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un a;
	socklen_t alen = local_name(&a, mac, endpoint);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) < 0) {
		*err = -errno;
		if (fd >= 0)
			close(fd);
		free(l);
		return NULL;
	}
	/* Room for a window of frames; beyond the limit root may force it. */
	int sz = 16 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	if (opts && opts->shared) {
		int rerr = 0;
		l->own = omx_shm_ring_create(mac, endpoint, mtu + 64, opts->ring_bytes, opts->session, &rerr);
		if (!l->own)
			l->stats.ring_error = rerr;
		else if (opts->lock)
			l->stats.ring_lock_error = omx_shm_ring_lock(l->own);
	}
	l->base.ops = &local_ops;
	l->base.fd = fd;
	l->base.fd2 = -1;
	memcpy(l->base.mac, mac, 6);
	l->base.mtu = mtu;
	return &l->base;
}
