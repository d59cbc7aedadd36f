/*
 * request.c - request objects and their life cycle (behaviour.md 3), and the completion calls
 * of the native API (omx-native-api.md 4.5): test, wait, test_any, wait_any, ipeek, peek,
 * iprobe, probe, ibuffered, context, forget, cancel, cancel_notest, set_request_timeout.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/hop_trace.h"
#include "shm/shm.h"
#include "hot_path.h"

/* Freed requests are kept on a short per-endpoint list (every message takes one or two, and
 * malloc/free was a visible part of a same-host round trip); not under AddressSanitizer, which
 * should see uses after free. */
#if defined(__SANITIZE_ADDRESS__)
#define REQ_CACHE_MAX 0u
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REQ_CACHE_MAX 0u
#endif
#endif
#ifndef REQ_CACHE_MAX
#define REQ_CACHE_MAX 32u
#endif

_Static_assert(offsetof(omx_req_t, type) == offsetof(omx_req_t, all_elt) + sizeof(struct omx_list),
	       "omx__req_alloc clears a recycled request from its type on: the list links come first");

/* Everything of a recycled request but the list links, set by omx__req_alloc, and a send's inline
 * payload, which is only read up to the length written into it (a third of the request): 216
 * bytes, in thirteen 16-byte stores and one 8-byte one. GCC turns a memset of them (or any loop
 * doing it) into a loop of 8-byte stores, ~55 instructions twice a ping-pong's hop, between its
 * send and the next receive's first look at the ring. */
typedef uint64_t omx_clear16 __attribute__((vector_size(16), may_alias));
_Static_assert(offsetof(omx_req_t, type) % 16 == 0 &&
		       offsetof(omx_req_t, inline_data) - offsetof(omx_req_t, type) == 13 * 16 + 8,
	       "clear_recycled writes 13 x 16 + 8 bytes from a 16-byte boundary: update it with the layout");

static inline void clear_recycled(union omx_request *r)
{
	/* Requests come from calloc (16-byte aligned) and go back to the cache only. */
	omx_clear16 *v = (omx_clear16 *)((uint8_t *)__builtin_assume_aligned(r, 16) + offsetof(omx_req_t, type));
	const omx_clear16 z = { 0, 0 };
	v[0] = z, v[1] = z, v[2] = z, v[3] = z, v[4] = z, v[5] = z, v[6] = z;
	v[7] = z, v[8] = z, v[9] = z, v[10] = z, v[11] = z, v[12] = z;
	memset(&v[13], 0, 8);
}

union omx_request *omx__req_alloc(struct omx_endpoint *ep, enum omx_req_type type)
{
	union omx_request *r = ep->req_cache;
	if (r) {
		ep->req_cache = *(union omx_request **)r;
		ep->req_cache_count--;
		clear_recycled(r); /* the list links are set below */
	} else {
		r = calloc(1, sizeof(*r));
		if (!r)
			return NULL;
	}
	omx_list_init(&r->s.queue_elt);
	omx_list_init(&r->s.done_elt);
	omx_list_init(&r->s.timer_elt);
	omx_list_add_tail(&ep->all_reqs, &r->s.all_elt);
	r->s.type = type;
	r->s.ep = ep;
	r->s.segs = r->s.seg_in;
	r->s.nseg = 1;
	r->s.resends_max = ep->resends_max;
	if (type <= OMX_REQ_SEND_SELF) /* u.send only: the same bytes are a receive's own fields */
		r->s.u.send.region = -1;
	return r;
}

/*
 * Medium sends copy their payload for retransmission. A buffer malloc'ed and freed per message
 * went back to the system whenever glibc trimmed the heap, and came back as fresh pages: 256 KiB
 * same-host mediums took 112 us per half round trip instead of ~8, most of it page faults
 * (docs/performance.md, stop 28). A few buffers are kept per endpoint instead, the largest ones
 * when there are more.
 */
#define BOUNCE_ROUND 4096u

uint8_t *omx__bounce_get(struct omx_endpoint *ep, uint32_t len, uint32_t *cap)
{
	for (unsigned i = 0; i < ep->bounce_count; i++) {
		if (ep->bounce[i].cap >= len) {
			uint8_t *b = ep->bounce[i].buf;
			*cap = ep->bounce[i].cap;
			ep->bounce[i] = ep->bounce[--ep->bounce_count];
			return b;
		}
	}
	*cap = (len + BOUNCE_ROUND - 1) / BOUNCE_ROUND * BOUNCE_ROUND;
	return malloc(*cap);
}

