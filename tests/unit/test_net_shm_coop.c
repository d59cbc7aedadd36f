/*
 * test_net_shm_coop.c - the cooperative single copy (src/shm/export.c) between real processes:
 * a sender that helps (its part written with process_vm_writev, every byte checked), a sender
 * that never looks (the receiver copies it all), a sender of another user (it must not write),
 * a sender whose writes fail (the receiver redoes its part), a sender that dies holding a chunk
 * (the receiver reports -ESRCH, no hang), and a stale receiver that must not open a newer use of
 * the export.
 * Whether the sender gets a chunk before the receiver has claimed them all is up to the
 * scheduler: those cases retry with a new use of the export, and fail after 8 tries. They, and
 * the other user's sender, need the export opened: they pin the two processes to different CPUs
 * (a receiver on the sender's CPU reads alone, which the last case checks), and are skipped
 * with fewer than two CPUs.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/ring_layout.h"
#include "unit_check.h"

#define LEN (32u * 1024 * 1024 + 12345u) /* ~5 ms for one CPU to copy: time for the other to join */
#define CHUNK (64u * 1024)
#define TRIES 8

static char dir[64];
static const uint8_t mac[6] = { 2, 0, 0, 0, 0, 9 };

static uint8_t pattern(uint64_t i, unsigned use)
{
	return (uint8_t)(i * 131 + (i >> 13) + use);
}

/* The sender's message in three segments of odd sizes, filled for `use`. */
static void fill(uint8_t *msg, unsigned use)
{
	for (uint64_t i = 0; i < LEN; i++)
		msg[i] = pattern(i, use);
}

static void src_segs(uint8_t *msg, struct iovec *v)
{
	v[0] = (struct iovec){ msg, 1000001 };
	v[1] = (struct iovec){ msg + 1000001, 7 };
	v[2] = (struct iovec){ msg + 1000008, LEN - 1000008 };
}

/* The receiver's buffer in four other segments (so the two walks never line up), one guard
 * byte after the message. */
static void dst_segs(uint8_t *buf, struct iovec *v)
{
	v[0] = (struct iovec){ buf, 4096 };
	v[1] = (struct iovec){ buf + 4096, 3333333 };
	v[2] = (struct iovec){ buf + 3337429, 1 };
	v[3] = (struct iovec){ buf + 3337430, LEN - 3337430 };
}

static uint64_t bad_bytes(const uint8_t *buf, unsigned use)
{
	uint64_t bad = 0;
	for (uint64_t i = 0; i < LEN; i++)
		bad += buf[i] != pattern(i, use);
	return bad + (buf[LEN] != 0xee);
}

enum sender_mode { SERVE, IDLE, DIE_HOLDING, FAIL_WRITES };

/* Sender process: export use `use` of region 4, then per mode: SERVE calls omx_shm_coop_serve
 * until it has nothing more to do; IDLE does nothing; FAIL_WRITES claims chunks from the back and
 * reports them failed; DIE_HOLDING claims a chunk from the back as the sender would, then exits
 * without finishing it. Reports on the pipe: 'r' exported, then the bytes written (SERVE), the
 * bytes claimed (FAIL_WRITES) or whether it got a chunk (DIE_HOLDING). */
