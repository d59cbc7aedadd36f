/*
 * ring.c - the shared-memory receive ring of an endpoint (see shm.h).
 *
 * Multi-producer single-consumer, fixed-size slots, each with a sequence word: a producer claims
 * position p by moving the tail from p to p+1 while p is less than a ring ahead of the consumer's
 * head, writes its frame, and publishes it by setting the slot's sequence to p+1; the consumer
 * takes slot p when its sequence reads p+1, and frees it by moving its head past p. The consumer
 * writes nothing into the slots: a slot's lines then only travel from producer to consumer, one
 * transfer a frame, instead of coming back to the producer a round later (Vyukov's bounded queue,
 * which this was until stop 40, frees a slot by rewriting its sequence word: the producer's next
 * use of the slot then starts with a miss on a line the consumer owns).
 *
 * A producer that dies between claiming and publishing would block the consumer forever: a slot
 * claimed but unpublished is skipped once its producer (the owner word, written with the slot's
 * first line just before publishing, names it and the round) is gone, or after one second if this
 * round's owner is not there yet (it died while copying the frame: a window of at most a few
 * microseconds). A late publication of a skipped slot is detected by the producer (its
 * compare-and-swap fails, or its look at the word before a plain store finds the skip's mark:
 * publish_stored) and counts as a lost frame, which the protocol's retransmission recovers like
 * any loss.
 *
 * Sleeping: before sleeping the consumer sets `waiting` and re-checks the ring; a producer that
 * finds `waiting` set after publishing clears it and tells its caller to ring the doorbell (a
 * byte to the owner's Unix socket, which the owner's poll() watches).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "shm/ring_layout.h"
#include "hot_path.h"

#define STALL_NS 1000000000ull
#define TAIL_CHECK 16384u

const char *omx_shm_dir(void)
{
	const char *d = getenv("OMX_SHM_DIR");
	return d && *d ? d : "/dev/shm";
}

static unsigned long long netns_id(void)
{
	struct stat st;
	return stat("/proc/self/ns/net", &st) == 0 ? (unsigned long long)st.st_ino : 0ull;
}

static void ring_name(char *buf, size_t len, const uint8_t m[6], uint8_t endpoint)
{
	snprintf(buf, len, "%s/omx-%llx-%02x%02x%02x%02x%02x%02x-%u.ring", omx_shm_dir(), netns_id(), m[0], m[1], m[2],
		 m[3], m[4], m[5], endpoint);
}

uint64_t omx_shm_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Prefetch a line for writing (exclusive): the compiler emits a plain read prefetch for
 * __builtin_prefetch(p, 1) unless built for a CPU with PREFETCHW, which then costs a second
 * transfer (shared, then the upgrade). PREFETCHW is a no-op on x86-64 CPUs without it. */
static inline void prefetch_w(const void *p)
{
#if defined(__x86_64__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

static inline struct slot *slot_at(struct omx_shm_ring *r, uint64_t pos)
{
	return (struct slot *)(r->slots + (size_t)(pos & r->mask) * r->stride);
}

/* Remove ring files whose owner is gone, and temporary files of dead creators, of every network
 * namespace (a namespace deleted with endpoints killed in it leaves files nobody of that
 * namespace will ever sweep). A file is removed only while we hold its lock and the name still
 * refers to it; a new owner takes the old file's lock before renaming its own over the name, so
 * a live ring is never lost. */
static void sweep(void)
{
	char path[512];
	const char *prefix = "omx-";
	DIR *d = opendir(omx_shm_dir());
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", omx_shm_dir(), e->d_name);
		const char *tmp = strstr(e->d_name, ".ring.");
		if (tmp) { /* "<name>.ring.<pid>.tmp" */
			int pid = atoi(tmp + 6);
			if (pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
				(void)unlink(path);
			continue;
		}
		/* Rings, and the pools of shared buffers (pool.c): both locked by their owner. */
		size_t n = strlen(e->d_name);
		if (n < 5 || (strcmp(e->d_name + n - 5, ".ring") != 0 && strcmp(e->d_name + n - 5, ".pool") != 0))
			continue;
		int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		struct stat a, b;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
		    a.st_dev == b.st_dev)
			(void)unlink(path);
		close(fd);
	}
	closedir(d);
}

static int map_ring(struct omx_shm_ring *r, size_t size)
{
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	r->h = m;
	r->map_len = size;
	return 0;
}