static void bounce_put(struct omx_endpoint *ep, uint8_t *buf, uint32_t cap)
{
	unsigned smallest = 0;
	if (ep->bounce_count < OMX_BOUNCE_CACHE_MAX) {
		ep->bounce[ep->bounce_count++] = (struct omx_bounce){ buf, cap };
		return;
	}
	for (unsigned i = 1; i < ep->bounce_count; i++)
		if (ep->bounce[i].cap < ep->bounce[smallest].cap)
			smallest = i;
	if (ep->bounce[smallest].cap < cap) {
		free(ep->bounce[smallest].buf);
		ep->bounce[smallest] = (struct omx_bounce){ buf, cap };
	} else {
		free(buf);
	}
}

void omx__req_free(union omx_request *r)
{
	omx_list_del(&r->s.all_elt);
	if (r->s.segs != r->s.seg_in)
		free(r->s.segs);
	if (r->s.type <= OMX_REQ_SEND_SELF) {
		if (r->s.u.send.data && r->s.u.send.data != r->s.inline_data)
			bounce_put(r->s.ep, r->s.u.send.data, r->s.u.send.data_cap);
	} else if (r->s.type == OMX_REQ_RECV || r->s.type == OMX_REQ_RECV_LARGE) {
		/* Only unexpected messages have either: a posted receive skips both calls. */
		if (r->s.u.recv.unexp_charge)
			omx__unexp_uncharge(r);
		if (r->s.u.recv.unexp_buf)
			free(r->s.u.recv.unexp_buf);
	}
#if REQ_CACHE_MAX > 0
	struct omx_endpoint *ep = r->s.ep;
	if (ep && ep->req_cache_count < REQ_CACHE_MAX) {
		*(union omx_request **)r = ep->req_cache;
		ep->req_cache = r;
		ep->req_cache_count++;
		return;
	}
#endif
	free(r);
}

void omx__req_cache_drain(struct omx_endpoint *ep)
{
	while (ep->req_cache) {
		union omx_request *r = ep->req_cache;
		ep->req_cache = *(union omx_request **)r;
		free(r);
	}
	ep->req_cache_count = 0;
	while (ep->bounce_count)
		free(ep->bounce[--ep->bounce_count].buf);
}

void omx__req_maybe_free(union omx_request *r)
{
	if ((r->s.state & (OMX_RS_COLLECTED | OMX_RS_DONE)) == (OMX_RS_COLLECTED | OMX_RS_DONE) &&
	    !(r->s.state & OMX_RS_BUSY))
		omx__req_free(r);
}

void omx__req_clear(union omx_request *r, uint32_t bits)
{
	struct omx_endpoint *ep = r->s.ep;
	if ((bits & OMX_RS_NEED_ACK) && (r->s.state & OMX_RS_NEED_ACK) && (r->s.state & OMX_RS_DONE_EARLY)) {
		ep->zombies--;
		r->s.state &= ~OMX_RS_DONE_EARLY;
	}
	r->s.state &= ~bits;
	omx__req_maybe_free(r);
}

/* Mark done with `code`; requests with a non-success status go through the error handler first
 * (its return value becomes the status, omx-native-api.md 5.2). */
void omx__req_complete(union omx_request *r, omx_return_t code)
{
	struct omx_endpoint *ep = r->s.ep;
	if (r->s.state & OMX_RS_DONE)
		return;
	if (code != OMX_SUCCESS && code != OMX_CANCELLED && !(r->s.state & OMX_RS_INTERNAL))
		code = omx__error(ep, code, "Completing request");
	r->s.status.code = code;
	r->s.state |= OMX_RS_DONE;
	ep->completions++;
	if (!(r->s.state & OMX_RS_COLLECTED))
		omx_list_add_tail(&ep->done, &r->s.done_elt);
	omx__req_maybe_free(r);
}

