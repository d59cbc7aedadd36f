/*
 * pool.c - shared buffers (omx_shared_alloc): memory that the other processes of the host can
 * map, so that a same-host receiver reads a message straight from its sender's pages with one
 * memcpy instead of process_vm_readv or two copies through the rings.
 *
 * Why an allocator and not the application's own buffers: stock Linux maps another process's
 * memory only where that memory is a shared file. Moving an ordinary buffer into such a file
 * behind the application's back is not safe (after fork the child would share it; a range the
 * application unmaps and maps again must never be read from the old pages, and telling costs a
 * system call a send: docs/performance.md, stop 50). Memory the application asks for by name has
 * no such trap: the range stays ours until omx_shared_free, and what fork shares is documented.
 *
 * One pool a process: a sparse file in the shared-memory directory ("omx-pool-<pid>-<id>.pool",
 * 0600), a page of header then `reserve` bytes, mapped once at a fixed range; allocations are
 * page-rounded extents of it, first fit, their pages allocated in the file at once (fallocate),
 * and a free punches them out again (the memory goes back at once; a later allocation there
 * reads zeros). The owner holds the file's lock for its life (the ring files' sweep removes pools
 * whose owner is gone).
 *
 * A sender names the pool in its ring's header (pool_id: the file's random id) when it exports a
 * buffer inside it; the receiver maps the file read-only (cached, a few pools at a time) and
 * copies from there when every exported segment lies in the pool.
 *
 * After fork the child gets private copies of its parent's live allocations at the same
 * addresses, as it would of malloc'ed memory (the shared heap, heap/shared_heap.c, hands the
 * pool's memory to programs that never asked for sharing), and the rest of the parent's range
 * goes; it allocates from a pool of its own. The copies are "inherited": not in a pool (exports
 * of them are read with process_vm_readv), but freed and sized by the same calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/ring_layout.h"

#define POOL_MAGIC 0x4c504d4fu /* "OMPL" */
#define POOL_VERSION 1u
#define POOL_HDR 4096u
#define POOL_PAGE 4096u
#define POOL_MAPS 16 /* pools of other processes mapped at once */

struct pool_hdr {
	uint32_t magic, version;
	uint32_t pid, id;
	uint64_t base, size; /* the owner's address of the data's first byte, and its size */
};

struct ext {
	uint64_t off, len;
};

/* Sorted extent lists (by offset). */
struct ext_list {
	struct ext *v;
	unsigned n, cap;
};

