/*
 * export.c - exports and the single copy (see shm.h): a sender describes the buffer of a
 * rendezvous region in its ring, and a same-host receiver copies it with process_vm_readv.
 *
 * Cooperative single copy: one process_vm_readv leaves the sender's CPU idle, waiting for the
 * NOTIFY, while the receiver's copies the whole message (8 MiB: ~1.2 ms on the AMD VM). So for
 * large messages the receiver opens the export for cooperation: it publishes its own buffer
 * next to the sender's, and both claim chunks of the message from a shared window, the receiver
 * from the front (process_vm_readv), the sender from the back (process_vm_writev, from its
 * progression), until they meet. Two CPUs copy at once: 8 MiB took ~0.6 ms instead of 1.2 in a
 * two-process test on that VM, near or far apart. A sender that never looks (computing, asleep)
 * costs the receiver only its chunks' extra calls: it claims and copies everything itself. The
 * receiver returns only once the sender is done with every chunk it claimed (so its buffer is
 * never written after the receive completes), and redoes them if any of its writes failed.
 *
 * The receiver names the process the sender writes into. Ring files are private to their user
 * (0600), so only a process of the sender's user (or root) can name one; the sender still writes
 * only into a process of its own effective user (/proc/<pid>), and not at all under Yama's
 * ptrace_scope 1 or more unless it is root: there a process of the same user may not write into
 * another's memory, and must not get the sender to do it for it. A receive buffer in the
 * receiver's shared pool (pool.c) is the exception: its file is the receiver's, 0600, which any
 * process of that user may write anyway; the sender writes there with memcpy, and a receiver
 * reading a pooled export reads it with memcpy too (read_range).
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm/ring_layout.h"

int omx_shm_export(struct omx_shm_ring *own, uint8_t id, uint8_t seqnum, const struct iovec *segs, unsigned nseg,
		   uint64_t total)
{
	struct export_ent *e = &own->h->exports[id];
	uint32_t g = __atomic_load_n(&e->gen, __ATOMIC_RELAXED) & ~1u;
	__atomic_store_n(&e->gen, g + 1u, __ATOMIC_RELAXED);
	int ok = segs && nseg <= OMX_SHM_EXPORT_SEGS;
	/* A buffer of our shared pool: the receiver may read it from the pool's file (pool.c). */
	uint32_t pool_id = ok ? omx_shm_pool_contains(segs, nseg) : 0;
	if (pool_id && __atomic_load_n(&own->h->pool_id, __ATOMIC_RELAXED) != pool_id)
		__atomic_store_n(&own->h->pool_id, pool_id, __ATOMIC_RELEASE);
	__atomic_store_n(&e->valid, !ok ? 0u : pool_id ? EXPORT_POOLED : 1u, __ATOMIC_RELEASE);
	/* Invalid entries name their use too: the receiver tells "pull this one" from a stale entry. */
	__atomic_store_n(&e->seqnum, seqnum, __ATOMIC_RELEASE);
	if (ok) {
		__atomic_store_n(&e->pid, own->pid, __ATOMIC_RELEASE); /* cached: no system call per export */
		int cpu = sched_getcpu(); /* glibc reads it from rseq: no system call either */
		__atomic_store_n(&e->cpu, cpu >= 0 ? (uint32_t)cpu + 1u : 0u, __ATOMIC_RELEASE);
		__atomic_store_n(&e->nseg, nseg, __ATOMIC_RELEASE);
		__atomic_store_n(&e->total, total, __ATOMIC_RELEASE);
		for (unsigned i = 0; i < nseg; i++) {
			__atomic_store_n(&e->seg[i][0], (uint64_t)(uintptr_t)segs[i].iov_base, __ATOMIC_RELEASE);
			__atomic_store_n(&e->seg[i][1], (uint64_t)segs[i].iov_len, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&e->window, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&e->sender_done, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&e->sender_err, 0, __ATOMIC_RELAXED);
	}
	/* Published with the entry (before the RNDV that names it leaves). */
	__atomic_store_n(&e->coop, ok ? (uint32_t)seqnum << 8 | COOP_IDLE : COOP_NONE, __ATOMIC_RELEASE);
	__atomic_store_n(&e->gen, g + 2u, __ATOMIC_RELEASE);
	return ok ? 0 : -E2BIG;
}

