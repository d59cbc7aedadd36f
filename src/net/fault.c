/*
 * fault.c - deterministic fault injection on the send side of any transport (tests only).
 *
 * Every frame offered to send() draws four numbers (five with refuse) from a splitmix64 stream
 * seeded by the spec, always in the same order, and is then, in this order of precedence:
 *   refused   (u4 < refuse, drawn only with refuse set) - not sent, send returns -EAGAIN as a
 *             full queue does (the sender knows: a loss of its own, not the link's);
 *   dropped   (u0 < drop)   - discarded, send returns 0;
 *   delayed   (u2 < delay)  - copied and held until now + delay_us;
 *   reordered (u3 < reorder, and no frame already held for reordering) - copied and held until
 *             the next frame goes out (it then follows that frame) or for at most 1 ms;
 *   otherwise sent at once (and a frame held for reordering follows it).
 * With u1 < dup the frame is handled twice in a row (both copies share its fate: a delayed frame
 * is delayed twice, a reordered one is held with its duplicate). The outcome sequence depends
 * only on the seed and the number of frames sent.
 *
 * Delayed frames are released, once due, from send() (before the new frame) and from recv_burst();
 * a frame held for reordering right after the next frame actually sent, or from recv_burst() once
 * its 1 ms deadline has passed (so a sequence of sends alone is reproducible for a seed: only
 * delays depend on the clock). next_deadline() tells the caller when the earliest held frame is
 * due. close() discards held frames.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/net.h"

#define REORDER_HOLD_NS 1000000ull /* 1 ms */
#define DEFAULT_DELAY_US 1000u

struct held_frame {
	struct held_frame *next;
	uint64_t due;
	size_t len;
	uint8_t data[];
};

struct fault_net {
	struct omx_net base;
	struct omx_net *inner;
	struct omx_fault_spec spec;
	uint64_t rng;
	struct omx_fault_stats stats;
	pthread_mutex_t lock;
	struct held_frame *delayed; /* sorted by due time, FIFO among equal times */
	struct held_frame *reorder; /* at most one frame (plus its duplicate) held for reordering */
};

