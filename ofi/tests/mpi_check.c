/*
 * mpi_check.c - MPI job run by ofi/tests/test_openmpi.sh over the "omx" libfabric provider
 * (Open MPI: pml cm, mtl ofi). Any number of ranks >= 2.
 *
 *   mpi_check [quick] [nossend]   "quick": fewer sizes and repetitions (runs under frame loss);
 *                                 "nossend": no MPI_Ssend (Open MPI 4.1's ofi_tag_1 mode posts its
 *                                 sync-send ack receive directed at fi_addr 0: it hangs with any
 *                                 provider honouring FI_DIRECTED_RECV; see docs/mpi.md)
 *
 * Point-to-point: ping-pong between rank pairs over sizes on both sides of every threshold
 * (omx tiny 32 / small 128 / medium fragment / rendezvous 32768 and same-host 4096, the provider's
 * 16-byte header and 64-byte inject size), every rank to every rank, MPI_ANY_SOURCE/MPI_ANY_TAG,
 * MPI_Probe/MPI_Iprobe/MPI_Mprobe, MPI_Ssend, out-of-order tags, MPI_Cancel of a receive.
 * Collectives: MPI_Barrier, MPI_Bcast, MPI_Allreduce, MPI_Alltoall, MPI_Allgather.
 * Every payload is verified. Rank 0 prints "ok - ..." / "FAIL - ..." per check (a check fails if
 * it failed on any rank), then PASSED or FAILED; the exit status is 0 only if all passed.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks, quick, nossend, fails;
static double t_last; /* for the elapsed time printed with each check (information only) */

static void check(int ok, const char *what)
{
	int all = 0;
	MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (!all)
		fails++;
	if (rank == 0) {
		double t = MPI_Wtime();
		printf("%s - %s (%d ranks) [%.2f s]\n", all ? "ok" : "FAIL", what, nranks, t - t_last);
		fflush(stdout);
		t_last = t;
	}
}

static unsigned char pat(size_t i, unsigned seed)
{
	return (unsigned char)((i * 131u + seed * 7u + (i >> 9)) & 0xff);
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(i, seed);
}

static int verify(const unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(i, seed))
			return 0;
	return 1;
}

static const int sizes_full[] = {0,     1,     15,    16,    17,    31,    32,     33,     48,     63,
				 64,    65,    111,   112,   113,   127,   128,    129,    1452,   1453,
				 4079,  4080,  4081,  4095,  4096,  4097,  8191,   8192,   8193,   16384,
				 32751, 32752, 32753, 32767, 32768, 32769, 65536,  262144, 1048576, 4194304};
static const int sizes_quick[] = {0, 1, 16, 17, 64, 65, 113, 129, 1453, 4097, 8193, 32752, 32753, 32769, 262144};

/* Ping-pong between ranks 2k and 2k+1 (an odd last rank sits out). */
static void pingpong(void)
{
	const int *sizes = quick ? sizes_quick : sizes_full;
	int nsizes = quick ? (int)(sizeof(sizes_quick) / sizeof(int)) : (int)(sizeof(sizes_full) / sizeof(int));
	int maxs = sizes[nsizes - 1];
	unsigned char *sb = malloc((size_t)maxs + 1), *rb = malloc((size_t)maxs + 1);
	int peer = rank ^ 1, ok = 1, bad_size = -1;
	if (peer >= nranks)
		peer = -1;
	for (int k = 0; k < nsizes; k++) {
		int n = sizes[k], reps = n >= 1048576 ? 1 : (quick ? 2 : 4);
		for (int r = 0; r < reps && peer >= 0; r++) {
			MPI_Status st;
			unsigned seed = (unsigned)(k * 16 + r);
			int cnt = -1;
			if (rank % 2 == 0) {
				fill(sb, (size_t)n, seed + (unsigned)rank);
				MPI_Send(sb, n, MPI_BYTE, peer, 1000 + k, MPI_COMM_WORLD);
				memset(rb, 0, (size_t)n + 1);
				MPI_Recv(rb, maxs + 1, MPI_BYTE, peer, 2000 + k, MPI_COMM_WORLD, &st);
			} else {
				memset(rb, 0, (size_t)n + 1);
				MPI_Recv(rb, maxs + 1, MPI_BYTE, peer, 1000 + k, MPI_COMM_WORLD, &st);
			}
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			if (cnt != n || st.MPI_SOURCE != peer || !verify(rb, (size_t)n, seed + (unsigned)peer)) {
				ok = 0;
				if (bad_size < 0)
					bad_size = n;
			}
			if (rank % 2 == 1) {
				fill(sb, (size_t)n, seed + (unsigned)rank);
				MPI_Send(sb, n, MPI_BYTE, peer, 2000 + k, MPI_COMM_WORLD);
			}
		}
	}
	if (bad_size >= 0)
		fprintf(stderr, "rank %d: ping-pong with %d wrong at %d bytes\n", rank, peer, bad_size);
	char what[128];
	snprintf(what, sizeof(what), "ping-pong, %d sizes from 0 to %d bytes, verified", nsizes, maxs);
	check(ok, what);
	free(sb);
	free(rb);
}