void omx_shm_unexport(struct omx_shm_ring *own, uint8_t id)
{
	struct export_ent *e = &own->h->exports[id];
	uint32_t g = __atomic_load_n(&e->gen, __ATOMIC_RELAXED) & ~1u;
	__atomic_store_n(&e->gen, g + 1u, __ATOMIC_RELAXED);
	__atomic_store_n(&e->valid, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&e->seqnum, UINT32_MAX, __ATOMIC_RELEASE); /* names no use: -ENOENT, not "pull" */
	__atomic_store_n(&e->coop, COOP_NONE, __ATOMIC_RELEASE);
	__atomic_store_n(&e->gen, g + 2u, __ATOMIC_RELEASE);
}

/* ---- copying a byte range of a message between two segment lists ---- */

#define CMA_IOV 64

/* Move the cursor (segment *i, offset *o) of v forward by `by` bytes. */
static void iov_advance(const struct iovec *v, unsigned n, unsigned *i, size_t *o, uint64_t by)
{
	while (by && *i < n) {
		size_t left = v[*i].iov_len - *o;
		if (left > by) {
			*o += (size_t)by;
			return;
		}
		by -= left;
		(*i)++;
		*o = 0;
	}
}

/* Up to max iovecs of v from the cursor, at most `want` bytes in all (their sum in *sum). */
static unsigned iov_take(const struct iovec *v, unsigned n, unsigned i, size_t o, uint64_t want, struct iovec *out,
			 unsigned max, uint64_t *sum)
{
	unsigned k = 0;
	*sum = 0;
	for (; i < n && k < max && *sum < want; i++, o = 0) {
		size_t len = v[i].iov_len - o;
		if (len > want - *sum)
			len = (size_t)(want - *sum);
		if (!len)
			continue;
		out[k].iov_base = (uint8_t *)v[i].iov_base + o;
		out[k++].iov_len = len;
		*sum += len;
	}
	return k;
}

/*
 * Copy bytes [off, off + len) of a message between `mine` (our memory) and `theirs` (pid's), two
 * descriptions of the same message from its byte 0: process_vm_readv into mine, or with `write`
 * process_vm_writev from mine. CMA_IOV iovecs a call, advancing by what each call moved.
 * 0 or -errno.
 */
/* One process_vm_readv (or with `write` process_vm_writev), again on EINTR: bytes moved, or
 * -errno (-EFAULT for a call that moved nothing). */
static ssize_t cma_call(pid_t pid, const struct iovec *l, unsigned nl, const struct iovec *r, unsigned nr, int write)
{
	for (;;) {
		ssize_t got = write ? process_vm_writev(pid, l, nl, r, nr, 0) : process_vm_readv(pid, l, nl, r, nr, 0);
		if (got > 0)
			return got;
		if (got == 0)
			return -EFAULT;
		if (errno != EINTR)
			return -errno;
	}
}

