/*
 * mx_exercise.c - an MX application: compiled only against myriexpress.h / mx_extensions.h and
 * linked with -lmyriexpress. Run on two hosts ("a" and "b"), it exercises the MX API across
 * the network: init, info, hostname/nic id/board translation, connect/iconnect/disconnect,
 * isend/issend/irecv with segment lists of every size class, test/wait/test_any/wait_any,
 * ipeek/peek, iprobe/probe, ibuffered, context, cancel, forget, address contexts, the
 * unexpected handler, wakeup, self sends, error handlers and strerror/strstatus.
 *
 *   mx_exercise a|b <peer hostname>
 * Prints "N passed, M failed"; exit 0 only if everything passed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "myriexpress.h"
#include "mx_extensions.h"

#define KEY 0x4d58
#define M_DATA 0x1000000000000000ull
#define M_REPLY 0x2000000000000000ull
#define M_SYNC 0x3000000000000000ull
#define M_UNEXP 0x4000000000000000ull
#define M_HANDLER 0x5000000000000000ull

static int passed, failed;
#define CHECK(c)                                                                                                \
	do {                                                                                                    \
		if (c)                                                                                          \
			passed++;                                                                               \
		else {                                                                                          \
			failed++;                                                                               \
			fprintf(stderr, "FAIL line %d: %s\n", __LINE__, #c);                                     \
		}                                                                                               \
	} while (0)

static mx_endpoint_t ep;
static mx_endpoint_addr_t peer;

static void pattern(uint8_t *b, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 31 + i * 7);
}

static int wait_ok(mx_request_t *r, mx_status_t *st)
{
	uint32_t res = 0;
	mx_return_t rc = mx_wait(ep, r, 20000, st, &res);
	return rc == MX_SUCCESS && res == 1;
}

static void sync_peer(uint64_t tag)
{
	mx_request_t s, r;
	mx_status_t st;
	CHECK(mx_irecv(ep, NULL, 0, M_SYNC | tag, MX_MATCH_MASK_NONE, NULL, &r) == MX_SUCCESS);
	CHECK(mx_issend(ep, NULL, 0, peer, M_SYNC | tag, NULL, &s) == MX_SUCCESS);
	int ok = wait_ok(&s, &st);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  sync %llu: issend did not complete\n", (unsigned long long)tag);
	ok = wait_ok(&r, &st);
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  sync %llu: receive did not complete\n", (unsigned long long)tag);
}

static const uint32_t sizes[] = { 0, 1, 32, 33, 128, 129, 4096, 8193, 32768, 32769, 100000, 1 << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* a sends every size with 3 segments; b receives into 2 segments and echoes with issend. */
static void data_exchange(int is_a)
{
	for (unsigned k = 0; k < NSIZES; k++) {
		uint32_t n = sizes[k];
		uint8_t *buf = malloc(n + 16), *got = calloc(1, n + 16);
		mx_segment_t seg[3] = { { buf, n / 3 }, { buf + n / 3, 0 }, { buf + n / 3, n - n / 3 } };
		mx_segment_t rseg[2] = { { got, n / 2 }, { got + n / 2, n - n / 2 + 16 } };
		mx_request_t s, r;
		mx_status_t st;
		uint32_t res;
		pattern(buf, n, k);
		if (is_a) {
			CHECK(mx_isend(ep, seg, 3, peer, M_DATA | k, (void *)(uintptr_t)(k + 1), &s) == MX_SUCCESS);
			CHECK(mx_ibuffered(ep, &s, &res) == MX_SUCCESS);
			CHECK(wait_ok(&s, &st) && st.code == MX_STATUS_SUCCESS && st.msg_length == n);
			CHECK(st.context == (void *)(uintptr_t)(k + 1));
			CHECK(mx_irecv(ep, rseg, 2, M_REPLY | k, MX_MATCH_MASK_NONE, NULL, &r) == MX_SUCCESS);
			CHECK(wait_ok(&r, &st) && st.xfer_length == n && memcmp(got, buf, n) == 0);
		} else {
			CHECK(mx_irecv(ep, rseg, 2, M_DATA | k, MX_MATCH_MASK_NONE, NULL, &r) == MX_SUCCESS);
			void *ctx = (void *)1;
			CHECK(mx_context(&r, &ctx) == MX_SUCCESS && ctx == NULL);
			CHECK(wait_ok(&r, &st) && st.code == MX_STATUS_SUCCESS && st.xfer_length == n &&
			      st.match_info == (M_DATA | k) && memcmp(got, buf, n) == 0);
			mx_segment_t back = { got, n };
			CHECK(mx_issend(ep, &back, 1, st.source, M_REPLY | k, NULL, &s) == MX_SUCCESS);
			CHECK(wait_ok(&s, &st) && st.xfer_length == n);
		}
		free(buf);
		free(got);
	}
}

