/*
 * shared.c - the core's side of same-host communication (behaviour.md 6.2).
 *
 * Same-host partners (their board is one of ours) exchange the usual frames through the local
 * transport (net/local.c: shared-memory rings, Unix socket fallback), so matching, ordering,
 * acks, NACKs, probe/cancel/truncation semantics are exactly those of the network path. On top:
 *  - messages above OMX_SHARED_RNDV_THRESHOLD use the rendezvous; from OMX_SHARED_SINGLE_COPY_MIN
 *    on the sender exports its buffer description in its ring (per region), and the receiver
 *    copies the data directly with process_vm_readv (single copy) before sending the NOTIFY;
 *    both thresholds measured per machine by default (shm/calib.c, policy_resolve_once);
 *  - below that minimum the sender exports "pull this one", and if the single copy is
 *    impossible (OMX_SHARED_SINGLE_COPY=0, too many segments, EPERM from Yama or different
 *    users, the sender gone) the receiver pulls as over the network, the pull replies
 *    travelling through the ring (two copies), copied out with the copy engine.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "core/counters.h"
#include "omx_shared_alloc.h"
#include "shm/shm.h"

static struct {
	uint64_t single_copies, single_copy_bytes, fallbacks;
	uint64_t pool_copies; /* single copies read from a sender's shared pool (memcpy) */
	uint64_t coop_written_bytes; /* by us, into our receivers' buffers */
	uint64_t pulled; /* rendezvous the sender offered for pulling only (its policy) */
	uint64_t chosen_pulls; /* rendezvous offered for the single copy that we pulled (adaptive) */
	uint64_t live_looks; /* band messages sent eager to time the placement (omx__shared_rndv_for) */
	int denied; /* errno of the first EPERM-like failure: single copy abandoned */
} stats;

/* The machine's copy costs, measured once per process (shm/calib.c). */
static struct omx_copy_calib calib;
static int calib_err = -EAGAIN; /* not measured yet */
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;
/* The boundary follows the placement (omx__shared_rndv_for): measured, and where it matters. */
static int live_on;

void omx__shared_single_copy_text(char *buf, size_t len)
{
	uint32_t min = omx__cfg.shared_single_copy_min;
	if (!omx__cfg.shared_single_copy_min_auto)
		snprintf(buf, len, "single copy from %u B", min);
	else if (min == OMX_SINGLE_COPY_NEVER)
		snprintf(buf, len, "pulls, from %u KiB timed against the single copy", OMX_COPY_ADAPT_MIN >> 10);
	else
		snprintf(buf, len, "single copy from %u B, from %u KiB timed against pulls", min, OMX_COPY_ADAPT_MIN >> 10);
}

static void policy_resolve_once(void)
{
	struct omx_config *c = &omx__cfg;
	if (!c->shared_rndv_auto && !c->shared_single_copy_min_auto)
		return;
	calib_err = omx_copy_calibrate(&calib);
	uint32_t rndv, min;
	omx_copy_policy(&calib, &rndv, &min);
	if (c->shared_rndv_auto) {
		if (rndv < OMX_SMALL_MAX)
			rndv = OMX_SMALL_MAX;
		c->shared_rndv_threshold = rndv < c->shared_medium_cap ? rndv : c->shared_medium_cap;
	}
	if (c->shared_single_copy_min_auto)
		c->shared_single_copy_min = min;
	live_on = c->shared_rndv_auto && c->shared_live && !calib_err && omx_copy_live_useful(&calib);
	char from[96];
	omx__shared_single_copy_text(from, sizeof(from));
	omx__verbose("same-host policy: process_vm_readv %.0f ns + %.1f ns/KiB, memcpy %.1f ns/KiB, two copies "
		     "between CPUs %.1f ns/KiB%s%s: rendezvous above %u B, %s%s\n",
		     calib.cma_fixed_ns, calib.cma_ns_per_kib, calib.memcpy_ns_per_kib, calib.cross_ns_per_kib,
		     calib.cross_missed ? " (the other CPU too busy: guessed from memcpy)" : "",
		     calib_err ? " (not measured)" : "", c->shared_rndv_threshold, from,
		     live_on ? "; from 4 to 128 KiB the boundary follows the receivers' copies of the moment" : "");
}

