/*
 * side_by_side.c - omx and MPI's shared memory in the same two processes (not a test), for
 * bench/side_by_side.sh: rank 0 and rank 1 of an MPI job (Open MPI's ob1 over vader, or whatever
 * the mpirun line chose) also open an omx endpoint each and connect them, then ping-pong in short
 * blocks, MPI and omx in turn (A B B A A B ...). Both stacks run on the same CPUs, in the same
 * moments of the host's placement of the VM's vCPUs: that placement changes every few seconds
 * and moves a hop by 2-6x, which separate runs (bench/same_host.sh) can only sort out after the
 * fact with a probe. Here each pair of neighbouring blocks gives a ratio, omx's time over MPI's,
 * and a shared flag's ping-pong right before the pair says where the vCPUs were (side_by_side.sh
 * sorts the pairs by it). Within one placement the medians over hundreds of pairs are steady to a
 * few percent from run to run.
 *
 *   mpirun -np 2 ... side_by_side <lengths> [block round trips [blocks]]
 * <lengths>: comma-separated message lengths in bytes (each up to 1 MiB); block: round trips a
 * block (default 1000); blocks: per length, an even number (default 400), after 4 warm-up blocks.
 * The loops are omx_perf's and mpi_shm_pingpong's: omx_isend then omx_test until done, omx_irecv
 * then omx_test until done; MPI_Send then MPI_Recv. The omx endpoint is endpoint <rank> of board
 * 0 (OMX_PEERS etc. from the environment, as for any omx program).
 * Output on rank 0 (CSV), per length: a line per pair, pair,length,mpi_us,omx_us,probe_us (the
 * blocks' half round trips and the flag's, all us); then length,pairs,mpi_us,omx_us,probe_us,
 * ratio,ratio_p25,ratio_p75: medians over all the pairs, whatever their placement, and the
 * quartiles of the omx/MPI ratios.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "open-mx.h"

#define KEY 0x51de
#define MATCH 0x5b5
#define MAX_LENGTH (64u << 20) /* the range, 4 KiB to 64 MiB */

static omx_endpoint_t ep;
static omx_endpoint_addr_t peer;

/* The placement probe: a shared flag's ping-pong (bench/local_pingpong's "shm" floor) between the
 * two ranks, a short one before each pair of blocks, so that each pair says where the vCPUs were
 * in the same terms for every transport. */
#define PROBE_ROUND_TRIPS 200
static volatile uint64_t *flag; /* [0]: rank 0 -> 1, [8]: rank 1 -> 0 (another line) */

static void map_flag(int rank)
{
	char path[64];
	int pid = (int)getpid();
	MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
	snprintf(path, sizeof(path), "/dev/shm/omx-side-by-side-%d", pid);
	int fd = rank == 0 ? open(path, O_RDWR | O_CREAT | O_EXCL, 0600) : -1;
	if (rank == 0 && (fd < 0 || ftruncate(fd, 4096) < 0))
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank != 0 && (fd = open(path, O_RDWR)) < 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		unlink(path);
	if (m == MAP_FAILED)
		MPI_Abort(MPI_COMM_WORLD, 1);
	flag = m;
}

/* Half round trips in us. Counts go on from call to call: each side's last seen value is kept. */
static double probe(int rank)
{
	static uint64_t n;
	double t0 = MPI_Wtime();
	for (int i = 0; i < PROBE_ROUND_TRIPS; i++) {
		n++;
		if (rank == 0) {
			__atomic_store_n(&flag[0], n, __ATOMIC_RELEASE);
			while (__atomic_load_n(&flag[8], __ATOMIC_ACQUIRE) != n)
				;
		} else {
			while (__atomic_load_n(&flag[0], __ATOMIC_ACQUIRE) != n)
				;
			__atomic_store_n(&flag[8], n, __ATOMIC_RELEASE);
		}
	}
	return (MPI_Wtime() - t0) * 1e6 / (2.0 * PROBE_ROUND_TRIPS);
}