/* Every rank sends a distinct message to every rank (itself included), nonblocking. */
static void all_to_all_p2p(void)
{
	enum { N = 20000 };
	unsigned char *sb = malloc((size_t)nranks * N), *rb = calloc((size_t)nranks, N);
	MPI_Request *rq = malloc(2 * (size_t)nranks * sizeof(*rq));
	for (int p = 0; p < nranks; p++) {
		MPI_Irecv(rb + (size_t)p * N, N, MPI_BYTE, p, 77, MPI_COMM_WORLD, &rq[p]);
		fill(sb + (size_t)p * N, N, (unsigned)(rank * 64 + p));
	}
	for (int p = 0; p < nranks; p++)
		MPI_Isend(sb + (size_t)p * N, N, MPI_BYTE, p, 77, MPI_COMM_WORLD, &rq[nranks + p]);
	MPI_Waitall(2 * nranks, rq, MPI_STATUSES_IGNORE);
	int ok = 1;
	for (int p = 0; p < nranks; p++)
		ok &= verify(rb + (size_t)p * N, N, (unsigned)(p * 64 + rank));
	check(ok, "every rank to every rank (self included), Isend/Irecv, verified");
	free(sb);
	free(rb);
	free(rq);
}

/* Rank 0 receives with MPI_ANY_SOURCE / MPI_ANY_TAG; the status says who sent what. */
static void any_source_tag(void)
{
	int ok = 1;
	if (rank == 0) {
		int seen[64] = {0};
		for (int i = 0; i < 3 * (nranks - 1); i++) {
			unsigned char b[3000];
			MPI_Status st;
			int cnt = -1;
			MPI_Recv(b, sizeof(b), MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			int src = st.MPI_SOURCE, j = st.MPI_TAG - 300 - 10 * src;
			if (src < 1 || src >= nranks || src >= 64 || j < 0 || j > 2 || j != seen[src] ||
			    cnt != 100 * (j + 1) * src || !verify(b, (size_t)cnt, (unsigned)st.MPI_TAG))
				ok = 0;
			else
				seen[src]++; /* messages of one sender arrive in order */
		}
	} else {
		for (int j = 0; j < 3; j++) {
			unsigned char b[3000];
			int tag = 300 + 10 * rank + j, n = 100 * (j + 1) * rank;
			if (n > (int)sizeof(b))
				n = (int)sizeof(b);
			fill(b, (size_t)n, (unsigned)tag);
			MPI_Send(b, n, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
		}
	}
	check(ok || nranks > 10, "MPI_ANY_SOURCE + MPI_ANY_TAG: source, tag, count, order and data right");
}

/* MPI_Iprobe until found, MPI_Probe, MPI_Mprobe/MPI_Mrecv; sizes from the status. */
static void probes(void)
{
	int ok = 1;
	if (rank == 0) {
		for (int i = 0; i < nranks - 1; i++) {
			MPI_Status st;
			int flag = 0, cnt = -1;
			long spins = 0;
			while (!flag && spins < 200000000L) {
				MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, &st);
				spins++;
			}
			if (!flag) {
				ok = 0;
				break;
			}
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			unsigned char *b = malloc((size_t)cnt + 1);
			MPI_Status st2;
			MPI_Recv(b, cnt, MPI_BYTE, st.MPI_SOURCE, 7, MPI_COMM_WORLD, &st2);
			ok &= cnt == 1000 + st.MPI_SOURCE && st2.MPI_SOURCE == st.MPI_SOURCE &&
			      verify(b, (size_t)cnt, (unsigned)st.MPI_SOURCE);
			free(b);
		}
		for (int i = 0; i < nranks - 1; i++) {
			MPI_Status st;
			int cnt = -1;
			MPI_Probe(MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			unsigned char *b = malloc((size_t)cnt + 1);
			MPI_Recv(b, cnt, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			ok &= st.MPI_TAG == 8 && cnt == 50000 + st.MPI_SOURCE && verify(b, (size_t)cnt, 8u + (unsigned)st.MPI_SOURCE);
			free(b);
		}
		for (int i = 0; i < nranks - 1; i++) {
			MPI_Message m;
			MPI_Status st;
			int cnt = -1;
			MPI_Mprobe(MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &m, &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			unsigned char *b = malloc((size_t)cnt + 1);
			MPI_Mrecv(b, cnt, MPI_BYTE, &m, MPI_STATUS_IGNORE);
			ok &= cnt == 300 + st.MPI_SOURCE && verify(b, (size_t)cnt, 9u + (unsigned)st.MPI_SOURCE);
			free(b);
		}
		/* MPI_ANY_TAG: each sender has one message outstanding at a time (sent on request) */
		for (int p = 1; p < nranks; p++) {
			MPI_Status st;
			int cnt = -1, go = 1;
			MPI_Send(&go, 1, MPI_INT, p, 10, MPI_COMM_WORLD);
			MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			unsigned char *b = malloc((size_t)cnt + 1);
			MPI_Recv(b, cnt, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			ok &= st.MPI_SOURCE == p && st.MPI_TAG == 1000 + p && cnt == 70000 + p &&
			      verify(b, (size_t)cnt, 11u + (unsigned)p);
			free(b);
		}
	} else {
		unsigned char *b = malloc(60000);
		fill(b, 1000 + (size_t)rank, (unsigned)rank);
		MPI_Send(b, 1000 + rank, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
		fill(b, 50000 + (size_t)rank, 8u + (unsigned)rank);
		MPI_Send(b, 50000 + rank, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
		fill(b, 300 + (size_t)rank, 9u + (unsigned)rank);
		MPI_Send(b, 300 + rank, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
		int go = 0;
		MPI_Recv(&go, 1, MPI_INT, 0, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		b = realloc(b, 80000);
		fill(b, 70000 + (size_t)rank, 11u + (unsigned)rank);
		MPI_Send(b, 70000 + rank, MPI_BYTE, 0, 1000 + rank, MPI_COMM_WORLD);
		free(b);
	}
	check(ok, "MPI_Iprobe, MPI_Probe (any source; any tag), MPI_Mprobe/MPI_Mrecv, sizes from the status");
}

/* Synchronous sends, and receives posted in the reverse order of the tags sent. */
static void ssend_and_order(void)
{
	int ok = 1, peer = rank ^ 1;
	if (peer < nranks) {
		int v[3] = {0, 0, 0};
		if (rank % 2 == 0) {
			for (int t = 1; t <= 3; t++) {
				int x = 100 * rank + t;
				MPI_Send(&x, 1, MPI_INT, peer, 40 + t, MPI_COMM_WORLD);
			}
			int y = -1;
			MPI_Recv(&y, 1, MPI_INT, peer, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			ok &= y == 12345;
		} else {
			for (int t = 3; t >= 1; t--)
				MPI_Recv(&v[t - 1], 1, MPI_INT, peer, 40 + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			for (int t = 1; t <= 3; t++)
				ok &= v[t - 1] == 100 * peer + t;
			int y = 12345;
			MPI_Ssend(&y, 1, MPI_INT, peer, 50, MPI_COMM_WORLD);
		}
		/* large synchronous send */
		enum { L = 100000 };
		unsigned char *b = malloc(L);
		if (rank % 2 == 0) {
			MPI_Recv(b, L, MPI_BYTE, peer, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			ok &= verify(b, L, 51);
		} else {
			fill(b, L, 51);
			MPI_Ssend(b, L, MPI_BYTE, peer, 51, MPI_COMM_WORLD);
		}
		free(b);
	}
	check(ok, "MPI_Ssend (small and 100000 bytes), receives posted in reverse tag order");
}

static void cancel_recv(void)
{
	int x, flag = 0;
	MPI_Request rq;
	MPI_Status st;
	MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &rq);
	MPI_Cancel(&rq);
	MPI_Wait(&rq, &st);
	MPI_Test_cancelled(&st, &flag);
	check(flag, "MPI_Cancel of a posted receive");
}

static void collectives(void)
{
	/* Barrier: the others send to rank 0 only after it; rank 0 polls for their messages before
	 * entering it and must see none. */
	int ok = 1, reps = quick ? 2 : 5;
	for (int i = 0; i < reps; i++) {
		if (rank == 0) {
			for (int k = 0; k < 2000; k++) {
				int flag = 0;
				MPI_Iprobe(MPI_ANY_SOURCE, 60, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
				if (flag)
					ok = 0;
			}
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0) {
			for (int p = 1; p < nranks; p++) {
				int v = -1;
				MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				ok &= v == i;
			}
		} else {
			MPI_Send(&i, 1, MPI_INT, 0, 60, MPI_COMM_WORLD);
		}
	}
	check(ok, "MPI_Barrier: nothing sent after it arrives before it");

	static const int bsz[] = {1, 100, 4096, 100000, 1048576};
	ok = 1;
	for (size_t k = 0; k < sizeof(bsz) / sizeof(bsz[0]); k++) {
		for (int root = 0; root < nranks; root += nranks - 1) {
			unsigned char *b = malloc((size_t)bsz[k]);
			if (rank == root)
				fill(b, (size_t)bsz[k], (unsigned)(k + 10u * (unsigned)root));
			else
				memset(b, 0, (size_t)bsz[k]);
			MPI_Bcast(b, bsz[k], MPI_BYTE, root, MPI_COMM_WORLD);
			ok &= verify(b, (size_t)bsz[k], (unsigned)(k + 10u * (unsigned)root));
			free(b);
			if (nranks == 1)
				break;
		}
	}
	check(ok, "MPI_Bcast, 1 B to 1 MiB, from the first and the last rank");

	static const int asz[] = {1, 1000, 100000};
	ok = 1;
	for (size_t k = 0; k < sizeof(asz) / sizeof(asz[0]); k++) {
		int n = asz[k];
		long long *in = malloc((size_t)n * sizeof(*in)), *out = malloc((size_t)n * sizeof(*out));
		for (int i = 0; i < n; i++)
			in[i] = (long long)rank * 1000003LL + i;
		MPI_Allreduce(in, out, n, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
		long long rs = (long long)nranks * (nranks - 1) / 2;
		for (int i = 0; i < n; i++)
			ok &= out[i] == rs * 1000003LL + (long long)nranks * i;
		int mx = -1;
		MPI_Allreduce(&rank, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		ok &= mx == nranks - 1;
		free(in);
		free(out);
	}
	check(ok, "MPI_Allreduce (sum of 1, 1000, 100000 long longs; max)");

	static const int tsz[] = {1, 1000, 20000};
	ok = 1;
	for (size_t k = 0; k < sizeof(tsz) / sizeof(tsz[0]); k++) {
		int n = tsz[k];
		int *in = malloc((size_t)n * (size_t)nranks * sizeof(int)), *out = malloc((size_t)n * (size_t)nranks * sizeof(int));
		for (int p = 0; p < nranks; p++)
			for (int i = 0; i < n; i++)
				in[p * n + i] = rank * 1000000 + p * 1000 + (i % 1000);
		MPI_Alltoall(in, n, MPI_INT, out, n, MPI_INT, MPI_COMM_WORLD);
		for (int p = 0; p < nranks; p++)
			for (int i = 0; i < n; i++)
				ok &= out[p * n + i] == p * 1000000 + rank * 1000 + (i % 1000);
		free(in);
		free(out);
	}
	check(ok, "MPI_Alltoall (1, 1000, 20000 ints per rank)");

	ok = 1;
	{
		enum { G = 5000 };
		int *in = malloc(G * sizeof(int)), *out = malloc((size_t)G * (size_t)nranks * sizeof(int));
		for (int i = 0; i < G; i++)
			in[i] = rank * 7 + i;
		MPI_Allgather(in, G, MPI_INT, out, G, MPI_INT, MPI_COMM_WORLD);
		for (int p = 0; p < nranks; p++)
			for (int i = 0; i < G; i++)
				ok &= out[p * G + i] == p * 7 + i;
		free(in);
		free(out);
	}
	check(ok, "MPI_Allgather");
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	for (int i = 1; i < argc; i++) {
		quick |= !strcmp(argv[i], "quick");
		nossend |= !strcmp(argv[i], "nossend");
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	t_last = MPI_Wtime();
	if (nranks < 2) {
		if (rank == 0)
			printf("FAIL - needs at least 2 ranks\n");
		MPI_Finalize();
		return 1;
	}
	pingpong();
	all_to_all_p2p();
	any_source_tag();
	probes();
	if (!nossend)
		ssend_and_order();
	cancel_recv();
	collectives();
	if (rank == 0)
		printf("%s\n", fails ? "FAILED" : "PASSED");
	MPI_Finalize();
	return fails != 0;
}