void omx__shared_policy_resolve(void)
{
	(void)pthread_once(&policy_once, policy_resolve_once);
}

/* ---- the eager/rendezvous boundary of the moment (shm.h, omx_copy_live) ---- */

uint32_t omx__shared_rndv_for(struct omx_endpoint *ep, struct omx_partner *p, uint32_t len)
{
	const struct omx_config *c = &omx__cfg;
	if (!live_on || len <= OMX_COPY_LIVE_LO || len > OMX_COPY_LIVE_HI || !ep->local)
		return c->shared_rndv_threshold;
	struct omx_copy_live *l = &p->copy_live;
	struct omx_shm_ring *ring = omx_net_local_peer_ring_routed(ep->local, &p->route, p->mac, p->endpoint_index);
	omx_copy_live_policy(l, &calib, ring ? omx_shm_ring_copy_out(ring) : 0);
	uint32_t t = l->rndv < OMX_SMALL_MAX ? OMX_SMALL_MAX : l->rndv;
	if (t > c->shared_medium_cap)
		t = c->shared_medium_cap;
	/* A rendezvous sends no medium that could tell the placement moved: one in a while goes
	 * eager, to be timed (at most one every OMX_COPY_LIVE_STALE_NS, a few per second). */
	uint64_t now = ep->now_ns;
	if (len > t && len <= c->shared_medium_cap && now - l->eager_at_ns >= OMX_COPY_LIVE_STALE_NS &&
	    now - l->looked_at_ns >= OMX_COPY_LIVE_STALE_NS) {
		l->looked_at_ns = now;
		__atomic_fetch_add(&stats.live_looks, 1, __ATOMIC_RELAXED);
		return len;
	}
	return t;
}

uint64_t omx__shared_live_looks(void)
{
	return __atomic_load_n(&stats.live_looks, __ATOMIC_RELAXED);
}

uint32_t omx__shared_single_copy_min_for(struct omx_partner *p)
{
	const struct omx_config *c = &omx__cfg;
	return live_on && c->shared_single_copy_min_auto && p->copy_live.made ? p->copy_live.single_min :
										  c->shared_single_copy_min;
}

void omx__shared_medium_sent(struct omx_endpoint *ep, struct omx_partner *p, uint32_t len)
{
	if (len >= OMX_COPY_LIVE_MIN)
		p->copy_live.eager_at_ns = ep->now_ns;
}

uint64_t omx__shared_copy_out_timing(struct omx_endpoint *ep, uint32_t n)
{
	if (!live_on || n < OMX_COPY_LIVE_MIN || !ep->own_ring || ep->now_ns - ep->copy_out.at_ns < OMX_COPY_LIVE_EVERY_NS)
		return 0;
	return omx_now_ns();
}

void omx__shared_copy_out_done(struct omx_endpoint *ep, uint32_t n, uint64_t start)
{
	uint64_t end = omx_now_ns();
	ep->copy_out_ns_kib = omx_copy_live_out_add(&ep->copy_out, n, end - start, ep->now_ns);
	omx_shm_ring_set_copy_out(ep->own_ring, ep->copy_out_ns_kib);
}

uint16_t omx__shared_send_window(struct omx_endpoint *ep)
{
	struct omx_shm_ring *own = ep->local ? omx_net_local_own_ring(ep->local) : NULL;
	if (!own)
		return 0;
	/* Our ring's slot count, as the partners' rings have (they run our configuration). */
	uint32_t slots = omx_shm_ring_slots(own);
	return (uint16_t)(slots < 16 ? 16 : slots > OMX_THROTTLE_WINDOW ? OMX_THROTTLE_WINDOW : slots);
}

int omx__partner_shared(const struct omx_partner *p)
{
	struct omx_endpoint *ep = p->ep;
	if (!ep->local || !omx_net_local_own_ring(ep->local))
		return 0;
	struct omx_peer *peer = omx__peer(p->peer_index);
	return peer && peer->local_board >= 0;
}

