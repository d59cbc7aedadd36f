/*
 * test_net_shm_huge.c - shm/huge.c: large same-host buffers moved to huge pages on their Nth use.
 *
 * The kernel's own account is the judge: /proc/self/smaps' AnonHugePages of the mapping holding
 * the buffer. Where the kernel cannot collapse (THP "never", a kernel before 6.1) the collapse
 * checks are skipped, and nothing may be reported collapsed.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "shm/shm.h"
#include "unit_check.h"

#define MIB (1ull << 20)

/* AnonHugePages (bytes) of the mapping that contains p; -1 if not found. */
static long long anon_huge(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	long long kb = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
			continue;
		}
		if (in && sscanf(line, "AnonHugePages: %lld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb < 0 ? -1 : kb * 1024;
}

/* The THP mode line ("always [madvise] never"), "" if there is none. */
static void thp_mode(char *mode, size_t len)
{
	mode[0] = 0;
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	if (f) {
		if (!fgets(mode, (int)len, f))
			mode[0] = 0;
		fclose(f);
	}
}

/* Can this kernel collapse anonymous memory: THP not "never", Linux 6.1 or later? */
static int thp_usable(void)
{
	char mode[128];
	thp_mode(mode, sizeof(mode));
	struct utsname u;
	int major = 0, minor = 0;
	if (uname(&u) == 0)
		(void)sscanf(u.release, "%d.%d", &major, &minor);
	return mode[0] && !strstr(mode, "[never]") && (major > 6 || (major == 6 && minor >= 1));
}

/* THP in "madvise" mode: anonymous memory faults in small pages unless asked otherwise. */
static int thp_madvise_mode(void)
{
	char mode[128];
	thp_mode(mode, sizeof(mode));
	return strstr(mode, "[madvise]") != NULL;
}

static uint8_t *aligned_map(size_t len, uint8_t **base, size_t *maplen)
{
	*maplen = len + 4 * MIB;
	*base = mmap(NULL, *maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*base == MAP_FAILED)
		return NULL;
	return (uint8_t *)(((uintptr_t)*base + 2 * MIB - 1) & ~(uintptr_t)(2 * MIB - 1));
}

int main(void)
{
	const uint32_t after = 3;
	omx_shm_huge_set_after(after);
	CHECK_EQ(omx_shm_huge_after(), after);

	/* Shared memory first (MAP_SHARED: shmem, whose THP is often "never" while anonymous memory's
	 * is "madvise"): whatever the kernel answers for it, anonymous buffers must still be
	 * collapsed afterwards (a refusal of one mapping is not a refusal of all). */
	uint8_t *shm = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(shm != MAP_FAILED);
	if (shm != MAP_FAILED) {
		memset(shm, 7, 4 * MIB);
		struct iovec sv = { shm, 4 * MIB };
		for (uint32_t i = 0; i < after; i++)
			(void)omx_shm_huge_use(&sv, 1, sv.iov_len);
		munmap(shm, 4 * MIB);
	}
	/* Collapsed or not (refused on the AMD VM in the plain build, collapsed in the sanitizer
	 * builds on the same kernel: shmem's rules are not ours to test), counted from here. */
	uint64_t shm_bytes, shm_failures;
	int shm_off;
	omx_shm_huge_stats(&shm_bytes, &shm_failures, &shm_off);

	/* A 7 MiB buffer 4 KiB into a 2 MiB-aligned area: its range rounds out to 8 MiB. */
	uint8_t *base, *area;
	size_t maplen;
	area = aligned_map(8 * MIB, &base, &maplen);
	CHECK(area != NULL);
	if (!area)
		return unit_finish(NULL);
	/* No MADV_HUGEPAGE: under THP "madvise" the pages fault in small and khugepaged leaves the
	 * mapping alone (with it, khugepaged collapsed the area by itself during the test once);
	 * MADV_COLLAPSE does not need it. Under "always" they may fault in huge already. */
	int small_faults = thp_madvise_mode();
	memset(area, 0x5a, 8 * MIB);
	struct iovec buf = { area + 4096, 7 * MIB };
	uint64_t bytes, failures;
	int off;
	long long before = anon_huge(area);
	for (uint32_t i = 1; i < after; i++)
		CHECK_EQ(omx_shm_huge_use(&buf, 1, buf.iov_len), 0);
	omx_shm_huge_stats(&bytes, &failures, &off);
	CHECK_EQ(bytes, shm_bytes);
	if (small_faults)
		CHECK_EQ(anon_huge(area), before);
	uint64_t got = omx_shm_huge_use(&buf, 1, buf.iov_len);
	omx_shm_huge_stats(&bytes, &failures, &off);
	if (!thp_usable()) {
		printf("SKIP collapse checks: transparent huge pages off or a kernel before 6.1 (%llu failures, off %d)\n",
		       (unsigned long long)failures, off);
		CHECK_EQ(got, 0);
	} else {
		CHECK_EQ(got, 8 * MIB);
		CHECK_EQ(bytes, shm_bytes + 8 * MIB);
		CHECK(anon_huge(area) >= (long long)(6 * MIB)); /* the kernel may keep a page small */
		uint8_t ok = 1;
		for (size_t i = 0; i < 8 * MIB; i += 4096)
			ok &= area[i] == 0x5a;
		CHECK(ok); /* contents unchanged */

		/* Memory freed and mapped again in small pages at the same place: collapsed again at
		 * the next recheck (64 uses after the collapse). */
		CHECK(mmap(area, 8 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == area);
		memset(area, 0x33, 8 * MIB);
		long long small = anon_huge(area);
		uint64_t again = 0;
		int calls = 0;
		while (!again && calls < 64)
			calls++, again = omx_shm_huge_use(&buf, 1, buf.iov_len);
		CHECK_EQ(calls, 64);
		CHECK_EQ(again, 8 * MIB);
		CHECK(anon_huge(area) >= (long long)(6 * MIB) && (!small_faults || anon_huge(area) > small));
		CHECK(area[4096] == 0x33 && area[8 * MIB - 1] == 0x33);

		/* Rounded out, a buffer's range reaches a neighbouring mapping the kernel refuses (the
		 * first 2 MiB of the area kept in small pages, a mapping of its own): the buffer's own
		 * whole huge pages are collapsed instead, 4 MiB of [1 MiB, 7 MiB). */
		uint8_t *nbbase;
		size_t nblen;
		uint8_t *nb = aligned_map(8 * MIB, &nbbase, &nblen);
		CHECK(nb != NULL);
		if (nb) {
			CHECK(madvise(nb, 2 * MIB, MADV_NOHUGEPAGE) == 0);
			memset(nb, 3, 8 * MIB);
			struct iovec nbv = { nb + MIB, 6 * MIB };
			uint64_t n = 0;
			for (uint32_t i = 0; i < after; i++)
				n += omx_shm_huge_use(&nbv, 1, nbv.iov_len);
			CHECK_EQ(n, 4 * MIB);
			CHECK(anon_huge(nb + 2 * MIB) >= (long long)(4 * MIB));
			CHECK_EQ(anon_huge(nb), 0);
			munmap(nbbase, nblen);
		}

		/* A mapping the application keeps in small pages (MADV_NOHUGEPAGE): the kernel refuses
		 * it for good, it is not asked again, and the rest stays on. */
		uint8_t *nbase;
		size_t nlen;
		uint8_t *nohuge = aligned_map(4 * MIB, &nbase, &nlen);
		CHECK(nohuge != NULL);
		if (nohuge) {
			(void)madvise(nohuge, 4 * MIB, MADV_NOHUGEPAGE);
			memset(nohuge, 1, 4 * MIB);
			struct iovec nv = { nohuge, 4 * MIB };
			uint64_t f0, f1, b0;
			omx_shm_huge_stats(&b0, &f0, &off);
			uint64_t n = 0;
			for (uint32_t i = 0; i < after + 300; i++)
				n += omx_shm_huge_use(&nv, 1, nv.iov_len);
			omx_shm_huge_stats(&bytes, &f1, &off);
			CHECK_EQ(n, 0);
			CHECK_EQ(f1, f0 + 1);
			CHECK_EQ(off, 0);
			CHECK_EQ(anon_huge(nohuge), 0);
			munmap(nbase, nlen);
		}
	}

	/* Segments under OMX_SHM_HUGE_MIN are not counted, whatever their number of uses. */
	struct iovec small_seg = { area + 4096, OMX_SHM_HUGE_MIN - 1 };
	uint64_t sum = 0;
	for (int i = 0; i < 20; i++)
		sum += omx_shm_huge_use(&small_seg, 1, small_seg.iov_len);
	CHECK_EQ(sum, 0);

	/* Ranges are remembered 32 at a time, the least recently used forgotten first: counting only
	 * (nothing reaches the count, so nothing is asked of the kernel: the addresses need not be
	 * mapped). */
	omx_shm_huge_set_after(3);
	uintptr_t far = (uintptr_t)1 << 44;
	struct iovec a = { (void *)far, 2 * MIB };
	CHECK_EQ(omx_shm_huge_use(&a, 1, a.iov_len), 0);
	CHECK_EQ(omx_shm_huge_use(&a, 1, a.iov_len), 0); /* a: 2 uses */
	for (int i = 1; i <= 32; i++) {
		struct iovec o = { (void *)(far + (uintptr_t)i * 4 * MIB), 2 * MIB };
		CHECK_EQ(omx_shm_huge_use(&o, 1, o.iov_len), 0);
	}
	/* a was forgotten: its third use is a first one. Were it not, the call would reach the
	 * count and ask the kernel to collapse an unmapped range (a counted failure). */
	omx_shm_huge_stats(&bytes, &failures, &off);
	uint64_t failures_before = failures;
	CHECK_EQ(omx_shm_huge_use(&a, 1, a.iov_len), 0);
	omx_shm_huge_stats(&bytes, &failures, &off);
	CHECK_EQ(failures, failures_before);
	/* ... and the most recent of the others still counts: its third use reaches the kernel,
	 * which cannot collapse unmapped memory. */
	int refused = off;
	struct iovec last = { (void *)(far + 32 * 4 * MIB), 2 * MIB };
	CHECK_EQ(omx_shm_huge_use(&last, 1, last.iov_len), 0);
	CHECK_EQ(omx_shm_huge_use(&last, 1, last.iov_len), 0);
	omx_shm_huge_stats(&bytes, &failures, &off);
	CHECK_EQ(failures, failures_before + (refused ? 0 : 1));

	/* Only the bytes the message fills count (a receive buffer larger than its message): of two
	 * 2 MiB segments and 2.5 MiB, the second's 0.5 MiB is under the minimum. Unmapped
	 * addresses again: a range reaching the count shows as one failed request. */
	omx_shm_huge_set_after(3);
	struct iovec two[2] = { { (void *)(far + 256 * MIB), 2 * MIB }, { (void *)(far + 512 * MIB), 2 * MIB } };
	omx_shm_huge_stats(&bytes, &failures_before, &off);
	refused = off;
	for (int i = 0; i < 3; i++)
		CHECK_EQ(omx_shm_huge_use(two, 2, 5 * MIB / 2), 0);
	omx_shm_huge_stats(&bytes, &failures, &off);
	CHECK_EQ(failures, failures_before + (refused ? 0 : 1)); /* the first segment only */
	for (int i = 0; i < 3; i++)
		CHECK_EQ(omx_shm_huge_use(two, 2, 3 * MIB), 0); /* now the second's 1 MiB counts too */
	omx_shm_huge_stats(&bytes, &failures, &off);
	CHECK_EQ(failures, failures_before + (refused ? 0 : 2));

	/* 0: never. */
	omx_shm_huge_set_after(0);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(omx_shm_huge_use(&buf, 1, buf.iov_len), 0);
	omx_shm_huge_stats(&bytes, &failures, &off);
	CHECK(off);

	munmap(base, maplen);
	return unit_finish(NULL);
}