/* b leaves messages unexpected; a probes, peeks, test_any's and cancels. */
static void queues(int is_a)
{
	mx_request_t r, any;
	mx_status_t st;
	uint32_t res;
	char b1[64];
	if (!is_a) {
		for (int i = 0; i < 3; i++) {
			mx_segment_t s = { "queued", 7 };
			CHECK(mx_isend(ep, &s, 1, peer, M_UNEXP | (uint64_t)i, NULL, NULL) == MX_SUCCESS);
		}
		sync_peer(1);
		return;
	}
	sync_peer(1);
	CHECK(mx_probe(ep, 5000, M_UNEXP, 0xF000000000000000ull, &st, &res) == MX_SUCCESS && res == 1 &&
	      st.match_info == M_UNEXP && st.msg_length == 7);
	CHECK(mx_iprobe(ep, M_UNEXP | 9, MX_MATCH_MASK_NONE, &st, &res) == MX_SUCCESS && res == 0);
	for (int i = 0; i < 3; i++) {
		mx_segment_t s = { b1, sizeof(b1) };
		CHECK(mx_irecv(ep, &s, 1, M_UNEXP | (uint64_t)i, MX_MATCH_MASK_NONE, (void *)7, NULL) == MX_SUCCESS);
	}
	mx_segment_t s = { b1, sizeof(b1) };
	CHECK(mx_irecv(ep, &s, 1, 0x77, MX_MATCH_MASK_NONE, NULL, &r) == MX_SUCCESS);
	CHECK(mx_cancel(ep, &r, &res) == MX_SUCCESS && res == 1);
	/* peek and test_any on a self send (synchronous until matched) */
	mx_endpoint_addr_t me;
	CHECK(mx_get_endpoint_addr(ep, &me) == MX_SUCCESS);
	mx_segment_t ss = { "self", 5 };
	mx_request_t sr, rr;
	CHECK(mx_isend(ep, &ss, 1, me, 0xABCD, (void *)3, &sr) == MX_SUCCESS);
	CHECK(mx_irecv(ep, &s, 1, 0xABCD, MX_MATCH_MASK_NONE, (void *)4, &rr) == MX_SUCCESS);
	CHECK(mx_peek(ep, 1000, &any, &res) == MX_SUCCESS && res == 1);
	CHECK(mx_test_any(ep, 0xABCD, MX_MATCH_MASK_NONE, &st, &res) == MX_SUCCESS && res == 1);
	CHECK(mx_wait_any(ep, 1000, 0xABCD, MX_MATCH_MASK_NONE, &st, &res) == MX_SUCCESS && res == 1);
	CHECK(mx_wait_any(ep, 50, 0xABCD, MX_MATCH_MASK_NONE, &st, &res) == MX_SUCCESS && res == 0);
	CHECK(!strcmp(b1, "self"));
}

static int handler_hits;
static mx_unexp_handler_action_t on_unexp(void *ctx, mx_endpoint_addr_t src, uint64_t match, uint32_t len, void *data)
{
	(void)ctx;
	(void)src;
	if ((match & 0xF000000000000000ull) == M_HANDLER) {
		handler_hits++;
		return MX_RECV_FINISHED;
	}
	return MX_RECV_CONTINUE;
}

