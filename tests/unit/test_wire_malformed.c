/*
 * test_wire_malformed.c - the decoder on bad input (wire.md 5 and 14): every truncation of a
 * valid frame of every type, bad length fields, unknown/invalid ptypes, wrong EtherType,
 * random and mutated frames. Every decode reads from a heap copy of exactly len bytes, so an
 * out-of-bounds read shows up under ASan.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"
#include "../fuzz/wire_check.h"
#include "../fuzz/wire_testlib.h"

static struct omx_wire_params P_EXT, P_EXT1500, P_COMPAT;
static uint8_t frame[70000], pl[65536];

/*
 * Decode the first len bytes of f from an exact-size heap copy. The copy lives until the next
 * call, since out->payload points into it.
 */
static uint8_t *last_copy;

static enum omx_wire_err decode_exact(const struct omx_wire_params *wp, const uint8_t *f, size_t len,
				      struct omx_pkt *out)
{
	free(last_copy);
	last_copy = malloc(len ? len : 1);
	if (!last_copy)
		abort();
	memcpy(last_copy, f, len);
	return omx_wire_decode(wp, last_copy, len, out);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

/* Expected verdict for the first len bytes of the encoding of p. */
static enum omx_wire_err truncated_verdict(const struct omx_wire_params *wp, const struct omx_pkt *p, size_t len)
{
	size_t hlen = omx_wire_header_len(wp, p->ptype);
	size_t plen = p->ptype == OMX_PT_HOST_REPLY ? p->u.host.length : p->payload_len;

