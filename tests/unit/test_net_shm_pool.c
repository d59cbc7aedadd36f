/*
 * test_net_shm_pool.c - shm/pool.c: the pool of shared buffers (omx_shared_alloc) and the
 * single copy read from it.
 *
 * The allocator (alignment, zero fill, reuse after a free, merging, a full reservation, bad
 * frees), a receiver in another process reading an exported pool buffer through a ring (memcpy,
 * no process_vm_readv: the receiver drops the right to call it first), what fork gives a child
 * (its parent's pages, not its pool), a sender helping with memcpy into its receiver's pool
 * buffer (every byte checked), a shared-memory directory too small for an allocation (an error,
 * not a SIGBUS later), and the file of a killed owner swept by the next ring.
 * Pools live in a private OMX_SHM_DIR.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/shm.h"
#include "unit_check.h"

#define KIB 1024u
#define MIB (1024u * 1024u)
#define RESERVE (256u * MIB) /* address space and a sparse file: only touched pages count */

static char dir[64];

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void allocator(void)
{
	int err;
	uint8_t *a = omx_shm_pool_alloc(100, RESERVE, &err);
	CHECK(a != NULL && err == 0);
	if (!a)
		return;
	CHECK(((uintptr_t)a & 4095) == 0);
	CHECK(unit_count_files(dir, "\\.pool$") == 1);
	uint8_t *b = omx_shm_pool_alloc(3 * MIB, RESERVE, &err);
	uint8_t *c = omx_shm_pool_alloc(64 * KIB, RESERVE, &err);
	CHECK(b && c && b >= a + 4096 && c >= b + 3 * MIB);
	CHECK(all_zero(b, 3 * MIB));
	memset(b, 0x5a, 3 * MIB);
	memset(a, 1, 100);

	struct iovec in[2] = { { a, 100 }, { b + 10, 3 * MIB - 10 } };
	uint32_t id = omx_shm_pool_contains(in, 2);
	CHECK(id != 0);
	uint8_t stack[16];
	struct iovec out[2] = { { a, 100 }, { stack, sizeof(stack) } };
	CHECK(omx_shm_pool_contains(out, 2) == 0); /* one segment outside */
	struct iovec past = { c + 60 * KIB, RESERVE }; /* runs past the reservation */
	CHECK(omx_shm_pool_contains(&past, 1) == 0);

	/* Bad frees: not ours, inside an allocation, twice. */
	CHECK(omx_shm_pool_free(stack) == -EINVAL);
	CHECK(omx_shm_pool_free(b + 4096) == -EINVAL);
	CHECK(omx_shm_pool_free(b) == 0);
	CHECK(omx_shm_pool_free(b) == -EINVAL);

	/* The freed extent comes back first fit, its pages punched out: zeros. */
	uint8_t *b2 = omx_shm_pool_alloc(2 * MIB, RESERVE, &err);
	CHECK(b2 == b);
	CHECK(b2 && all_zero(b2, 2 * MIB));

	/* Full: more than is left, NULL and -ENOMEM; nothing else changed. */
	CHECK(omx_shm_pool_alloc(RESERVE, RESERVE, &err) == NULL && err == -ENOMEM);
	uint64_t reserved, in_use, copied;
	omx_shm_pool_stats(&reserved, &in_use, &copied);
	CHECK_EQ(reserved, RESERVE);
	CHECK_EQ(in_use, 4096 + 2 * MIB + 64 * KIB);

	/* Freed in any order, the extents merge back into one: the whole reservation fits. */
	CHECK(omx_shm_pool_free(c) == 0);
	CHECK(omx_shm_pool_free(a) == 0);
	CHECK(omx_shm_pool_free(b2) == 0);
	omx_shm_pool_stats(&reserved, &in_use, &copied);
	CHECK_EQ(in_use, 0);
	uint8_t *all = omx_shm_pool_alloc(RESERVE, RESERVE, &err);
	CHECK(all == a);
	CHECK(all && omx_shm_pool_free(all) == 0);
}