/*
 * Keep our ring's pages mapped. A ring's slots are touched in turn, and the tail of a slot (past
 * a small frame's line) only by large frames: minutes can pass between two uses of a page. A
 * kernel reclaiming cold file pages (DAMON's pageout scheme on the AMD VM; DAMON_RECLAIM, or
 * plain memory pressure) unmaps such shmem pages even with no swap to write them to, and the next
 * large frame then takes a minor fault per page: a 256 KiB pull took 100 us instead of 5 (35
 * faults), and same-host medians at 64-128 KiB turned bimodal (docs/performance.md, stop 29).
 * Locked by the owner, the pages stay mapped for every process that maps the ring. Costs the
 * ring's size of RLIMIT_MEMLOCK; -errno if the limit (or anything else) refuses it.
 */
int omx_shm_ring_lock(struct omx_shm_ring *r)
{
	return mlock(r->h, r->map_len) == 0 ? 0 : -errno;
}

uint32_t omx_shm_ring_slots(const struct omx_shm_ring *r)
{
	return r->mask + 1;
}

struct omx_shm_ring *omx_shm_ring_create(const uint8_t mac[6], uint8_t endpoint, uint32_t slot_bytes,
					 uint32_t ring_bytes, uint32_t session, int *err)
{
	struct omx_shm_ring *r = calloc(1, sizeof(*r));
	char tmp[200];
	int oldfd = -1;
	if (!r) {
		*err = -ENOMEM;
		return NULL;
	}
	sweep();
	r->own = 1;
	r->pid = (uint32_t)getpid();
	ring_name(r->path, sizeof(r->path), mac, endpoint);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", r->path, (int)getpid());
	slot_bytes = (slot_bytes + 63u) & ~63u;
	uint32_t stride = (uint32_t)((sizeof(struct slot) + slot_bytes + 63u) & ~63u);
	uint32_t count = 64;
	while (count < 4096 && (uint64_t)count * 2 * stride <= ring_bytes)
		count *= 2;
	size_t off = (sizeof(struct ring_hdr) + 4095u) & ~(size_t)4095u;
	size_t size = off + (size_t)count * stride;

	(void)unlink(tmp);
	r->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (r->fd < 0 || flock(r->fd, LOCK_EX | LOCK_NB) < 0 || ftruncate(r->fd, (off_t)size) < 0) {
		*err = -errno;
		goto fail;
	}
	*err = map_ring(r, size);
	if (*err)
		goto fail;
	struct ring_hdr *h = r->h;
	h->version = RING_VERSION;
	h->slot_bytes = slot_bytes;
	h->slot_count = count;
	h->slot_stride = stride;
	h->owner_pid = (uint32_t)getpid();
	h->session = session;
	h->slots_off = off;
	h->file_size = size;
	r->slots = (uint8_t *)h + off;
	r->mask = count - 1;
	r->stride = stride;
	r->slot_bytes = slot_bytes;
	r->shift = (uint32_t)__builtin_ctz(count);
	for (uint32_t i = 0; i < count; i++)
		slot_at(r, i)->seq = (uint64_t)i + 1 - count; /* published in round -1: free for round 0 */
	for (uint32_t i = 0; i < OMX_SHM_EXPORTS; i++) {
		h->exports[i].seqnum = UINT32_MAX; /* no use named yet */
		h->exports[i].coop = COOP_NONE;
	}
	__atomic_store_n(&h->magic, RING_MAGIC, __ATOMIC_RELEASE);

	/* A previous file of the slot: its owner must be gone (we hold the endpoint slot); take its
	 * lock (an attacher may probe it for a moment) so a sweeper cannot unlink our new file. */
	oldfd = open(r->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (oldfd >= 0) {
		int locked = 0;
		for (int i = 0; i < 200 && !locked; i++) {
			if (flock(oldfd, LOCK_EX | LOCK_NB) == 0)
				locked = 1;
			else
				usleep(500);
		}
		if (!locked) {
			*err = -EBUSY;
			goto fail;
		}
	}
	if (rename(tmp, r->path) < 0) {
		*err = -errno;
		goto fail;
	}
	if (oldfd >= 0)
		close(oldfd);
	return r;
fail:
	if (oldfd >= 0)
		close(oldfd);
	if (r->h)
		munmap(r->h, r->map_len);
	if (r->fd >= 0) {
		close(r->fd);
		(void)unlink(tmp);
	}
	free(r);
	return NULL;
}

struct omx_shm_ring *omx_shm_ring_attach(const uint8_t mac[6], uint8_t endpoint, int *err)
{
	struct omx_shm_ring *r = calloc(1, sizeof(*r));
	struct stat st;
	(void)omx_shm_own_lines(); /* decided before the first push */
	if (!r) {
		*err = -ENOMEM;
		return NULL;
	}
	ring_name(r->path, sizeof(r->path), mac, endpoint);
	r->pid = (uint32_t)getpid();
	r->fd = open(r->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (r->fd < 0) {
		*err = -errno;
		free(r);
		return NULL;
	}
	*err = -EPROTO;
	if (fstat(r->fd, &st) < 0 || (size_t)st.st_size < sizeof(struct ring_hdr) || map_ring(r, (size_t)st.st_size))
		goto fail;
	struct ring_hdr *h = r->h;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != RING_MAGIC || h->version != RING_VERSION ||
	    h->slot_count < 2 || (h->slot_count & (h->slot_count - 1)) || h->slot_stride < sizeof(struct slot) + h->slot_bytes ||
	    h->slots_off < sizeof(struct ring_hdr) || h->file_size != (uint64_t)st.st_size ||
	    h->slots_off + (uint64_t)h->slot_count * h->slot_stride > (uint64_t)st.st_size)
		goto fail;
	r->slots = (uint8_t *)h + h->slots_off;
	r->mask = h->slot_count - 1;
	r->shift = (uint32_t)__builtin_ctz(h->slot_count);
	r->stride = h->slot_stride;
	r->slot_bytes = h->slot_bytes;
	if (!omx_shm_ring_owner_alive(r) || omx_shm_ring_closed(r)) {
		*err = -ECONNREFUSED;
		goto fail;
	}
	*err = 0;
	return r;
fail:
	if (r->h)
		munmap(r->h, r->map_len);
	close(r->fd);
	free(r);
	return NULL;
}

void omx_shm_ring_close(struct omx_shm_ring *r)
{
	if (!r)
		return;
	if (r->own) {
		__atomic_store_n(&r->h->closed, 1, __ATOMIC_SEQ_CST);
		/* Only if the name is still ours. */
		struct stat a, b;
		if (fstat(r->fd, &a) == 0 && stat(r->path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
			(void)unlink(r->path);
	}
	munmap(r->h, r->map_len);
	close(r->fd);
	free(r);
}

int omx_shm_ring_owner_alive(struct omx_shm_ring *r)
{
	if (flock(r->fd, LOCK_SH | LOCK_NB) == 0) {
		(void)flock(r->fd, LOCK_UN);
		return 0;
	}
	return errno == EWOULDBLOCK;
}

uint32_t omx_shm_ring_session(struct omx_shm_ring *r)
{
	return r->h->session;
}

void omx_shm_ring_set_copy_out(struct omx_shm_ring *own, uint32_t ns_kib)
{
	uint32_t old = __atomic_load_n(&own->h->copy_out_ns_kib, __ATOMIC_RELAXED);
	uint32_t d = old > ns_kib ? old - ns_kib : ns_kib - old;
	if (d > old / 8) /* the line its producers read stays in their caches between real moves */
		__atomic_store_n(&own->h->copy_out_ns_kib, ns_kib, __ATOMIC_RELAXED);
}

uint32_t omx_shm_ring_copy_out(const struct omx_shm_ring *r)
{
	return __atomic_load_n(&r->h->copy_out_ns_kib, __ATOMIC_RELAXED);
}

int omx_shm_ring_closed(struct omx_shm_ring *r)
{
	return __atomic_load_n(&r->h->closed, __ATOMIC_ACQUIRE) != 0;
}

/* A frame's bytes that fit in the slot's first line, beside the slot header: the line the
 * consumer polls. */
#define SLOT_HEAD_BYTES (64 - offsetof(struct slot, data))

/* n bytes (k <= n <= 2k) as their first and last k; k a constant at every call, so each memcpy
 * is a fixed-size move. Both blocks are read before either is written. */
static inline __attribute__((always_inline)) void copy_ends(uint8_t *d, const uint8_t *s, size_t n, size_t k)
{
	uint8_t a[32], b[32];
	memcpy(a, s, k), memcpy(b, s + n - k, k);
	memcpy(d, a, k), memcpy(d + n - k, b, k);
}

/*
 * Frames of up to two lines (every tiny and small frame of up to 72 payload bytes: MPI's small
 * messages carry the provider's 16-byte header, so all of theirs up to 56 B) are copied with
 * fixed-size moves: n bytes as two overlapping blocks of the largest power of two not above n.
 * The variable-length memcpy calls they replace, one for the bytes past the first line and one
 * for the first line, took ~80 of the ~200 instructions of such a push (callgrind, an MPI
 * ping-pong over omx on one host); a one-line frame's call (0-8 B messages) ~11 more.
 */
static inline __attribute__((always_inline)) void copy_small(uint8_t *d, const uint8_t *s, size_t n)
{
	if (n >= 32) /* up to 64 */
		copy_ends(d, s, n, 32);
	else if (n >= 16)
		copy_ends(d, s, n, 16);
	else if (n >= 8)
		copy_ends(d, s, n, 8);
	else if (n >= 4)
		copy_ends(d, s, n, 4);
	else
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
}

/* Prefetch the lines of slot s past its first, for a frame of len bytes (at most max), for
 * writing (the producer's next slot) or reading (the consumer's new frame). */
static inline void prefetch_slot_data(const struct slot *s, size_t len, size_t max, int for_write)
{
	size_t end = offsetof(struct slot, data) + (len < max ? len : max);
	for (size_t o = 64; o < end; o += 64) {
		if (for_write)
			prefetch_w((const uint8_t *)s + o);
		else
			__builtin_prefetch((const uint8_t *)s + o, 0, 3);
	}
}

/*
 * Owning a slot's lines before writing them. The consumer read them last (a ring round ago), so
 * the producer's copy into them waits on an ownership request per line: a 4 KiB frame's copy took
 * 600-1100 cycles on the Zen 4 VM near, against 200-330 into lines already ours, PREFETCHW
 * notwithstanding (it left the copy at ~0.8x). A masked store with an empty mask writes nothing,
 * yet on that CPU it takes the line for writing like a store (a write-intent access whose
 * elements are all suppressed), and, unlike a locked no-op (an atomic add of 0, ~30 cycles a
 * line in series), 64 of them overlap: the copy then reads 150-350 cycles, a two-thread 4 KiB
 * ring-like ping-pong's round trip 0.7x (docs/performance.md, stop 58). Frames of up to two
 * lines keep PREFETCHW for their second line: 64 B messages near read no faster with the stores,
 * maybe slower. Writing nothing, it cannot race with a producer that claims the slot meanwhile
 * nor with a consumer still reading it. CPUs that ignore empty-mask stores lose only the instructions. The 256-bit
 * EVEX form (AVX-512 VL + BW), not the 512-bit one, so that no CPU lowers its clock for it; the
 * VEX form (VMASKMOV) does not take the line on Zen 4. Not under TSan, which would read each as a
 * 32-byte write racing with the frame's copy.
 */
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && (defined(__GNUC__) && __GNUC__ >= 11)
#include <immintrin.h>
#define HAVE_OWN_LINES 1
__attribute__((target("avx512vl,avx512bw"))) static void own_lines_evex(const struct slot *s, size_t end)
{
	__mmask32 none = _cvtu32_mask32(0);
	const __m256i zero = _mm256_setzero_si256();
	__asm__("" : "+k"(none)); /* an empty mask the compiler cannot fold the stores away with */
	for (size_t o = 64; o < end; o += 64)
		_mm256_mask_storeu_epi8((uint8_t *)s + o, none, zero);
}
#else
#define HAVE_OWN_LINES 0
#endif

static int own_lines_mode = -1; /* -1: not decided yet; 0: PREFETCHW; 1: empty-mask stores */

void omx_shm_set_own_lines(int on)
{
	int m = 0;
#if HAVE_OWN_LINES
	__builtin_cpu_init(); /* the CPU model libgcc fills in at start-up: not yet if we run from a constructor */
	m = on && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#else
	(void)on;
#endif
	__atomic_store_n(&own_lines_mode, m, __ATOMIC_RELAXED);
}

int omx_shm_own_lines(void)
{
	int m = __atomic_load_n(&own_lines_mode, __ATOMIC_RELAXED);
	if (m < 0) {
		omx_shm_set_own_lines(1);
		m = __atomic_load_n(&own_lines_mode, __ATOMIC_RELAXED);
	}
	return m;
}

/* The producer's next slot, for a frame like this one of len bytes (at most max). */
static inline void own_slot_data(const struct slot *s, size_t len, size_t max)
{
#if HAVE_OWN_LINES
	if (len > SLOT_HEAD_BYTES + 64 && __atomic_load_n(&own_lines_mode, __ATOMIC_RELAXED) > 0) {
		own_lines_evex(s, offsetof(struct slot, data) + (len < max ? len : max));
		return;
	}
#endif
	prefetch_slot_data(s, len, max, 1);
}

/*
 * The data lines of the slot our next push will probably use were last read by the consumer (a
 * ring round ago): writing them costs an ownership transfer per line on the critical path. Ask
 * for them now, while the peer is busy with this frame; as many as this frame used, bounded.
 * Not the first line: the consumer polls its sequence word and would only take it back.
 * Measured (same-host omx_perf): 16-64 B half round trip -20%, 4 KiB -7%, 1 KiB unchanged; only
 * done for frames past the first line, which left 0-8 B unchanged.
 */
#define PREFETCH_TX_MAX_BYTES 4160u
/* The consumer's side: a new frame's lines past the first (just read) were written by the
 * producer; ask for them all as soon as the frame is seen, so their transfers overlap each
 * other and the decoding and matching of the header, instead of coming one by one when the
 * payload is copied out. */
#define PREFETCH_RX_MAX_BYTES 1024u

/*
 * The publication of the frame at position pos: its slot's word set to pos + 1, unless the
 * consumer skipped the slot meanwhile (we stalled past STALL_NS: its mark is pos + 1 already),
 * and ordered before our look at `waiting` (omx_shm_ring_arm sets it, then looks at the slot:
 * each side must see the other's store). Two ways, measured (docs/performance.md, stop 48):
 * - a frame of one line, by a compare-and-swap from the last round's word: far apart, a plain
 *   store read 3-7% slower a hop at 0-8 B (omx_perf), near the same;
 * - a longer frame, by a plain store after a look at the word: its lines past the first are
 *   written first, and a locked instruction waits for all of them to leave; the consumer,
 *   spinning on the first line, often took it back in between, and the publication paid a
 *   second transfer (near: the ring alone 0.72x a hop at 64 B, omx_perf 0.92x).
 * What a store cannot tell: a stall of a second right between the look and the store. That
 * frame is lost unknown to us (retransmission recovers it), and were the slot reused meanwhile,
 * the store leaves a wrong word in it: a later round's publication it undoes is skipped after
 * STALL_NS (a loss); in a slot not yet claimed, the next producer publishes over it, both ways
 * (anything but the skip's mark is written over).
 */
static inline int publish_locked(struct slot *s, uint64_t pos, uint64_t slots)
{
	uint64_t expect = pos + 1 - slots; /* the last round's publication or skip */
	while (!__atomic_compare_exchange_n(&s->seq, &expect, pos + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		if (expect == pos + 1)
			return -1;
	return 0;
}

static inline int publish_stored(struct slot *s, uint64_t pos)
{
	if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == pos + 1)
		return -1;
	/* A sequentially consistent store would order it before the look at `waiting` too, but GCC
	 * makes that an xchg, a locked instruction on the line again; under TSan, which has no
	 * fences (GCC: -Wtsan), it is that store. */
#if defined(__SANITIZE_THREAD__)
	__atomic_store_n(&s->seq, pos + 1, __ATOMIC_SEQ_CST);
#else
	__atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
	return 0;
}

OMX_HOT_PATH int omx_shm_ring_push(struct omx_shm_ring *r, const struct iovec *iov, unsigned iovcnt, int *doorbell)
{
	struct ring_hdr *h = r->h;
	size_t len = 0;
	*doorbell = 0;
	for (unsigned i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > r->slot_bytes)
		return -EMSGSIZE;
	if (__atomic_load_n(&h->closed, __ATOMIC_RELAXED))
		return -ECONNREFUSED;
	uint64_t pos = __atomic_load_n(&h->tail, __ATOMIC_RELAXED);
	uint64_t slots = (uint64_t)r->mask + 1;
	/* Signed: a head read after pos may be past it (other producers' frames, consumed meanwhile),
	 * and the compare-and-swap then fails and brings a newer pos. */
	do {
		if ((int64_t)(pos - r->head_seen) >= (int64_t)slots) {
			r->head_seen = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
			if ((int64_t)(pos - r->head_seen) >= (int64_t)slots)
				return -EAGAIN; /* full */
		}
	} while (!__atomic_compare_exchange_n(&h->tail, &pos, pos + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	struct slot *s = slot_at(r, pos);
	/*
	 * The consumer spins on the slot's first line. Every store to it before the publication
	 * gives the spinning reader a chance to take the line back, and the publication then pays
	 * another transfer: so the bytes past the first line go first, and the first line (pid,
	 * the frame's first bytes, len) is written in one burst right before the publication.
	 * Measured with bench/ring_pingpong (the ring alone, pinned to the two cores), half round
	 * trip: 9-64 B messages 0.40-0.43 -> 0.20-0.26 us, 4 KiB 1.01-1.04 -> 0.82-0.89 us.
	 */
	const size_t head = SLOT_HEAD_BYTES;
	if (iovcnt == 1 && len <= head) {
		copy_small(s->data, iov[0].iov_base, len); /* a tiny frame: the first line only */
	} else if (iovcnt == 1 && len <= head + 64) {
		/* Two lines: the second first, then the first in one burst (below). */
		const uint8_t *f = iov[0].iov_base;
		copy_small(s->data + head, f + head, len - head);
		copy_small(s->data, f, head);
	} else {
		size_t off = 0;
		for (unsigned i = 0; i < iovcnt; i++) {
			size_t n = iov[i].iov_len, skip = off < head ? head - off : 0;
			if (skip < n)
				omx_memcpy(s->data + off + skip, (const uint8_t *)iov[i].iov_base + skip, n - skip);
			off += n;
		}
		off = 0;
		for (unsigned i = 0; i < iovcnt && off < head; i++) {
			size_t n = iov[i].iov_len < head - off ? iov[i].iov_len : head - off;
			memcpy(s->data + off, iov[i].iov_base, n);
			off += n;
		}
	}
	__atomic_store_n(&s->owner, SLOT_OWNER(r->pid, pos, r->shift), __ATOMIC_RELAXED);
	__atomic_store_n(&s->len, (uint32_t)len, __ATOMIC_RELAXED);
	if (len <= SLOT_HEAD_BYTES ? publish_locked(s, pos, slots) : publish_stored(s, pos))
		return -EAGAIN; /* skipped by the consumer meanwhile (we were stalled): a loss */
	if (__atomic_load_n(&h->waiting, __ATOMIC_SEQ_CST) && __atomic_exchange_n(&h->waiting, 0, __ATOMIC_SEQ_CST))
		*doorbell = 1;
	if (len > SLOT_HEAD_BYTES)
		own_slot_data(slot_at(r, pos + 1), len, PREFETCH_TX_MAX_BYTES);
	return 0;
}

/* Slot pos, found unpublished, was claimed by a producer: the tail moved past it. Reads the tail,
 * a line every producer writes: not on every poll. */
static int slot_claimed(const struct omx_shm_ring *r, uint64_t pos)
{
	return __atomic_load_n(&r->h->tail, __ATOMIC_ACQUIRE) != pos;
}

/* Done with the frame at the head: producers may now reuse its slot. The head's line is ours
 * until a producer finds the ring full and reads it. */
static void release_slot(struct omx_shm_ring *r, uint64_t pos)
{
	r->head = pos + 1;
	__atomic_store_n(&r->h->head, pos + 1, __ATOMIC_RELEASE);
}

static __attribute__((noinline)) int ring_poll_frames(struct omx_shm_ring *r, omx_shm_rx_fn fn, void *arg,
						      unsigned max)
{
	int count = 0;
	while ((unsigned)count < max) {
		uint64_t pos = r->head;
		struct slot *s = slot_at(r, pos);
		uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		if (seq == pos + 1) {
			uint32_t len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
			if (len > r->slot_bytes)
				len = r->slot_bytes;
			prefetch_slot_data(s, len, PREFETCH_RX_MAX_BYTES, 0);
			fn(arg, s->data, len);
			release_slot(r, pos);
			r->stall_since = 0;
			count++;
			continue;
		}
		/* The slot is free for this round (its word the last round's publication, or a late
		 * producer's store, see publish_locked): empty, or claimed but not published yet.
		 * Either way a live producer publishes within nanoseconds: whether one died holding the
		 * slot is looked into once every TAIL_CHECK polls only. The tail is on a line every
		 * producer writes, so each read of it costs the next push a miss, and a stall starts
		 * with a clock read: done on every poll, this took 6% of a busy ping-pong's polls
		 * (docs/performance.md, stop 34). */
		if (!r->stall_since && ++r->empty_polls < TAIL_CHECK)
			break;
		r->empty_polls = 0;
		if (!slot_claimed(r, pos))
			break; /* empty */
		/* Claimed, not published yet. */
		uint64_t now = omx_shm_now_ns();
		if (!r->stall_since) {
			r->stall_since = now;
			break;
		}
		uint32_t owner = __atomic_load_n(&s->owner, __ATOMIC_RELAXED);
		uint32_t pid = owner == SLOT_OWNER(SLOT_OWNER_PID(owner), pos, r->shift) ? SLOT_OWNER_PID(owner) : 0;
		int dead = pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
		if (!dead && now - r->stall_since < STALL_NS)
			break;
		/* Skipped: marked as published for this round, which is what the slot's next producer
		 * expects to find, and what makes a late publication fail. */
		uint64_t expect = seq;
		if (__atomic_compare_exchange_n(&s->seq, &expect, pos + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			release_slot(r, pos);
			__atomic_fetch_add(&r->h->skipped, 1, __ATOMIC_RELAXED);
		}
		r->stall_since = 0;
	}
	return count;
}

int omx_shm_ring_poll(struct omx_shm_ring *r, omx_shm_rx_fn fn, void *arg, unsigned max)
{
	/* The common answer, nothing there, without the frame loop's set-up (ring_poll_frames
	 * repeats these tests). */
	uint64_t pos = r->head;
	struct slot *s = slot_at(r, pos);
	uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
	if (seq != pos + 1) {
		if (!r->stall_since && r->empty_polls + 1 < TAIL_CHECK) {
			r->empty_polls++;
			return 0;
		}
	}
	return ring_poll_frames(r, fn, arg, max);
}

/* No prefetch of the frame's lines past the first, unlike the poll: the peek's caller (the fast
 * receive) copies an eager payload out right away, so the prefetch could not run ahead of the copy.
 * Measured no slower without it (64 B omx_perf 0.114 against 0.119 µs with it, 11 alternated rounds
 * near; but two builds of the same code differ by up to 0.004 µs on this VM). */
OMX_HOT_PATH const uint8_t *omx_shm_ring_peek(struct omx_shm_ring *r, uint32_t *len)
{
	uint64_t pos = r->head;
	struct slot *s = slot_at(r, pos);
	if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != pos + 1)
		return NULL; /* empty, or claimed and not published: omx_shm_ring_poll looks into those */
	uint32_t n = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
	if (n > r->slot_bytes)
		n = r->slot_bytes;
	*len = n;
	return s->data;
}

OMX_HOT_PATH void omx_shm_ring_take(struct omx_shm_ring *r)
{
	release_slot(r, r->head);
	r->stall_since = 0;
}

int omx_shm_ring_arm(struct omx_shm_ring *r)
{
	__atomic_store_n(&r->h->waiting, 1, __ATOMIC_SEQ_CST);
	struct slot *s = slot_at(r, r->head);
	uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST);
	/* A slot claimed but not published: do not sleep past it (its producer may be dead, and
	 * the polls would look into that only every TAIL_CHECK): the next poll does. */
	int claimed = seq != r->head + 1 && slot_claimed(r, r->head);
	if (seq == r->head + 1 || r->stall_since || claimed) {
		if (claimed && !r->stall_since)
			r->empty_polls = TAIL_CHECK;
		__atomic_store_n(&r->h->waiting, 0, __ATOMIC_SEQ_CST);
		return 1;
	}
	return 0;
}

void omx_shm_ring_disarm(struct omx_shm_ring *r)
{
	__atomic_store_n(&r->h->waiting, 0, __ATOMIC_RELAXED);
}

void omx_shm_ring_hint_bump(struct omx_shm_ring *r)
{
	__atomic_fetch_add(&r->h->sock_hint, 1, __ATOMIC_RELEASE);
}

uint32_t omx_shm_ring_hint(struct omx_shm_ring *r)
{
	return __atomic_load_n(&r->h->sock_hint, __ATOMIC_ACQUIRE);
}

uint64_t omx_shm_ring_skipped(struct omx_shm_ring *r)
{
	return __atomic_load_n(&r->h->skipped, __ATOMIC_RELAXED);
}