/* The chunks of a cooperative single copy of len bytes (0: none): a quarter of the message, at
 * least 64 KiB and at most OMX_SHARED_COOP_CHUNK; below 128 KiB, halves, from 32 KiB messages on.
 * Each chunk is a process_vm_readv/writev call (~1.3 us to enter on the AMD VM), so small chunks
 * are dear on large messages (1 MiB in 64 KiB chunks: 75 us, in 256 KiB: 60), and large ones
 * leave one side idle at the end on small messages (256 KiB: 27 us in 64 KiB chunks, 39 without
 * cooperation). Halves of 64 KiB took 0.87x the time of one call far apart (stop 63); of 32 and
 * 48 KiB 0.93x and 0.86x once the sender's permission check no longer cost it ~2 us per message
 * (may_help), of 16 KiB 1.02x (stop 64, docs/performance.md). */
#define COOP_HALVES_FROM (32u << 10)

static uint32_t coop_chunk(uint64_t len)
{
	uint32_t max = omx__cfg.shared_coop_chunk, min = max < (64u << 10) ? max : 64u << 10;
	uint64_t c = len / 4 < min ? min : len / 4 > max ? max : len / 4;
	if (len < 2 * c && len >= COOP_HALVES_FROM && len / 2 <= max)
		c = len / 2;
	return max && len >= 2 * c ? (uint32_t)c : 0;
}

/* The chunks this receiver asks for now. Below COOP_FAR_ONLY_BELOW, none while its copies out
 * of the ring (OMX_SHARED_LIVE's figure, 16ths of ns/KiB; 0 when not timed) say the two CPUs
 * are near: on two cores a 128 KiB message took 0.61 of vader-cma's time with the sender's
 * prompt help against 0.54 alone, on one core's two threads 0.59 against 0.58; far apart the
 * help took it from 1.05 to 0.81 (stop 63; near, the figures read 35-61 ns/KiB, far 100-150). */
#define COOP_FAR_ONLY_BELOW (256u << 10)
#define COOP_FAR_FROM_NS_KIB16 (80u * 16u)

static uint32_t coop_chunk_now(const struct omx_endpoint *ep, uint64_t len)
{
	if (len < COOP_FAR_ONLY_BELOW && ep->copy_out_ns_kib && ep->copy_out_ns_kib < COOP_FAR_FROM_NS_KIB16)
		return 0;
	return coop_chunk(len);
}

/* Our exports whose receivers may ask for our help: one bit a region, and their count. */
static int coop_marked(const struct omx_endpoint *ep, int region)
{
	return (ep->coop_mask[region / 64] >> (region % 64)) & 1;
}

static void coop_mark(struct omx_endpoint *ep, int region, int on)
{
	if (coop_marked(ep, region) == on)
		return;
	ep->coop_mask[region / 64] ^= 1ull << (region % 64);
	if (on)
		ep->coop_exports++;
	else
		ep->coop_exports--;
}

#define PULL_REPLY_PAYS 8192u

/*
 * Does the receiver choose this rendezvous' way from what each took (OMX_SHARED_SINGLE_COPY_MIN
 * auto)? From 1 MiB only. Its clock sees the transfer, not what each way leaves behind: after a
 * single copy the sender's next writes to its buffer must take back the lines the receiver read
 * (pulls read them on the sender's own core), and a pull tried among single copies finds the ring
 * out of the caches. Measured over huge pages (AMD VM, stop 29): at 256 KiB the receiver timed
 * single copies at 6.5 us and pulls at 13, yet the ping-pong took 12.2 us copying once and 9.2
 * pulling (far apart 30.6 against 15.6); from 1 MiB the copy itself dominates and the timed
 * choice matched the ping-pongs (1 MiB near: pulls 34 us against 50 copied once over small pages,
 * single copies 27 against 36 pulled over huge pages).
 */
static int adapted(uint32_t len)
{
	return omx__cfg.shared_single_copy_min_auto && len >= OMX_COPY_ADAPT_MIN;
}

/* Our buffer of a large single copy (the sender's it reads, the receiver's the sender writes
 * into when it helps): used often enough, it is moved to huge pages (shm/huge.c). */
