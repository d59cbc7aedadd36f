/*
 * fuzz_recv.c - the receive state machine under hostile frames (libFuzzer entry point).
 *
 * Each input is a sequence of frames, each record: flags (1 byte), length (2 bytes LE), bytes.
 * Per input, two endpoints on an in-memory hub (A on board 0, B on board 1) are opened with
 * reproducible sessions and connected both ways, A posts a few receives, then every frame is
 * handed to A's receive path as if it came from the wire, with progression of both endpoints in
 * between (timers, acks, pulls). Flags: bit 0 rewrites the Ethernet head (destination = A,
 * source = B, EtherType 0x86DF) so that mutated frames still get past the first checks.
 * Afterwards A drains what it can and both endpoints close: nothing may crash, hang or leak.
 *
 * The seed corpus (corpus/recv) is recorded from real traffic B -> A of every message class:
 *   fuzz_replay_recv --record DIR     (tests/fuzz/CMakeLists.txt)
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "open-mx.h"
#include "core/core.h"
#include "core/counters.h"
#include "core/testhooks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SESSION_BASE 0x5e550000u
#define FRAME_MAX 9100

static struct omx_memnet *hub;
static omx_endpoint_t A, B;
static omx_endpoint_addr_t a2b, b2a;

static void pump(int rounds)
{
	for (int i = 0; i < rounds; i++) {
		omx_progress(A);
		omx_progress(B);
	}
}

static int wait_req(omx_endpoint_t ep, omx_request_t *r, omx_status_t *st, int rounds)
{
	uint32_t res = 0;
	for (int i = 0; i < rounds; i++) {
		omx_test(ep, r, st, &res);
		if (res)
			return 1;
		pump(1);
	}
	return 0;
}

static char lock_dir[] = "/tmp/omx-fuzz-XXXXXX";

/* The lock directory (endpoint locks, counter files) is this process's alone: emptied and removed
 * at exit. Every fuzzing and replay run used to leave one behind in /tmp. */
static void remove_lock_dir(void)
{
	char path[sizeof(lock_dir) + 256];
	DIR *d = opendir(lock_dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", lock_dir, e->d_name);
			(void)unlink(path);
		}
	}
	closedir(d);
	(void)rmdir(lock_dir);
}

static void init_once(void)
{
	if (hub)
		return;
	if (!mkdtemp(lock_dir))
		abort();
	atexit(remove_lock_dir);
	setenv("OMX_LOCK_DIR", lock_dir, 1);
	setenv("OMX_IFACES", "mem0,mem1", 1);
	setenv("OMX_HOSTNAME", "fuzz", 1);
	setenv("OMX_PROGRESS_THREAD", "0", 1);
	setenv("OMX_CLOSE_LINGER_MS", "0", 1);
	setenv("OMX_RESEND_DELAY_MS", "1", 1);
	setenv("OMX_PULL_RESEND_MS", "1", 1);
	setenv("OMX_UNEXP_MAX_KB", "256", 1);
	setenv("OMX_SPIN_US", "0", 1);
	setenv("OMX_FATAL_ERRORS", "0", 1);
	hub = omx_memnet_create();
	omx__test_set_memnet(hub, 9000);
	omx__test_set_session_base(SESSION_BASE);
	if (omx_init() != OMX_SUCCESS)
		abort();
	omx_set_error_handler(NULL, OMX_ERRORS_RETURN);
}

static omx_endpoint_addr_t connect_pair(omx_endpoint_t from, uint32_t board)
{
	uint64_t nic;
	omx_request_t r;
	omx_status_t st;
	memset(&st, 0, sizeof(st));
	omx_board_number_to_nic_id(board, &nic);
	if (omx_iconnect(from, nic, 0, 0x42, 0, NULL, &r) != OMX_SUCCESS || !wait_req(from, &r, &st, 1000) ||
	    st.code != OMX_SUCCESS)
		abort(); /* the harness itself is broken */
	return st.addr;
}

static void open_pair(void)
{
	if (omx_open_endpoint(0, 0, 0x42, NULL, 0, &A) != OMX_SUCCESS ||
	    omx_open_endpoint(1, 0, 0x42, NULL, 0, &B) != OMX_SUCCESS)
		abort();
	b2a = connect_pair(B, 0);
	a2b = connect_pair(A, 1);
}

static void close_pair(void)
{
	omx_close_endpoint(A);
	omx_close_endpoint(B);
	A = B = NULL;
}

