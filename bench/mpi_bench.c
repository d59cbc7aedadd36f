/* mpi_bench.c - MPI micro-benchmark of the benchmark suite (bench/mpi.sh): the same program runs
 * over Open MPI's OFI MTL on the omx provider and over Open MPI's TCP BTL, so the two can be
 * compared in one run.
 *
 *   mpi_bench TEST [-S start] [-E end] [-M mult] [-N iters] [-W warmup] [-R reps] [-a CPUS]
 *             [-c FILE] [-h]
 *
 * TEST:
 *   pingpong   ranks 0 and 1 (other ranks idle): rank 0 sends L bytes, rank 1 answers L bytes;
 *              time = half a round trip, bandwidth = L / time (same convention as the suite's
 *              ping-pongs: 2 L per round trip)
 *   alltoall   MPI_Alltoall, L bytes per destination (block size), all ranks
 *   allreduce  MPI_Allreduce MPI_SUM over L / 4 ints (L rounded down to a multiple of 4)
 * Lengths: start, start * mult, ... below end (0 is followed by 1; for allreduce, by 4).
 * Each length: `warmup` untimed operations, then `reps` repetitions of `iters` timed operations
 * (iters is scaled down above 64 KiB: iters * 64 KiB / L, at least 4); a repetition's figure is
 * the mean time per operation (for collectives: the slowest rank's mean, MPI_MAX); the printed
 * figure is the median of the repetitions, with their min and max.
 * -a CPUS: comma-separated CPU list; rank r pins itself (before MPI_Init, so that the threads
 * MPI and the omx provider start inherit it) to CPUS[r % count]. The rank comes from the
 * launcher's environment (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK).
 * Output (rank 0): CSV on FILE (-c) or standard output:
 *   test,np,length,iterations,reps,time_us,time_us_min,time_us_max,bandwidth_MBps,other_cpus
 * other_cpus: CPU time the machine spent outside the ranks while this length was measured, in
 * CPUs: (user+nice+system+steal of /proc/stat) minus the sum over ranks of their own user+system
 * time (getrusage, all threads), divided by the elapsed time. Above ~0.35 on a 2-CPU machine,
 * another process competed with the ranks (bench/report.py marks such points "disturbed").
 * Interrupt and softirq time is left out (packet processing of either transport lands there).
 * Exit status 0, or 1 on a usage error or a verification failure (the received data is checked
 * at the end of each length).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

enum test { T_PINGPONG, T_ALLTOALL, T_ALLREDUCE };

static void usage(void)
{
	fprintf(stderr, "usage: mpi_bench pingpong|alltoall|allreduce [-S start] [-E end] [-M mult] "
			"[-N iters] [-W warmup] [-R reps] [-a cpu,cpu...] [-c file]\n");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Pin this process to CPUS[rank % n] before MPI_Init; silently does nothing without a rank. */
static void pin_early(const char *cpus)
{
	const char *r = getenv("OMPI_COMM_WORLD_RANK");
	if (!r)
		r = getenv("PMIX_RANK");
	if (!r)
		r = getenv("PMI_RANK");
	if (!r)
		return;
	long rank = strtol(r, NULL, 10);
	int list[256], n = 0;
	char *copy = strdup(cpus), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok && n < 256; tok = strtok_r(NULL, ",", &save))
		list[n++] = atoi(tok);
	free(copy);
	if (n == 0)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(list[rank % n], &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		perror("mpi_bench: sched_setaffinity");
}

/* busy CPU-seconds of the whole machine: user + nice + system + steal (no irq, softirq) */
static double machine_busy_s(void)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return 0.0;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		       &v[6], &v[7]);
	fclose(f);
	if (n < 8)
		return 0.0;
	long hz = sysconf(_SC_CLK_TCK);
	return (double)(v[0] + v[1] + v[2] + v[7]) / (double)(hz > 0 ? hz : 100);
}

