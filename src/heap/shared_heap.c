/*
 * shared_heap.c - libomx-shared-heap.so, loaded with LD_PRELOAD: a program's large mallocs come
 * from omx_shared_alloc, so that the same-host receivers of messages sent from them read them with
 * one memcpy from the sender's pages (docs/architecture.md, "Shared heap"), with no change to the
 * program. The case it is for: MPI over omx, whose applications allocate their own buffers
 * (Open MPI's MPI_Alloc_mem has no path to a libfabric provider's allocator).
 *
 * Requests of at least OMX_SHARED_HEAP_MIN bytes (environment, read at the first request; 65536
 * by default, at least 4096) go to the pool; smaller ones, and large ones the pool refuses (its
 * reservation full, the shared-memory directory short of space), go to the C library's own
 * allocator, as does everything while this thread is inside the pool (it mallocs its extent
 * lists). free, realloc and malloc_usable_size tell the two apart by address (omx_shared_size).
 *
 * The cost of a pooled allocation is the pool's: a system call to take its pages and one to give
 * them back at free (glibc keeps a freed block of that size for the next malloc instead), and the
 * size rounded up to pages. fork copies every live pooled block into the child (shm/pool.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
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
static size_t heap_min; /* 0: not read yet */

static size_t min_size(void)
{
	size_t m = __atomic_load_n(&heap_min, __ATOMIC_RELAXED);
	if (!m) {
		const char *v = getenv("OMX_SHARED_HEAP_MIN");
		char *end;
		unsigned long long x = v && *v ? strtoull(v, &end, 0) : HEAP_MIN_DEFAULT;
		if (!v || !*v || *end || x < HEAP_PAGE)
			x = v && *v && !*end && x < HEAP_PAGE ? HEAP_PAGE : HEAP_MIN_DEFAULT;
		m = (size_t)x;
		__atomic_store_n(&heap_min, m, __ATOMIC_RELAXED);
	}
	return m;
}

/* A pooled block of at least n bytes, or NULL (then the caller asks the C library). */
static void *pool_get(size_t n)
{
	if (in_pool || n < min_size())
		return NULL;
	in_pool = 1;
	void *p = omx_shared_alloc(n);
	in_pool = 0;
	return p;
}

static int pool_put(void *p)
{
	if (!p || in_pool || !omx_shared_size(p))
		return 0;
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
	void *p = pool_get(n); /* zero-filled: fresh or punched-out pages */
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
	if (n <= have && n >= min_size())
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