/* One frame into A's receive path, as the transport would deliver it. */
static void inject(const uint8_t *f, size_t len)
{
	omx__eplock(&A->lock);
	omx__recv_frame(A, f, len);
	omx__epunlock(&A->lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t bufs[4][70000];
	static uint8_t frame[FRAME_MAX];
	omx_request_t posted[4];
	init_once();
	open_pair();
	/* Posted receives of every class, so that frames can match as well as be unexpected. */
	static const uint32_t lens[4] = { 16, 200, 9000, 70000 };
	for (int i = 0; i < 4; i++)
		omx_irecv(A, bufs[i], lens[i], (uint64_t)i, i == 3 ? 0 : ~0ull, NULL, &posted[i]);
	while (size >= 3) {
		uint8_t flags = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;
		data += 3;
		size -= 3;
		if (len > size)
			len = size;
		size_t n = len < sizeof(frame) ? len : sizeof(frame);
		memcpy(frame, data, n);
		data += len;
		size -= len;
		if ((flags & 1) && n >= 14) {
			memcpy(frame, A->board->iface.mac, 6);
			memcpy(frame + 6, B->board->iface.mac, 6);
			frame[12] = 0x86;
			frame[13] = 0xDF;
		}
		inject(frame, n);
		pump(2);
	}
	pump(20);
	/* Drain: take whatever became unexpected, complete what can complete. */
	for (int k = 0; k < 64; k++) {
		omx_request_t r;
		omx_status_t st;
		uint32_t res = 0;
		if (omx_iprobe(A, 0, 0, &st, &res) != OMX_SUCCESS || !res)
			break;
		if (omx_irecv(A, bufs[k % 4], sizeof(bufs[0]), st.match_info, ~0ull, NULL, &r) != OMX_SUCCESS)
			break;
		wait_req(A, &r, &st, 50);
	}
	if (getenv("OMX_FUZZ_VERBOSE")) { /* to check that seeds reach past the session checks */
		const uint64_t *c = omx__counters_values(A->board);
		fprintf(stderr, "recv tiny %lu small %lu medium %lu rndv %lu pull-reply %lu notify %lu, drop bad session %lu\n",
			c[OMX_C_RECV_TINY], c[OMX_C_RECV_SMALL], c[OMX_C_RECV_MEDIUM_FRAG], c[OMX_C_RECV_RNDV],
			c[OMX_C_RECV_PULL_REPLY], c[OMX_C_RECV_NOTIFY], c[OMX_C_DROP_BAD_SESSION]);
	}
	close_pair();
	return 0;
}

/* ---- recording the seed corpus (fuzz_replay_recv --record DIR) ---- */

static FILE *rec;

static void tap(void *arg, const uint8_t *f, size_t len)
{
	(void)arg;
	if (!rec || !A || len < 14 || memcmp(f, A->board->iface.mac, 6))
		return; /* only what A receives */
	uint8_t head[3] = { 0, (uint8_t)len, (uint8_t)(len >> 8) };
	fwrite(head, 1, 3, rec);
	fwrite(f, 1, len, rec);
}

/* Records B -> A traffic of one message of len bytes (A posts after it arrives when unexp). */
static void record_one(const char *dir, const char *name, size_t len, int unexpected, int sync)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	open_pair();
	rec = fopen(path, "wb");
	if (!rec)
		abort();
	uint8_t *s = malloc(len + 1), *r = malloc(len + 1);
	for (size_t i = 0; i < len; i++)
		s[i] = (uint8_t)(i * 7);
	omx_request_t sr, rr;
	omx_status_t st;
	if (!unexpected)
		omx_irecv(A, r, len, 0x77, ~0ull, NULL, &rr);
	(sync ? omx_issend : omx_isend)(B, s, len, b2a, 0x77, NULL, &sr);
	pump(20);
	if (unexpected)
		omx_irecv(A, r, len, 0x77, ~0ull, NULL, &rr);
	wait_req(A, &rr, &st, 20000);
	wait_req(B, &sr, &st, 20000);
	pump(50);
	fclose(rec);
	rec = NULL;
	free(s);
	free(r);
	close_pair();
}

int omx_fuzz_recv_record(const char *dir);
int omx_fuzz_recv_record(const char *dir)
{
	init_once();
	omx_memnet_set_tap(hub, tap, NULL);
	static const struct {
		const char *name;
		size_t len;
		int unexpected, sync;
	} seeds[] = {
		{ "tiny", 10, 0, 0 },         { "tiny-unexp", 30, 1, 0 },      { "small", 100, 0, 0 },
		{ "small-unexp", 128, 1, 0 }, { "medium", 5000, 0, 0 },        { "medium-unexp", 20000, 1, 0 },
		{ "large", 70000, 0, 0 },     { "large-unexp", 300000, 1, 0 }, { "issend", 40, 0, 1 },
		{ "empty", 0, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		record_one(dir, seeds[i].name, seeds[i].len, seeds[i].unexpected, seeds[i].sync);
	omx_memnet_set_tap(hub, NULL, NULL);
	return 0;
}