static void check(const char *what, omx_return_t r)
{
	if (r == OMX_SUCCESS)
		return;
	fprintf(stderr, "side_by_side: %s: %s\n", what, omx_strerror(r));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void complete(omx_request_t *req)
{
	omx_status_t st;
	uint32_t done = 0;
	while (!done)
		check("omx_test", omx_test(ep, req, &st, &done));
	check("request", st.code);
}

/* SIDE_BY_SIDE_PREPOST=1: each side posts its receive before its send (rank 1 its next one
 * before answering), so no answer arrives before its receive: what an eager medium that completes
 * on its ack costs in omx_perf's loop, where the answer may (docs/performance.md, stop 61). */
static void omx_block_preposted(int rank, char *sbuf, char *rbuf, int len, long round_trips)
{
	omx_request_t sreq, rreq;
	if (rank == 1 && round_trips > 0)
		check("omx_irecv", omx_irecv(ep, rbuf, (size_t)len, MATCH, ~0ull, NULL, &rreq));
	for (long i = 0; i < round_trips; i++) {
		if (rank == 0) {
			check("omx_irecv", omx_irecv(ep, rbuf, (size_t)len, MATCH, ~0ull, NULL, &rreq));
			check("omx_isend", omx_isend(ep, sbuf, (size_t)len, peer, MATCH, NULL, &sreq));
			complete(&sreq);
			complete(&rreq);
		} else {
			complete(&rreq);
			if (i + 1 < round_trips)
				check("omx_irecv", omx_irecv(ep, rbuf, (size_t)len, MATCH, ~0ull, NULL, &rreq));
			check("omx_isend", omx_isend(ep, sbuf, (size_t)len, peer, MATCH, NULL, &sreq));
			complete(&sreq);
		}
	}
}

static void omx_block(int rank, char *sbuf, char *rbuf, int len, long round_trips)
{
	omx_request_t req;
	static int prepost = -1;
	if (prepost < 0) {
		const char *e = getenv("SIDE_BY_SIDE_PREPOST");
		prepost = e && *e == '1';
	}
	if (prepost) {
		omx_block_preposted(rank, sbuf, rbuf, len, round_trips);
		return;
	}
	for (long i = 0; i < round_trips; i++) {
		if (rank == 0) {
			check("omx_isend", omx_isend(ep, sbuf, (size_t)len, peer, MATCH, NULL, &req));
			complete(&req);
			check("omx_irecv", omx_irecv(ep, rbuf, (size_t)len, MATCH, ~0ull, NULL, &req));
			complete(&req);
		} else {
			check("omx_irecv", omx_irecv(ep, rbuf, (size_t)len, MATCH, ~0ull, NULL, &req));
			complete(&req);
			check("omx_isend", omx_isend(ep, sbuf, (size_t)len, peer, MATCH, NULL, &req));
			complete(&req);
		}
	}
}

static void mpi_block(int rank, char *sbuf, char *rbuf, int len, long round_trips)
{
	for (long i = 0; i < round_trips; i++) {
		if (rank == 0) {
			MPI_Send(sbuf, len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(rbuf, len, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(rbuf, len, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(sbuf, len, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
		}
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double quantile(double *v, long n, long num, long den)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n * num / den];
}

/* Block b's stack: 0 MPI, 1 omx, in the order A B B A (each pair of blocks holds one of each,
 * and which comes first alternates, so that neither always follows the other). */
static int block_stack(long b)
{
	return (int)(((b >> 1) ^ b) & 1);
}

static void measure(int rank, char *sbuf, char *rbuf, int len, long round_trips, long blocks)
{
	double *t = calloc((size_t)blocks, sizeof(*t)), *mpi = calloc((size_t)blocks, sizeof(*mpi));
	double *omx = calloc((size_t)blocks, sizeof(*omx)), *ratio = calloc((size_t)blocks, sizeof(*ratio));
	double *pr = calloc((size_t)blocks, sizeof(*pr));
	if (!t || !mpi || !omx || !ratio || !pr)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Barrier(MPI_COMM_WORLD);
	for (long b = -4; b < blocks; b++) {
		int stack = block_stack(b < 0 ? b + 4 : b);
		if (b >= 0 && b % 2 == 0)
			pr[b / 2] = probe(rank);
		double t0 = MPI_Wtime();
		if (stack)
			omx_block(rank, sbuf, rbuf, len, round_trips);
		else
			mpi_block(rank, sbuf, rbuf, len, round_trips);
		if (b >= 0)
			t[b] = (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)round_trips);
	}
	if (rank == 0) {
		/* Pair j: blocks 2j and 2j+1, one of each stack. */
		long np = 0;
		for (long b = 0; b + 1 < blocks; b += 2, np++) {
			omx[np] = block_stack(b) ? t[b] : t[b + 1];
			mpi[np] = block_stack(b) ? t[b + 1] : t[b];
			ratio[np] = omx[np] / mpi[np];
			printf("pair,%d,%.4f,%.4f,%.4f\n", len, mpi[np], omx[np], pr[np]);
		}
		double r25 = quantile(ratio, np, 1, 4), r50 = quantile(ratio, np, 1, 2), r75 = quantile(ratio, np, 3, 4);
		printf("%d,%ld,%.4f,%.4f,%.4f,%.3f,%.3f,%.3f\n", len, np, quantile(mpi, np, 1, 2), quantile(omx, np, 1, 2),
		       quantile(pr, np, 1, 2), r50, r25, r75);
		fflush(stdout);
	}
	free(t);
	free(mpi);
	free(omx);
	free(ratio);
	free(pr);
}

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long round_trips = argc > 2 ? atol(argv[2]) : 1000, blocks = argc > 3 ? atol(argv[3]) : 400;
	if (argc < 2 || size != 2 || round_trips < 1 || blocks < 2 || blocks % 2) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 %s <lengths,...> [round trips a block [blocks, even]]\n", argv[0]);
		MPI_Finalize();
		return 2;
	}
	uint64_t nic;
	check("omx_init", omx_init());
	check("board 0", omx_board_number_to_nic_id(0, &nic));
	check("omx_open_endpoint", omx_open_endpoint(0, (uint32_t)rank, KEY, NULL, 0, &ep));
	map_flag(rank);
	MPI_Barrier(MPI_COMM_WORLD); /* both endpoints open before either connects */
	omx_request_t req;
	omx_status_t st;
	uint32_t done = 0;
	check("omx_iconnect", omx_iconnect(ep, nic, (uint32_t)(1 - rank), KEY, 0, NULL, &req));
	while (!done) /* polling answers the other side's connect request too */
		check("omx_test", omx_test(ep, &req, &st, &done));
	check("connect", st.code);
	peer = st.addr;
	/* A send buffer and a receive buffer, as in omx_perf and mpi_shm_pingpong: with one buffer for
	 * both, 64 KiB - 1 MiB messages took up to twice the time, in either stack (stop 56). */
	char *sbuf = malloc(MAX_LENGTH), *rbuf = malloc(MAX_LENGTH);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(sbuf, 1, MAX_LENGTH);
	memset(rbuf, 0, MAX_LENGTH);
	/* One omx round trip before any MPI call: each side keeps polling until the other's connect
	 * is answered (without the progress thread nothing else would answer it). */
	omx_block(rank, sbuf, rbuf, 0, 1);
	if (rank == 0)
		printf("length,pairs,mpi_us,omx_us,probe_us,ratio,ratio_p25,ratio_p75\n");
	for (char *s = argv[1], *end; *s; s = *end ? end + 1 : end) {
		unsigned long len = strtoul(s, &end, 0);
		if (end == s || len > MAX_LENGTH) {
			if (rank == 0)
				fprintf(stderr, "side_by_side: bad length list at \"%s\"\n", s);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		measure(rank, sbuf, rbuf, (int)len, round_trips, blocks);
	}
	MPI_Barrier(MPI_COMM_WORLD); /* neither closes while the other may still need an ack */
	omx_close_endpoint(ep);
	omx_finalize();
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
