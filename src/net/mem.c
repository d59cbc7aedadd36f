/*
 * mem.c - in-memory hub for unit tests. Every transport attached to a hub has a FIFO of copied
 * frames and an eventfd that is readable exactly while that FIFO is non-empty. A sent frame goes
 * to every other transport whose MAC is the frame's destination (a group address such as
 * ff:ff:ff:ff:ff:ff reaches every other transport) and whose endpoint is the one the frame is for
 * (omx_wire_frame_endpoint; -1 = every endpoint of the board), which is what the packet filter of
 * the real transport does. A sender never receives its own frames (as with PACKET_IGNORE_OUTGOING).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "net/net.h"
#include "wire/wire.h"

#define OMX_ETH_HLEN 14
#define MEM_QUEUE_MAX 8192 /* per transport, like a finite RX ring */

struct mem_frame {
	struct mem_frame *next;
	size_t len;
	uint8_t data[];
};

struct mem_net {
	struct omx_net base;
	struct omx_memnet *hub;
	struct mem_net *next; /* in hub->list */
	uint8_t endpoint;
	struct mem_frame *qhead, *qtail;
	size_t qlen;
};

struct omx_memnet {
	pthread_mutex_t lock;
	struct mem_net *list;
	struct omx_memnet_stats stats;
	omx_net_rx_fn tap; /* sees every frame sent (tests that record traffic) */
	void *tap_arg;
};

static struct mem_net *to_mem(struct omx_net *n)
{
	return (struct mem_net *)n;
}

static void eventfd_set(int fd)
{
	uint64_t one = 1;
	ssize_t r;
	do
		r = write(fd, &one, sizeof(one));
	while (r < 0 && errno == EINTR);
}

static void eventfd_clear(int fd)
{
	uint64_t v;
	ssize_t r;
	do
		r = read(fd, &v, sizeof(v));
	while (r < 0 && errno == EINTR);
}

/* Called with the hub lock held. Takes ownership of f. */
static void mem_enqueue(struct omx_memnet *hub, struct mem_net *t, struct mem_frame *f)
{
	if (f->len > (size_t)t->base.mtu + OMX_ETH_HLEN) {
		hub->stats.dropped_mtu++;
		free(f);
		return;
	}
	if (t->qlen >= MEM_QUEUE_MAX) {
		hub->stats.dropped_overflow++;
		free(f);
		return;
	}
	f->next = NULL;
	if (t->qtail)
		t->qtail->next = f;
	else
		t->qhead = f;
	t->qtail = f;
	if (t->qlen++ == 0)
		eventfd_set(t->base.fd);
	hub->stats.delivered++;
}