static void *wake_later(void *a)
{
	(void)a;
	usleep(200000);
	mx_wakeup(ep);
	return NULL;
}

static void misc(int is_a)
{
	mx_status_t st;
	uint32_t res;
	mx_request_t r;
	/* address context */
	void *c = NULL;
	CHECK(mx_set_endpoint_addr_context(peer, (void *)0x1234) == MX_SUCCESS);
	CHECK(mx_get_endpoint_addr_context(peer, &c) == MX_SUCCESS && c == (void *)0x1234);
	/* unexpected handler: b sends 2 messages that a's handler swallows */
	if (is_a) {
		CHECK(mx_register_unexp_handler(ep, on_unexp, NULL) == MX_SUCCESS);
		sync_peer(2);
		sync_peer(3);
		for (int i = 0; i < 100 && handler_hits < 2; i++)
			mx_progress(ep);
		CHECK(handler_hits == 2);
		CHECK(mx_register_unexp_handler(ep, NULL, NULL) == MX_SUCCESS);
	} else {
		sync_peer(2);
		mx_segment_t s = { "x", 1 };
		CHECK(mx_isend(ep, &s, 1, peer, M_HANDLER | 1, NULL, NULL) == MX_SUCCESS);
		static char big[200000]; /* a rendezvous in every wire mode (eager up to 128 KiB at MTU 9000) */
		mx_segment_t sb = { big, sizeof(big) };
		CHECK(mx_isend(ep, &sb, 1, peer, M_HANDLER | 2, NULL, &r) == MX_SUCCESS);
		CHECK(wait_ok(&r, &st) && st.code == MX_STATUS_TRUNCATED && st.xfer_length == 0);
		sync_peer(3);
	}
	/* wakeup ends a blocked wait with result 0 */
	mx_segment_t s = { NULL, 0 };
	CHECK(mx_irecv(ep, &s, 1, 0xDEAD, MX_MATCH_MASK_NONE, NULL, &r) == MX_SUCCESS);
	pthread_t t;
	pthread_create(&t, NULL, wake_later, NULL);
	CHECK(mx_wait(ep, &r, MX_INFINITE, &st, &res) == MX_SUCCESS && res == 0);
	pthread_join(t, NULL);
	CHECK(mx_cancel(ep, &r, &res) == MX_SUCCESS && res == 1);
	CHECK(mx_forget(ep, &r) == MX_SUCCESS);
	/* truncation reported with the right status */
	char small[4];
	mx_segment_t ts = { small, sizeof(small) };
	if (is_a) {
		CHECK(mx_irecv(ep, &ts, 1, 0x7777, MX_MATCH_MASK_NONE, NULL, &r) == MX_SUCCESS);
		CHECK(wait_ok(&r, &st) && st.code == MX_STATUS_TRUNCATED && st.xfer_length == 4 && st.msg_length == 10);
	} else {
		mx_segment_t ten = { "0123456789", 10 };
		CHECK(mx_isend(ep, &ten, 1, peer, 0x7777, NULL, &r) == MX_SUCCESS);
		CHECK(wait_ok(&r, &st));
	}
	sync_peer(4);
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "a") && strcmp(argv[1], "b"))) {
		fprintf(stderr, "usage: mx_exercise a|b <peer hostname>\n");
		return 2;
	}
	int is_a = argv[1][0] == 'a';
	mx_set_error_handler(MX_ERRORS_RETURN);
	CHECK(mx_init() == MX_SUCCESS);
	CHECK(mx_init() == MX_SUCCESS); /* idempotent */
	uint32_t count = 0, max_ep = 0, nc = 0;
	CHECK(mx_get_info(NULL, MX_NIC_COUNT, NULL, 0, &count, sizeof(count)) == MX_SUCCESS && count == 1);
	uint64_t ids[4] = { 1, 1, 1, 1 };
	CHECK(mx_get_info(NULL, MX_NIC_IDS, NULL, 0, ids, sizeof(ids)) == MX_SUCCESS && ids[0] != 0 && ids[1] == 0);
	CHECK(mx_get_info(NULL, MX_MAX_NATIVE_ENDPOINTS, NULL, 0, &max_ep, sizeof(max_ep)) == MX_SUCCESS && max_ep == 32);
	CHECK(mx_get_info(NULL, MX_COUNTERS_COUNT, NULL, 0, &nc, sizeof(nc)) == MX_SUCCESS && nc == 85);
	CHECK(mx_get_info(NULL, MX_NIC_COUNT, NULL, 0, NULL, 4) == MX_BAD_INFO_VAL);
	CHECK(mx_get_info(NULL, MX_NIC_COUNT, NULL, 0, &count, 2) == MX_BAD_INFO_LENGTH);
	uint64_t nic;
	uint32_t board;
	CHECK(mx_board_number_to_nic_id(0, &nic) == MX_SUCCESS && nic == ids[0]);
	CHECK(mx_nic_id_to_board_number(nic, &board) == MX_SUCCESS && board == 0);
	CHECK(mx_board_number_to_nic_id(5, &nic) == MX_BOARD_UNKNOWN);
	CHECK(!strcmp(mx_strerror(MX_BAD_MATCH_MASK), "Bad match mask."));
	CHECK(!strcmp(mx_strstatus(MX_STATUS_TRUNCATED), "Message Truncated"));

	mx_param_t param = { .key = MX_PARAM_UNEXP_QUEUE_MAX, .val = { .unexp_queue_max = 10 } };
	CHECK(mx_open_endpoint(MX_ANY_NIC, MX_ANY_ENDPOINT, KEY, &param, 1, &ep) == MX_SUCCESS);
	uint64_t peer_nic;
	char name[MX_MAX_HOSTNAME_LEN];
	CHECK(mx_hostname_to_nic_id(argv[2], &peer_nic) == MX_SUCCESS);
	CHECK(mx_nic_id_to_hostname(peer_nic, name) == MX_SUCCESS && !strcmp(name, argv[2]));
	CHECK(mx_hostname_to_nic_id("no-such-host:0", &nic) == MX_HOST_NOT_FOUND);
	mx_return_t rc = MX_TIMEOUT;
	for (int i = 0; i < 30 && rc != MX_SUCCESS; i++)
		rc = mx_connect(ep, peer_nic, 0, KEY, 1000, &peer);
	CHECK(rc == MX_SUCCESS);
	uint32_t eid, sess;
	CHECK(mx_decompose_endpoint_addr2(peer, &nic, &eid, &sess) == MX_SUCCESS && nic == peer_nic && eid == 0);
	/* wrong key through iconnect */
	mx_request_t cr;
	mx_status_t st;
	CHECK(mx_iconnect(ep, peer_nic, 0, KEY + 1, 99, NULL, &cr) == MX_SUCCESS);
	CHECK(wait_ok(&cr, &st) && st.code == MX_STATUS_BAD_KEY && st.match_info == 99);
	CHECK(mx_connect(ep, peer_nic, 0, KEY + 1, 5000, &peer) == MX_BAD_CONNECTION_KEY);
	CHECK(mx_connect(ep, peer_nic, 0, KEY, 5000, &peer) == MX_SUCCESS);
	/* bad arguments */
	mx_segment_t many[MX_MAX_SEGMENTS + 1];
	memset(many, 0, sizeof(many));
	mx_request_t r;
	CHECK(mx_isend(ep, many, MX_MAX_SEGMENTS + 1, peer, 0, NULL, &r) == MX_BAD_SEG_CNT);
	CHECK(mx_irecv(ep, many, 1, 1, 0, NULL, &r) == MX_BAD_MATCH_MASK);

	sync_peer(0);
	data_exchange(is_a);
	queues(is_a);
	misc(is_a);
	sync_peer(5);
	CHECK(mx_disconnect(ep, peer) == MX_SUCCESS);
	CHECK(mx_close_endpoint(ep) == MX_SUCCESS);
	CHECK(mx_finalize() == MX_SUCCESS);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