static void huge_use(struct omx_endpoint *ep, const struct iovec *iov, unsigned n, uint64_t len)
{
	uint64_t collapsed = omx_shm_huge_use(iov, n, len);
	if (collapsed)
		omx__count_add(ep->board, OMX_C_X_HUGE_COLLAPSED_BYTES, collapsed);
}

/* ---- shared buffers (shm/pool.c) ---- */

#define POOL_HEAD_MAX 64u /* the largest first segment pool_head copies into the pool */

/* A small first segment before segments all in our pool (what pool_head can make pooled). */
static int small_head_then_pooled(const struct iovec *iov, unsigned n)
{
	return n >= 2 && iov[0].iov_len <= POOL_HEAD_MAX && omx_shm_pool_contains(iov + 1, n - 1) != 0;
}

int omx__shared_pooled(const omx_seg_t *segs, uint32_t nseg)
{
	struct iovec iov[OMX_SHM_EXPORT_SEGS];
	if (!nseg || nseg > OMX_SHM_EXPORT_SEGS)
		return 0;
	for (uint32_t i = 0; i < nseg; i++) {
		iov[i].iov_base = segs[i].ptr;
		iov[i].iov_len = segs[i].len;
	}
	/* or a small head before pooled segments (pool_head below copies it into the pool) */
	return omx_shm_pool_contains(iov, nseg) != 0 || small_head_then_pooled(iov, nseg);
}

void *omx_shared_alloc(size_t length)
{
	/* No library lock here: the shared heap calls this from the library's own mallocs. The
	 * reservation matters only at the first call (the pool's creation). */
	int err;
	void *p = omx_shm_pool_alloc(length, omx__config_shared_pool_bytes(), &err);
	if (!p)
		omx__verbose("omx_shared_alloc(%zu): %s\n", length, strerror(-err));
	return p;
}

omx_return_t omx_shared_free(void *ptr)
{
	if (!ptr)
		return OMX_SUCCESS;
	return omx_shm_pool_free(ptr) == 0 ? OMX_SUCCESS : OMX_BAD_ERROR;
}

size_t omx_shared_size(const void *ptr)
{
	return ptr ? omx_shm_pool_size(ptr) : 0;
}

/* Slot i of ep->pool_heads (POOL_HEAD_MAX bytes in our pool), made at the first use: one per
 * region for sends (pool_head), and RECV_HEAD_SLOT for the receive being copied (single copies
 * run one at a time, under the endpoint's lock). NULL if the pool refuses. */
#define RECV_HEAD_SLOT OMX_REGION_MAX
static uint8_t *pool_head_slot(struct omx_endpoint *ep, int i)
{
	if (!ep->pool_heads) {
		int err;
		ep->pool_heads =
			omx_shm_pool_alloc((OMX_REGION_MAX + 1) * POOL_HEAD_MAX, omx__config_shared_pool_bytes(), &err);
		if (!ep->pool_heads)
			return NULL;
	}
	return ep->pool_heads + (size_t)i * POOL_HEAD_MAX;
}

/* A small first segment outside the pool before pooled ones (the header a libfabric provider puts
 * before each message, ofi/ofx_send.c): exported as its copy in the region's slot of
 * ep->pool_heads, so that the receiver reads the message from the pool alone. The copy stays
 * right: a send's segments must not change until it completes, and the region is ours until
 * then. Whether the export is pooled now. */
static int pool_head(struct omx_endpoint *ep, int region, struct iovec *iov, unsigned n)
{
	if (omx_shm_pool_contains(iov, n))
		return 1;
	if (region < 0 || region >= OMX_REGION_MAX || !small_head_then_pooled(iov, n))
		return 0;
	uint8_t *slot = pool_head_slot(ep, region);
	if (!slot)
		return 0;
	memcpy(slot, iov[0].iov_base, iov[0].iov_len);
	iov[0].iov_base = slot;
	return 1;
}

void omx__shared_endpoint_free(struct omx_endpoint *ep)
{
	if (ep->pool_heads)
		(void)omx_shm_pool_free(ep->pool_heads);
	ep->pool_heads = NULL;
}