static int mem_send(struct omx_net *n, const struct iovec *iov, unsigned iovcnt)
{
	struct mem_net *self = to_mem(n);
	struct omx_memnet *hub = self->hub;
	size_t len = 0;

	for (unsigned i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (!hub)
		return -ENETDOWN;
	if (len < OMX_ETH_HLEN)
		return -EINVAL;

	struct mem_frame *f = malloc(sizeof(*f) + len);
	if (!f)
		return -ENOBUFS;
	f->len = len;
	size_t off = 0;
	for (unsigned i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(f->data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}

	pthread_mutex_lock(&hub->lock);
	hub->stats.sent++;
	if (hub->tap)
		hub->tap(hub->tap_arg, f->data, len);
	if (len > (size_t)n->mtu + OMX_ETH_HLEN) {
		/* The kernel refuses such a frame on a packet socket. */
		hub->stats.dropped_mtu++;
		pthread_mutex_unlock(&hub->lock);
		free(f);
		return -EMSGSIZE;
	}

	int ep = omx_wire_frame_endpoint(f->data, len);
	int group = f->data[0] & 1;
	unsigned matched = 0;
	if (ep >= -1) {
		for (struct mem_net *t = hub->list; t; t = t->next) {
			if (t == self)
				continue;
			if (!group && memcmp(t->base.mac, f->data, 6) != 0)
				continue;
			if (ep >= 0 && t->endpoint != (uint8_t)ep)
				continue;
			struct mem_frame *c = malloc(sizeof(*c) + len);
			if (!c) {
				hub->stats.dropped_overflow++;
				continue;
			}
			c->len = len;
			memcpy(c->data, f->data, len);
			mem_enqueue(hub, t, c);
			matched++;
		}
	}
	if (!matched)
		hub->stats.dropped_noroute++;
	pthread_mutex_unlock(&hub->lock);
	free(f);
	return 0;
}

static int mem_recv_burst(struct omx_net *n, omx_net_rx_fn fn, void *arg, unsigned max)
{
	struct mem_net *self = to_mem(n);
	struct omx_memnet *hub = self->hub;
	struct mem_frame *batch = NULL, **tail = &batch;
	int count = 0;

	if (!hub || max == 0)
		return 0;
	pthread_mutex_lock(&hub->lock);
	while (self->qhead && (unsigned)count < max) {
		struct mem_frame *f = self->qhead;
		self->qhead = f->next;
		if (!self->qhead)
			self->qtail = NULL;
		self->qlen--;
		f->next = NULL;
		*tail = f;
		tail = &f->next;
		count++;
	}
	if (count && self->qlen == 0)
		eventfd_clear(n->fd);
	pthread_mutex_unlock(&hub->lock);

	/* Deliver outside the lock: the callback may send. */
	while (batch) {
		struct mem_frame *f = batch;
		batch = f->next;
		fn(arg, f->data, f->len);
		free(f);
	}
	return count;
}

static void mem_close(struct omx_net *n)
{
	struct mem_net *self = to_mem(n);
	struct omx_memnet *hub = self->hub;

	if (hub) {
		pthread_mutex_lock(&hub->lock);
		for (struct mem_net **pp = &hub->list; *pp; pp = &(*pp)->next) {
			if (*pp == self) {
				*pp = self->next;
				break;
			}
		}
		pthread_mutex_unlock(&hub->lock);
	}
	while (self->qhead) {
		struct mem_frame *f = self->qhead;
		self->qhead = f->next;
		free(f);
	}
	close(n->fd);
	free(self);
}

/* Batches as the packet transport's sendmmsg, but at most MEM_BATCH_TAKES frames a call, so
 * that the tests run the core's partial-batch path on every medium and pull. */
#define MEM_BATCH_TAKES 3u
static int mem_send_batch(struct omx_net *n, const struct omx_net_frame *f, unsigned count)
{
	unsigned i = 0;
	for (; i < count && i < MEM_BATCH_TAKES; i++) {
		int e = mem_send(n, f[i].iov, f[i].iovcnt);
		if (e < 0)
			return i ? (int)i : e;
	}
	return (int)i;
}

static const struct omx_net_ops mem_ops = {
	.send = mem_send,
	.recv_burst = mem_recv_burst,
	.next_deadline = NULL,
	.close = mem_close,
	.send_batch = mem_send_batch,
};

struct omx_memnet *omx_memnet_create(void)
{
	struct omx_memnet *hub = calloc(1, sizeof(*hub));
	if (!hub)
		return NULL;
	if (pthread_mutex_init(&hub->lock, NULL) != 0) {
		free(hub);
		return NULL;
	}
	return hub;
}

void omx_memnet_destroy(struct omx_memnet *hub)
{
	if (!hub)
		return;
	/* Transports still attached (a caller bug) are detached, not freed: they fail with
	 * -ENETDOWN and can still be closed. */
	pthread_mutex_lock(&hub->lock);
	for (struct mem_net *t = hub->list; t; t = t->next)
		t->hub = NULL;
	hub->list = NULL;
	pthread_mutex_unlock(&hub->lock);
	pthread_mutex_destroy(&hub->lock);
	free(hub);
}

void omx_memnet_stats(struct omx_memnet *hub, struct omx_memnet_stats *out)
{
	pthread_mutex_lock(&hub->lock);
	*out = hub->stats;
	pthread_mutex_unlock(&hub->lock);
}

struct omx_net *omx_net_mem_open(struct omx_memnet *hub, const uint8_t mac[6], uint32_t mtu, uint8_t endpoint)
{
	static int next_ifindex = 1000;
	struct mem_net *t;

	if (!hub || !mac || mtu == 0)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->base.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->base.fd < 0) {
		free(t);
		return NULL;
	}
	t->base.fd2 = -1;
	t->base.ops = &mem_ops;
	memcpy(t->base.mac, mac, 6);
	t->base.mtu = mtu;
	t->endpoint = endpoint;
	t->hub = hub;
	t->base.ifindex = __atomic_fetch_add(&next_ifindex, 1, __ATOMIC_RELAXED);

	pthread_mutex_lock(&hub->lock);
	/* Append, so that group frames are delivered in attach order. */
	struct mem_net **pp = &hub->list;
	while (*pp)
		pp = &(*pp)->next;
	*pp = t;
	pthread_mutex_unlock(&hub->lock);
	return &t->base;
}

void omx_memnet_set_tap(struct omx_memnet *hub, omx_net_rx_fn fn, void *arg)
{
	pthread_mutex_lock(&hub->lock);
	hub->tap = fn;
	hub->tap_arg = arg;
	pthread_mutex_unlock(&hub->lock);
}
