/*
 * gen_wire_corpus.c - writes the seed corpus of fuzz_wire_decode into a directory:
 * one valid frame of every packet type in both modes, an omxoed discovery frame, and a set of
 * malformed frames (one per decoder rejection path). Deterministic (fixed seed).
 * Usage: gen_wire_corpus tests/fuzz/corpus/wire
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"
#include "wire_testlib.h"

static const char *outdir;
static int failures;
static uint8_t pl[65536], frame[70000];

static void write_file(const char *name, const uint8_t *data, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(data, 1, len, f) != len) {
		fprintf(stderr, "gen_wire_corpus: cannot write %s\n", path);
		failures++;
	}
	if (f && fclose(f) != 0)
		failures++;
}

static const char *ptype_name(uint8_t t)
{
	switch (t) {
	case OMX_PT_RAW: return "raw";
	case OMX_PT_HOST_QUERY: return "host_query";
	case OMX_PT_HOST_REPLY: return "host_reply";
	case OMX_PT_TRUC: return "truc";
	case OMX_PT_CONNECT: return "connect";
	case OMX_PT_TINY: return "tiny";
	case OMX_PT_SMALL: return "small";
	case OMX_PT_MEDIUM: return "medium";
	case OMX_PT_RNDV: return "rndv";
	case OMX_PT_PULL: return "pull";
	case OMX_PT_PULL_REPLY: return "pull_reply";
	case OMX_PT_NOTIFY: return "notify";
	case OMX_PT_NACK_LIB: return "nack_lib";
	case OMX_PT_NACK_MCP: return "nack_mcp";
	default: return "unknown";
	}
}

/* A valid frame of this type, kept small (<= 600 bytes) so the corpus stays light. */
static size_t valid_frame(const struct omx_wire_params *wp, struct omx_test_rng *r, uint8_t ptype)
{
	struct omx_pkt p;
	size_t n;

	do {
		omx_test_gen_pkt(wp, r, ptype, &p, pl);
		n = omx_wire_encode(wp, &p, frame, sizeof(frame));
	} while (n == 0 || n > 600 ||
		 (ptype == OMX_PT_HOST_REPLY && p.u.host.length < 2) ||
		 ((ptype == OMX_PT_TINY || ptype == OMX_PT_SMALL || ptype == OMX_PT_MEDIUM ||
		   ptype == OMX_PT_PULL_REPLY) && p.payload_len == 0));
	return n;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

#define B(off) (frame + OMX_HEAD_LEN + (off))

/* One frame per rejection path of omx_wire_decode. */
static void malformed(const struct omx_wire_params *ext, const struct omx_wire_params *cpt, struct omx_test_rng *r)
{
	size_t n;

	n = valid_frame(ext, r, OMX_PT_TINY);
	write_file("bad_truncated_head", frame, 15);
	frame[12] = 0x08;
	frame[13] = 0x00;
	write_file("bad_ethertype", frame, n);
	frame[12] = 0x86;
	frame[13] = 0xDF;
	*B(0) = 0x7F;
	write_file("bad_unknown_ptype", frame, n);
	*B(0) = OMX_PT_ETHER_UNICAST;
	write_file("bad_invalid_ptype", frame, n);
	*B(0) = OMX_PT_TINY;
	put16(B(4), 33);
	write_file("bad_tiny_length", frame, 80);
	put16(B(4), 30);
	write_file("bad_tiny_short_payload", frame, 60);
	write_file("bad_tiny_short_header", frame, 30);

	n = valid_frame(ext, r, OMX_PT_RNDV);
	put16(B(4), 7);
	write_file("bad_rndv_length", frame, n);
	n = valid_frame(ext, r, OMX_PT_CONNECT);
	*B(4) = 15;
	write_file("bad_connect_length", frame, n);
	n = valid_frame(ext, r, OMX_PT_TRUC);
	*B(12) = 0x56;
	write_file("bad_truc_type", frame, n);
	*B(12) = OMX_TRUC_TYPE_ACK;
	B(16)[0] ^= 0x80;
	write_file("bad_truc_session", frame, n);
	n = valid_frame(ext, r, OMX_PT_HOST_REPLY);
	*B(1) = 81;
	write_file("bad_host_reply_length", frame, 200);
	n = valid_frame(cpt, r, OMX_PT_MEDIUM);
	*B(26) = 9;
	write_file("bad_medium_frag_seqnum", frame, n);
	*B(26) = 0;
	*B(27) = 11;
	write_file("bad_medium_compat_pipeline", frame, n);
	n = valid_frame(ext, r, OMX_PT_PULL_REPLY);
	put16(B(2), 0xFFFF);
	write_file("bad_pull_reply_length", frame, n);
	write_file("bad_pull_short_header", frame, 40);
}

int main(int argc, char **argv)
{
	struct omx_wire_params ext, cpt;
	const struct omx_wire_params *modes[2] = {&ext, &cpt};
	struct omx_test_rng r;
	char name[128];

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	outdir = argv[1];
	if (omx_wire_params_init(&ext, OMX_WIRE_EXTENDED, 9000) || omx_wire_params_init(&cpt, OMX_WIRE_COMPAT, 4144))
		return 1;
	omx_test_rng_seed(&r, 0x5EED);
	for (int m = 0; m < 2; m++) {
		for (size_t t = 0; t < OMX_TEST_NPTYPES; t++) {
			size_t n = valid_frame(modes[m], &r, omx_test_ptypes[t]);

			snprintf(name, sizeof(name), "valid_%s_%s", m ? "compat" : "ext", ptype_name(omx_test_ptypes[t]));
			write_file(name, frame, n);
		}
	}
	{
		struct omx_pkt p;
		size_t n;

		memset(&p, 0, sizeof(p));
		p.ptype = OMX_PT_RAW;
		memset(p.dst_mac, 0xFF, 6);
		p.src_mac[0] = 0x02;
		p.src_mac[5] = 0x0a;
		p.u.raw.nic_id = omx_mac_to_nic_id(p.src_mac);
		p.u.raw.serial = 0x12345678;
		n = omx_wire_encode(&ext, &p, frame, sizeof(frame));
		write_file("valid_raw_discovery", frame, n);
	}
	malformed(&ext, &cpt, &r);
	return failures ? 1 : 0;
}