int omx__shared_export(union omx_request *r)
{
	struct omx_endpoint *ep = r->s.ep;
	if (!omx__partner_shared(r->s.partner))
		return 0;
	/* Pulls through the rings are cheaper than the single copy below the measured minimum only
	 * with replies of at least 8 KiB (MTU 1500 pulls took 12.8 against 8.9 us at 64 KiB on the
	 * AMD VM when same-host replies had the interface's size; since stop 28 they carry 32 KiB
	 * in the extended mode whatever the MTU, wire.c). Where the receiver chooses from what each
	 * way took (adapted()), offer both. */
	struct iovec iov[OMX_SHM_EXPORT_SEGS];
	unsigned n = r->s.nseg <= OMX_SHM_EXPORT_SEGS ? r->s.nseg : 0;
	for (unsigned i = 0; i < n; i++) {
		iov[i].iov_base = r->s.segs[i].ptr;
		iov[i].iov_len = r->s.segs[i].len;
	}
	int pooled = pool_head(ep, r->s.u.send.region, iov, n);
	int pull_pays = !pooled && !adapted(r->s.total_len) && r->s.total_len < omx__shared_single_copy_min_for(r->s.partner) &&
			ep->wp_local.pull_reply_max >= PULL_REPLY_PAYS;
	if (!omx__cfg.shared_single_copy || pull_pays) {
		/* Single copy off, or dearer than pulling here: say so, the receiver pulls without
		 * trying. */
		(void)omx_shm_export(omx_net_local_own_ring(ep->local), (uint8_t)r->s.u.send.region,
				     r->s.u.send.region_seqnum, NULL, 0, r->s.total_len);
		return 0;
	}
	/* More segments than an export holds: exported as invalid, the receiver pulls. */
	int region = r->s.u.send.region;
	int e = omx_shm_export(omx_net_local_own_ring(ep->local), (uint8_t)region, r->s.u.send.region_seqnum, iov,
			       n ? n : OMX_SHM_EXPORT_SEGS + 1, r->s.total_len);
	int single = e == 0 && n > 0 && (pooled || !__atomic_load_n(&stats.denied, __ATOMIC_RELAXED));
	if (single && !pooled)
		huge_use(ep, iov, n, r->s.total_len);
	/* Its receiver may ask us to copy part of it (omx__shared_coop_serve): a pooled buffer's
	 * receiver asks when its own buffer is pooled too (both sides then use memcpy). */
	if (single && coop_chunk(r->s.total_len))
		coop_mark(ep, region, 1);
	return single;
}

void omx__shared_unexport(struct omx_endpoint *ep, int region)
{
	struct omx_shm_ring *own = ep->local ? omx_net_local_own_ring(ep->local) : NULL;
	if (own && region >= 0 && region < OMX_REGION_MAX)
		omx_shm_unexport(own, (uint8_t)region);
	if (region >= 0 && region < OMX_REGION_MAX)
		coop_mark(ep, region, 0);
}

/* From progression, while some of our large sends are exported for single copy: write our part
 * of those whose receivers opened them for cooperation (shm/export.c), then forget them. */
void omx__shared_coop_serve(struct omx_endpoint *ep)
{
	struct omx_shm_ring *own = omx_net_local_own_ring(ep->local);
	uint64_t written = 0;
	for (int w = 0; w < OMX_REGION_MAX / 64 && ep->coop_exports; w++) {
		for (uint64_t bits = ep->coop_mask[w]; bits; bits &= bits - 1) {
			int region = w * 64 + __builtin_ctzll(bits);
			union omx_request *r = ep->regions[region].req;
			uint32_t chunk = r ? coop_chunk(r->s.total_len) : 0;
			if (omx_shm_coop_serve(own, (uint8_t)region, chunk, &written))
				coop_mark(ep, region, 0);
		}
	}
	if (written) {
		__atomic_fetch_add(&stats.coop_written_bytes, written, __ATOMIC_RELAXED);
		omx__count_add(ep->board, OMX_C_X_COOP_WRITTEN_BYTES, written);
	}
}