static double own_cpu_s(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0.0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec * 1e-6;
}

static size_t scaled_iters(size_t len, size_t iters)
{
	if (len <= 65536)
		return iters;
	size_t n = (size_t)((double)iters * 65536.0 / (double)len);
	return n < 4 ? 4 : n;
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static int check(const unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	size_t start = 0, end = 4194305, mult = 4, iters = 1000, warmup = 100, reps = 5;
	const char *csv = NULL, *cpus = NULL;
	enum test test;

	if (argc < 2) {
		usage();
		return 1;
	}
	if (!strcmp(argv[1], "pingpong"))
		test = T_PINGPONG;
	else if (!strcmp(argv[1], "alltoall"))
		test = T_ALLTOALL;
	else if (!strcmp(argv[1], "allreduce"))
		test = T_ALLREDUCE;
	else {
		usage();
		return 1;
	}
	int opt;
	optind = 2;
	while ((opt = getopt(argc, argv, "S:E:M:N:W:R:a:c:h")) != -1) {
		switch (opt) {
		case 'S': start = strtoull(optarg, NULL, 0); break;
		case 'E': end = strtoull(optarg, NULL, 0); break;
		case 'M': mult = strtoull(optarg, NULL, 0); break;
		case 'N': iters = strtoull(optarg, NULL, 0); break;
		case 'W': warmup = strtoull(optarg, NULL, 0); break;
		case 'R': reps = strtoull(optarg, NULL, 0); break;
		case 'a': cpus = optarg; break;
		case 'c': csv = optarg; break;
		default: usage(); return 1;
		}
	}
	if (mult < 2 || iters == 0 || reps == 0 || reps > 1000) {
		usage();
		return 1;
	}
	if (cpus)
		pin_early(cpus);

	MPI_Init(&argc, &argv);
	int rank, np;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	if (test == T_PINGPONG && np < 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_bench: pingpong needs at least 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	/* largest length, for the buffers */
	size_t maxlen = 0;
	for (size_t L = start; L < end; L = (L == 0 ? (test == T_ALLREDUCE ? 4 : 1) : L * mult))
		maxlen = L;
	size_t bufsz = maxlen ? maxlen : 1;
	if (test == T_ALLTOALL)
		bufsz *= (size_t)np;
	unsigned char *sbuf = malloc(bufsz), *rbuf = malloc(bufsz);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "mpi_bench: cannot allocate 2 x %zu bytes\n", bufsz);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(rbuf, 0, bufsz);

	FILE *out = stdout;
	if (rank == 0 && csv) {
		out = fopen(csv, "w");
		if (!out) {
			perror(csv);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	if (rank == 0) {
		fprintf(out, "test,np,length,iterations,reps,time_us,time_us_min,time_us_max,bandwidth_MBps,other_cpus\n");
		fflush(out);
	}

	double *rt = calloc(reps, sizeof *rt);
	int bad = 0;
	for (size_t L = start; L < end; L = (L == 0 ? (test == T_ALLREDUCE ? 4 : 1) : L * mult)) {
		size_t n = scaled_iters(L, iters);
		size_t w = L > 65536 ? (warmup < 2 ? warmup : 2) : warmup;
		MPI_Barrier(MPI_COMM_WORLD);
		double mb0 = rank == 0 ? machine_busy_s() : 0.0, c0 = own_cpu_s(), w0 = MPI_Wtime();
		if (test == T_PINGPONG) {
			fill(sbuf, L, (unsigned)(L + rank));
			for (size_t r = 0; r <= reps; r++) {
				size_t cnt = r == 0 ? w : n; /* r == 0: warm-up */
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = MPI_Wtime();
				for (size_t i = 0; i < cnt; i++) {
					if (rank == 0) {
						MPI_Send(sbuf, (int)L, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
						MPI_Recv(rbuf, (int)L, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					} else if (rank == 1) {
						MPI_Recv(rbuf, (int)L, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
						MPI_Send(sbuf, (int)L, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
					}
				}
				double t1 = MPI_Wtime();
				if (r > 0)
					rt[r - 1] = (t1 - t0) / (double)cnt / 2.0;
			}
			if (rank <= 1 && (n > 0 || w > 0) && !check(rbuf, L, (unsigned)(L + 1 - rank))) {
				fprintf(stderr, "mpi_bench: rank %d: pingpong data mismatch at length %zu\n", rank, L);
				bad = 1;
			}
		} else if (test == T_ALLTOALL) {
			for (int d = 0; d < np; d++)
				fill(sbuf + (size_t)d * L, L, (unsigned)(rank * 31 + d));
			for (size_t r = 0; r <= reps; r++) {
				size_t cnt = r == 0 ? w : n;
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = MPI_Wtime();
				for (size_t i = 0; i < cnt; i++)
					MPI_Alltoall(sbuf, (int)L, MPI_BYTE, rbuf, (int)L, MPI_BYTE, MPI_COMM_WORLD);
				double t = (MPI_Wtime() - t0) / (double)(cnt ? cnt : 1), tmax;
				MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				if (r > 0)
					rt[r - 1] = tmax;
			}
			for (int s = 0; s < np; s++)
				if (!check(rbuf + (size_t)s * L, L, (unsigned)(s * 31 + rank))) {
					fprintf(stderr, "mpi_bench: rank %d: alltoall data mismatch from %d at length %zu\n", rank,
						s, L);
					bad = 1;
					break;
				}
		} else {
			int count = (int)(L / 4);
			int *si = (int *)sbuf, *ri = (int *)rbuf;
			for (int i = 0; i < count; i++)
				si[i] = rank + i;
			for (size_t r = 0; r <= reps; r++) {
				size_t cnt = r == 0 ? w : n;
				MPI_Barrier(MPI_COMM_WORLD);
				double t0 = MPI_Wtime();
				for (size_t i = 0; i < cnt; i++)
					MPI_Allreduce(si, ri, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
				double t = (MPI_Wtime() - t0) / (double)(cnt ? cnt : 1), tmax;
				MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				if (r > 0)
					rt[r - 1] = tmax;
			}
			/* sum over ranks of (rank + i) = np (np - 1) / 2 + np i */
			for (int i = 0; i < count; i += (count > 64 ? count / 64 : 1))
				if (ri[i] != np * (np - 1) / 2 + np * i) {
					fprintf(stderr, "mpi_bench: rank %d: allreduce wrong sum at length %zu\n", rank, L);
					bad = 1;
					break;
				}
		}
		MPI_Barrier(MPI_COMM_WORLD);
		double cpu = own_cpu_s() - c0, cpusum = 0.0, mb1 = rank == 0 ? machine_busy_s() : 0.0;
		double wall = MPI_Wtime() - w0;
		MPI_Reduce(&cpu, &cpusum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		double other = wall > 0 ? (mb1 - mb0 - cpusum) / wall : 0.0;
		if (other < 0)
			other = 0;
		if (rank == 0) {
			qsort(rt, reps, sizeof *rt, cmp_double);
			double med = reps % 2 ? rt[reps / 2] : (rt[reps / 2 - 1] + rt[reps / 2]) / 2.0;
			size_t len = test == T_ALLREDUCE ? L / 4 * 4 : L;
			fprintf(out, "%s,%d,%zu,%zu,%zu,%.3f,%.3f,%.3f,%.2f,%.2f\n", argv[1], np, len, n, reps,
				med * 1e6, rt[0] * 1e6, rt[reps - 1] * 1e6, med > 0 ? (double)len / med / 1e6 : 0.0,
				other);
			fflush(out);
		}
	}
	int anybad;
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0 && out != stdout)
		fclose(out);
	free(rt);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return anybad ? 1 : 0;
}