static struct {
	pthread_mutex_t lock;
	int fd;
	uint32_t id;
	uint8_t *base; /* published last (atomic): omx_shm_pool_contains reads it without the lock */
	uint64_t size;
	uint64_t in_use;
	struct ext_list free_ext, used;
	/* Private copies of the allocations of the pools of our ancestors (fork): absolute addresses
	 * in off, sorted. */
	struct ext_list inherited;
	unsigned inherited_n; /* inherited.n, for a look without the lock */
	int atfork;
	char path[256];
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static struct {
	pthread_mutex_t lock;
	struct pool_map {
		uint32_t pid, id;
		int writable;
		const uint8_t *map; /* the file, header included */
		size_t map_len;
		uint64_t base, size;
		unsigned refs;
		uint64_t last;
	} m[POOL_MAPS];
	uint64_t tick;
	uint64_t copied;
} maps = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void pool_path(char *buf, size_t len, uint32_t pid, uint32_t id)
{
	snprintf(buf, len, "%s/omx-pool-%u-%08x.pool", omx_shm_dir(), pid, id);
}

#define EXT_PAGE_CAP (POOL_PAGE / sizeof(struct ext))

static void ext_list_drop(struct ext_list *l)
{
	if (l->v)
		munmap(l->v, l->cap * sizeof(*l->v));
	memset(l, 0, sizeof(*l));
}

static int ext_insert(struct ext_list *l, unsigned at, struct ext e)
{
	if (l->n == l->cap) {
		/* Pages of our own, not malloc: the shared heap's malloc comes here (and a fork child's
		 * handler fills the inherited list). */
		unsigned cap = l->cap ? 2 * l->cap : EXT_PAGE_CAP;
		struct ext *v = l->v ? mremap(l->v, l->cap * sizeof(*v), cap * sizeof(*v), MREMAP_MAYMOVE)
				     : mmap(NULL, cap * sizeof(*v), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (v == MAP_FAILED)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	memmove(&l->v[at + 1], &l->v[at], (l->n - at) * sizeof(*l->v));
	l->v[at] = e;
	l->n++;
	return 0;
}

static void ext_remove(struct ext_list *l, unsigned at)
{
	memmove(&l->v[at], &l->v[at + 1], (l->n - at - 1) * sizeof(*l->v));
	l->n--;
}

/* The first extent of l at or after off. */
static unsigned ext_find(const struct ext_list *l, uint64_t off)
{
	unsigned lo = 0, hi = l->n;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (l->v[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Our allocations in a fork child's address space: each copied into private memory moved to its
 * own address, the parent's pages of the rest unmapped. An extent whose copy cannot be made (no
 * memory) stays shared with the parent and is left out of the inherited list (never freed). */
static void pool_privatise_in_child(void)
{
	uint8_t *b = pool.base;
	uint64_t at = 0;
	for (unsigned i = 0; i <= pool.used.n; i++) {
		struct ext u = i < pool.used.n ? pool.used.v[i] : (struct ext){ pool.size, 0 };
		if (u.off > at)
			(void)munmap(b + at, (size_t)(u.off - at)); /* the parent's free space */
		at = u.off + u.len;
		if (!u.len)
			continue;
		void *tmp = mmap(NULL, (size_t)u.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (tmp == MAP_FAILED)
			continue;
		memcpy(tmp, b + u.off, (size_t)u.len);
		if (mremap(tmp, (size_t)u.len, (size_t)u.len, MREMAP_MAYMOVE | MREMAP_FIXED, b + u.off) == MAP_FAILED) {
			munmap(tmp, (size_t)u.len);
			continue;
		}
		struct ext a = { (uint64_t)(uintptr_t)(b + u.off), u.len };
		(void)ext_insert(&pool.inherited, ext_find(&pool.inherited, a.off), a);
	}
	__atomic_store_n(&pool.inherited_n, pool.inherited.n, __ATOMIC_RELAXED);
}

static void pool_lock_for_fork(void)
{
	pthread_mutex_lock(&pool.lock);
}

static void pool_unlock_after_fork(void)
{
	pthread_mutex_unlock(&pool.lock);
}

/* The child of a fork: private copies of what its parent had allocated (above), no pool. */
static void pool_forget_in_child(void)
{
	if (pool.base)
		pool_privatise_in_child();
	if (pool.fd >= 0)
		close(pool.fd); /* the parent's descriptor keeps the lock */
	pool.fd = -1;
	pool.id = 0;
	__atomic_store_n(&pool.base, NULL, __ATOMIC_RELEASE);
	pool.size = 0;
	pool.in_use = 0;
	ext_list_drop(&pool.free_ext);
	ext_list_drop(&pool.used);
	memset(&pool.free_ext, 0, sizeof(pool.free_ext));
	memset(&pool.used, 0, sizeof(pool.used));
	pthread_mutex_init(&pool.lock, NULL);
	/* Other pools' mappings are inherited as they are; no copy of ours is running in the child. */
	for (int i = 0; i < POOL_MAPS; i++)
		maps.m[i].refs = 0;
	pthread_mutex_init(&maps.lock, NULL);
}

/* At exit the file goes (the ring files' sweep removes those of processes that crashed). */
static void __attribute__((destructor)) pool_unlink_at_exit(void)
{
	if (pool.fd >= 0)
		(void)unlink(pool.path);
}

static int pool_create(uint64_t reserve)
{
	if (!pool.atfork) {
		if (pthread_atfork(pool_lock_for_fork, pool_unlock_after_fork, pool_forget_in_child))
			return -ENOMEM;
		pool.atfork = 1;
	}
	reserve = (reserve + POOL_PAGE - 1) / POOL_PAGE * POOL_PAGE;
	if (!reserve)
		return -EINVAL;
	char path[256];
	uint32_t id = 0;
	int fd = -1;
	for (int tries = 0; fd < 0 && tries < 8; tries++) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id) || !id)
			continue;
		pool_path(path, sizeof(path), (uint32_t)getpid(), id);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	int err = 0;
	void *m = MAP_FAILED;
	struct pool_hdr h = { POOL_MAGIC, POOL_VERSION, (uint32_t)getpid(), id, 0, reserve };
	if (flock(fd, LOCK_EX | LOCK_NB) < 0 || ftruncate(fd, (off_t)(POOL_HDR + reserve)) < 0) {
		err = -errno;
		goto fail;
	}
	m = mmap(NULL, reserve, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, POOL_HDR);
	if (m == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	h.base = (uint64_t)(uintptr_t)m;
	if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h)) {
		err = errno ? -errno : -EIO;
		goto fail;
	}
	if (ext_insert(&pool.free_ext, 0, (struct ext){ 0, reserve })) {
		err = -ENOMEM;
		goto fail;
	}
	pool.fd = fd;
	pool.id = id;
	snprintf(pool.path, sizeof(pool.path), "%s", path);
	pool.size = reserve;
	__atomic_store_n(&pool.base, (uint8_t *)m, __ATOMIC_RELEASE);
	return 0;
fail:
	if (m != MAP_FAILED)
		munmap(m, reserve);
	unlink(path);
	close(fd);
	return err;
}

void *omx_shm_pool_alloc(size_t len, uint64_t reserve, int *err)
{
	*err = 0;
	if (!len)
		len = 1;
	if (len > (size_t)1 << 46) {
		*err = -ENOMEM;
		return NULL;
	}
	uint64_t n = ((uint64_t)len + POOL_PAGE - 1) / POOL_PAGE * POOL_PAGE;
	void *p = NULL;
	pthread_mutex_lock(&pool.lock);
	if (!pool.base)
		*err = pool_create(reserve);
	for (unsigned i = 0; !*err && i < pool.free_ext.n; i++) {
		struct ext *f = &pool.free_ext.v[i];
		if (f->len < n)
			continue;
		struct ext u = { f->off, n };
		/* The pages now, not at the first touch: a shared-memory directory too small for them
		 * (a container's 64 MiB /dev/shm) is this call's ENOSPC, not a SIGBUS in the
		 * application later. */
		if (fallocate(pool.fd, 0, (off_t)(POOL_HDR + u.off), (off_t)n) < 0) {
			*err = -errno;
			(void)fallocate(pool.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(POOL_HDR + u.off), (off_t)n);
			break;
		}
		if (ext_insert(&pool.used, ext_find(&pool.used, u.off), u)) {
			*err = -ENOMEM;
			break;
		}
		f->off += n;
		f->len -= n;
		if (!f->len)
			ext_remove(&pool.free_ext, i);
		pool.in_use += n;
		p = pool.base + u.off;
		break;
	}
	if (!*err && !p)
		*err = -ENOMEM; /* the reservation is full (OMX_SHARED_POOL_MB) */
	pthread_mutex_unlock(&pool.lock);
	return p;
}

int omx_shm_pool_free(void *ptr)
{
	int err = -EINVAL;
	pthread_mutex_lock(&pool.lock);
	uint8_t *b = pool.base;
	if (b && (uint8_t *)ptr >= b && (uint8_t *)ptr < b + pool.size) {
		uint64_t off = (uint64_t)((uint8_t *)ptr - b);
		unsigned i = ext_find(&pool.used, off);
		if (i < pool.used.n && pool.used.v[i].off == off) {
			struct ext u = pool.used.v[i];
			/* The pages go back now; whoever still reads them (a receiver the application did
			 * not wait for) reads zeros. */
			if (fallocate(pool.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(POOL_HDR + u.off),
				      (off_t)u.len) < 0)
				memset(ptr, 0, u.len); /* keep the zero fill of the next allocation there */
			unsigned j = ext_find(&pool.free_ext, u.off);
			int merged = 0;
			if (j > 0 && pool.free_ext.v[j - 1].off + pool.free_ext.v[j - 1].len == u.off) {
				pool.free_ext.v[j - 1].len += u.len;
				merged = 1;
				if (j < pool.free_ext.n && u.off + u.len == pool.free_ext.v[j].off) {
					pool.free_ext.v[j - 1].len += pool.free_ext.v[j].len;
					ext_remove(&pool.free_ext, j);
				}
			} else if (j < pool.free_ext.n && u.off + u.len == pool.free_ext.v[j].off) {
				pool.free_ext.v[j].off = u.off;
				pool.free_ext.v[j].len += u.len;
				merged = 1;
			}
			err = merged ? 0 : ext_insert(&pool.free_ext, j, u);
			if (!err) {
				ext_remove(&pool.used, i);
				pool.in_use -= u.len;
			}
		}
	} else if (!b || (uint8_t *)ptr < b || (uint8_t *)ptr >= b + pool.size) {
		unsigned i = ext_find(&pool.inherited, (uint64_t)(uintptr_t)ptr);
		if (i < pool.inherited.n && pool.inherited.v[i].off == (uint64_t)(uintptr_t)ptr) {
			err = munmap(ptr, (size_t)pool.inherited.v[i].len) == 0 ? 0 : -errno;
			if (!err) {
				ext_remove(&pool.inherited, i);
				__atomic_store_n(&pool.inherited_n, pool.inherited.n, __ATOMIC_RELAXED);
			}
		}
	}
	pthread_mutex_unlock(&pool.lock);
	return err;
}

size_t omx_shm_pool_size(const void *ptr)
{
	const uint8_t *b = __atomic_load_n(&pool.base, __ATOMIC_ACQUIRE);
	uint64_t a = (uint64_t)(uintptr_t)ptr;
	/* Without the lock for what is plainly outside (the shared heap asks at every free). */
	if ((!b || (const uint8_t *)ptr < b || (const uint8_t *)ptr >= b + pool.size) &&
	    !__atomic_load_n(&pool.inherited_n, __ATOMIC_RELAXED))
		return 0;
	size_t n = 0;
	pthread_mutex_lock(&pool.lock);
	b = pool.base;
	struct ext_list *l = b && (const uint8_t *)ptr >= b && (const uint8_t *)ptr < b + pool.size ? &pool.used
												  : &pool.inherited;
	uint64_t key = l == &pool.used ? a - (uint64_t)(uintptr_t)b : a;
	unsigned i = ext_find(l, key);
	if (i < l->n && l->v[i].off == key)
		n = (size_t)l->v[i].len;
	pthread_mutex_unlock(&pool.lock);
	return n;
}

uint32_t omx_shm_pool_contains(const struct iovec *v, unsigned n)
{
	const uint8_t *b = __atomic_load_n(&pool.base, __ATOMIC_ACQUIRE);
	if (!b || !n)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		const uint8_t *p = v[i].iov_base;
		if (v[i].iov_len && (p < b || p > b + pool.size || v[i].iov_len > (size_t)(b + pool.size - p)))
			return 0;
	}
	return pool.id;
}

void omx_shm_pool_stats(uint64_t *reserved, uint64_t *in_use, uint64_t *copied)
{
	pthread_mutex_lock(&pool.lock);
	*reserved = pool.size;
	*in_use = pool.in_use;
	pthread_mutex_unlock(&pool.lock);
	*copied = __atomic_load_n(&maps.copied, __ATOMIC_RELAXED);
}

/* ---- the receiver's side ---- */

static void map_drop(struct pool_map *m)
{
	munmap((void *)m->map, m->map_len);
	memset(m, 0, sizeof(*m));
}

/* Process pid's pool `id`, mapped (writable: for a sender helping its receiver), with a
 * reference taken (map_put it), or NULL. */
static struct pool_map *map_get(uint32_t pid, uint32_t id, int writable)
{
	struct pool_map *hit = NULL, *spare = NULL;
	pthread_mutex_lock(&maps.lock);
	maps.tick++;
	for (int i = 0; i < POOL_MAPS && !hit; i++) {
		struct pool_map *m = &maps.m[i];
		if (m->map && m->pid == pid && m->id == id && m->writable == writable)
			hit = m;
	}
	if (!hit) {
		/* A free entry, else one whose owner is gone, else the least recently used idle one. */
		for (int i = 0; i < POOL_MAPS; i++) {
			struct pool_map *m = &maps.m[i];
			if (!m->map) {
				spare = m;
				break;
			}
			if (m->refs)
				continue;
			if (kill((pid_t)m->pid, 0) < 0 && errno == ESRCH) {
				map_drop(m);
				spare = m;
				break;
			}
			if (!spare || m->last < spare->last)
				spare = m;
		}
		if (spare && spare->map)
			map_drop(spare);
	}
	if (!hit && spare) {
		char path[256];
		pool_path(path, sizeof(path), pid, id);
		int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		struct pool_hdr h;
		if (fd >= 0 && fstat(fd, &st) == 0 && (st.st_uid == geteuid() || geteuid() == 0) &&
		    pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == POOL_MAGIC &&
		    h.version == POOL_VERSION && h.pid == pid && h.id == id && h.size &&
		    (uint64_t)st.st_size == POOL_HDR + h.size) {
			void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | (writable ? PROT_WRITE : 0),
				       MAP_SHARED | MAP_NORESERVE, fd, 0);
			if (m != MAP_FAILED) {
				*spare = (struct pool_map){ pid, id, writable, m, (size_t)st.st_size, h.base, h.size, 0, 0 };
				hit = spare;
			}
		}
		if (fd >= 0)
			close(fd);
	}
	if (hit) {
		hit->refs++;
		hit->last = maps.tick;
	}
	pthread_mutex_unlock(&maps.lock);
	return hit;
}

static void map_put(struct pool_map *m)
{
	pthread_mutex_lock(&maps.lock);
	m->refs--;
	pthread_mutex_unlock(&maps.lock);
}

void *omx_shm_pool_map(uint32_t pid, uint32_t id, int writable, const struct iovec *segs, unsigned n,
		       struct iovec *local)
{
	if (!pid || !id)
		return NULL;
	struct pool_map *m = map_get(pid, id, writable);
	if (!m)
		return NULL;
	for (unsigned i = 0; i < n; i++) {
		uint64_t a = (uint64_t)(uintptr_t)segs[i].iov_base;
		if (segs[i].iov_len && (a < m->base || a - m->base > m->size || segs[i].iov_len > m->size - (a - m->base))) {
			map_put(m); /* not in that pool (another process's range, the owner's child) */
			return NULL;
		}
		local[i].iov_base = segs[i].iov_len ? (void *)(m->map + POOL_HDR + (a - m->base)) : NULL;
		local[i].iov_len = segs[i].iov_len;
	}
	return m;
}

void omx_shm_pool_unmap(void *handle)
{
	if (handle)
		map_put(handle);
}

int omx_shm_pool_copy_range(const struct iovec *dst, unsigned ndst, const struct iovec *src, unsigned nsrc,
			    uint64_t off, uint64_t len, uint64_t total)
{
	unsigned si = 0, di = 0;
	uint64_t so = off, dof = off;
	while (si < nsrc && so >= src[si].iov_len)
		so -= src[si++].iov_len;
	while (di < ndst && dof >= dst[di].iov_len)
		dof -= dst[di++].iov_len;
	for (uint64_t done = 0; done < len;) {
		while (si < nsrc && so == src[si].iov_len)
			si++, so = 0;
		while (di < ndst && dof == dst[di].iov_len)
			di++, dof = 0;
		if (si == nsrc || di == ndst)
			return -EFAULT;
		uint64_t n = src[si].iov_len - so < dst[di].iov_len - dof ? src[si].iov_len - so : dst[di].iov_len - dof;
		if (n > len - done)
			n = len - done;
		omx_copy((uint8_t *)dst[di].iov_base + dof, (const uint8_t *)src[si].iov_base + so, (size_t)n, total);
		so += n;
		dof += n;
		done += n;
	}
	__atomic_fetch_add(&maps.copied, len, __ATOMIC_RELAXED);
	return 0;
}
