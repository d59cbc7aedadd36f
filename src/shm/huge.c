/*
 * huge.c - huge pages for the buffers of repeated large same-host copies (see shm.h).
 *
 * process_vm_readv/writev pin the other process's pages one at a time. Over 4 KiB pages this
 * costs more than the copy itself: the AMD VM's kernel moves 4 MiB in 275 us, 73 us over 2 MiB
 * pages, memcpy 66 (docs/performance.md, stop 37). An application cannot be asked to allocate
 * its buffers in huge pages, but most reuse them (MPI programs, benchmarks). So this file counts
 * uses of the page ranges that large same-host transfers read or write, and on the Nth use of a
 * range asks the kernel to collapse it into transparent huge pages (madvise MADV_COLLAPSE,
 * Linux 6.1). Contents are unchanged; the price is paid once per range, in the call that reaches
 * the count: 0.2-2.5 ms per MiB on the AMD VM (allocating the huge pages, copying, remapping),
 * the time of 2-40 transfers. A range that has stopped being used costs nothing more.
 *
 * The range is rounded out to whole 2 MiB pages: a 1 MiB buffer gains as much as a larger one.
 * The kernel populates the rest of such a page (at most 2 MiB - 4 KiB at each end of the
 * buffer), as its THP "always" mode would. Where that reaches a mapping the kernel refuses, the
 * buffer's own whole huge pages are asked for instead. A range is collapsed again every RECHECK uses (a few
 * microseconds when its pages are still huge), for memory freed and reallocated at the same
 * address in small pages. A range the kernel refuses for good (EINVAL: a kernel before 6.1, a
 * mapping the application keeps in small pages, shared memory where shmem THP is off) is not
 * asked again; other failures are retried later. With transparent huge pages "never" (or
 * absent) nothing is counted at all.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "shm/shm.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define HUGE_PAGE (2ull << 20)
#define RANGES 32
#define RECHECK 64u
#define RETRY 256u

struct range {
	uintptr_t lo, hi;    /* the buffer rounded out to 2 MiB; hi == 0: free entry */
	uintptr_t ilo, ihi;  /* rounded in: what is asked for once the outer range failed */
	uint32_t uses, next; /* collapse (again) when uses reaches next */
	int inner;           /* the outer range reached a mapping the kernel refused */
	uint64_t stamp;      /* last use: the least recent entry is replaced */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct range ranges[RANGES];
static uint64_t clock_;
static uint32_t after = 8; /* OMX_SHARED_HUGE_AFTER */
static int thp_never = -1; /* THP "never" or absent: 1; not looked at yet: -1 */
static uint64_t collapsed_bytes, failures;

void omx_shm_huge_set_after(uint32_t uses)
{
	pthread_mutex_lock(&lock);
	__atomic_store_n(&after, uses, __ATOMIC_RELAXED);
	for (int i = 0; i < RANGES; i++)
		ranges[i] = (struct range){ 0 };
	pthread_mutex_unlock(&lock);
}

uint32_t omx_shm_huge_after(void)
{
	return __atomic_load_n(&after, __ATOMIC_RELAXED);
}

/* The entry of [lo, hi), made from the least recently used one (free ones: stamp 0) if none. */
static struct range *find(uintptr_t lo, uintptr_t hi)
{
	struct range *victim = &ranges[0];
	for (int i = 0; i < RANGES; i++) {
		struct range *r = &ranges[i];
		if (r->hi == hi && r->lo == lo)
			return r;
		if (r->stamp < victim->stamp)
			victim = r;
	}
	*victim = (struct range){ .lo = lo, .hi = hi, .uses = 0, .next = __atomic_load_n(&after, __ATOMIC_RELAXED) };
	return victim;
}

/* 0 or the errno of madvise; EINVAL for an empty range. */
static int collapse(uintptr_t lo, uintptr_t hi)
{
	if (hi <= lo)
		return EINVAL;
	return madvise((void *)lo, hi - lo, MADV_COLLAPSE) == 0 ? 0 : errno;
}

/*
 * One use of the buffer [start, end); the bytes collapsed by this call. Under the lock. Rounded
 * out, the range may reach a neighbouring mapping the kernel refuses (a library's file mapping,
 * a MADV_NOHUGEPAGE region, a hole: EINVAL or ENOMEM, and madvise stops at the first such
 * mapping): the buffer's own whole huge pages are then asked for, from now on.
 */
static uintptr_t huge_down(uintptr_t a)
{
	return a & ~(uintptr_t)(HUGE_PAGE - 1);
}

static uintptr_t huge_up(uintptr_t a)
{
	return huge_down(a + (uintptr_t)(HUGE_PAGE - 1));
}

static uint64_t use(uintptr_t start, uintptr_t end)
{
	uintptr_t lo = huge_down(start), hi = huge_up(end);
	struct range *r = find(lo, hi);
	if (!r->uses) {
		r->ilo = huge_up(start);
		r->ihi = huge_down(end);
	}
	r->stamp = ++clock_;
	if (++r->uses < r->next)
		return 0;
	int e = collapse(r->inner ? r->ilo : lo, r->inner ? r->ihi : hi);
	if (e && !r->inner && (e == EINVAL || e == ENOMEM) && r->ihi > r->ilo) {
		r->inner = 1;
		e = collapse(r->ilo, r->ihi);
	}
	if (!e) {
		uint64_t n = r->inner ? r->ihi - r->ilo : hi - lo;
		r->next = r->uses + RECHECK;
		collapsed_bytes += n;
		return n;
	}
	failures++;
	r->next = e == EINVAL ? UINT32_MAX : r->uses + RETRY;
	return 0;
}

/* Transparent huge pages "never", or no THP at all: 1. Read once; under the lock. */
static int thp_off(void)
{
	int off = __atomic_load_n(&thp_never, __ATOMIC_RELAXED);
	if (off >= 0)
		return off;
	char mode[128] = "";
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (f) {
		if (!fgets(mode, sizeof(mode), f))
			mode[0] = 0;
		fclose(f);
	}
	off = !mode[0] || strstr(mode, "[never]") != NULL;
	__atomic_store_n(&thp_never, off, __ATOMIC_RELAXED);
	return off;
}

uint64_t omx_shm_huge_use(const struct iovec *v, unsigned n, uint64_t len)
{
	if (len < OMX_SHM_HUGE_MIN || !__atomic_load_n(&after, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&thp_never, __ATOMIC_RELAXED) == 1)
		return 0;
	uint64_t done = 0;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < n && len && !thp_off(); i++) {
		size_t seg = v[i].iov_len < len ? v[i].iov_len : (size_t)len;
		len -= seg;
		if (seg < OMX_SHM_HUGE_MIN)
			continue;
		done += use((uintptr_t)v[i].iov_base, (uintptr_t)v[i].iov_base + seg);
	}
	pthread_mutex_unlock(&lock);
	return done;
}

void omx_shm_huge_stats(uint64_t *bytes, uint64_t *failed, int *off)
{
	pthread_mutex_lock(&lock);
	*bytes = collapsed_bytes;
	*failed = failures;
	*off = thp_off() || !__atomic_load_n(&after, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lock);
}