static int cma_range(pid_t pid, const struct iovec *mine, unsigned nmine, const struct iovec *theirs,
		     unsigned ntheirs, uint64_t off, uint64_t len, int write)
{
	if (nmine == 1 && ntheirs == 1) { /* one buffer each side (most messages): no cursors */
		if (off + len > mine[0].iov_len || off + len > theirs[0].iov_len)
			return -EFAULT;
		for (uint64_t done = 0; done < len;) {
			struct iovec l = { (uint8_t *)mine[0].iov_base + off + done, (size_t)(len - done) };
			struct iovec r = { (uint8_t *)theirs[0].iov_base + off + done, (size_t)(len - done) };
			ssize_t got = cma_call(pid, &l, 1, &r, 1, write);
			if (got < 0)
				return (int)got;
			done += (uint64_t)got;
		}
		return 0;
	}
	unsigned li = 0, ri = 0;
	size_t lo = 0, ro = 0;
	iov_advance(mine, nmine, &li, &lo, off);
	iov_advance(theirs, ntheirs, &ri, &ro, off);
	for (uint64_t done = 0; done < len;) {
		struct iovec lv[CMA_IOV], rv[CMA_IOV];
		uint64_t lsum, rsum;
		unsigned nl = iov_take(mine, nmine, li, lo, len - done, lv, CMA_IOV, &lsum);
		unsigned nr = iov_take(theirs, ntheirs, ri, ro, lsum, rv, CMA_IOV, &rsum);
		if (!nl || !nr)
			return -EFAULT;
		ssize_t got = cma_call(pid, lv, nl, rv, nr, write);
		if (got < 0)
			return (int)got;
		done += (uint64_t)got;
		iov_advance(mine, nmine, &li, &lo, (uint64_t)got);
		iov_advance(theirs, ntheirs, &ri, &ro, (uint64_t)got);
	}
	return 0;
}

/* n (address, length) pairs of an export entry as iovecs. */
static void load_segs(uint64_t (*s)[2], unsigned n, struct iovec *v)
{
	for (unsigned i = 0; i < n; i++) {
		v[i].iov_base = (void *)(uintptr_t)__atomic_load_n(&s[i][0], __ATOMIC_ACQUIRE);
		v[i].iov_len = (size_t)__atomic_load_n(&s[i][1], __ATOMIC_ACQUIRE);
	}
}

static uint64_t iov_sum(const struct iovec *v, unsigned n)
{
	uint64_t s = 0;
	for (unsigned i = 0; i < n; i++)
		s += v[i].iov_len;
	return s;
}

/* ---- the window of a cooperative copy ---- */

/* Claim up to `chunk` unclaimed bytes, from the front or from the back. 0 when none are left,
 * else the claimed length, its first byte in *at. */
