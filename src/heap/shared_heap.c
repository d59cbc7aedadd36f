/*
 * shared_heap.c - libomx-shared-heap.so, loaded with LD_PRELOAD: a program's large mallocs come
 * from omx_shared_alloc, so that the same-host receivers of messages sent from them read them with
 * one memcpy from the sender's pages (docs/architecture.md, "Shared heap"), with no change to the
 * program. The case it is for: MPI over omx, whose applications allocate their own buffers
 * (Open MPI's MPI_Alloc_mem has no path to a libfabric provider's allocator).
 *
 * Requests of at least OMX_SHARED_HEAP_MIN bytes (environment, read at the first request; 65536
 * by default, at least 4096) and at most OMX_SHARED_HEAP_MAX (no bound by default) go to the
 * pool; others, and those the pool refuses (its
 * reservation full, the shared-memory directory short of space), go to the C library's own
 * allocator, as does everything while this thread is inside the pool (it mallocs its extent
 * lists). free, realloc and malloc_usable_size tell the two apart by address (omx_shared_size).
 *
 * The cost of a pooled allocation is the pool's: a system call to take its pages and one to give
 * them back at free, unless a freed block of about the size is kept (the cache below), and the
 * size rounded up to pages. fork copies every live pooled block into the child (shm/pool.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "omx_shared_alloc.h"

/* The C library's allocator (glibc exports these for allocators that wrap it). */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

#define HEAP_PAGE 4096u
#define HEAP_MIN_DEFAULT 65536u

/* initial-exec: reading it must not allocate (a dynamic TLS access may call malloc). */
static __thread int in_pool __attribute__((tls_model("initial-exec")));
static size_t heap_min, heap_max; /* heap_min 0: not read yet */

/* A size from the environment: def when unset or not a number, at least floor. */
static size_t env_size(const char *name, size_t def, size_t floor)
{
	const char *v = getenv(name);
	char *end = NULL;
	unsigned long long x = v && *v ? strtoull(v, &end, 0) : 0;
	if (!end || *end)
		return def;
	return x < floor ? floor : (size_t)x;
}

/* Whether a request of n bytes goes to the pool (OMX_SHARED_HEAP_MIN <= n <= OMX_SHARED_HEAP_MAX). */
static int pooled_size(size_t n)
{
	size_t m = __atomic_load_n(&heap_min, __ATOMIC_ACQUIRE);
	if (!m) {
		__atomic_store_n(&heap_max, env_size("OMX_SHARED_HEAP_MAX", SIZE_MAX, HEAP_PAGE), __ATOMIC_RELAXED);
		m = env_size("OMX_SHARED_HEAP_MIN", HEAP_MIN_DEFAULT, HEAP_PAGE);
		__atomic_store_n(&heap_min, m, __ATOMIC_RELEASE);
	}
	return n >= m && n <= __atomic_load_n(&heap_max, __ATOMIC_RELAXED);
}

/*
 * A few freed blocks are kept for the next malloc of their size, as the C library keeps its own:
 * the pool's free gives the pages back (a system call) and its alloc takes fresh ones (another,
 * and a page fault a page at the first touch). A program that mallocs and frees a buffer per
 * message (the libfabric provider's buffer of an unexpected message, ofi/ofx_match.c) paid
 * them at each: 2,600 fallocate calls in 2,000 round trips of 256 KiB under MPI.
 */
#define CACHE_BLOCKS 8
#define CACHE_BLOCK_MAX (16u << 20)
#define CACHE_BYTES_MAX (64u << 20)
static struct {
	pthread_mutex_t lock;
	void *p[CACHE_BLOCKS];
	size_t len[CACHE_BLOCKS];
	unsigned n;
	size_t bytes;
} cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void cache_lock_for_fork(void)
{
	pthread_mutex_lock(&cache.lock);
}

static void cache_unlock_after_fork(void)
{
	pthread_mutex_unlock(&cache.lock);
}

/* The child's cached blocks are its private copies (shm/pool.c): still ours to reuse or free. */
static void __attribute__((constructor)) cache_init(void)
{
	(void)pthread_atfork(cache_lock_for_fork, cache_unlock_after_fork, cache_unlock_after_fork);
}

