/*
 * fuzz_wire_decode.c - libFuzzer harness for the wire codec. The input is one Ethernet frame.
 * For each mode (extended MTU 9000, extended MTU 1500, compat): decode; if accepted, check
 * the payload lies inside the input and omx_wire_frame_endpoint agrees with the decoded
 * destination, then re-encode, re-decode and require the same packet, and require encoding
 * to be a fixpoint (encode(decode(encode(p))) == encode(p)).
 * Built with -fsanitize=fuzzer by OMX_FUZZ=ON, and always linked with replay_main.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"
#include "wire_testlib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                          \
	do {                                                                                      \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                  \
		}                                                                                 \
	} while (0)

/* What omx_wire_frame_endpoint must say for an accepted packet. */
static int expected_endpoint(const struct omx_pkt *p)
{
	switch (p->ptype) {
	case OMX_PT_TINY:
	case OMX_PT_SMALL:
	case OMX_PT_MEDIUM:
	case OMX_PT_RNDV:
		return p->u.msg.dst_endpoint;
	case OMX_PT_PULL:
		return p->u.pull.dst_endpoint;
	case OMX_PT_PULL_REPLY:
		return (int)((p->u.pull_reply.dst_magic & 0xFF) ^ 0x80);
	case OMX_PT_NOTIFY:
		return p->u.notify.dst_endpoint;
	case OMX_PT_CONNECT:
		return p->u.connect.dst_endpoint;
	case OMX_PT_TRUC:
		return p->u.truc.dst_endpoint;
	case OMX_PT_NACK_LIB:
		return p->u.nack_lib.dst_endpoint;
	case OMX_PT_NACK_MCP:
		return p->u.nack_mcp.src_endpoint;
	default:
		return -1; /* RAW, HOST_QUERY, HOST_REPLY */
	}
}

static void check_reencode(const struct omx_wire_params *wp, struct omx_pkt *d)
{
	static uint8_t out[70000], out2[70000], hdr[4096];
	struct omx_pkt d2;
	size_t n, n2, hn;

	n = omx_wire_encode(wp, d, out, sizeof(out));
	if (d->ptype == OMX_PT_RAW && OMX_HEAD_LEN + d->payload_len > wp->mtu) {
		FUZZ_CHECK(n == 0); /* a RAW body larger than the MTU cannot be sent */
		return;
	}
	FUZZ_CHECK(n >= OMX_FRAME_MIN && n <= wp->mtu);
	FUZZ_CHECK(omx_wire_decode(wp, out, n, &d2) == OMX_WIRE_OK);
	if (d->ptype == OMX_PT_RAW && d->payload_len < OMX_FRAME_MIN - OMX_HEAD_LEN) {
		/* a RAW body includes the padding: a short frame comes back zero-padded */
		FUZZ_CHECK(d2.payload_len == OMX_FRAME_MIN - OMX_HEAD_LEN);
		FUZZ_CHECK(memcmp(d->payload, d2.payload, d->payload_len) == 0);
		for (size_t i = d->payload_len; i < d2.payload_len; i++)
			FUZZ_CHECK(d2.payload[i] == 0);
		d->payload = d2.payload;
		d->payload_len = d2.payload_len;
	}
	{
		const char *diff = omx_test_pkt_diff(d, &d2);

		if (diff)
			fprintf(stderr, "re-decoded packet differs in %s\n", diff);
		FUZZ_CHECK(diff == NULL);
	}
	n2 = omx_wire_encode(wp, &d2, out2, sizeof(out2));
	FUZZ_CHECK(n2 == n && memcmp(out, out2, n) == 0);
	hn = omx_wire_encode_header(wp, &d2, hdr, sizeof(hdr));
	FUZZ_CHECK(hn > 0 && hn <= n && memcmp(hdr, out, hn) == 0);
}

/* A one-type decoder's packet (ok: it took the frame) against the full decoder's: it takes exactly
 * the frames `want` says, and reads them the same (the rest of its zeroed packet untouched). */
static void check_like_full(int ok, int want, const struct omx_pkt *d, const struct omx_pkt *f, const char *what)
{
	FUZZ_CHECK(ok == want);
	if (!ok)
		return;
	const char *diff = omx_test_pkt_diff(d, f);
	if (diff)
		fprintf(stderr, "%s decode differs in %s\n", what, diff);
	FUZZ_CHECK(diff == NULL);
	FUZZ_CHECK(f->payload == d->payload && memcmp(f, d, sizeof(*f)) == 0);
}

static void fuzz_one(const struct omx_wire_params *wp, const uint8_t *data, size_t size)
{
	struct omx_pkt d, f;
	enum omx_wire_err e = omx_wire_decode(wp, data, size, &d);
	int ep = omx_wire_frame_endpoint(data, size);

	/* The eager-only decoder takes exactly the TINY and SMALL frames the full one accepts, the
	 * whole-medium one the MEDIUM frames holding one message. */
	memset(&f, 0, sizeof(f));
	check_like_full(omx_wire_decode_eager(data, size, &f),
			e == OMX_WIRE_OK && (d.ptype == OMX_PT_TINY || d.ptype == OMX_PT_SMALL), &d, &f, "eager");
	memset(&f, 0, sizeof(f));
	check_like_full(omx_wire_decode_medium_whole(wp, data, size, &f),
			e == OMX_WIRE_OK && d.ptype == OMX_PT_MEDIUM && d.u.msg.frag_seqnum == 0 &&
				d.u.msg.frag_length == d.u.msg.length,
			&d, &f, "whole-medium");

	FUZZ_CHECK(e < OMX_WIRE_ERR_COUNT);
	FUZZ_CHECK(omx_wire_strerror(e) != NULL);
	if (e == OMX_WIRE_ERR_TRUNCATED_HEAD || e == OMX_WIRE_ERR_ETHERTYPE || e == OMX_WIRE_ERR_UNKNOWN_PTYPE ||
	    e == OMX_WIRE_ERR_INVALID_PTYPE)
		FUZZ_CHECK(ep == -2);
	if (e != OMX_WIRE_OK)
		return;
	FUZZ_CHECK(ep == expected_endpoint(&d));
	FUZZ_CHECK(omx_wire_header_len(wp, d.ptype) > 0);
	if (d.payload) {
		FUZZ_CHECK(d.payload >= data + OMX_HEAD_LEN && d.payload <= data + size);
		FUZZ_CHECK(d.payload_len <= (size_t)(data + size - d.payload));
	} else {
		FUZZ_CHECK(d.payload_len == 0);
	}
	if (d.ptype == OMX_PT_HOST_REPLY)
		FUZZ_CHECK(d.u.host.length <= OMX_HOSTNAME_MAX && strlen(d.u.host.hostname) <= d.u.host.length);
	check_reencode(wp, &d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct omx_wire_params modes[4];
	static int ready;

	if (!ready) {
		FUZZ_CHECK(omx_wire_params_init(&modes[0], OMX_WIRE_EXTENDED, 9000) == 0);
		FUZZ_CHECK(omx_wire_params_init(&modes[1], OMX_WIRE_EXTENDED, 1500) == 0);
		FUZZ_CHECK(omx_wire_params_init(&modes[2], OMX_WIRE_COMPAT, 9000) == 0);
		omx_wire_params_local(&modes[1], &modes[3]); /* same-host frames at MTU 1500 */
		ready = 1;
	}
	for (int m = 0; m < 4; m++)
		fuzz_one(&modes[m], data, size);
	return 0;
}