static void sender(int to_parent, int from_parent, enum sender_mode mode, unsigned use)
{
	int e;
	struct omx_shm_ring *own = omx_shm_ring_create(mac, 3, 1500, 128 << 10, 4, &e);
	uint8_t *msg = malloc(LEN);
	if (!own || !msg)
		_exit(3);
	fill(msg, use);
	struct iovec segs[3];
	src_segs(msg, segs);
	char c = omx_shm_export(own, 4, (uint8_t)use, segs, 3, LEN) == 0 ? 'r' : 'x';
	(void)!write(to_parent, &c, 1);
	uint64_t written = 0;
	if (mode == SERVE) {
		while (omx_shm_coop_serve(own, 4, CHUNK, &written) == 0)
			;
		(void)!write(to_parent, &written, sizeof(written));
	} else if (mode == FAIL_WRITES) {
		struct export_ent *x = &own->h->exports[4];
		while (__atomic_load_n(&x->coop, __ATOMIC_ACQUIRE) != ((use & 0xffu) << 8 | COOP_OPEN))
			;
		uint64_t w = __atomic_load_n(&x->window, __ATOMIC_ACQUIRE), claimed = 0;
		while ((w & 0xffffffffu) + CHUNK < (w >> 32)) {
			if (!__atomic_compare_exchange_n(&x->window, &w, (w & 0xffffffffu) | ((w >> 32) - CHUNK) << 32, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				continue;
			__atomic_store_n(&x->sender_err, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&x->sender_done, CHUNK, __ATOMIC_RELEASE);
			claimed += CHUNK;
			w = __atomic_load_n(&x->window, __ATOMIC_ACQUIRE);
		}
		(void)!write(to_parent, &claimed, sizeof(claimed));
	} else if (mode == DIE_HOLDING) {
		struct export_ent *x = &own->h->exports[4];
		while (__atomic_load_n(&x->coop, __ATOMIC_ACQUIRE) != ((use & 0xffu) << 8 | COOP_OPEN))
			;
		uint64_t w = __atomic_load_n(&x->window, __ATOMIC_ACQUIRE), got = 0;
		while ((w & 0xffffffffu) + CHUNK < (w >> 32) &&
		       !__atomic_compare_exchange_n(&x->window, &w, (w & 0xffffffffu) | ((w >> 32) - CHUNK) << 32, 0,
						    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			;
		got = (w & 0xffffffffu) + CHUNK < (w >> 32);
		/* Die once the receiver has copied the rest and waits for us (its reads of our memory
		 * are over), holding the chunk: sender_done never covers it. */
		while (got && (w = __atomic_load_n(&x->window, __ATOMIC_ACQUIRE), (w & 0xffffffffu) < (w >> 32)))
			;
		(void)!write(to_parent, &got, sizeof(got));
		_exit(0);
	}
	(void)!read(from_parent, &c, 1);
	omx_shm_ring_close(own);
	_exit(0);
}

/* Pin the calling process to cpu: 0, or -1. */
static int pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static int sender_cpu = -1; /* where start_sender pins its sender (-1: nowhere) */

struct peer_proc {
	pid_t pid;
	int rd, wr; /* from it, to it */
};

static struct peer_proc start_sender(enum sender_mode mode, unsigned use, uid_t uid)
{
	int up[2], down[2];
	struct peer_proc p = { -1, -1, -1 };
	if (pipe(up) || pipe(down))
		return p;
	p.pid = fork();
	if (p.pid == 0) {
		close(up[0]);
		close(down[1]);
		if (uid && (setgid(uid) || setuid(uid)))
			_exit(3);
		if (sender_cpu >= 0 && pin(sender_cpu) < 0)
			_exit(3);
		sender(up[1], down[0], mode, use);
	}
	close(up[1]);
	close(down[0]);
	p.rd = up[0];
	p.wr = down[1];
	char c = 0;
	if (read(p.rd, &c, 1) != 1 || c != 'r')
		p.pid = -p.pid; /* failed to export */
	return p;
}

static int stop_sender(struct peer_proc *p)
{
	int status = 0;
	(void)!write(p->wr, "q", 1);
	close(p->wr);
	close(p->rd);
	waitpid(p->pid < 0 ? -p->pid : p->pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Receive use `use` with cooperation; returns the single copy's result, data checked into *bad. */
static int receive(unsigned use, uint8_t *buf, uint64_t *bad)
{
	int err;
	struct omx_shm_ring *peer = omx_shm_ring_attach(mac, 3, &err);
	if (!peer)
		return -1000 + err;
	struct iovec dst[4];
	memset(buf, 0, LEN);
	buf[LEN] = 0xee;
	dst_segs(buf, dst);
	int r = omx_shm_single_copy(peer, 4, (uint8_t)use, dst, 4, LEN, CHUNK);
	*bad = bad_bytes(buf, use);
	omx_shm_ring_close(peer);
	return r;
}

/* The sender helps: both parts land, every byte right, the sender wrote part of it. */
static void helped(uint8_t *buf)
{
	uint64_t written = 0, bad = 1;
	int r = -1, tries = 0, yama = 0;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	if (f) {
		if (fscanf(f, "%d", &yama) != 1)
			yama = 1;
		fclose(f);
	}
	if (yama > 0 && geteuid() != 0) {
		printf("helped: skipped (Yama ptrace_scope %d: senders do not help unless root)\n", yama);
		return;
	}
	for (; tries < TRIES && !written; tries++) {
		struct peer_proc s = start_sender(SERVE, 10 + (unsigned)tries, 0);
		CHECK(s.pid > 0);
		r = receive(10 + (unsigned)tries, buf, &bad);
		CHECK(r == 0 && bad == 0);
		CHECK(read(s.rd, &written, sizeof(written)) == (ssize_t)sizeof(written));
		CHECK(stop_sender(&s) == 0);
	}
	printf("helped: sender wrote %llu of %u bytes (try %d)\n", (unsigned long long)written, LEN, tries);
	CHECK(written > 0 && written < LEN);
}

/* The sender never looks: the receiver copies everything; a late look finds nothing to do. */
static void alone(uint8_t *buf)
{
	uint64_t bad = 1;
	struct peer_proc s = start_sender(IDLE, 30, 0);
	CHECK(s.pid > 0);
	CHECK(receive(30, buf, &bad) == 0 && bad == 0);
	CHECK(stop_sender(&s) == 0);
}

/* A sender of another user (not allowed to write into a root process, and the receiver's
 * process is not its user's): it must not even try; the receiver copies everything (it claimed
 * the whole window) and the sender's error flag stays clear. */
static void other_user(uint8_t *buf)
{
	if (getuid() != 0) {
		printf("other_user: skipped (needs root to switch users)\n");
		return;
	}
	CHECK(chmod(dir, 0777) == 0);
	uint64_t written = 1, bad = 1;
	struct peer_proc s = start_sender(SERVE, 40, 65534);
	CHECK(s.pid > 0);
	CHECK(receive(40, buf, &bad) == 0 && bad == 0);
	CHECK(read(s.rd, &written, sizeof(written)) == (ssize_t)sizeof(written));
	CHECK(written == 0);
	int err;
	struct omx_shm_ring *peer = omx_shm_ring_attach(mac, 3, &err);
	CHECK(peer != NULL);
	if (peer) {
		struct export_ent *x = &peer->h->exports[4];
		CHECK(__atomic_load_n(&x->window, __ATOMIC_ACQUIRE) == ((uint64_t)LEN | (uint64_t)LEN << 32));
		CHECK(__atomic_load_n(&x->sender_err, __ATOMIC_ACQUIRE) == 0);
		omx_shm_ring_close(peer);
	}
	CHECK(stop_sender(&s) == 0);
	CHECK(chmod(dir, 0700) == 0);
}

/* A sender whose writes fail (emulated: it claims chunks, marks the failure and reports them
 * done without writing, as omx_shm_coop_serve does when process_vm_writev fails): the receiver
 * copies the sender's part again itself. */
static void failing_sender(uint8_t *buf)
{
	uint64_t claimed = 0, bad = 1;
	int tries = 0;
	for (; tries < TRIES && !claimed; tries++) {
		unsigned use = 45 + (unsigned)tries;
		struct peer_proc s = start_sender(FAIL_WRITES, use, 0);
		CHECK(s.pid > 0);
		CHECK(receive(use, buf, &bad) == 0 && bad == 0);
		CHECK(read(s.rd, &claimed, sizeof(claimed)) == (ssize_t)sizeof(claimed));
		CHECK(stop_sender(&s) == 0);
	}
	printf("failing_sender: %llu bytes claimed and failed, redone by the receiver (try %d)\n",
	       (unsigned long long)claimed, tries);
	CHECK(claimed > 0);
}

/* The sender dies with a chunk claimed and never finished: the receiver returns -ESRCH (its
 * caller then pulls, and the pull fails as for any dead sender) instead of waiting for ever.
 * The receiver runs in a child so that we reap the sender (a zombie still holds nothing). */
static void sender_dies(void)
{
	int got = 0, tries = 0;
	for (; tries < TRIES && !got; tries++) {
		unsigned use = 50 + (unsigned)tries;
		struct peer_proc s = start_sender(DIE_HOLDING, use, 0);
		CHECK(s.pid > 0);
		pid_t rpid = fork();
		if (rpid == 0) {
			alarm(60); /* a hang fails the test instead of blocking it */
			uint8_t *buf = malloc(LEN + 1);
			uint64_t bad;
			int r = buf ? receive(use, buf, &bad) : -1;
			_exit(r == -ESRCH ? 0 : r == 0 ? 1 : 2);
		}
		uint64_t claimed = 0;
		CHECK(read(s.rd, &claimed, sizeof(claimed)) == (ssize_t)sizeof(claimed));
		int status = 0;
		CHECK(stop_sender(&s) == 0);
		waitpid(rpid, &status, 0);
		CHECK(WIFEXITED(status));
		if (claimed) {
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
			got = 1;
		} else {
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1); /* it finished alone: fine */
		}
	}
	printf("sender_dies: receiver reported -ESRCH (try %d)\n", tries);
	CHECK(got);
}

/* A receiver that acts on an old use of the export must neither open the new one nor copy. */
static void stale_use(uint8_t *buf)
{
	struct peer_proc s = start_sender(IDLE, 60, 0);
	CHECK(s.pid > 0);
	uint64_t bad;
	CHECK(receive(59, buf, &bad) == -ENOENT);
	int err;
	struct omx_shm_ring *peer = omx_shm_ring_attach(mac, 3, &err);
	CHECK(peer != NULL);
	if (peer) {
		CHECK(__atomic_load_n(&peer->h->exports[4].coop, __ATOMIC_ACQUIRE) == (60u << 8 | COOP_IDLE));
		omx_shm_ring_close(peer);
	}
	CHECK(receive(60, buf, &bad) == 0 && bad == 0);
	CHECK(stop_sender(&s) == 0);
}

/* Both processes on one CPU: the receiver reads the whole message itself, without opening the
 * export to the sender (whose help could only come in turns with its own reads). */
static void same_cpu(uint8_t *buf, int cpu)
{
	int saved = sender_cpu;
	sender_cpu = cpu;
	struct peer_proc s = start_sender(IDLE, 70, 0);
	CHECK(s.pid > 0);
	uint64_t bad;
	CHECK(receive(70, buf, &bad) == 0 && bad == 0);
	int err;
	struct omx_shm_ring *peer = omx_shm_ring_attach(mac, 3, &err);
	CHECK(peer != NULL);
	if (peer) {
		CHECK(__atomic_load_n(&peer->h->exports[4].cpu, __ATOMIC_ACQUIRE) == (uint32_t)cpu + 1u);
		CHECK(__atomic_load_n(&peer->h->exports[4].coop, __ATOMIC_ACQUIRE) == (70u << 8 | COOP_IDLE));
		omx_shm_ring_close(peer);
	}
	CHECK(stop_sender(&s) == 0);
	sender_cpu = saved;
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/omx-coop-test.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	setenv("OMX_SHM_DIR", dir, 1);
	signal(SIGPIPE, SIG_IGN); /* a sender that died on purpose has closed its pipe */
	uint8_t *buf = malloc(LEN + 1);
	if (!buf)
		return 1;
	/* The cases where the sender must help run with the two processes on CPUs 0 and 1. */
	int two = pin(1) == 0 && pin(0) == 0; /* both allowed here: the sender's pin to 1 will hold */
	if (two) {
		sender_cpu = 1;
		helped(buf);
		other_user(buf); /* its sender looks for an opened export until it has been */
		failing_sender(buf);
		sender_dies();
	} else {
		sender_cpu = -1;
		printf("helped, other_user, failing_sender, sender_dies: skipped (no two CPUs to pin the sender and the "
		       "receiver to)\n");
	}
	alone(buf);
	stale_use(buf);
	int cpu = sched_getcpu();
	CHECK(cpu >= 0);
	if (cpu >= 0 && pin(cpu) == 0)
		same_cpu(buf, cpu);
	free(buf);
	return unit_finish(dir);
}