/* A cached block for n bytes (at least n, at most a quarter more), or NULL; *len its size. */
static void *cache_take(size_t n, size_t *len)
{
	void *p = NULL;
	pthread_mutex_lock(&cache.lock);
	for (unsigned i = cache.n; i-- > 0;) {
		if (cache.len[i] >= n && cache.len[i] - n <= n / 4) {
			p = cache.p[i];
			*len = cache.len[i];
			cache.bytes -= cache.len[i];
			cache.n--;
			cache.p[i] = cache.p[cache.n];
			cache.len[i] = cache.len[cache.n];
			break;
		}
	}
	pthread_mutex_unlock(&cache.lock);
	return p;
}

static int cache_keep(void *p, size_t len)
{
	int kept = 0;
	if (len > CACHE_BLOCK_MAX)
		return 0;
	pthread_mutex_lock(&cache.lock);
	for (unsigned i = 0; i < cache.n; i++)
		if (cache.p[i] == p) { /* freed twice: kept once, never handed out twice */
			pthread_mutex_unlock(&cache.lock);
			return 1;
		}
	if (cache.n < CACHE_BLOCKS && cache.bytes + len <= CACHE_BYTES_MAX) {
		cache.p[cache.n] = p;
		cache.len[cache.n++] = len;
		cache.bytes += len;
		kept = 1;
	}
	pthread_mutex_unlock(&cache.lock);
	return kept;
}

/* A pooled block of at least n bytes, or NULL (then the caller asks the C library); *cached: it
 * came from the cache (not zero-filled). */
static void *pool_get_any(size_t n, int *cached)
{
	*cached = 0;
	if (in_pool || !pooled_size(n))
		return NULL;
	size_t len;
	void *p = cache_take(n, &len);
	if (p) {
		*cached = 1;
		return p;
	}
	in_pool = 1;
	p = omx_shared_alloc(n);
	in_pool = 0;
	return p;
}

static void *pool_get(size_t n)
{
	int cached;
	return pool_get_any(n, &cached);
}

static int pool_put(void *p)
{
	size_t len = p && !in_pool ? omx_shared_size(p) : 0;
	if (!len)
		return 0;
	if (cache_keep(p, len))
		return 1;
	in_pool = 1;
	(void)omx_shared_free(p);
	in_pool = 0;
	return 1;
}

void *malloc(size_t n)
{
	void *p = pool_get(n);
	return p ? p : __libc_malloc(n);
}

void free(void *p)
{
	if (!pool_put(p))
		__libc_free(p);
}

void *calloc(size_t count, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	int cached;
	void *p = pool_get_any(n, &cached); /* zero-filled if fresh: new or punched-out pages */
	if (p && cached)
		memset(p, 0, n);
	return p ? p : __libc_calloc(count, size);
}

/* A block of the C library stays one (its realloc may move it without a copy); a pooled one
 * stays where it is while it fits and stays large. */
void *realloc(void *old, size_t n)
{
	size_t have = old && !in_pool ? omx_shared_size(old) : 0;
	if (!have)
		return old ? __libc_realloc(old, n) : malloc(n);
	if (!n) {
		pool_put(old);
		return NULL;
	}
	if (n <= have && pooled_size(n))
		return old;
	void *p = malloc(n);
	if (!p)
		return NULL;
	memcpy(p, old, n < have ? n : have);
	pool_put(old);
	return p;
}

void *reallocarray(void *old, size_t count, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, n);
}

/* Pool blocks are page-aligned: alignments up to a page are theirs. */
static void *aligned(size_t align, size_t n)
{
	void *p = align <= HEAP_PAGE ? pool_get(n) : NULL;
	return p ? p : __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	void *p = aligned(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return aligned(align, n);
}

void *memalign(size_t align, size_t n)
{
	return aligned(align, n);
}

/* The C library's own is the symbol this one hides: found once, the first time a block of its
 * own is asked about. */
size_t malloc_usable_size(void *p)
{
	static size_t (*libc_usable)(void *);
	size_t have = p ? omx_shared_size(p) : 0;
	if (have || !p)
		return have;
	size_t (*f)(void *) = __atomic_load_n(&libc_usable, __ATOMIC_ACQUIRE);
	if (!f) {
		*(void **)&f = dlsym(RTLD_NEXT, "malloc_usable_size");
		__atomic_store_n(&libc_usable, f, __ATOMIC_RELEASE);
	}
	return f && f != malloc_usable_size ? f(p) : 0;
}
