/*
 * copy.c - copy engines for intra-node data (design.md 1): the CPU's memcpy, a non-temporal copy
 * (SSE2 streaming stores, x86-64) for transfers of at least OMX_SHARED_NT_THRESHOLD bytes so that
 * multi-megabyte messages do not evict the caches of both processes, and a slot for hardware
 * engines (Intel DSA work queues are detected and reported, never required and not used yet).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "shm/shm.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_NT 1
#else
#define HAVE_NT 0
#endif

static uint64_t nt_threshold = 2u << 20;

void omx_copy_set_nt_threshold(uint64_t bytes)
{
	__atomic_store_n(&nt_threshold, bytes, __ATOMIC_RELAXED);
}

uint64_t omx_copy_nt_threshold(void)
{
	return __atomic_load_n(&nt_threshold, __ATOMIC_RELAXED);
}

uint64_t omx_copy_llc_bytes(void)
{
	/* The caches of CPU 0 as the kernel lists them (sysconf's figure is the host's in the VMs
	 * measured: 384 MiB for a 32 MiB L3): the size of the highest level. */
	uint64_t best = 0;
	int best_level = 0;
	for (int i = 0; i < 8; i++) {
		char path[96], buf[32];
		int level = 0;
		unsigned long long kb = 0;
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
		FILE *f = fopen(path, "r");
		if (!f)
			break;
		if (fscanf(f, "%d", &level) != 1)
			level = 0;
		fclose(f);
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		f = fopen(path, "r");
		if (f) {
			if (fgets(buf, sizeof(buf), f) && sscanf(buf, "%lluK", &kb) == 1 && level > best_level) {
				best_level = level;
				best = (uint64_t)kb << 10;
			}
			fclose(f);
		}
	}
	return best;
}

/*
 * OMX_SHARED_NT_THRESHOLD's auto: half the last-level cache, at least 2 MiB, at most
 * NT_AUTO_MAX. Below it a message and its receive buffer fit in that cache together, and caching
 * stores leave them there: on the Zen 5 VM (32 MiB L3) shared-buffer copies of 2 / 4 / 8 MiB
 * took 21 / 39-40 / 121-131 us with regular stores against 51-52 / 98-101 / 276-283 with
 * streaming ones, pulls 50 / 86-93 / 274-285 against 57-64 / 86-93 / 279-318; from 16 MiB the
 * two read alike (docs/performance.md, stop 51). The bound: a VM's sysfs may list its host's
 * cache, shared with other guests (the Intel VM: 480 MiB), and there copies of 32 / 64 MiB
 * between shared buffers took 0.70 / 0.76x the time with streaming stores, pulls 0.91 /
 * 0.88x, while 16 MiB read alike (stop 66).
 */
#define NT_AUTO_MIN (2ull << 20)
#define NT_AUTO_MAX (32ull << 20)

uint64_t omx_copy_nt_auto(uint64_t llc_bytes)
{
	uint64_t half = llc_bytes / 2;
	return half < NT_AUTO_MIN ? NT_AUTO_MIN : half > NT_AUTO_MAX ? NT_AUTO_MAX : half;
}

int omx_copy_nt_available(void)
{
	return HAVE_NT;
}

#if HAVE_NT
/* Copy whole 64-byte blocks with SSE2 (every x86-64 has it), streaming (non-temporal) stores or
 * regular ones; advances the cursors, leaves the tail (< 64 bytes) to the caller. */
static inline __attribute__((always_inline)) void copy_blocks(uint8_t **dp, const uint8_t **sp, size_t *np, int nt)
{
	uint8_t *d = *dp;
	const uint8_t *s = *sp;
	size_t n = *np;
	while (n >= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
		__m128i *o = (__m128i *)(void *)d;
		if (nt) {
			_mm_stream_si128(o, a), _mm_stream_si128(o + 1, b);
			_mm_stream_si128(o + 2, c), _mm_stream_si128(o + 3, e);
		} else {
			_mm_storeu_si128(o, a), _mm_storeu_si128(o + 1, b);
			_mm_storeu_si128(o + 2, c), _mm_storeu_si128(o + 3, e);
		}
		d += 64, s += 64, n -= 64;
	}
	*dp = d, *sp = s, *np = n;
}

static void copy_nt(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (16u - ((uintptr_t)d & 15u)) & 15u;
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head, s += head, n -= head;
	copy_blocks(&d, &s, &n, 1);
	_mm_sfence(); /* streaming stores are weakly ordered: visible before anything published next */
	memcpy(d, s, n);
}

/* Regular stores: the way around memcpy's slow relative alignments (omx_memcpy). */
static void copy_vec(void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	copy_blocks(&d, &s, &n, 0);
	memcpy(d, s, n);
}
#endif

/*
 * memcpy, except where it falls off a cliff: on the AMD EPYC VM (glibc 2.36, its `rep movsb`
 * path from 4 KiB) a copy whose destination lies 1-31 bytes past the source modulo 4 KiB runs
 * 15-30x slower (8 KiB: 2.3 us against 78 ns; 256 KiB: 86 us against 4.9). Frames in ring slots
 * and receive buffers meet at every relative offset, so some runs (whichever addresses the
 * buffers got) had pulls and mediums 10x slower from start to end (docs/performance.md, stop
 * 19). Those offsets take a plain vector loop instead: 166 ns at 8 KiB, 9.2 us at 256 KiB.
 */
#define ALIAS_MIN_BYTES 2048u
#define ALIAS_WINDOW 32u

void omx_memcpy(void *dst, const void *src, size_t n)
{
#if HAVE_NT
	if (n >= ALIAS_MIN_BYTES && (((uintptr_t)dst - (uintptr_t)src) & 4095u) - 1u < ALIAS_WINDOW - 1u) {
		copy_vec(dst, src, n);
		return;
	}
#endif
	memcpy(dst, src, n);
}

void omx_copy(void *dst, const void *src, size_t n, uint64_t total)
{
#if HAVE_NT
	uint64_t t = __atomic_load_n(&nt_threshold, __ATOMIC_RELAXED);
	if (t && total >= t && n >= 256) {
		copy_nt(dst, src, n);
		return;
	}
#else
	(void)total;
#endif
	omx_memcpy(dst, src, n);
}

const char *omx_copy_hw_engine(void)
{
	const char *found = "";
	DIR *d = opendir("/sys/bus/dsa/devices");
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (!strncmp(e->d_name, "wq", 2))
				found = "Intel DSA (detected, not used)";
		closedir(d);
	}
	return found;
}
