/*
 * mpi_shm_pingpong.c - the MPI baseline of bench/same_host.sh (not a test): a ping-pong between
 * ranks 0 and 1 measured like omx_perf, so that Open MPI's shared-memory transport (vader, with
 * or without its CMA single copy) can be compared with omx on the same machine, in the same run.
 *
 *   mpirun -np 2 ... mpi_shm_pingpong <start> <end> <multiplier> <max-iterations> [-U] [-T] [-H]
 *
 * For each length from <start> (0 is followed by 1) while below <end>, times <multiplier>:
 * warmup round trips (a tenth of the iterations, at least 10), then the timed ones. Iterations
 * shrink for large lengths (about 1 GB moved per length, at least 20). Rank 1 answers with the
 * same length, or with 0 bytes with -U (unidirectional, like omx_perf -U). -T (like omx_perf -T):
 * before each send, write a byte in every 64-byte line of the message, so that its data comes
 * from the sender's cache as in an application that produced it (timed). Rank 1 writes its reply
 * after the request arrived, as omx_perf's server does (until stop 22 it wrote it before its
 * receive, in the shadow of rank 0's writing and sending: one write of the message per round
 * trip was not timed, in the MPI modes only).
 * Output on rank 0 (CSV, the columns of omx_perf -c): length,iterations,latency_us,bandwidth_MBps
 * where latency is half a round trip and bandwidth counts both directions (one with -U).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* -T: dirty every line of the message in our cache, as its producer would have. */
static void touch_lines(char *buf, int len, unsigned long long i)
{
	for (int o = 0; o < len; o += 64)
		((volatile char *)buf)[o] = (char)(i + (unsigned long long)o);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 5 || size != 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 %s <start> <end> <multiplier> <max-iterations> [-U] [-T] [-H]\n",
				argv[0]);
		MPI_Finalize();
		return 2;
	}
	unsigned long long start = strtoull(argv[1], NULL, 0), end = strtoull(argv[2], NULL, 0);
	unsigned long long mult = strtoull(argv[3], NULL, 0), maxit = strtoull(argv[4], NULL, 0);
	int unidir = 0, touch = 0, huge = 0;
	for (int a = 5; a < argc; a++) {
		unidir |= !strcmp(argv[a], "-U");
		touch |= !strcmp(argv[a], "-T");
		huge |= !strcmp(argv[a], "-H");
	}
	if (mult < 2)
		mult = 2;
	size_t largest = end > 1 ? (size_t)end : 1;
	char *sbuf, *rbuf;
	if (huge) { /* -H (as omx_perf -H): transparent huge pages, 2 MiB aligned */
		size_t hn = (largest + (2u << 20) - 1) / (2u << 20) * (2u << 20);
		sbuf = aligned_alloc(2u << 20, hn);
		rbuf = aligned_alloc(2u << 20, hn);
		if (sbuf && rbuf && (madvise(sbuf, hn, MADV_HUGEPAGE) < 0 || madvise(rbuf, hn, MADV_HUGEPAGE) < 0))
			fprintf(stderr, "madvise(MADV_HUGEPAGE) failed: small pages\n");
	} else {
		sbuf = malloc(largest);
		rbuf = malloc(largest);
	}
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sbuf, 1, largest);
	memset(rbuf, 0, largest);
	if (rank == 0)
		printf("length,iterations,latency_us,bandwidth_MBps\n");
	for (unsigned long long len = start; len < end; len = len ? len * mult : 1) {
		unsigned long long iters = 1000000000ull / (len + 1);
		if (iters > maxit)
			iters = maxit;
		if (iters < 20)
			iters = 20;
		unsigned long long warm = iters / 10 < 10 ? 10 : iters / 10;
		int n = (int)len, back = unidir ? 0 : (int)len;
		double t0 = 0;
		MPI_Barrier(MPI_COMM_WORLD);
		for (unsigned long long i = 0; i < warm + iters; i++) {
			if (i == warm)
				t0 = MPI_Wtime();
			if (rank == 0) {
				if (touch)
					touch_lines(sbuf, n, i);
				MPI_Send(sbuf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
				MPI_Recv(rbuf, back, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(rbuf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				/* The reply is produced after the request arrives, as omx_perf's server does:
				 * writing it before the receive would hide its cost behind rank 0's. */
				if (touch)
					touch_lines(sbuf, back, i);
				MPI_Send(sbuf, back, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
			}
		}
		double us = (MPI_Wtime() - t0) * 1e6;
		if (rank == 0) {
			double dirs = unidir ? 1.0 : 2.0;
			printf("%llu,%llu,%.3f,%.2f\n", len, iters, us / dirs / (double)iters,
			       dirs * (double)iters * (double)len / us);
			fflush(stdout);
		}
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
