/*
 * cpurun.c - run a command and record its CPU time (bench/run.sh).
 *   cpurun OUTFILE CMD [ARGS...]
 * Writes "user_s sys_s wall_s" (rusage of the child and all its threads, from wait4) to OUTFILE,
 * exits with the command's status. SIGINT/SIGTERM are passed on to the command.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t child;

static void forward(int sig)
{
	if (child > 0)
		kill(child, sig);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: cpurun OUTFILE CMD [ARGS...]\n");
		return 255;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("cpurun: fork");
		return 255;
	}
	if (pid == 0) {
		execvp(argv[2], argv + 2);
		fprintf(stderr, "cpurun: %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	child = pid;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	int status;
	struct rusage ru;
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			perror("cpurun: wait4");
			return 255;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	FILE *f = fopen(argv[1], "w");
	if (f) {
		fprintf(f, "%.6f %.6f %.6f\n", (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
			(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
			(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
		fclose(f);
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