omx_return_t omx__req_set_segs(union omx_request *r, const omx_seg_t *segs, uint32_t nseg)
{
	uint64_t total = 0;
	if (nseg > OMX_MAX_SEGMENTS || (nseg && !segs))
		return OMX_SEGMENTS_BAD_COUNT;
	if (nseg == 0) {
		r->s.seg_in[0].ptr = NULL;
		r->s.seg_in[0].len = 0;
		r->s.segs = r->s.seg_in;
		r->s.nseg = 1;
		r->s.total_len = 0;
		return OMX_SUCCESS;
	}
	for (uint32_t i = 0; i < nseg; i++)
		total += segs[i].len;
	if (total > UINT32_MAX)
		return OMX_SEGMENTS_BAD_COUNT; /* [QUIRK fixed] the reference wrapped at 4 GiB */
	omx_seg_t *dst = r->s.seg_in;
	if (nseg <= OMX_REQ_INLINE_SEGS) {
		/* Most requests (one segment; a provider's header and payload): no library call. */
		for (uint32_t i = 0; i < nseg; i++)
			dst[i] = segs[i];
	} else {
		if (!(dst = malloc(nseg * sizeof(*segs))))
			return OMX_NO_RESOURCES;
		memcpy(dst, segs, nseg * sizeof(*segs));
	}
	r->s.segs = dst;
	r->s.nseg = nseg;
	r->s.total_len = (uint32_t)total;
	return OMX_SUCCESS;
}

uint8_t *omx__segs_place(const omx_seg_t *segs, uint32_t nseg, uint64_t offset, uint32_t len)
{
	for (uint32_t i = 0; i < nseg; i++) {
		if (offset < segs[i].len)
			return segs[i].ptr && offset + len <= segs[i].len ? (uint8_t *)segs[i].ptr + offset : NULL;
		offset -= segs[i].len;
	}
	return NULL;
}

void omx__copy_to_segs(const omx_seg_t *segs, uint32_t nseg, uint32_t offset, const void *src, uint32_t len)
{
	const uint8_t *s = src;
	for (uint32_t i = 0; i < nseg && len; i++) {
		if (offset >= segs[i].len) {
			offset -= segs[i].len;
			continue;
		}
		uint32_t n = segs[i].len - offset;
		if (n > len)
			n = len;
		omx_memcpy((uint8_t *)segs[i].ptr + offset, s, n);
		s += n;
		len -= n;
		offset = 0;
	}
}

void omx__copy_from_segs(const omx_seg_t *segs, uint32_t nseg, uint32_t offset, void *dst, uint32_t len)
{
	uint8_t *d = dst;
	for (uint32_t i = 0; i < nseg && len; i++) {
		if (offset >= segs[i].len) {
			offset -= segs[i].len;
			continue;
		}
		uint32_t n = segs[i].len - offset;
		if (n > len)
			n = len;
		omx_memcpy(d, (const uint8_t *)segs[i].ptr + offset, n);
		d += n;
		len -= n;
		offset = 0;
	}
}

/* ---- collecting completions ---- */

static OMX_HOT_PATH void collect(union omx_request *r, omx_status_t *status)
{
	struct omx_endpoint *ep = r->s.ep;
	if (status)
		*status = r->s.status;
	omx_list_del(&r->s.done_elt);
	r->s.state |= OMX_RS_COLLECTED;
	if ((r->s.state & OMX_RS_NEED_ACK) && !(r->s.state & OMX_RS_DONE_EARLY)) {
		/* completed, still awaiting its ack: a zombie freed at ack time */
	}
	(void)ep;
	omx__req_maybe_free(r);
}

#define ENTER(ep)                                                                                              \
	do {                                                                                                   \
		OMX_CHECK_EP(ep);                                                                              \
		omx__eplock(&(ep)->lock);                                                                      \
		omx__progress_fast(ep);                                                                        \
	} while (0)

omx_return_t omx_test(omx_endpoint_t ep, omx_request_t *request, omx_status_t *status, uint32_t *result)
{
	*result = 0;
	if (!request || !*request)
		return omx__error(ep, OMX_BAD_REQUEST, "Testing a NULL request");
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	union omx_request *r = *request;
	/* A request that completed before this call (an eager send completes in its own post) is
	 * returned without a progress pass: the call that completed it made one. */
	if (!(r->s.state & OMX_RS_DONE))
		omx__progress_fast(ep);
	if (r->s.state & OMX_RS_DONE) {
		collect(r, status);
		*request = NULL;
		*result = 1;
	}
	omx__epunlock(&ep->lock);
	if (*result)
		omx_hop_mark(OMX_HOP_COLLECTED);
	return OMX_SUCCESS;
}

static int cond_req_done(struct omx_endpoint *ep, void *arg)
{
	(void)ep;
	union omx_request *r = arg;
	return (r->s.state & OMX_RS_DONE) != 0;
}