/* Drop root (both sides the same unprivileged user then); 0 or -1. */
static int unprivileged(void)
{
	return getuid() == 0 && (setgid(65534) || setuid(65534)) ? -1 : 0;
}

/* A sender exports pool buffers in its ring; a receiver in another process, refused
 * process_vm_readv (the sender is not dumpable, neither side privileged), still reads them, from
 * the pool. An export not wholly in the pool is not read from it (and is refused). */
static void single_copy_from_pool(void)
{
	const uint8_t mac[6] = { 2, 0, 0, 0, 0, 9 };
	enum { A = 1000000, B = 300001 };
	int to_child[2], to_parent[2];
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
	if (getuid() == 0)
		CHECK(chmod(dir, 0777) == 0);
	fflush(stdout); /* children end with exit(): not twice */
	pid_t sender = fork();
	if (sender == 0) {
		int e;
		char c = 'x';
		if (unprivileged() == 0 && prctl(PR_SET_DUMPABLE, 0) == 0) {
			struct omx_shm_ring *own = omx_shm_ring_create(mac, 3, 1500, 128 << 10, 4, &e);
			uint8_t *a = omx_shm_pool_alloc(A, RESERVE, &e), *b = omx_shm_pool_alloc(B, RESERVE, &e);
			static uint8_t plain[4096];
			if (own && a && b) {
				for (size_t i = 0; i < A; i++)
					a[i] = (uint8_t)(i * 13);
				for (size_t i = 0; i < B; i++)
					b[i] = (uint8_t)((A + i) * 13);
				struct iovec segs[2] = { { a, A }, { b, B } }, mixed[2] = { { a, A }, { plain, 4096 } };
				if (omx_shm_export(own, 4, 2, segs, 2, A + B) == 0 &&
				    omx_shm_export(own, 5, 2, mixed, 2, A + 4096) == 0)
					c = 'r';
			}
		}
		(void)!write(to_parent[1], &c, 1);
		(void)!read(to_child[0], &c, 1);
		exit(0); /* not _exit: the exit handler removes the pool's file */
	}
	char c = 0;
	CHECK(read(to_parent[0], &c, 1) == 1 && c == 'r');
	fflush(stdout); /* children end with exit(): not twice */
	pid_t reader = fork();
	if (reader == 0) {
		int bad = 0, e;
		if (unprivileged())
			_exit(10);
		struct omx_shm_ring *peer = omx_shm_ring_attach(mac, 3, &e);
		if (!peer)
			_exit(11);
		if (!omx_shm_export_pooled(peer, 4, 2) || omx_shm_export_pooled(peer, 4, 3) ||
		    omx_shm_export_pooled(peer, 5, 2))
			_exit(12);
		size_t total = A + B;
		uint8_t *d = calloc(1, total);
		struct iovec dst[3] = { { d, 7 }, { d + 7, 800000 }, { d + 800007, total - 800007 } };
		if (omx_shm_single_copy(peer, 4, 2, dst, 3, total, 0) != 1)
			_exit(13);
		for (size_t i = 0; i < total; i++)
			bad += d[i] != (uint8_t)(i * 13);
		if (bad)
			_exit(14);
		uint64_t reserved, in_use, copied;
		omx_shm_pool_stats(&reserved, &in_use, &copied);
		if (copied != total || reserved != 0)
			_exit(15); /* counted, and no pool of our own was needed */
		int r = omx_shm_single_copy(peer, 5, 2, dst, 1, 7, 0);
		if (r != -EPERM && r != -EACCES)
			_exit(16);
		_exit(0);
	}
	int status;
	waitpid(reader, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fprintf(stderr, "receiver exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	(void)!write(to_child[1], "q", 1);
	waitpid(sender, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (getuid() == 0)
		CHECK(chmod(dir, 0700) == 0);
	CHECK(unit_count_files(dir, "\\.pool$") == 1); /* the sender's went at its exit; ours stays */
	for (int i = 0; i < 4; i++)
		close(i < 2 ? to_child[i] : to_parent[i - 2]);
}

/* After fork: the child has a private copy of its parent's buffer at the same address (as of
 * malloc'ed memory), not in any pool but sized and freed by the same calls; it allocates from a
 * new pool. */
static void fork_child(void)
{
	int err;
	uint8_t *p = omx_shm_pool_alloc(8192, RESERVE, &err);
	CHECK(p != NULL);
	if (!p)
		return;
	p[0] = 0x55;
	p[8191] = 0x66;
	struct iovec v = { p, 8192 };
	uint32_t id = omx_shm_pool_contains(&v, 1);
	fflush(stdout); /* children end with exit(): not twice */
	pid_t pid = fork();
	if (pid == 0) {
		if (omx_shm_pool_contains(&v, 1) != 0)
			_exit(20);
		if (p[0] != 0x55 || p[8191] != 0x66 || omx_shm_pool_size(p) != 8192)
			_exit(21);
		p[0] = 0x77; /* its own copy */
		if (omx_shm_pool_free(p) != 0 || omx_shm_pool_size(p) != 0 || omx_shm_pool_free(p) != -EINVAL)
			_exit(24);
		uint8_t *q = omx_shm_pool_alloc(4096, RESERVE, &err);
		struct iovec w = { q, 4096 };
		uint32_t mine = q ? omx_shm_pool_contains(&w, 1) : 0;
		exit(!mine || mine == id ? 22 : 0); /* exit: its pool's file goes */
	}
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(p[0] == 0x55); /* the child's write stayed its own */
	CHECK(omx_shm_pool_contains(&v, 1) == id);
	CHECK(omx_shm_pool_free(p) == 0);
	CHECK(unit_count_files(dir, "\\.pool$") == 1); /* the child's went at its exit */
}

static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* Both buffers pooled: the receiver opens the export for cooperation and the sender writes its
 * chunks with memcpy through the receiver's pool file (pinned to CPUs 0 and 1: a receiver on the
 * sender's CPU reads alone). Tried a few times: the sender must get a chunk before the receiver
 * has claimed them all. */
#define COOP_LEN (32u * MIB + 4321u)
#define COOP_CHUNK (256u * KIB)
static void sender_helps(void)
{
	if (pin(1) != 0 || pin(0) != 0) {
		printf("sender_helps: skipped (no two CPUs to pin to)\n");
		return;
	}
	const uint8_t mac[6] = { 2, 0, 0, 0, 0, 11 };
	int err;
	uint8_t *d = omx_shm_pool_alloc(COOP_LEN, RESERVE, &err);
	CHECK(d != NULL);
	if (!d)
		return;
	uint64_t written = 0;
	int tries = 0, bad = 1;
	for (; tries < 5 && !written; tries++) {
		int to_child[2], to_parent[2];
		CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
		fflush(stdout); /* children end with exit(): not twice */
		pid_t pid = fork();
		if (pid == 0) {
			char c = 'x';
			uint64_t w = 0;
			struct omx_shm_ring *own = pin(1) == 0 ? omx_shm_ring_create(mac, 2, 1500, 128 << 10, 4, &err) : NULL;
			uint8_t *a = omx_shm_pool_alloc(COOP_LEN, RESERVE, &err);
			if (own && a) {
				for (size_t i = 0; i < COOP_LEN; i++)
					a[i] = (uint8_t)(i * 31 + 7);
				struct iovec seg = { a, COOP_LEN };
				if (omx_shm_export(own, 4, 1, &seg, 1, COOP_LEN) == 0)
					c = 'r';
			}
			(void)!write(to_parent[1], &c, 1);
			if (c == 'r')
				while (omx_shm_coop_serve(own, 4, COOP_CHUNK, &w) == 0)
					;
			(void)!write(to_parent[1], &w, sizeof(w));
			(void)!read(to_child[0], &c, 1);
			exit(0);
		}
		char c = 0;
		CHECK(read(to_parent[0], &c, 1) == 1 && c == 'r');
		struct omx_shm_ring *peer = omx_shm_ring_attach(mac, 2, &err);
		CHECK(peer != NULL);
		memset(d, 0, COOP_LEN);
		struct iovec dst = { d, COOP_LEN };
		CHECK(peer && omx_shm_single_copy(peer, 4, 1, &dst, 1, COOP_LEN, COOP_CHUNK) == 1);
		CHECK(read(to_parent[0], &written, sizeof(written)) == (ssize_t)sizeof(written));
		bad = 0;
		for (size_t i = 0; i < COOP_LEN; i++)
			bad += d[i] != (uint8_t)(i * 31 + 7);
		CHECK_EQ(bad, 0);
		if (peer)
			omx_shm_ring_close(peer);
		(void)!write(to_child[1], "q", 1);
		int status;
		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		for (int i = 0; i < 2; i++)
			close(to_child[i]), close(to_parent[i]);
	}
	printf("sender_helps: the sender wrote %llu of %u bytes with memcpy (try %d)\n", (unsigned long long)written,
	       COOP_LEN, tries);
	CHECK(written > 0 && written < COOP_LEN);
	CHECK(omx_shm_pool_free(d) == 0);
	cpu_set_t all;
	CPU_ZERO(&all);
	for (int i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &all);
	(void)sched_setaffinity(0, sizeof(all), &all);
}

/* A shared-memory directory too small for an allocation (a 4 MiB tmpfs, as a container's small
 * /dev/shm): the call fails with -ENOSPC, a smaller one still works, and nothing is left
 * allocated. Needs the right to mount (root); skipped otherwise. */
static void small_directory(void)
{
	char small[96];
	snprintf(small, sizeof(small), "%s/small", dir);
	if (mkdir(small, 0700) != 0 || mount("omxpooltest", small, "tmpfs", 0, "size=4m") != 0) {
		printf("small_directory: skipped (cannot mount a tmpfs here)\n");
		rmdir(small);
		return;
	}
	fflush(stdout); /* children end with exit(): not twice */
	pid_t pid = fork();
	if (pid == 0) { /* a process of its own: its pool goes in the small directory */
		int err = 0, rc = 0;
		setenv("OMX_SHM_DIR", small, 1);
		uint8_t *big = omx_shm_pool_alloc(8u * MIB, RESERVE, &err);
		if (big || err != -ENOSPC)
			rc = 30;
		uint8_t *ok = rc ? NULL : omx_shm_pool_alloc(1u * MIB, RESERVE, &err);
		if (!rc && !ok)
			rc = 31;
		if (!rc) {
			memset(ok, 0x11, MIB);
			uint64_t reserved, in_use, copied;
			omx_shm_pool_stats(&reserved, &in_use, &copied);
			if (in_use != MIB || omx_shm_pool_free(ok) != 0)
				rc = 32;
		}
		exit(rc);
	}
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fprintf(stderr, "small_directory: child exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	CHECK(umount(small) == 0);
	rmdir(small);
}

/* A pool whose owner was killed (no exit handler ran) is removed by the next ring's sweep. */
static void killed_owner(void)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	fflush(stdout); /* children end with exit(): not twice */
	pid_t pid = fork();
	if (pid == 0) {
		int err;
		char c = omx_shm_pool_alloc(4096, RESERVE, &err) ? 'y' : 'n';
		(void)!write(fds[1], &c, 1);
		pause();
		_exit(0);
	}
	char c = 0;
	CHECK(read(fds[0], &c, 1) == 1 && c == 'y');
	CHECK(unit_count_files(dir, "\\.pool$") == 2);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK(unit_count_files(dir, "\\.pool$") == 2); /* still there: nobody swept yet */
	const uint8_t mac[6] = { 2, 0, 0, 0, 0, 10 };
	int err;
	struct omx_shm_ring *r = omx_shm_ring_create(mac, 1, 1500, 128 << 10, 4, &err);
	CHECK(r != NULL);
	CHECK(unit_count_files(dir, "\\.pool$") == 1); /* ours stays: we hold its lock */
	if (r)
		omx_shm_ring_close(r);
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/omx-pool-test.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	setenv("OMX_SHM_DIR", dir, 1);
	allocator();
	single_copy_from_pool();
	fork_child();
	sender_helps();
	small_directory();
	killed_owner();
	return unit_finish(dir);
}