int omx__shared_single_copy(union omx_request *r)
{
	struct omx_endpoint *ep = r->s.ep;
	struct omx_partner *p = r->s.partner;
	if (!omx__cfg.shared_single_copy || !omx__partner_shared(p))
		return 0;
	struct omx_shm_ring *peer = omx_net_local_peer_ring_routed(ep->local, &p->route, p->mac, p->endpoint_index);
	if (!peer)
		return 0;
	/* A buffer of the sender's shared pool: one memcpy, always the cheaper way, alone, and
	 * needing no permission to read another process's memory. */
	int pooled = omx_shm_export_pooled(peer, r->s.u.recv.rdma_id, r->s.u.recv.rdma_seqnum);
	if (!pooled && __atomic_load_n(&stats.denied, __ATOMIC_RELAXED))
		return 0;
	uint32_t X = r->s.status.xfer_length;
	struct iovec stack[8], *iov = r->s.nseg <= 8 ? stack : malloc(r->s.nseg * sizeof(*iov));
	if (!iov)
		return 0;
	for (uint32_t i = 0; i < r->s.nseg; i++) {
		iov[i].iov_base = r->s.segs[i].ptr;
		iov[i].iov_len = r->s.segs[i].len;
	}
	/* Counted whichever way this one takes: the choice below times the single copy, whose
	 * sender writes into this buffer too, against pulls. */
	if (!pooled)
		huge_use(ep, iov, r->s.nseg, X);
	int adaptive = !pooled && adapted(X);
	if (adaptive && !omx_copy_choice_single(&p->copy_choice, X, X >= omx__cfg.shared_single_copy_min)) {
		__atomic_fetch_add(&stats.chosen_pulls, 1, __ATOMIC_RELAXED);
		if (iov != stack)
			free(iov);
		return 0;
	}
	/* A pooled message into a small head (the provider's header) before pooled segments: the head
	 * goes through a slot of our pool, so that the sender can write its share of the message
	 * into our buffer (it does only into our pool; before, the receiver copied it all alone). */
	uint8_t *head = NULL, *head_slot = NULL;
	uint32_t head_len = 0;
	if (pooled && !omx_shm_pool_contains(iov, r->s.nseg) && small_head_then_pooled(iov, r->s.nseg) &&
	    (head_slot = pool_head_slot(ep, RECV_HEAD_SLOT))) {
		head = iov[0].iov_base;
		head_len = (uint32_t)iov[0].iov_len < X ? (uint32_t)iov[0].iov_len : X;
		iov[0].iov_base = head_slot;
	}
	uint64_t start = adaptive ? omx_now_ns() : 0;
	int e = omx_shm_single_copy(peer, r->s.u.recv.rdma_id, r->s.u.recv.rdma_seqnum, iov, r->s.nseg, X,
				    coop_chunk_now(ep, X));
	if (head && (e == 0 || e == 1))
		memcpy(head, head_slot, head_len);
	if (iov != stack)
		free(iov);
	if (e == 1) { /* from the sender's pool */
		__atomic_fetch_add(&stats.pool_copies, 1, __ATOMIC_RELAXED);
		omx__count_add(ep->board, OMX_C_X_POOL_COPY_BYTES, X);
	}
	if (e == 0 || e == 1) {
		if (adaptive)
			omx_copy_choice_record(&p->copy_choice, X, 1, omx_now_ns() - start);
		__atomic_fetch_add(&stats.single_copies, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&stats.single_copy_bytes, X, __ATOMIC_RELAXED);
		omx__count_add(ep->board, OMX_C_X_SINGLE_COPY_BYTES, X);
		return 1;
	}
	if (e == -ENODATA) { /* the sender's choice (or more segments than an export holds) */
		__atomic_fetch_add(&stats.pulled, 1, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_fetch_add(&stats.fallbacks, 1, __ATOMIC_RELAXED);
	if (e == -EPERM || e == -EACCES || e == -ENOSYS) {
		int zero = 0;
		if (__atomic_compare_exchange_n(&stats.denied, &zero, -e, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			omx__verbose("single copy from pid of endpoint %u denied (%s): pulling through shared memory from now on\n",
				     p->endpoint_index, strerror(-e));
	} else {
		omx__verbose("single copy failed (%s): pulling instead\n", strerror(-e));
	}
	return 0;
}

void omx__shared_pulled(struct omx_partner *p, uint32_t len, uint64_t start_ns)
{
	if (adapted(len) && omx__partner_shared(p))
		omx_copy_choice_record(&p->copy_choice, len, 0, omx_now_ns() - start_ns);
}

/* Can another process read us with process_vm_readv? A child (not our descendant, the case of
 * two independent processes under Yama) reads a word of ours. 0 or the errno it got. */
static int probe_single_copy(void)
{
	static volatile uint64_t word = 0x0123456789abcdefull;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		uint64_t got = 0;
		struct iovec l = { &got, sizeof(got) }, r = { (void *)&word, sizeof(word) };
		ssize_t n = process_vm_readv(parent, &l, 1, &r, 1, 0);
		_exit(n == (ssize_t)sizeof(got) && got == 0x0123456789abcdefull ? 0 : n < 0 ? (errno & 0x7f) : 0x7f);
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status))
		return EINTR;
	return WEXITSTATUS(status) == 0x7f ? EIO : WEXITSTATUS(status);
}

/* One line for omx_info: which same-host mode is in force for endpoints this process opens
 * (probes process_vm_readv between two processes with a fork: call it from tools, not from
 * the middle of an application). */
int omx__shared_mode_string(char *buf, size_t len)
{
	char cfg[768];
	const char *hw = omx_copy_hw_engine();
	if (!omx__cfg.loaded)
		omx__config_load_open();
	if (omx__cfg.shared_disabled)
		return snprintf(buf, len, "Shared communication: disabled (OMX_DISABLE_SHARED): same-host frames over Unix sockets");
	omx__shared_policy_resolve();
	int yama = omx_shm_yama_scope();
	int denied = __atomic_load_n(&stats.denied, __ATOMIC_RELAXED);
	if (!denied && omx__cfg.shared_single_copy)
		denied = probe_single_copy();
	char measured[200] = "";
	if (!calib_err)
		snprintf(measured, sizeof(measured),
			 " (measured here: process_vm_readv %.0f ns + %.0f ns/KiB, memcpy %.0f ns/KiB, two copies between CPUs "
			 "%.0f ns/KiB%s)",
			 calib.cma_fixed_ns, calib.cma_ns_per_kib, calib.memcpy_ns_per_kib, calib.cross_ns_per_kib,
			 calib.cross_missed ? ", the other CPU too busy to measure: guessed" : "");
	char coop[64] = ", senders do not help (OMX_SHARED_COOP_CHUNK=0)";
	if (omx__cfg.shared_coop_chunk)
		snprintf(coop, sizeof(coop), ", senders help in chunks of up to %u KiB", omx__cfg.shared_coop_chunk >> 10);
	char from[96], huge[96] = ", buffers stay in their pages (OMX_SHARED_HUGE_AFTER=0)";
	omx__shared_single_copy_text(from, sizeof(from));
	uint64_t hbytes, hfailed;
	int hoff;
	omx_shm_huge_stats(&hbytes, &hfailed, &hoff);
	if (omx_shm_huge_after() && hoff)
		snprintf(huge, sizeof(huge), ", buffers stay in their pages (transparent huge pages off)");
	else if (omx_shm_huge_after())
		snprintf(huge, sizeof(huge), ", buffers of 1 MiB+ moved to huge pages at their use %u", omx_shm_huge_after());
	snprintf(cfg, sizeof(cfg),
		 "rndv above %u B%s, %s%s%s%s, non-temporal copies from %llu B%s%s%s; ring slots taken by %s; "
		 "buffers from omx_shared_alloc "
		 "(up to %llu MiB) read with memcpy from %u B",
		 omx__cfg.shared_rndv_threshold,
		 live_on ? " (auto; from 4 to 128 KiB per partner, from the eager mediums' times of the moment)" :
		 omx__cfg.shared_rndv_auto ? " (auto)" : "", from, measured, coop, huge,
		 (unsigned long long)omx_copy_nt_threshold(), omx_copy_nt_available() ? "" : " (unavailable)",
		 *hw ? ", " : "", hw, omx_shm_own_lines() ? "empty-mask stores" : "PREFETCHW",
		 (unsigned long long)(omx__cfg.shared_pool_bytes >> 20), omx__cfg.shared_pool_rndv);
	if (!omx__cfg.shared_single_copy)
		return snprintf(buf, len, "Shared communication: shared-memory rings, two-copy large messages "
					  "(OMX_SHARED_SINGLE_COPY=0); %s", cfg);
	if (denied) {
		char why[64] = "";
		if (yama > 0)
			snprintf(why, sizeof(why), ", Yama ptrace_scope=%d", yama);
		return snprintf(buf, len, "Shared communication: shared-memory rings, two-copy large messages "
					  "(process_vm_readv between processes refused: %s%s); %s", strerror(denied), why, cfg);
	}
	return snprintf(buf, len, "Shared communication: shared-memory rings, %s%s; %s",
			omx__cfg.shared_single_copy_min_auto ?
				"single-copy large messages (process_vm_readv) or pulls through the rings, "
				"whichever each receiver times faster" :
				"single-copy large messages (process_vm_readv)",
			yama == 1 ? ", two-copy fallback for peers Yama ptrace_scope=1 protects" : "", cfg);
}

void omx__shared_stats(uint64_t *single_copies, uint64_t *bytes, uint64_t *fallbacks, uint64_t *pulled,
			uint64_t *coop_written, uint64_t *chosen_pulls)
{
	*chosen_pulls = __atomic_load_n(&stats.chosen_pulls, __ATOMIC_RELAXED);
	*coop_written = __atomic_load_n(&stats.coop_written_bytes, __ATOMIC_RELAXED);
	*pulled = __atomic_load_n(&stats.pulled, __ATOMIC_RELAXED);
	*single_copies = __atomic_load_n(&stats.single_copies, __ATOMIC_RELAXED);
	*bytes = __atomic_load_n(&stats.single_copy_bytes, __ATOMIC_RELAXED);
	*fallbacks = __atomic_load_n(&stats.fallbacks, __ATOMIC_RELAXED);
}

uint64_t omx__shared_pool_copies(void)
{
	return __atomic_load_n(&stats.pool_copies, __ATOMIC_RELAXED);
}

/* Two waits no timer ends, when the partner is an endpoint of this host: a large send acked on
 * its RNDV waits for the NOTIFY as long as the receiver takes to match it, and a medium partly
 * received waits for its remaining fragments (a sender whose ring push failed sends them again
 * only from its retransmission timer). A remote partner is probed for these (connect.c); on this
 * host we can tell directly, from its ring and socket, whether the endpoint instance we know is
 * gone: everything waiting for it then fails with REMOTE_ENDPOINT_CLOSED (checked every 100 ms
 * while something waits). */
void omx__shared_check_partners(struct omx_endpoint *ep, uint64_t now)
{
	ep->next_shared_check = now + 100000000ull;
	for (uint32_t i = 0; i < omx__g.peer_count; i++) {
		struct omx_peer *peer = omx__peer(i);
		if (!peer || peer->local_board < 0 || !ep->partners[i])
			continue;
		for (uint32_t e = 0; e < omx__cfg.endpoint_max; e++) {
			struct omx_partner *p = ep->partners[i][e];
			if (!p || p->is_self || (omx_list_empty(&p->need_notify) && omx_list_empty(&p->partial_recvs)))
				continue;
			/* A receive-only partner (it connected to us, we never to it) has only back_session. */
			uint32_t session = p->true_session != OMX_SESSION_UNKNOWN ? p->true_session : p->back_session;
			if (session == OMX_SESSION_UNKNOWN || !omx_net_local_peer_gone(ep->local, p->mac, p->endpoint_index, session))
				continue;
			omx__verbose("same-host endpoint %u (session %08x) is gone: failing what waits for it\n",
				     p->endpoint_index, session);
			omx__count(ep->board, OMX_C_X_SHARED_PARTNER_GONE);
			omx__partner_reset(p, OMX_REMOTE_ENDPOINT_CLOSED, OMX_RESET_NEW_SESNUM);
		}
	}
}