omx_return_t omx_wait(omx_endpoint_t ep, omx_request_t *request, omx_status_t *status, uint32_t *result,
		      uint32_t timeout)
{
	*result = 0;
	if (!request || !*request)
		return omx__error(ep, OMX_BAD_REQUEST, "Waiting on a NULL request");
	ENTER(ep);
	union omx_request *r = *request;
	if (omx__wait(ep, cond_req_done, r, timeout)) {
		collect(r, status);
		*request = NULL;
		*result = 1;
	}
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

struct any_arg {
	uint64_t match, mask;
	union omx_request *found;
};

/* Oldest request of a queue linked by done_elt (completed, or unexpected) whose match value
 * satisfies the mask. */
static int find_matching(struct omx_list *q, struct any_arg *a)
{
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, q) {
		union omx_request *r = (union omx_request *)omx_container_of(pos, omx_req_t, done_elt);
		if ((r->s.status.match_info & a->mask) == a->match) {
			a->found = r;
			return 1;
		}
	}
	return 0;
}

static int cond_any_done(struct omx_endpoint *ep, void *arg)
{
	return find_matching(&ep->done, arg);
}

static omx_return_t any_common(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask, omx_status_t *status,
			       uint32_t *result, uint32_t timeout, int blocking)
{
	*result = 0;
	OMX_CHECK_EP(ep);
	if (match_info & ~match_mask)
		return omx__error(ep, OMX_BAD_MATCH_MASK, "%s with match 0x%llx mask 0x%llx",
				  blocking ? "Waiting any" : "Testing any", (unsigned long long)match_info,
				  (unsigned long long)match_mask);
	ENTER(ep);
	struct any_arg a = { match_info, match_mask, NULL };
	int ok = blocking ? omx__wait(ep, cond_any_done, &a, timeout) : cond_any_done(ep, &a);
	if (ok) {
		collect(a.found, status);
		*result = 1;
	}
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_test_any(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask, omx_status_t *status,
			  uint32_t *result)
{
	return any_common(ep, match_info, match_mask, status, result, 0, 0);
}

omx_return_t omx_wait_any(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask, omx_status_t *status,
			  uint32_t *result, uint32_t timeout)
{
	return any_common(ep, match_info, match_mask, status, result, timeout, 1);
}

static int cond_done_nonempty(struct omx_endpoint *ep, void *arg)
{
	(void)arg;
	return !omx_list_empty(&ep->done);
}

static omx_return_t peek_common(omx_endpoint_t ep, omx_request_t *request, uint32_t *result, uint32_t timeout,
				int blocking)
{
	*result = 0;
	ENTER(ep);
	int ok = blocking ? omx__wait(ep, cond_done_nonempty, NULL, timeout) : cond_done_nonempty(ep, NULL);
	if (ok) {
		*request = (union omx_request *)omx_container_of(ep->done.next, omx_req_t, done_elt);
		*result = 1;
	}
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_ipeek(omx_endpoint_t ep, omx_request_t *request, uint32_t *result)
{
	return peek_common(ep, request, result, 0, 0);
}

omx_return_t omx_peek(omx_endpoint_t ep, omx_request_t *request, uint32_t *result, uint32_t timeout)
{
	return peek_common(ep, request, result, timeout, 1);
}

static int cond_unexp(struct omx_endpoint *ep, void *arg)
{
	return find_matching(&ep->unexp, arg);
}

static omx_return_t probe_common(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask, omx_status_t *status,
				 uint32_t *result, uint32_t timeout, int blocking)
{
	*result = 0;
	OMX_CHECK_EP(ep);
	if (match_info & ~match_mask)
		return omx__error(ep, OMX_BAD_MATCH_MASK, "Probing with match 0x%llx mask 0x%llx",
				  (unsigned long long)match_info, (unsigned long long)match_mask);
	ENTER(ep);
	struct any_arg a = { match_info, match_mask, NULL };
	int ok = blocking ? omx__wait(ep, cond_unexp, &a, timeout) : cond_unexp(ep, &a);
	if (ok) {
		if (status) {
			*status = a.found->s.status;
			status->code = OMX_SUCCESS;
			status->xfer_length = status->msg_length;
			status->context = NULL;
		}
		*result = 1;
	}
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

omx_return_t omx_iprobe(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask, omx_status_t *status,
			uint32_t *result)
{
	return probe_common(ep, match_info, match_mask, status, result, 0, 0);
}

omx_return_t omx_probe(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask, omx_status_t *status,
		       uint32_t *result, uint32_t timeout)
{
	return probe_common(ep, match_info, match_mask, status, result, timeout, 1);
}

omx_return_t omx_ibuffered(omx_endpoint_t ep, omx_request_t *request, uint32_t *result)
{
	*result = 0;
	if (!request || !*request)
		return OMX_BAD_REQUEST;
	ENTER(ep);
	union omx_request *r = *request;
	omx_return_t ret = OMX_SUCCESS;
	switch (r->s.type) {
	case OMX_REQ_SEND_TINY:
	case OMX_REQ_SEND_SMALL:
	case OMX_REQ_SEND_MEDIUM:
	case OMX_REQ_SEND_SELF:
		/* eager payloads are copied when posted; a medium's after its first transmission */
		*result = !r->s.u.send.src;
		break;
	case OMX_REQ_SEND_LARGE:
		*result = (r->s.state & OMX_RS_DONE) ? 1 : 0;
		break;
	default:
		ret = OMX_BAD_REQUEST;
	}
	omx__epunlock(&ep->lock);
	return ret;
}

omx_return_t omx_context(omx_request_t *request, void **context)
{
	*context = (*request)->s.status.context;
	return OMX_SUCCESS;
}

omx_return_t omx_forget(omx_endpoint_t ep, omx_request_t *request)
{
	if (!request || !*request)
		return OMX_SUCCESS;
	OMX_CHECK_EP(ep);
	omx__eplock(&ep->lock);
	union omx_request *r = *request;
	omx_list_del(&r->s.done_elt);
	r->s.state |= OMX_RS_COLLECTED;
	omx__req_maybe_free(r);
	*request = NULL;
	omx__epunlock(&ep->lock);
	return OMX_SUCCESS;
}

/* Remove a cancellable request from its queues. Returns 1 if it was cancellable. */
static int cancel_detach(union omx_request *r)
{
	if ((r->s.type == OMX_REQ_RECV || r->s.type == OMX_REQ_RECV_LARGE) && (r->s.state & OMX_RS_RECV_POSTED)) {
		omx_list_del(&r->s.queue_elt);
		r->s.state &= ~OMX_RS_RECV_POSTED;
		return 1;
	}
	if (r->s.type == OMX_REQ_CONNECT && (r->s.state & OMX_RS_NEED_REPLY)) {
		omx_list_del(&r->s.queue_elt);
		omx_list_del(&r->s.timer_elt);
		r->s.state &= ~OMX_RS_NEED_REPLY;
		return 1;
	}
	return 0;
}

static omx_return_t cancel_common(omx_endpoint_t ep, omx_request_t *request, uint32_t *result, int notest)
{
	*result = 0;
	if (!request || !*request)
		return omx__error(ep, OMX_BAD_REQUEST, "Cancelling a NULL request");
	ENTER(ep);
	union omx_request *r = *request;
	omx_return_t ret = OMX_SUCCESS;
	if (r->s.type <= OMX_REQ_SEND_SELF) {
		omx__epunlock(&ep->lock);
		return omx__error(ep, OMX_BAD_REQUEST, "Cancelling a send request");
	}
	if (cancel_detach(r)) {
		*result = 1;
		if (notest) {
			omx__req_complete(r, OMX_CANCELLED);
		} else {
			r->s.state |= OMX_RS_COLLECTED | OMX_RS_DONE;
			omx__req_maybe_free(r);
			*request = NULL;
		}
	}
	omx__epunlock(&ep->lock);
	return ret;
}

omx_return_t omx_cancel(omx_endpoint_t ep, omx_request_t *request, uint32_t *result)
{
	return cancel_common(ep, request, result, 0);
}

omx_return_t omx_cancel_notest(omx_endpoint_t ep, omx_request_t *request, uint32_t *result)
{
	return cancel_common(ep, request, result, 1);
}

/* Budget = retransmissions allowed: ceil(ms / resend delay). All-ones = never give up. */
omx_return_t omx_set_request_timeout(omx_endpoint_t ep, omx_request_t request, uint32_t ms)
{
	uint64_t delay_ms = omx__cfg.resend_delay_ns / 1000000u;
	uint32_t budget;
	if (!delay_ms)
		delay_ms = 1;
	budget = ms == 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)(((uint64_t)ms + delay_ms - 1) / delay_ms);
	if (request) {
		request->s.resends_max = budget;
	} else if (omx__ep_live(ep)) {
		ep->resends_max = budget;
		ep->pull_timeout_ns = ms == 0xFFFFFFFFu ? UINT64_MAX : omx__ms_to_ns(ms);
	}
	return OMX_SUCCESS;
}