	if (len < OMX_HEAD_LEN + 1)
		return OMX_WIRE_ERR_TRUNCATED_HEAD;
	if (p->ptype == OMX_PT_RAW)
		return OMX_WIRE_OK;
	if (len < hlen)
		return OMX_WIRE_ERR_SHORT_HEADER;
	if (len < hlen + plen)
		return OMX_WIRE_ERR_SHORT_PAYLOAD;
	return OMX_WIRE_OK;
}

static void test_truncations(void)
{
	const struct omx_wire_params *modes[] = {&P_EXT, &P_EXT1500, &P_COMPAT};
	struct omx_test_rng r;
	struct omx_pkt p, d;

	omx_test_rng_seed(&r, 7);
	for (size_t m = 0; m < 3; m++) {
		for (size_t t = 0; t < OMX_TEST_NPTYPES; t++) {
			for (int it = 0; it < 4; it++) {
				size_t n, step;
				int bad = 0;

				omx_test_gen_pkt(modes[m], &r, omx_test_ptypes[t], &p, pl);
				n = omx_wire_encode(modes[m], &p, frame, sizeof(frame));
				CHECK(n >= OMX_FRAME_MIN);
				/* every length near the header/payload boundaries, sampled in big payloads */
				step = n > 600 ? 7 : 1;
				for (size_t len = 0; len <= n; len += (len < 80 || len + 80 > n) ? 1 : step) {
					enum omx_wire_err want = truncated_verdict(modes[m], &p, len);
					enum omx_wire_err got = decode_exact(modes[m], frame, len, &d);

					if (got != want) {
						if (!bad++)
							fprintf(stderr, "ptype %u mode %d len %zu/%zu: got %d want %d\n",
								p.ptype, modes[m]->mode, len, n, got, want);
					}
					if (got == OMX_WIRE_OK && p.ptype != OMX_PT_RAW)
						CHECK_SAME(omx_test_pkt_diff(&p, &d), "truncated padding");
				}
				CHECK(!bad);
			}
		}
	}
}

/* Encode a valid packet of this type, then patch bytes at body offsets. */
static size_t base_frame(const struct omx_wire_params *wp, uint8_t ptype, uint32_t payload_len)
{
	struct omx_test_rng r;
	struct omx_pkt p;

	omx_test_rng_seed(&r, 99);
	omx_test_gen_pkt(wp, &r, ptype, &p, pl);
	if (ptype == OMX_PT_TINY || ptype == OMX_PT_SMALL) {
		p.payload = pl;
		p.payload_len = p.u.msg.length = payload_len;
	}
	return omx_wire_encode(wp, &p, frame, sizeof(frame));
}

#define B(off) (frame + OMX_HEAD_LEN + (off))

static void test_bad_msg_lengths(void)
{
	struct omx_pkt d;
	size_t n;

	n = base_frame(&P_EXT, OMX_PT_TINY, 32);
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_OK);
	put16(B(4), 33);
	CHECK_EQ(decode_exact(&P_EXT, frame, 200, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	CHECK_EQ(d.ptype, OMX_PT_TINY); /* head fields are kept on error */
	put16(B(4), 0xFFFF);
	CHECK_EQ(decode_exact(&P_COMPAT, frame, 200, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	put16(B(4), 20); /* 20 bytes claimed, 19 present */
	CHECK_EQ(decode_exact(&P_EXT, frame, 40 + 19, &d), OMX_WIRE_ERR_SHORT_PAYLOAD);
	CHECK_EQ(decode_exact(&P_EXT, frame, 40 + 20, &d), OMX_WIRE_OK);

	n = base_frame(&P_EXT, OMX_PT_SMALL, 128);
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_OK);
	put16(B(4), 129);
	CHECK_EQ(decode_exact(&P_EXT, frame, n + 1, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	put16(B(4), 128);
	CHECK_EQ(decode_exact(&P_EXT, frame, n - 1, &d), OMX_WIRE_ERR_SHORT_PAYLOAD);

	n = base_frame(&P_EXT, OMX_PT_RNDV, 0);
	put16(B(4), 8);
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_OK);
	put16(B(4), 0xFFFF);
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_OK);
	put16(B(4), 7);
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	put16(B(4), 0);
	CHECK_EQ(decode_exact(&P_COMPAT, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);

	n = base_frame(&P_EXT, OMX_PT_CONNECT, 0);
	*B(4) = 16;
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_OK);
	*B(4) = 255;
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_OK);
	*B(4) = 15;
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	*B(4) = 0;
	CHECK_EQ(decode_exact(&P_COMPAT, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
}

static void test_bad_truc_host_reply(void)
{
	struct omx_pkt d;
	size_t n = base_frame(&P_EXT, OMX_PT_TRUC, 0);

	*B(4) = 16;
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_OK);
	*B(4) = 15;
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	*B(4) = 16;
	*B(12) = 0x56;
	CHECK_EQ(decode_exact(&P_EXT, frame, n, &d), OMX_WIRE_ERR_BAD_TRUC);
	*B(12) = 0x55;
	B(16)[3] ^= 1; /* session_id != session */
	CHECK_EQ(decode_exact(&P_COMPAT, frame, n, &d), OMX_WIRE_ERR_BAD_TRUC);
	B(16)[3] ^= 1;
	CHECK_EQ(decode_exact(&P_COMPAT, frame, n, &d), OMX_WIRE_OK);

	n = base_frame(&P_EXT, OMX_PT_HOST_REPLY, 0);
	*B(1) = 80;
	memset(B(16), 'h', 80); /* no NUL at all: the copy is terminated anyway */
	CHECK_EQ(decode_exact(&P_EXT, frame, 32 + 80, &d), OMX_WIRE_OK);
	CHECK_EQ(strlen(d.u.host.hostname), 80);
	CHECK_EQ(decode_exact(&P_EXT, frame, 32 + 79, &d), OMX_WIRE_ERR_SHORT_PAYLOAD);
	*B(1) = 81;
	CHECK_EQ(decode_exact(&P_EXT, frame, 200, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	*B(1) = 255;
	CHECK_EQ(decode_exact(&P_EXT, frame, 400, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	*B(1) = 5;
	memcpy(B(16), "ab\0cd", 5);
	CHECK_EQ(decode_exact(&P_EXT, frame, 60, &d), OMX_WIRE_OK);
	CHECK(strcmp(d.u.host.hostname, "ab") == 0 && d.u.host.length == 5);
	*B(1) = 0;
	CHECK_EQ(decode_exact(&P_EXT, frame, 60, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.host.hostname[0], 0);
	/* byte 1 is a pad in a HOST_QUERY */
	*B(0) = OMX_PT_HOST_QUERY;
	*B(1) = 200;
	CHECK_EQ(decode_exact(&P_EXT, frame, 32, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.host.length, 0);
}

/* MEDIUM: total length, fragment number/length/position, compat pipeline. */
static void test_bad_medium(const struct omx_wire_params *wp)
{
	int compat = wp->mode == OMX_WIRE_COMPAT;
	uint32_t f = wp->medium_frag_max, last = wp->medium_frags_max - 1;
	struct omx_pkt d;
	size_t n;

	n = base_frame(wp, OMX_PT_MEDIUM, 0);
	memset(frame + 48, 0x5A, f + 1);
	/* the last allowed fragment of the largest message */
	if (compat)
		put16(B(4), (uint16_t)wp->medium_max);
	else
		put32(B(4), wp->medium_max);
	put16(B(24), (uint16_t)f);
	*B(26) = (uint8_t)last;
	n = 48 + f;
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_OK);
	CHECK_EQ(d.payload_len, f);
	CHECK_EQ(decode_exact(wp, frame, n - 1, &d), OMX_WIRE_ERR_SHORT_PAYLOAD);
	*B(26) = (uint8_t)(last + 1);
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_ERR_BAD_FRAG);
	*B(26) = 255;
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_ERR_BAD_FRAG);
	*B(26) = 0;
	put16(B(24), (uint16_t)(f + 1));
	CHECK_EQ(decode_exact(wp, frame, n + 1, &d), OMX_WIRE_ERR_BAD_FRAG);
	if (compat) {
		put16(B(4), (uint16_t)(wp->medium_max + 1));
		CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
		put16(B(4), 0xFFFF);
	} else {
		put32(B(4), wp->medium_max + 1);
		CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
		put32(B(4), 0xFFFFFFFF);
	}
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
	/* message of 100 bytes: frag_length 101 and a second fragment are both outside it */
	if (compat)
		put16(B(4), 100);
	else
		put32(B(4), 100);
	put16(B(24), 101);
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_ERR_BAD_FRAG);
	put16(B(24), 100);
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_OK);
	CHECK_EQ(decode_exact(wp, frame, 48 + 99, &d), OMX_WIRE_ERR_SHORT_PAYLOAD);
	*B(26) = 1;
	put16(B(24), 1);
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_ERR_BAD_FRAG);
	*B(26) = 0;
	/* compat: frag_pipeline must be 12; extended: byte 27 is a pad */
	*B(27) = 11;
	CHECK_EQ(decode_exact(wp, frame, n, &d), compat ? OMX_WIRE_ERR_BAD_FRAG : OMX_WIRE_OK);
	*B(27) = 12;
	CHECK_EQ(decode_exact(wp, frame, n, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.msg.frag_pipeline, compat ? 12 : 0);
}

static void test_bad_pull_reply(const struct omx_wire_params *wp)
{
	struct omx_pkt d;
	uint32_t r = wp->pull_reply_max;

	base_frame(wp, OMX_PT_PULL_REPLY, 0);
	memset(B(16), 0x77, r + 1);
	put16(B(2), (uint16_t)r);
	CHECK_EQ(decode_exact(wp, frame, 32 + r, &d), OMX_WIRE_OK);
	CHECK_EQ(decode_exact(wp, frame, 32 + r - 1, &d), OMX_WIRE_ERR_SHORT_PAYLOAD);
	put16(B(2), (uint16_t)(r + 1));
	CHECK_EQ(decode_exact(wp, frame, 32 + r + 1, &d), OMX_WIRE_ERR_BAD_DATA_LENGTH);
}

static void test_ptypes_ethertype(void)
{
	uint8_t f[300];
	struct omx_pkt d;

	memset(f, 0, sizeof(f));
	f[12] = 0x86;
	f[13] = 0xDF;
	for (unsigned t = 0; t < 256; t++) {
		int known = omx_wire_header_len(&P_EXT, (uint8_t)t) != 0;
		int invalid = t == 2 || t == 32 || t == 33 || t == 34;
		enum omx_wire_err e;

		f[16] = (uint8_t)t;
		e = decode_exact(&P_EXT, f, sizeof(f), &d);
		if (invalid)
			CHECK_EQ(e, OMX_WIRE_ERR_INVALID_PTYPE);
		else if (!known)
			CHECK_EQ(e, OMX_WIRE_ERR_UNKNOWN_PTYPE);
		else
			CHECK(e != OMX_WIRE_ERR_UNKNOWN_PTYPE && e != OMX_WIRE_ERR_INVALID_PTYPE);
		/* only the ptype byte present */
		e = decode_exact(&P_COMPAT, f, 17, &d);
		if (invalid)
			CHECK_EQ(e, OMX_WIRE_ERR_INVALID_PTYPE);
		else if (!known)
			CHECK_EQ(e, OMX_WIRE_ERR_UNKNOWN_PTYPE);
		else
			CHECK_EQ(e, t == OMX_PT_RAW ? OMX_WIRE_OK : OMX_WIRE_ERR_SHORT_HEADER);
		CHECK_EQ(d.ptype, t);
	}
	CHECK_EQ(decode_exact(&P_EXT, f, 0, &d), OMX_WIRE_ERR_TRUNCATED_HEAD);
	CHECK_EQ(decode_exact(&P_EXT, f, 16, &d), OMX_WIRE_ERR_TRUNCATED_HEAD);
	CHECK_EQ(omx_wire_decode(&P_EXT, NULL, 60, &d), OMX_WIRE_ERR_TRUNCATED_HEAD);
	f[16] = OMX_PT_NOTIFY;
	CHECK_EQ(decode_exact(&P_EXT, f, 60, &d), OMX_WIRE_OK);
	{
		static const uint16_t bad[] = {0x0800, 0x86DE, 0xDF86, 0x8100, 0x0000, 0xFFFF};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			put16(f + 12, bad[i]);
			CHECK_EQ(decode_exact(&P_EXT, f, 60, &d), OMX_WIRE_ERR_ETHERTYPE);
			CHECK_EQ(decode_exact(&P_COMPAT, f, 17, &d), OMX_WIRE_ERR_ETHERTYPE);
			CHECK_EQ(omx_wire_frame_endpoint(f, 60), -2);
		}
	}
}

/* RAW shorter than the discovery frame: accepted, u.raw left zero. CONNECT ext detection. */
static void test_raw_connect_ext(void)
{
	uint8_t f[64];
	struct omx_pkt d;
	static const uint8_t ext_bytes[][2] = {{'X', 0}, {'X', 3}, {'Y', 1}, {'X', 1}, {'X', 2}};

	memset(f, 0xEE, sizeof(f));
	f[12] = 0x86;
	f[13] = 0xDF;
	f[16] = OMX_PT_RAW;
	CHECK_EQ(decode_exact(&P_EXT, f, 63, &d), OMX_WIRE_OK);
	CHECK(d.u.raw.nic_id == 0 && d.u.raw.serial == 0 && d.payload_len == 47);
	CHECK_EQ(decode_exact(&P_EXT, f, 64, &d), OMX_WIRE_OK);
	CHECK(d.u.raw.nic_id == 0xEEEEEEEEEEEEEEEEull && d.payload_len == 48);

	base_frame(&P_EXT, OMX_PT_CONNECT, 0);
	*B(4) = 16;
	put16(B(14), 1500);
	for (size_t i = 0; i < sizeof(ext_bytes) / sizeof(ext_bytes[0]); i++) {
		int valid = ext_bytes[i][0] == 'X' && (ext_bytes[i][1] == 1 || ext_bytes[i][1] == 2);

		*B(12) = ext_bytes[i][0];
		*B(13) = ext_bytes[i][1];
		CHECK_EQ(decode_exact(&P_EXT, frame, 60, &d), OMX_WIRE_OK);
		CHECK_EQ(d.u.connect.ext_present, valid);
		if (valid) {
			CHECK_EQ(d.u.connect.ext_mode, ext_bytes[i][1] - 1);
			CHECK_EQ(d.u.connect.ext_mtu, 1500);
		} else {
			CHECK(d.u.connect.ext_mode == 0 && d.u.connect.ext_mtu == 0);
		}
	}
}

/* Decode, and if accepted, re-encode and compare: the encoder must take what the decoder took. */
static void decode_reencode(const struct omx_wire_params *wp, const uint8_t *f, size_t len)
{
	static uint8_t out[70000];
	struct omx_pkt d, d2;
	enum omx_wire_err e = decode_exact(wp, f, len, &d);
	size_t n;

	CHECK(e < OMX_WIRE_ERR_COUNT);
	if (e != OMX_WIRE_OK)
		return;
	n = omx_wire_encode(wp, &d, out, sizeof(out));
	if (d.ptype == OMX_PT_RAW && OMX_HEAD_LEN + d.payload_len > wp->mtu) {
		CHECK_EQ(n, 0);
		return;
	}
	CHECK(n >= OMX_FRAME_MIN);
	CHECK_EQ(omx_wire_decode(wp, out, n, &d2), OMX_WIRE_OK);
	if (d.ptype == OMX_PT_RAW && d.payload_len < OMX_FRAME_MIN - OMX_HEAD_LEN) {
		/* a RAW body includes the padding: a short frame comes back padded with zeros */
		CHECK_EQ(d2.payload_len, OMX_FRAME_MIN - OMX_HEAD_LEN);
		CHECK(memcmp(d.payload, d2.payload, d.payload_len) == 0);
		d.payload_len = d2.payload_len = 0;
	}
	CHECK_SAME(omx_test_pkt_diff(&d, &d2), "re-encode");
}

static void test_random_frames(void)
{
	const struct omx_wire_params *modes[] = {&P_EXT, &P_EXT1500, &P_COMPAT};
	struct omx_test_rng r;
	static uint8_t f[9000];
	struct omx_pkt p;

	omx_test_rng_seed(&r, 2024);
	for (int i = 0; i < 200000; i++) {
		size_t len = omx_test_below(&r, 8) ? omx_test_below(&r, 160) : omx_test_below(&r, sizeof(f));

		omx_test_fill(&r, f, len);
		if (len >= 17 && omx_test_below(&r, 10)) {
			f[12] = 0x86;
			f[13] = 0xDF;
			if (omx_test_below(&r, 5))
				f[16] = omx_test_ptypes[omx_test_below(&r, OMX_TEST_NPTYPES)];
		}
		decode_reencode(modes[i % 3], f, len);
	}
	/* single-byte mutations of valid frames */
	for (int i = 0; i < 10000; i++) {
		const struct omx_wire_params *wp = modes[i % 3];
		size_t n;

		omx_test_gen_pkt(wp, &r, omx_test_ptypes[i % OMX_TEST_NPTYPES], &p, pl);
		n = omx_wire_encode(wp, &p, frame, sizeof(frame));
		for (int k = 0; k < 8; k++) {
			size_t at = OMX_HEAD_LEN + omx_test_below(&r, 48);
			uint8_t old = frame[at];

			frame[at] = (uint8_t)omx_test_rand32(&r);
			decode_reencode(wp, frame, n);
			decode_reencode(modes[(i + 1) % 3], frame, n); /* the other layout too */
			frame[at] = old;
		}
	}
}

int main(void)
{
	if (omx_wire_params_init(&P_EXT, OMX_WIRE_EXTENDED, 9000) || omx_wire_params_init(&P_COMPAT, OMX_WIRE_COMPAT, 4144) ||
	    omx_wire_params_init(&P_EXT1500, OMX_WIRE_EXTENDED, 1500)) {
		fprintf(stderr, "params init failed\n");
		return 1;
	}
	test_truncations();
	test_bad_msg_lengths();
	test_bad_truc_host_reply();
	test_bad_medium(&P_EXT);
	test_bad_medium(&P_EXT1500);
	test_bad_medium(&P_COMPAT);
	test_bad_pull_reply(&P_EXT);
	test_bad_pull_reply(&P_EXT1500);
	test_bad_pull_reply(&P_COMPAT);
	test_ptypes_ethertype();
	test_raw_connect_ext();
	test_random_frames();
	free(last_copy);
	return t_summary("test_wire_malformed");
}