static uint64_t claim(struct export_ent *e, uint64_t chunk, int back, uint64_t *at)
{
	uint64_t w = __atomic_load_n(&e->window, __ATOMIC_ACQUIRE), lo, hi, n;
	do {
		lo = w & 0xffffffffu;
		hi = w >> 32;
		if (lo >= hi)
			return 0;
		n = hi - lo < chunk ? hi - lo : chunk;
	} while (!__atomic_compare_exchange_n(&e->window, &w, back ? lo | (hi - n) << 32 : (lo + n) | hi << 32, 0,
					      __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	*at = back ? hi - n : lo;
	return n;
}

/* Leave nothing to claim; returns where the two sides met (the sender claimed from there on). */
static uint64_t close_window(struct export_ent *e)
{
	uint64_t w = __atomic_load_n(&e->window, __ATOMIC_ACQUIRE), hi;
	do {
		hi = w >> 32;
		if ((w & 0xffffffffu) >= hi)
			return hi;
	} while (!__atomic_compare_exchange_n(&e->window, &w, hi | hi << 32, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	return hi;
}

/* Receiver: open the export (this use of it) for cooperation. 1 if done, 0 if the sender's
 * entry is not in the state for it (another use, another receiver, an old ring). */
static int coop_open(struct export_ent *e, uint8_t seqnum, uint32_t pid, const struct iovec *dst, unsigned ndst,
		     uint64_t len, uint32_t pool)
{
	uint32_t want = (uint32_t)seqnum << 8 | COOP_IDLE;
	if (!__atomic_compare_exchange_n(&e->coop, &want, (uint32_t)seqnum << 8 | COOP_BUSY, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return 0;
	__atomic_store_n(&e->dst_pid, pid, __ATOMIC_RELAXED);
	__atomic_store_n(&e->dst_nseg, ndst, __ATOMIC_RELAXED);
	__atomic_store_n(&e->dst_pool, pool, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < ndst; i++) {
		__atomic_store_n(&e->dst[i][0], (uint64_t)(uintptr_t)dst[i].iov_base, __ATOMIC_RELAXED);
		__atomic_store_n(&e->dst[i][1], (uint64_t)dst[i].iov_len, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&e->window, len << 32, __ATOMIC_RELAXED);
	__atomic_store_n(&e->coop, (uint32_t)seqnum << 8 | COOP_OPEN, __ATOMIC_RELEASE);
	return 1;
}

/* Receiver: wait until the sender is done with the `expect` bytes it claimed (at most the one
 * chunk it is copying when the window closes). -ESRCH if it died in the middle, or closed its
 * endpoint (its ring's lock, dropped at exit: a zombie counts as gone). */
static int wait_sender(struct omx_shm_ring *peer, struct export_ent *e, uint64_t expect)
{
	for (unsigned spins = 0; __atomic_load_n(&e->sender_done, __ATOMIC_ACQUIRE) < expect; spins++) {
		if (spins < 1024u) {
#if defined(__x86_64__)
			__builtin_ia32_pause();
#endif
			continue;
		}
		(void)sched_yield(); /* on a shared CPU it may be the sender's turn */
		if ((spins & 1023u) == 0 && !omx_shm_ring_owner_alive(peer))
			return -ESRCH;
	}
	return 0;
}

/* Where the receiver reads a message from: the sender's memory (process_vm_readv), or its
 * shared pool mapped here (memcpy, pool.c). src: the sender's segments, as our addresses for a
 * pool. */
struct reader {
	pid_t pid;
	int pool;
	const struct iovec *src, *dst;
	unsigned nsrc, ndst;
	uint64_t total;
};

/* Bytes [off, off + len) of the message into dst. 0 or -errno. */
static int read_range(const struct reader *rd, uint64_t off, uint64_t len)
{
	if (rd->pool)
		return omx_shm_pool_copy_range(rd->dst, rd->ndst, rd->src, rd->nsrc, off, len, rd->total) ? -EFAULT : 0;
	return cma_range(rd->pid, rd->dst, rd->ndst, rd->src, rd->nsrc, off, len, 0);
}

/* The receiver's side of a cooperative copy, the export opened: chunks from the front until the
 * two sides meet, then the sender's part awaited (and redone if any of its writes failed). */
static int coop_read(struct omx_shm_ring *peer, struct export_ent *e, const struct reader *rd, uint32_t chunk)
{
	int err = 0;
	uint64_t at, n;
	while (!err && (n = claim(e, chunk, 0, &at)))
		err = read_range(rd, at, n);
	uint64_t met = close_window(e);
	int w = wait_sender(peer, e, rd->total - met);
	if (!err && !w && __atomic_load_n(&e->sender_err, __ATOMIC_ACQUIRE))
		err = read_range(rd, met, rd->total - met); /* its part, ourselves */
	return err ? err : w;
}

int omx_shm_export_pooled(struct omx_shm_ring *peer, uint8_t id, uint8_t seqnum)
{
	struct export_ent *e = &peer->h->exports[id];
	uint32_t g = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
	int pooled = __atomic_load_n(&e->valid, __ATOMIC_ACQUIRE) == EXPORT_POOLED &&
		     __atomic_load_n(&e->seqnum, __ATOMIC_ACQUIRE) == seqnum;
	return !(g & 1u) && pooled && __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) == g;
}

int omx_shm_single_copy(struct omx_shm_ring *peer, uint8_t id, uint8_t seqnum, const struct iovec *dst,
			unsigned ndst, uint64_t len, uint32_t coop_chunk)
{
	struct export_ent *e = &peer->h->exports[id];
	struct iovec src[OMX_SHM_EXPORT_SEGS];
	uint32_t g1 = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
	if (g1 & 1u)
		return -ENOENT;
	uint32_t valid = __atomic_load_n(&e->valid, __ATOMIC_ACQUIRE);
	uint32_t pid = __atomic_load_n(&e->pid, __ATOMIC_ACQUIRE);
	uint32_t sn = __atomic_load_n(&e->seqnum, __ATOMIC_ACQUIRE);
	uint32_t nseg = __atomic_load_n(&e->nseg, __ATOMIC_ACQUIRE);
	uint64_t total = __atomic_load_n(&e->total, __ATOMIC_ACQUIRE);
	uint32_t sender_cpu = __atomic_load_n(&e->cpu, __ATOMIC_ACQUIRE);
	if (nseg > OMX_SHM_EXPORT_SEGS)
		return -ENOENT;
	load_segs(e->seg, nseg, src);
	if (__atomic_load_n(&e->gen, __ATOMIC_RELAXED) != g1 || sn != seqnum)
		return -ENOENT;
	if (!valid)
		return -ENODATA; /* exported to be pulled */
	if (total < len || !pid || iov_sum(src, nseg) < len)
		return -ENOENT;
	/* From the sender's shared pool: memcpy, no system call. */
	uint32_t pool_id = valid == EXPORT_POOLED ? __atomic_load_n(&peer->h->pool_id, __ATOMIC_ACQUIRE) : 0;
	struct iovec from[OMX_SHM_EXPORT_SEGS];
	void *pool = pool_id ? omx_shm_pool_map(pid, pool_id, 0, src, nseg, from) : NULL;
	struct reader rd = { (pid_t)pid, pool != NULL, pool ? from : src, dst, nseg, ndst, len };
	/* Both processes on one CPU (pinned there, as an oversubscribed job is): the sender's help
	 * would come only in turns with our own reads, each chunk a call and each turn a switch. One
	 * call instead: on the Zen 3 VM, both pinned to CPU 0, 256 KiB read 45-47 us a half round
	 * trip alone against 59-60 with the chunks (omx_perf -y, docs/performance.md, stop 50). */
	int cpu = coop_chunk && sender_cpu ? sched_getcpu() : -1;
	if (cpu >= 0 && (uint32_t)cpu + 1u == sender_cpu)
		coop_chunk = 0;
	int help = coop_chunk && len >= 2ull * coop_chunk && len <= UINT32_MAX && ndst <= OMX_SHM_EXPORT_SEGS;
	/* A pooled message is shared out only into a buffer of our own pool: the sender then writes
	 * its part with memcpy too (omx_shm_coop_serve). */
	uint32_t mine = pool && help ? omx_shm_pool_contains(dst, ndst) : 0;
	if (pool && !mine)
		help = 0;
	int r = help && coop_open(e, seqnum, peer->pid, dst, ndst, len, mine) ? coop_read(peer, e, &rd, coop_chunk)
									       : read_range(&rd, 0, len);
	if (!pool)
		return r;
	omx_shm_pool_unmap(pool);
	/* Still the same export after the copy: the sender did not reuse the region under us (it
	 * cannot while the receive is pending, but a stale entry must not pass). */
	if (r == 0 && __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE) != g1)
		return -ENOENT;
	return r ? r : 1;
}

int omx_shm_yama_scope(void)
{
	static int cached = -2; /* not read yet */
	int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (v == -2) {
		FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
		v = -1;
		if (f) {
			if (fscanf(f, "%d", &v) != 1 || v < 0)
				v = 3;
			fclose(f);
		}
		__atomic_store_n(&cached, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* May we write into pid's memory for the receiver that named it? (See the top of the file.) */
static int may_help_ask(pid_t pid)
{
	uid_t me = geteuid();
	if (omx_shm_yama_scope() > 0 && me != 0)
		return 0;
	char path[32];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	return stat(path, &st) == 0 && st.st_uid == me;
}

/* may_help_ask's answers, kept a while per thread. Its stat costs ~2 us on the AMD VM, and the
 * sender asks before its first chunk of every cooperative copy, which the receiver then waits
 * for: with the question in the path, 128 KiB took 1.25x the time far apart (docs/performance.md,
 * stop 63). A process keeps its pid while it lives, and Linux hands pids out in turn, so an
 * answer kept MAY_HELP_KEEP_NS could only be about another process if the receiver died and its
 * pid came round again within that time. */
#define MAY_HELP_KEEP_NS 1000000000ull
#define MAY_HELP_KEPT 4

static int may_help(pid_t pid)
{
	static _Thread_local struct {
		pid_t pid;
		int ok;
		uint64_t at_ns;
	} kept[MAY_HELP_KEPT];
	static _Thread_local unsigned next;
	uint64_t now = omx_shm_now_ns();
	for (unsigned i = 0; i < MAY_HELP_KEPT; i++)
		if (kept[i].pid == pid && now - kept[i].at_ns < MAY_HELP_KEEP_NS)
			return kept[i].ok;
	unsigned i = next++ % MAY_HELP_KEPT;
	kept[i].pid = pid;
	kept[i].ok = may_help_ask(pid);
	kept[i].at_ns = now;
	return kept[i].ok;
}

int omx_shm_coop_serve(struct omx_shm_ring *own, uint8_t id, uint32_t chunk, uint64_t *written)
{
	struct export_ent *e = &own->h->exports[id];
	uint32_t sn = __atomic_load_n(&e->seqnum, __ATOMIC_RELAXED) & 0xffu;
	uint32_t c = __atomic_load_n(&e->coop, __ATOMIC_ACQUIRE);
	if (c == (sn << 8 | COOP_IDLE) || c == (sn << 8 | COOP_BUSY))
		return 0; /* not opened (yet) */
	if (c != (sn << 8 | COOP_OPEN) || !chunk)
		return 1;
	struct iovec src[OMX_SHM_EXPORT_SEGS], dst[OMX_SHM_EXPORT_SEGS];
	uint32_t nsrc = __atomic_load_n(&e->nseg, __ATOMIC_RELAXED);
	uint32_t ndst = __atomic_load_n(&e->dst_nseg, __ATOMIC_RELAXED);
	pid_t pid = (pid_t)__atomic_load_n(&e->dst_pid, __ATOMIC_RELAXED);
	if (nsrc > OMX_SHM_EXPORT_SEGS || ndst > OMX_SHM_EXPORT_SEGS || pid <= 0)
		return 1; /* the receiver copies it all */
	load_segs(e->seg, nsrc, src);
	load_segs(e->dst, ndst, dst);
	/* A receive buffer of the receiver's own pool: written with memcpy through its file, which
	 * only its user can open (no need for may_help's rights to write into another process). */
	uint32_t dst_pool = __atomic_load_n(&e->dst_pool, __ATOMIC_RELAXED);
	struct iovec to[OMX_SHM_EXPORT_SEGS];
	void *pool = dst_pool ? omx_shm_pool_map((uint32_t)pid, dst_pool, 1, dst, ndst, to) : NULL;
	if (!pool && !may_help(pid))
		return 1;
	/* Never write past either buffer, whatever the window says. */
	uint64_t ssum = iov_sum(src, nsrc), dsum = iov_sum(dst, ndst), limit = ssum < dsum ? ssum : dsum;
	uint64_t at, n;
	while ((n = claim(e, chunk, 1, &at))) {
		int err = at + n > limit ? -EFAULT
			  : pool	 ? omx_shm_pool_copy_range(to, ndst, src, nsrc, at, n, limit)
					 : cma_range(pid, src, nsrc, dst, ndst, at, n, 1);
		if (err)
			__atomic_store_n(&e->sender_err, 1, __ATOMIC_RELAXED);
		else
			*written += n;
		__atomic_fetch_add(&e->sender_done, n, __ATOMIC_RELEASE);
		if (err)
			break; /* the receiver redoes our part */
	}
	omx_shm_pool_unmap(pool);
	return 1;
}