static struct fault_net *to_fault(struct omx_net *n)
{
	return (struct fault_net *)n;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static double uniform01(uint64_t *state)
{
	return (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

static struct held_frame *held_copy(const struct iovec *iov, unsigned iovcnt, uint64_t due)
{
	size_t len = 0, off = 0;
	for (unsigned i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	struct held_frame *h = malloc(sizeof(*h) + len);
	if (!h)
		return NULL;
	h->next = NULL;
	h->due = due;
	h->len = len;
	for (unsigned i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len)
			memcpy(h->data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	return h;
}

static void held_send(struct fault_net *f, struct held_frame *h)
{
	struct iovec v = {.iov_base = h->data, .iov_len = h->len};
	/* An error here is a loss, as for any frame the kernel refuses. */
	(void)f->inner->ops->send(f->inner, &v, 1);
	free(h);
}

static void free_list(struct held_frame *h)
{
	while (h) {
		struct held_frame *next = h->next;
		free(h);
		h = next;
	}
}

static void release_reorder(struct fault_net *f)
{
	struct held_frame *h = f->reorder;
	f->reorder = NULL;
	while (h) {
		struct held_frame *next = h->next;
		held_send(f, h);
		h = next;
	}
}

/* Send the delayed frames due at `now`. Lock held. */
static void flush_delayed(struct fault_net *f, uint64_t now)
{
	while (f->delayed && f->delayed->due <= now) {
		struct held_frame *h = f->delayed;
		f->delayed = h->next;
		held_send(f, h);
	}
}

static void delayed_insert(struct fault_net *f, struct held_frame *h)
{
	struct held_frame **pp = &f->delayed;
	while (*pp && (*pp)->due <= h->due)
		pp = &(*pp)->next;
	h->next = *pp;
	*pp = h;
}

static int fault_send(struct omx_net *n, const struct iovec *iov, unsigned iovcnt)
{
	struct fault_net *f = to_fault(n);
	int ret = 0;

	pthread_mutex_lock(&f->lock);
	uint64_t now = omx_now_ns();
	/* Only delayed frames here: a frame held for reordering always goes out right after the
	 * next frame sent (or from recv_burst at its deadline), so that a run of sends gives the
	 * same order for the same seed whatever the timing. */
	flush_delayed(f, now);

	double u_drop = uniform01(&f->rng), u_dup = uniform01(&f->rng);
	double u_delay = uniform01(&f->rng), u_reorder = uniform01(&f->rng);
	f->stats.sent++;
	if (f->spec.refuse > 0 && uniform01(&f->rng) < f->spec.refuse) {
		f->stats.refused++;
		ret = -EAGAIN;
		goto out;
	}

	if (u_drop < f->spec.drop) {
		f->stats.dropped++;
		goto out;
	}
	unsigned copies = 1;
	if (u_dup < f->spec.dup) {
		f->stats.duplicated++;
		copies = 2;
	}

	if (u_delay < f->spec.delay) {
		f->stats.delayed++;
		uint64_t due = now + (uint64_t)f->spec.delay_us * 1000ull;
		for (unsigned c = 0; c < copies; c++) {
			struct held_frame *h = held_copy(iov, iovcnt, due);
			if (!h) {
				ret = c ? 0 : -ENOBUFS;
				goto out;
			}
			delayed_insert(f, h);
		}
		goto out;
	}

	if (u_reorder < f->spec.reorder && !f->reorder) {
		struct held_frame *h = held_copy(iov, iovcnt, now + REORDER_HOLD_NS);
		if (h) {
			f->stats.reordered++;
			if (copies == 2) {
				h->next = held_copy(iov, iovcnt, h->due);
			}
			f->reorder = h;
			goto out;
		}
		/* No memory to hold it: just send it. */
	}

	for (unsigned c = 0; c < copies; c++) {
		int r = f->inner->ops->send(f->inner, iov, iovcnt);
		if (c == 0)
			ret = r;
	}
	/* The held frame goes out right after the frame that overtook it. */
	if (f->reorder)
		release_reorder(f);
out:
	pthread_mutex_unlock(&f->lock);
	return ret;
}

static int fault_recv_burst(struct omx_net *n, omx_net_rx_fn fn, void *arg, unsigned max)
{
	struct fault_net *f = to_fault(n);

	pthread_mutex_lock(&f->lock);
	if (f->reorder || f->delayed) {
		uint64_t now = omx_now_ns();
		if (f->reorder && f->reorder->due <= now)
			release_reorder(f);
		flush_delayed(f, now);
	}
	pthread_mutex_unlock(&f->lock);
	/* Outside the lock: fn may call our send. */
	return f->inner->ops->recv_burst(f->inner, fn, arg, max);
}

static uint64_t fault_next_deadline(struct omx_net *n)
{
	struct fault_net *f = to_fault(n);
	uint64_t d = 0;

	pthread_mutex_lock(&f->lock);
	if (f->reorder)
		d = f->reorder->due;
	if (f->delayed && (d == 0 || f->delayed->due < d))
		d = f->delayed->due;
	pthread_mutex_unlock(&f->lock);
	if (f->inner->ops->next_deadline) {
		uint64_t di = f->inner->ops->next_deadline(f->inner);
		if (di && (d == 0 || di < d))
			d = di;
	}
	return d;
}

static void fault_close(struct omx_net *n)
{
	struct fault_net *f = to_fault(n);
	free_list(f->reorder);
	free_list(f->delayed);
	f->inner->ops->close(f->inner);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static const struct omx_net_ops fault_ops = {
	.send = fault_send,
	.recv_burst = fault_recv_burst,
	.next_deadline = fault_next_deadline,
	.close = fault_close,
};

struct omx_net *omx_net_fault_wrap(struct omx_net *inner, const struct omx_fault_spec *spec)
{
	if (!inner || !spec)
		return NULL;
	struct fault_net *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	if (pthread_mutex_init(&f->lock, NULL) != 0) {
		free(f);
		return NULL;
	}
	f->base.ops = &fault_ops;
	f->base.fd = inner->fd;
	f->base.fd2 = inner->fd2;
	memcpy(f->base.mac, inner->mac, 6);
	f->base.mtu = inner->mtu;
	f->base.ifindex = inner->ifindex;
	f->inner = inner;
	f->spec = *spec;
	if (f->spec.delay > 0 && f->spec.delay_us == 0)
		f->spec.delay_us = DEFAULT_DELAY_US;
	f->rng = spec->seed;
	return &f->base;
}

void omx_net_fault_stats(struct omx_net *wrapped, struct omx_fault_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!wrapped || wrapped->ops != &fault_ops)
		return;
	struct fault_net *f = to_fault(wrapped);
	pthread_mutex_lock(&f->lock);
	*out = f->stats;
	pthread_mutex_unlock(&f->lock);
}

static int parse_rate(const char *v, double *out)
{
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || end == v || *end != '\0' || !(d >= 0.0 && d <= 1.0))
		return -EINVAL;
	*out = d;
	return 0;
}

static int parse_u64(const char *v, uint64_t max, uint64_t *out)
{
	char *end;
	if (*v == '-' || *v == '\0')
		return -EINVAL;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (errno || end == v || *end != '\0' || x > max)
		return -EINVAL;
	*out = x;
	return 0;
}

/* Splits "k=v,k=v" (blanks around items, keys and values ignored). Empty string = no faults. */
int omx_fault_spec_parse(const char *str, struct omx_fault_spec *out)
{
	struct omx_fault_spec s = {0};
	int ret = 0;

	if (!str || !out)
		return -EINVAL;
	s.seed = 1;
	char *buf = strdup(str);
	if (!buf)
		return -ENOMEM;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ' || *tok == '\t')
			tok++;
		size_t l = strlen(tok);
		while (l && (tok[l - 1] == ' ' || tok[l - 1] == '\t'))
			tok[--l] = '\0';
		if (l == 0)
			continue;
		char *eq = strchr(tok, '=');
		if (!eq) {
			ret = -EINVAL;
			break;
		}
		char *k = tok, *v = eq + 1;
		*eq = '\0';
		for (size_t kl = strlen(k); kl && (k[kl - 1] == ' ' || k[kl - 1] == '\t'); kl--)
			k[kl - 1] = '\0';
		while (*v == ' ' || *v == '\t')
			v++;
		uint64_t u;
		if (!strcasecmp(k, "drop"))
			ret = parse_rate(v, &s.drop);
		else if (!strcasecmp(k, "dup"))
			ret = parse_rate(v, &s.dup);
		else if (!strcasecmp(k, "reorder"))
			ret = parse_rate(v, &s.reorder);
		else if (!strcasecmp(k, "delay"))
			ret = parse_rate(v, &s.delay);
		else if (!strcasecmp(k, "refuse"))
			ret = parse_rate(v, &s.refuse);
		else if (!strcasecmp(k, "delay_us")) {
			ret = parse_u64(v, UINT32_MAX, &u);
			s.delay_us = (uint32_t)u;
		} else if (!strcasecmp(k, "seed"))
			ret = parse_u64(v, UINT64_MAX, &s.seed);
		else
			ret = -EINVAL;
		if (ret)
			break;
	}
	free(buf);
	if (ret)
		return ret;
	if (s.delay > 0 && s.delay_us == 0)
		s.delay_us = DEFAULT_DELAY_US;
	*out = s;
	return 0;
}
