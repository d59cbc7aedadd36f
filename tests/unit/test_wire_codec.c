/*
 * test_wire_codec.c - wire codec: wire.md 17 test vectors, byte layouts of every packet type in
 * both modes, parameters, seeded random round trips, encoder refusals, frame_endpoint.
 * Malformed-frame tests are in test_wire_malformed.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "wire/wire.h"
#include "../fuzz/wire_check.h"
#include "../fuzz/wire_testlib.h"

static const uint8_t MAC_A[6] = {0x02, 0, 0, 0, 0, 0x0a};
static const uint8_t MAC_B[6] = {0x02, 0, 0, 0, 0, 0x0b};
static struct omx_wire_params P_EXT, P_EXT1500, P_COMPAT;
static uint8_t frame[70000], pl[65536];

static void head(struct omx_pkt *p, const uint8_t *dst, const uint8_t *src, uint16_t peer, uint8_t ptype)
{
	memset(p, 0, sizeof(*p));
	memcpy(p->dst_mac, dst, 6);
	memcpy(p->src_mac, src, 6);
	p->peer_index = peer;
	p->ptype = ptype;
}

/* Encode p and compare with vec (exact bytes), then decode vec and compare with p. */
static void check_exact(const struct omx_wire_params *wp, const struct omx_pkt *p, const uint8_t *vec,
			size_t vlen, const char *what)
{
	struct omx_pkt d;
	size_t n;

	memset(frame, 0xA5, sizeof(frame));
	n = omx_wire_encode(wp, p, frame, sizeof(frame));
	CHECK_EQ(n, vlen);
	if (n == vlen && memcmp(frame, vec, vlen) != 0) {
		for (size_t i = 0; i < vlen; i++)
			if (frame[i] != vec[i])
				fprintf(stderr, "%s: byte %zu: got %02x want %02x\n", what, i, frame[i], vec[i]);
		CHECK(!"encoded bytes differ");
	}
	CHECK_EQ(omx_wire_decode(wp, vec, vlen, &d), OMX_WIRE_OK);
	CHECK_SAME(omx_test_pkt_diff(p, &d), what);
	/* Unpadded (same-host) form: the encoded length without the padding, decoding the same. */
	size_t flen = omx_wire_frame_len(wp, p);
	CHECK(flen > 0 && flen <= vlen && (flen == vlen || vlen == OMX_FRAME_MIN));
	memset(&d, 0, sizeof(d));
	CHECK_EQ(omx_wire_decode(wp, vec, flen, &d), OMX_WIRE_OK);
	CHECK_SAME(omx_test_pkt_diff(p, &d), what);
}

/* Build the frame head(p) + body + zero padding, then check_exact. */
static void check_layout(const struct omx_wire_params *wp, const struct omx_pkt *p, const uint8_t *body,
			 size_t blen, const char *what)
{
	uint8_t vec[2048];
	size_t vlen = OMX_HEAD_LEN + blen < OMX_FRAME_MIN ? OMX_FRAME_MIN : OMX_HEAD_LEN + blen;

	memset(vec, 0, sizeof(vec));
	memcpy(vec, p->dst_mac, 6);
	memcpy(vec + 6, p->src_mac, 6);
	vec[12] = 0x86;
	vec[13] = 0xDF;
	vec[14] = (uint8_t)(p->peer_index >> 8);
	vec[15] = (uint8_t)p->peer_index;
	memcpy(vec + OMX_HEAD_LEN, body, blen);
	check_exact(wp, p, vec, vlen, what);
}

static const uint8_t V_CONNECT_REQ[60] = {
	0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x86, 0xdf, 0xff, 0xff,
	0x24, 0x03, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
	0x0a, 0x0b, 0x0c, 0x0d, 0x12, 0x34, 0x56, 0x78, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const uint8_t V_CONNECT_REP[60] = {
	0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x86, 0xdf, 0x00, 0x02,
	0x24, 0x00, 0x03, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
	0x0a, 0x0b, 0x0c, 0x0d, 0x5e, 0x55, 0x10, 0x4d, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const uint8_t V_TINY[60] = {
	0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x86, 0xdf, 0x00, 0x01,
	0x25, 0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x12, 0x34, 0x56, 0x78,
	0x9a, 0xbc, 0xde, 0xf0, 0x5e, 0x55, 0x10, 0x4d, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
static const uint8_t V_LIBACK[60] = {
	0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x86, 0xdf, 0x00, 0x02,
	0x23, 0x00, 0x03, 0x00, 0x10, 0x00, 0x00, 0x00, 0x0a, 0x0b, 0x0c, 0x0d, 0x55, 0x00, 0x00, 0x02,
	0x0a, 0x0b, 0x0c, 0x0d, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};

/* wire.md 17.1 and 17.2 */
static void test_vector_connect(void)
{
	struct omx_pkt p, d;
	struct omx_pkt_connect *c = &p.u.connect;

	head(&p, MAC_B, MAC_A, OMX_PEER_INDEX_UNKNOWN, OMX_PT_CONNECT);
	c->dst_endpoint = 3;
	c->length = 16;
	c->src_dst_peer_index = 2;
	c->src_session_id = 0x0A0B0C0D;
	c->app_key = c->target_session_id = 0x12345678;
	c->target_recv_seqnum_start = 1;
	check_exact(&P_EXT, &p, V_CONNECT_REQ, 60, "17.1 connect request");
	CHECK_EQ(omx_wire_decode(&P_EXT, V_CONNECT_REQ, 60, &d), OMX_WIRE_OK);
	CHECK_EQ(d.ptype, OMX_PT_CONNECT);
	CHECK_EQ(d.peer_index, 0xFFFF);
	CHECK_EQ(d.u.connect.dst_endpoint, 3);
	CHECK_EQ(d.u.connect.src_endpoint, 0);
	CHECK_EQ(d.u.connect.src_dst_peer_index, 2);
	CHECK_EQ(d.u.connect.app_key, 0x12345678);
	CHECK_EQ(d.u.connect.is_reply, 0);
	CHECK_EQ(d.u.connect.ext_present, 0);
	CHECK(memcmp(d.src_mac, MAC_A, 6) == 0 && memcmp(d.dst_mac, MAC_B, 6) == 0);
	CHECK_EQ(omx_wire_frame_endpoint(V_CONNECT_REQ, 60), 3);

	head(&p, MAC_A, MAC_B, 2, OMX_PT_CONNECT);
	c->src_endpoint = 3;
	c->length = 16;
	c->src_dst_peer_index = 1;
	c->src_session_id = 0x0A0B0C0D;
	c->app_key = c->target_session_id = 0x5E55104D;
	c->target_recv_seqnum_start = 1;
	c->is_reply = 1;
	c->status_code = OMX_CONNECT_STATUS_SUCCESS;
	check_exact(&P_EXT, &p, V_CONNECT_REP, 60, "17.2 connect reply");
	CHECK_EQ(omx_wire_decode(&P_EXT, V_CONNECT_REP, 60, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.connect.target_session_id, 0x5E55104D);
	CHECK_EQ(d.u.connect.src_session_id, 0x0A0B0C0D);
	CHECK_EQ(d.u.connect.is_reply, 1);
	CHECK_EQ(d.u.connect.status_code, 0);
	CHECK_EQ(omx_wire_frame_endpoint(V_CONNECT_REP, 60), 0);
	/* the same bytes are valid in compat mode */
	check_exact(&P_COMPAT, &p, V_CONNECT_REP, 60, "17.2 compat");
}

/* wire.md 17.3 and 17.4 */
static void test_vector_tiny_liback(void)
{
	struct omx_pkt p, d;

	head(&p, MAC_B, MAC_A, 1, OMX_PT_TINY);
	p.u.msg.dst_endpoint = 3;
	p.u.msg.length = 5;
	p.u.msg.lib_seqnum = 1;
	p.u.msg.lib_piggyack = 1;
	p.u.msg.match = 0x123456789ABCDEF0ull;
	p.u.msg.session = 0x5E55104D;
	p.payload = (const uint8_t *)"hello";
	p.payload_len = 5;
	check_exact(&P_EXT, &p, V_TINY, 60, "17.3 tiny");
	check_exact(&P_COMPAT, &p, V_TINY, 60, "17.3 tiny compat");
	CHECK_EQ(omx_wire_decode(&P_EXT, V_TINY, 60, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.msg.match, 0x123456789ABCDEF0ull);
	CHECK_EQ(d.u.msg.session, 0x5E55104D);
	CHECK_EQ(d.u.msg.length, 5);
	CHECK_EQ(d.payload_len, 5);
	CHECK(d.payload == V_TINY + 40 && memcmp(d.payload, "hello", 5) == 0);
	CHECK_EQ(omx_wire_frame_endpoint(V_TINY, 60), 3);
	/* decoding the frame without its padding works too */
	CHECK_EQ(omx_wire_decode(&P_EXT, V_TINY, 45, &d), OMX_WIRE_OK);

	head(&p, MAC_A, MAC_B, 2, OMX_PT_TRUC);
	p.u.truc.src_endpoint = 3;
	p.u.truc.length = 16;
	p.u.truc.session = p.u.truc.session_id = 0x0A0B0C0D;
	p.u.truc.type = OMX_TRUC_TYPE_ACK;
	p.u.truc.lib_seqnum = 2;
	p.u.truc.acknum = 1;
	p.u.truc.send_seq = 2;
	check_exact(&P_EXT, &p, V_LIBACK, 60, "17.4 liback");
	check_exact(&P_COMPAT, &p, V_LIBACK, 60, "17.4 liback compat");
	CHECK_EQ(omx_wire_decode(&P_EXT, V_LIBACK, 60, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.truc.acknum, 1);
	CHECK_EQ(d.u.truc.lib_seqnum, 2);
	CHECK_EQ(d.u.truc.session_id, 0x0A0B0C0D);
	CHECK_EQ(omx_wire_frame_endpoint(V_LIBACK, 60), 0);
	/* encoder defaults: length 0 -> 16, type 0 -> 0x55, session_id 0 -> session */
	p.u.truc.length = 0;
	p.u.truc.type = 0;
	p.u.truc.session_id = 0;
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, sizeof(frame)), 60);
	CHECK(memcmp(frame, V_LIBACK, 60) == 0);
}

static void msg_fields(struct omx_pkt *p)
{
	p->u.msg.dst_endpoint = 0x11;
	p->u.msg.src_endpoint = 0x22;
	p->u.msg.lib_seqnum = 0x0102;
	p->u.msg.lib_piggyack = 0x0304;
	p->u.msg.match = 0x0506070809101112ull;
	p->u.msg.session = 0x13141516;
}

static void test_layout_medium(void)
{
	static const uint8_t ext[] = {0x27, 0x11, 0x22, 0x00, 0x00, 0x01, 0x23, 0x45, 0x01, 0x02, 0x03, 0x04,
				      0x05, 0x06, 0x07, 0x08, 0x09, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
				      0x00, 0x04, 0x05, 0x00, 0x17, 0x18, 0x00, 0x00, 'a',  'b',  'c',  'd'};
	static const uint8_t cpt[] = {0x27, 0x11, 0x22, 0x00, 0x54, 0x32, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04,
				      0x05, 0x06, 0x07, 0x08, 0x09, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
				      0x00, 0x04, 0x05, 0x0c, 0x17, 0x18, 0x00, 0x00, 'a',  'b',  'c',  'd'};
	struct omx_pkt p;

	head(&p, MAC_B, MAC_A, 7, OMX_PT_MEDIUM);
	msg_fields(&p);
	p.u.msg.length = 0x12345;
	p.u.msg.frag_seqnum = 5;
	p.u.msg.frag_length = 4;
	p.u.msg.checksum = 0x1718;
	p.payload = (const uint8_t *)"abcd";
	p.payload_len = 4;
	check_layout(&P_EXT, &p, ext, sizeof(ext), "medium extended");
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), 0x11);
	p.u.msg.length = 0x5432;
	p.u.msg.frag_pipeline = 12;
	check_layout(&P_COMPAT, &p, cpt, sizeof(cpt), "medium compat");
	/* the encoder takes frag_pipeline from the params, not from the struct */
	p.u.msg.frag_pipeline = 0;
	CHECK_EQ(omx_wire_encode(&P_COMPAT, &p, frame, sizeof(frame)), 60);
	CHECK_EQ(frame[16 + 27], 12);
}

static void test_layout_msg(void)
{
	static const uint8_t rndv[] = {0x28, 0x11, 0x22, 0x00, 0x00, 0x08, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04,
				       0x05, 0x06, 0x07, 0x08, 0x09, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16,
				       0x00, 0x10, 0x00, 0x00, 0x33, 0x17, 0x00, 0x00};
	uint8_t small[24 + 40];
	struct omx_pkt p;

	head(&p, MAC_B, MAC_A, 7, OMX_PT_RNDV);
	msg_fields(&p);
	p.u.msg.length = 8;
	p.u.msg.msg_length = 0x100000;
	p.u.msg.rdma_id = 0x33;
	p.u.msg.rdma_seqnum = 0x17;
	check_layout(&P_EXT, &p, rndv, sizeof(rndv), "rndv");
	check_layout(&P_COMPAT, &p, rndv, sizeof(rndv), "rndv compat");
	p.u.msg.length = 0; /* encoder default: 8 */
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, sizeof(frame)), 60);
	CHECK_EQ(frame[21], 8);

	head(&p, MAC_B, MAC_A, 7, OMX_PT_SMALL);
	msg_fields(&p);
	p.u.msg.length = 40;
	p.u.msg.checksum = 0xBEEF;
	for (int i = 0; i < 40; i++)
		pl[i] = (uint8_t)(i * 7);
	p.payload = pl;
	p.payload_len = 40;
	memcpy(small, rndv, 24);
	small[0] = 0x26;
	small[4] = 0x00;
	small[5] = 40;
	small[6] = 0xBE;
	small[7] = 0xEF;
	memcpy(small + 24, pl, 40);
	check_layout(&P_EXT, &p, small, sizeof(small), "small");
	check_layout(&P_COMPAT, &p, small, sizeof(small), "small compat");
}

static void pull_fields(struct omx_pkt *p)
{
	head(p, MAC_B, MAC_A, 9, OMX_PT_PULL);
	p->u.pull.dst_endpoint = 0x11;
	p->u.pull.src_endpoint = 0x22;
	p->u.pull.session = 0x01020304;
	p->u.pull.total_length = 0x05060708;
	p->u.pull.rdma_id = 0x33;
	p->u.pull.rdma_seqnum = 0x17;
	p->u.pull.src_pull_handle = 0x00400023;
	p->u.pull.src_magic = OMX_PULL_MAGIC_XOR ^ 0x22;
	p->u.pull.frame_index = 0x89;
}

static void test_layout_pull(void)
{
	static const uint8_t ext[] = {0x29, 0x11, 0x22, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
				      0x08, 0x00, 0x00, 0x00, 0x33, 0x17, 0x00, 0x00, 0x00, 0x0a, 0x0b,
				      0x0c, 0x0d, 0x00, 0x40, 0x00, 0x23, 0x21, 0x07, 0x19, 0xa2, 0x00,
				      0x00, 0x01, 0x23, 0x00, 0x00, 0x45, 0x67, 0x00, 0x00, 0x00, 0x89};
	static const uint8_t cpt[] = {0x29, 0x11, 0x22, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
				      0x08, 0x33, 0x17, 0x0c, 0x0d, 0x00, 0x40, 0x00, 0x23, 0x21, 0x07,
				      0x19, 0xa2, 0x01, 0x23, 0x45, 0x67, 0x00, 0x00, 0x00, 0x89};
	static const uint8_t reply[] = {0x2a, 0x89, 0x00, 0x03, 0x00, 0x01, 0x23, 0x45, 0x00, 0x40,
					0x00, 0x23, 0x21, 0x07, 0x19, 0xa2, 'x',  'y',  'z'};
	struct omx_pkt p;

	pull_fields(&p);
	p.u.pull.rdma_offset = 0x0a0b0c0d;
	p.u.pull.first_frame_offset = 0x123;
	p.u.pull.block_length = 0x4567;
	check_layout(&P_EXT, &p, ext, sizeof(ext), "pull extended");
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_PULL), 60);
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), 0x11);
	p.u.pull.rdma_offset = 0x0c0d;
	check_layout(&P_COMPAT, &p, cpt, sizeof(cpt), "pull compat");
	CHECK_EQ(omx_wire_header_len(&P_COMPAT, OMX_PT_PULL), 48);

	head(&p, MAC_A, MAC_B, 0, OMX_PT_PULL_REPLY);
	p.u.pull_reply.frame_seqnum = 0x89;
	p.u.pull_reply.frame_length = 3;
	p.u.pull_reply.msg_offset = 0x12345;
	p.u.pull_reply.dst_pull_handle = 0x00400023;
	p.u.pull_reply.dst_magic = OMX_PULL_MAGIC_XOR ^ 0x22;
	p.payload = (const uint8_t *)"xyz";
	p.payload_len = 3;
	check_layout(&P_EXT, &p, reply, sizeof(reply), "pull reply");
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), 0x22);
	check_layout(&P_COMPAT, &p, reply, sizeof(reply), "pull reply compat");
}

static void test_layout_notify_nack(void)
{
	static const uint8_t notify[] = {0x2b, 0x11, 0x22, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
					 0x33, 0x17, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00};
	static const uint8_t nlib[] = {0x2c, 0x11, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
				       0x00, 0x22, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00};
	static const uint8_t nmcp[] = {0x2d, 0x11, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,
				       0x00, 0x40, 0x00, 0x23, 0x21, 0x07, 0x19, 0x91};
	struct omx_pkt p;

	head(&p, MAC_A, MAC_B, 3, OMX_PT_NOTIFY);
	p.u.notify.dst_endpoint = 0x11;
	p.u.notify.src_endpoint = 0x22;
	p.u.notify.session = 0x01020304;
	p.u.notify.total_length = 0x05060708;
	p.u.notify.rdma_id = 0x33;
	p.u.notify.rdma_seqnum = 0x17;
	p.u.notify.lib_seqnum = 0x0102;
	p.u.notify.lib_piggyack = 0x0304;
	check_layout(&P_EXT, &p, notify, sizeof(notify), "notify");
	check_layout(&P_COMPAT, &p, notify, sizeof(notify), "notify compat");
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), 0x11);

	head(&p, MAC_A, MAC_B, 3, OMX_PT_NACK_LIB);
	p.u.nack_lib.src_endpoint = 0x11;
	p.u.nack_lib.nack_type = OMX_NACK_BAD_SESSION;
	p.u.nack_lib.dst_endpoint = 0x22;
	p.u.nack_lib.dst_src_peer_index = 0x0102;
	p.u.nack_lib.lib_seqnum = 0x0304;
	check_layout(&P_EXT, &p, nlib, sizeof(nlib), "nack lib");
	check_layout(&P_COMPAT, &p, nlib, sizeof(nlib), "nack lib compat");
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), 0x22);

	head(&p, MAC_A, MAC_B, 3, OMX_PT_NACK_MCP);
	p.u.nack_mcp.src_endpoint = 0x11;
	p.u.nack_mcp.nack_type = OMX_NACK_BAD_RDMAWIN;
	p.u.nack_mcp.src_pull_handle = 0x00400023;
	p.u.nack_mcp.src_magic = OMX_PULL_MAGIC_XOR ^ 0x11;
	check_layout(&P_EXT, &p, nmcp, sizeof(nmcp), "nack mcp");
	check_layout(&P_COMPAT, &p, nmcp, sizeof(nmcp), "nack mcp compat");
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), 0x11);
}

static void test_layout_host_raw(void)
{
	static const uint8_t query[] = {0x03, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00,
					0x13, 0x05, 0x20, 0x08, 0x00, 0x00, 0x00, 0x00};
	static const uint8_t reply[] = {0x04, 0x06, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x13, 0x05, 0x20,
					0x08, 0x00, 0x00, 0x00, 0x00, 'n',  'o',  'd',  'e',  '1',  0x00};
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	uint8_t disc[64] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x0a, 0x86, 0xdf, 0, 0, 0x01};
	struct omx_pkt p, d;

	head(&p, MAC_B, MAC_A, 0, OMX_PT_HOST_QUERY);
	p.u.host.src_dst_peer_index = 5;
	p.u.host.magic = OMX_HOST_QUERY_MAGIC_START;
	check_layout(&P_EXT, &p, query, sizeof(query), "host query");
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), -1);
	head(&p, MAC_A, MAC_B, 0, OMX_PT_HOST_REPLY);
	p.u.host.src_dst_peer_index = 2;
	p.u.host.magic = OMX_HOST_QUERY_MAGIC_START;
	p.u.host.length = 6;
	strcpy(p.u.host.hostname, "node1");
	check_layout(&P_EXT, &p, reply, sizeof(reply), "host reply");
	check_layout(&P_COMPAT, &p, reply, sizeof(reply), "host reply compat");
	CHECK_EQ(omx_wire_frame_endpoint(frame, 60), -1);

	/* wire.md 12: the 64-byte omxoed discovery frame */
	disc[32 + 2] = 0x02;
	disc[32 + 7] = 0x0a;
	disc[40] = 0xde;
	disc[41] = 0xad;
	disc[42] = 0xbe;
	disc[43] = 0xef;
	head(&p, bcast, MAC_A, 0, OMX_PT_RAW);
	p.u.raw.nic_id = omx_mac_to_nic_id(MAC_A);
	p.u.raw.serial = 0xdeadbeef;
	memset(frame, 0xA5, 100);
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, sizeof(frame)), 64);
	CHECK(memcmp(frame, disc, 64) == 0);
	CHECK_EQ(omx_wire_decode(&P_EXT, disc, 64, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.raw.nic_id, 0x02000000000aull);
	CHECK_EQ(d.u.raw.serial, 0xdeadbeef);
	CHECK(d.payload == disc + 16 && d.payload_len == 48);
	CHECK_EQ(omx_wire_frame_endpoint(disc, 64), -1);
	/* re-encoding the decoded frame (body given as payload) gives the same bytes */
	CHECK_EQ(omx_wire_encode(&P_COMPAT, &d, frame, sizeof(frame)), 64);
	CHECK(memcmp(frame, disc, 64) == 0);
}

/* The omx extension in CONNECT pad2 (wire.h). */
static void test_connect_ext(void)
{
	struct omx_pkt p, d;
	uint8_t body[32];

	head(&p, MAC_B, MAC_A, OMX_PEER_INDEX_UNKNOWN, OMX_PT_CONNECT);
	p.u.connect.dst_endpoint = 3;
	p.u.connect.length = 16;
	p.u.connect.src_dst_peer_index = 2;
	p.u.connect.src_session_id = 0x0A0B0C0D;
	p.u.connect.app_key = p.u.connect.target_session_id = 0x12345678;
	p.u.connect.target_recv_seqnum_start = 1;
	p.u.connect.ext_present = 1;
	p.u.connect.ext_mode = OMX_WIRE_COMPAT;
	p.u.connect.ext_mtu = 4144;
	memcpy(body, V_CONNECT_REQ + 16, 32);
	body[12] = 'X';
	body[13] = 2;
	body[14] = 0x10;
	body[15] = 0x30;
	check_layout(&P_EXT, &p, body, 32, "connect ext compat");
	p.u.connect.ext_mode = OMX_WIRE_EXTENDED;
	p.u.connect.ext_mtu = 9000;
	body[13] = 1;
	body[14] = 0x23;
	body[15] = 0x28;
	check_layout(&P_EXT, &p, body, 32, "connect ext extended");
	/* an invalid mode is refused by the encoder */
	p.u.connect.ext_mode = (enum omx_wire_mode)2;
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, sizeof(frame)), 0);
	/* length 0 -> 16; a request does not send status_code */
	p.u.connect.ext_present = 0;
	p.u.connect.length = 0;
	p.u.connect.status_code = 11;
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, sizeof(frame)), 60);
	CHECK(memcmp(frame, V_CONNECT_REQ, 60) == 0);
	CHECK_EQ(omx_wire_decode(&P_EXT, frame, 60, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.connect.status_code, 0);
	/* a reply writes target_session_id, not app_key */
	p.u.connect.is_reply = 1;
	p.u.connect.app_key = 0x11111111;
	p.u.connect.target_session_id = 0x22222222;
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, sizeof(frame)), 60);
	CHECK_EQ(frame[36], 0x22);
	CHECK_EQ(frame[44], 11);
	CHECK_EQ(omx_wire_decode(&P_EXT, frame, 60, &d), OMX_WIRE_OK);
	CHECK_EQ(d.u.connect.target_session_id, 0x22222222);
	CHECK_EQ(d.u.connect.app_key, 0x22222222);
	CHECK_EQ(d.u.connect.status_code, 11);
}

struct param_row {
	enum omx_wire_mode mode;
	uint32_t mtu;
	int ret;
	uint32_t eff_mtu, f, frags, mmax, r, b, pipe;
};

static void test_params(void)
{
	static const struct param_row rows[] = {
		{OMX_WIRE_EXTENDED, 1500, 0, 1500, 1452, 32, 46464, 1468, 32, 0},
		{OMX_WIRE_EXTENDED, 4144, 0, 4144, 4096, 32, 131072, 4112, 32, 0},
		{OMX_WIRE_EXTENDED, 9000, 0, 9000, 8192, 32, 262144, 8968, 32, 0},
		/* above 9000 the rule is ours: powers of two up to 32 KiB, from P = 48 KiB P itself
		 * rounded down to 64 bytes */
		{OMX_WIRE_EXTENDED, 65535, 0, 65535, 65472, 32, 2095104, 65503, 32, 0},
		{OMX_WIRE_EXTENDED, 49199, 0, 49199, 32768, 32, 1048576, 49167, 32, 0},
		{OMX_WIRE_EXTENDED, 49200, 0, 49200, 49152, 32, 1572864, 49168, 32, 0},
		{OMX_WIRE_EXTENDED, 32816, 0, 32816, 32768, 32, 1048576, 32784, 32, 0},
		{OMX_WIRE_EXTENDED, 256, 0, 256, 208, 32, 6656, 224, 32, 0},
		{OMX_WIRE_COMPAT, 4144, 0, 4144, 4096, 8, 32768, 4096, 8, 12},
		{OMX_WIRE_COMPAT, 9000, 0, 4144, 4096, 8, 32768, 4096, 8, 12},
		{OMX_WIRE_COMPAT, 65535, 0, 4144, 4096, 8, 32768, 4096, 8, 12},
		{OMX_WIRE_COMPAT, 1500, -1, 0, 0, 0, 0, 0, 0, 0},
		{OMX_WIRE_COMPAT, 4143, -1, 0, 0, 0, 0, 0, 0, 0},
		{OMX_WIRE_EXTENDED, 255, -1, 0, 0, 0, 0, 0, 0, 0},
		{OMX_WIRE_EXTENDED, 65536, -1, 0, 0, 0, 0, 0, 0, 0},
		{(enum omx_wire_mode)7, 9000, -1, 0, 0, 0, 0, 0, 0, 0},
	};
	struct omx_wire_params p;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct param_row *w = &rows[i];

		CHECK_EQ(omx_wire_params_init(&p, w->mode, w->mtu), w->ret);
		if (w->ret)
			continue;
		CHECK_EQ(p.mode, w->mode);
		CHECK_EQ(p.mtu, w->eff_mtu);
		CHECK_EQ(p.medium_frag_max, w->f);
		CHECK_EQ(p.medium_frags_max, w->frags);
		CHECK_EQ(p.medium_max, w->mmax);
		CHECK_EQ(p.pull_reply_max, w->r);
		CHECK_EQ(p.pull_block_replies, w->b);
		CHECK_EQ(p.frag_pipeline, w->pipe);
	}
	/* pull block max bytes of the spec table: 286976 / 32768 / 46976 */
	CHECK_EQ(P_EXT.pull_reply_max * P_EXT.pull_block_replies, 286976);
	CHECK_EQ(P_COMPAT.pull_reply_max * P_COMPAT.pull_block_replies, 32768);
	CHECK_EQ(P_EXT1500.pull_reply_max * P_EXT1500.pull_block_replies, 46976);
	CHECK_EQ(omx_wire_params_init(NULL, OMX_WIRE_EXTENDED, 9000), -1);
	/* the reference rule (wire.md 1) for every MTU up to 9000 */
	for (uint32_t mtu = OMX_WIRE_MTU_MIN; mtu <= 9000; mtu++) {
		uint32_t q = mtu - 48, f = q <= 4096 ? q : (8192 + 48 <= mtu ? 8192 : 4096);

		if (omx_wire_params_init(&p, OMX_WIRE_EXTENDED, mtu) != 0 || p.medium_frag_max != f ||
		    p.pull_reply_max != mtu - 32 || p.medium_max != 32 * f) {
			CHECK(!"extended params differ from the reference rule");
			fprintf(stderr, "  mtu %u: F %u want %u\n", mtu, p.medium_frag_max, f);
			break;
		}
	}
	CHECK(1);
}

/* MTU 65535 builds before stop 30 cut mediums into 32 KiB fragments, later ones into 65472 bytes;
 * neither decodes the other's multi-fragment mediums whole (docs/compatibility.md): the newer
 * refuses the older's last fragment, the older the newer's full ones. Never a misplaced payload. */
static void test_params_jumbo_mix(void)
{
	struct omx_wire_params now, old;
	CHECK_EQ(omx_wire_params_init(&now, OMX_WIRE_EXTENDED, 65535), 0);
	CHECK_EQ(omx_wire_params_init(&old, OMX_WIRE_EXTENDED, 65535), 0);
	old.medium_frag_max = 32768; /* the earlier rule at this MTU */
	old.medium_max = 32768 * 32;
	static uint8_t payload[65472], buf[65535 + 64];
	struct omx_pkt p, d;
	memset(&p, 0, sizeof(p));
	memcpy(p.dst_mac, MAC_A, 6);
	memcpy(p.src_mac, MAC_B, 6);
	p.ptype = OMX_PT_MEDIUM;
	p.payload = payload;
	for (uint32_t len = 32769; len <= 262144; len += 4096) {
		/* the older sender's last fragment */
		uint32_t last = (len - 1) / 32768;
		p.u.msg.length = len;
		p.u.msg.frag_seqnum = (uint8_t)last;
		p.u.msg.frag_length = (uint16_t)(len - last * 32768);
		p.payload_len = p.u.msg.frag_length;
		size_t n = omx_wire_encode(&old, &p, buf, sizeof(buf));
		CHECK(n > 0);
		CHECK_EQ(omx_wire_decode(&old, buf, n, &d), OMX_WIRE_OK);
		if (omx_wire_decode(&now, buf, n, &d) != OMX_WIRE_ERR_BAD_FRAG) {
			CHECK(!"an older build's last fragment decoded with today's parameters");
			fprintf(stderr, "  length %u\n", len);
			break;
		}
		/* today's first fragment, full when the message has more than one */
		if (len <= 65472)
			continue;
		p.u.msg.frag_seqnum = 0;
		p.u.msg.frag_length = 65472;
		p.payload_len = 65472;
		n = omx_wire_encode(&now, &p, buf, sizeof(buf));
		CHECK(n > 0);
		CHECK_EQ(omx_wire_decode(&now, buf, n, &d), OMX_WIRE_OK);
		CHECK_EQ(omx_wire_decode(&old, buf, n, &d), OMX_WIRE_ERR_BAD_FRAG);
	}
}

/* Same-host parameters: OMX_WIRE_LOCAL_FRAG (32 KiB) medium fragments in the extended mode whatever
 * the interface's, pull replies at least that large, the rest untouched; a full local fragment encodes and decodes
 * with them and not with the interface's; fragments of older builds (1452 bytes at MTU 1500 until
 * stop 20, 8 KiB until stop 28) are refused, never placed at the wrong offsets. */
enum { LF = OMX_WIRE_LOCAL_FRAG };
static void test_params_local(void)
{
	CHECK_EQ(LF, 32768);
	struct omx_wire_params l, p65535, p32816;
	CHECK_EQ(omx_wire_params_init(&p65535, OMX_WIRE_EXTENDED, 65535), 0);
	CHECK_EQ(omx_wire_params_init(&p32816, OMX_WIRE_EXTENDED, 32816), 0);
	const struct omx_wire_params *under[] = { &P_EXT1500, &P_EXT };
	for (int i = 0; i < 2; i++) {
		omx_wire_params_local(under[i], &l);
		CHECK_EQ(l.medium_frag_max, LF);
		CHECK_EQ(l.medium_max, LF * 32);
		CHECK_EQ(l.mtu, LF + 48);
		CHECK_EQ(l.pull_reply_max, LF); /* pull replies as large as the fragments */
		CHECK_EQ(l.pull_block_replies, under[i]->pull_block_replies);
	}
	omx_wire_params_local(&p32816, &l); /* fragments of LF already */
	CHECK(!memcmp(&l, &p32816, sizeof(l)));
	omx_wire_params_local(&p65535, &l); /* larger interface fragments: the ring's stay LF */
	CHECK_EQ(l.medium_frag_max, LF);
	CHECK_EQ(l.medium_max, LF * 32);
	CHECK(l.frags_exact);
	CHECK_EQ(l.mtu, 65535);
	CHECK_EQ(l.pull_reply_max, 65503);
	omx_wire_params_local(&P_COMPAT, &l);
	CHECK(!memcmp(&l, &P_COMPAT, sizeof(l)));

	static uint8_t payload[LF], buf[LF + 64];
	struct omx_pkt p, d;
	memset(&p, 0, sizeof(p));
	memcpy(p.dst_mac, MAC_A, 6);
	memcpy(p.src_mac, MAC_B, 6);
	p.ptype = OMX_PT_MEDIUM;
	p.u.msg.length = 3 * LF;
	p.u.msg.frag_seqnum = 2;
	p.u.msg.frag_length = LF;
	p.payload = payload;
	p.payload_len = LF;
	omx_wire_params_local(&P_EXT1500, &l);
	size_t n = omx_wire_encode(&l, &p, buf, sizeof(buf));
	CHECK_EQ(n, 48 + LF);
	CHECK_EQ(omx_wire_decode(&l, buf, n, &d), OMX_WIRE_OK);
	CHECK(d.u.msg.frag_seqnum == 2 && d.u.msg.frag_length == LF && d.payload_len == LF);
	CHECK_EQ(omx_wire_encode(&P_EXT1500, &p, buf, sizeof(buf)), 0);
	CHECK(omx_wire_decode(&P_EXT1500, buf, n, &d) != OMX_WIRE_OK);
	/* older builds' fragments, valid with their parameters, are refused with the local ones:
	 * fragment 1 of a 40000-byte message in 1452-byte and in 8 KiB fragments */
	uint16_t old_frags[] = { 1452, 8192 };
	for (int i = 0; i < 2; i++) {
		struct omx_wire_params old;
		CHECK_EQ(omx_wire_params_init(&old, OMX_WIRE_EXTENDED, old_frags[i] + 48u), 0);
		CHECK_EQ(old.medium_frag_max, old_frags[i]);
		p.u.msg.length = 40000;
		p.u.msg.frag_seqnum = 1;
		p.u.msg.frag_length = old_frags[i];
		p.payload_len = old_frags[i];
		n = omx_wire_encode(&old, &p, buf, sizeof(buf));
		CHECK_EQ(n, 48u + old_frags[i]);
		CHECK_EQ(omx_wire_decode(&old, buf, n, &d), OMX_WIRE_OK);
		CHECK_EQ(omx_wire_decode(&l, buf, n, &d), OMX_WIRE_ERR_BAD_FRAG);
	}
	/* with the local parameters the last fragment must carry the rest exactly */
	p.u.msg.frag_seqnum = 1;
	p.u.msg.frag_length = 40000 - LF;
	p.payload_len = p.u.msg.frag_length;
	n = omx_wire_encode(&l, &p, buf, sizeof(buf));
	CHECK(n > 0 && omx_wire_decode(&l, buf, n, &d) == OMX_WIRE_OK);
	p.u.msg.frag_length = 1000;
	p.payload_len = 1000;
	n = omx_wire_encode(&l, &p, buf, sizeof(buf)); /* a short last fragment: encodable, refused */
	CHECK(n > 0 && omx_wire_decode(&l, buf, n, &d) == OMX_WIRE_ERR_BAD_FRAG);
}

/* omx_wire_encode_eager: the generic encoder's bytes, unpadded, from only the fields it says it
 * reads (everything else of the packet is garbage here); refusals. */
static void check_eager(const struct omx_wire_params *wp, const struct omx_pkt *p, const uint8_t *generic)
{
	static uint8_t buf[512];
	struct omx_pkt q;
	memset(&q, 0x5A, sizeof(q));
	memcpy(q.dst_mac, p->dst_mac, 6);
	memcpy(q.src_mac, p->src_mac, 6);
	q.peer_index = p->peer_index;
	q.ptype = p->ptype;
	q.u.msg.dst_endpoint = p->u.msg.dst_endpoint;
	q.u.msg.src_endpoint = p->u.msg.src_endpoint;
	q.u.msg.src_generation = p->u.msg.src_generation;
	q.u.msg.lib_seqnum = p->u.msg.lib_seqnum;
	q.u.msg.lib_piggyack = p->u.msg.lib_piggyack;
	q.u.msg.match = p->u.msg.match;
	q.u.msg.session = p->u.msg.session;
	q.u.msg.checksum = p->u.msg.checksum;
	q.payload = p->payload;
	q.payload_len = p->payload_len;
	size_t want = omx_wire_frame_len(wp, p);
	memset(buf, 0xA5, sizeof(buf));
	size_t n = omx_wire_encode_eager(&q, buf, sizeof(buf));
	CHECK_EQ(n, want);
	CHECK(n && memcmp(buf, generic, n) == 0);
	CHECK_EQ(buf[n], 0xA5);
	CHECK_EQ(omx_wire_encode_eager(&q, buf, want - 1), 0);
	q.payload_len = q.ptype == OMX_PT_TINY ? OMX_TINY_MAX + 1 : OMX_SMALL_MAX + 1;
	CHECK_EQ(omx_wire_encode_eager(&q, buf, sizeof(buf)), 0);
	q.payload_len = p->payload_len;
	q.ptype = OMX_PT_MEDIUM;
	CHECK_EQ(omx_wire_encode_eager(&q, buf, sizeof(buf)), 0);

	/* From a template made of another message to the same partner (other type, sequence
	 * numbers, match): the same bytes once this message's fields are written over it. */
	uint8_t tmpl[OMX_EAGER_HDR_LEN];
	q.ptype = p->ptype == OMX_PT_TINY ? OMX_PT_SMALL : OMX_PT_TINY;
	q.u.msg.lib_seqnum ^= 0x1234;
	q.u.msg.lib_piggyack ^= 0x4321;
	q.u.msg.match = ~q.u.msg.match;
	CHECK_EQ(omx_wire_eager_template(&q, tmpl), OMX_EAGER_HDR_LEN);
	memset(buf, 0xA5, sizeof(buf));
	n = omx_wire_encode_eager_from(tmpl, p->ptype, p->u.msg.lib_seqnum, p->u.msg.lib_piggyack, p->u.msg.match,
				       p->payload, p->payload_len, buf, sizeof(buf));
	CHECK_EQ(n, want);
	CHECK(n && memcmp(buf, generic, n) == 0);
	CHECK_EQ(buf[n], 0xA5);
	CHECK_EQ(omx_wire_encode_eager_from(tmpl, p->ptype, 0, 0, 0, p->payload, p->payload_len, buf, want - 1), 0);
	CHECK_EQ(omx_wire_encode_eager_from(tmpl, p->ptype, 0, 0, 0, p->payload,
					    p->ptype == OMX_PT_TINY ? OMX_TINY_MAX + 1 : OMX_SMALL_MAX + 1, buf, sizeof(buf)),
		 0);
	CHECK_EQ(omx_wire_encode_eager_from(tmpl, OMX_PT_MEDIUM, 0, 0, 0, p->payload, p->payload_len, buf, sizeof(buf)), 0);
	q.ptype = OMX_PT_MEDIUM;
	CHECK_EQ(omx_wire_eager_template(&q, tmpl), 0);
}

/* omx_wire_decode_medium_whole: a MEDIUM frame holding a whole message decodes as the generic
 * decoder has it; fragments of larger messages, other types and short frames are refused. */
static void whole_medium_one(const struct omx_wire_params *wp, const char *what)
{
	static uint8_t payload[9000], buf[9100];
	struct omx_pkt p, d, f;
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	head(&p, MAC_B, MAC_A, 7, OMX_PT_MEDIUM);
	msg_fields(&p);
	p.payload = payload;
	const uint32_t F = wp->medium_frag_max;
	const struct {
		uint32_t length, frag_length;
		uint8_t seq;
		int whole;
	} cases[] = { { 300, 300, 0, 1 }, { F, F, 0, 1 }, { F + 10, F, 0, 0 }, { F + 10, 10, 1, 0 } };
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		p.u.msg.length = cases[c].length;
		p.u.msg.frag_length = (uint16_t)cases[c].frag_length;
		p.u.msg.frag_seqnum = cases[c].seq;
		p.payload_len = cases[c].frag_length;
		size_t n = omx_wire_encode(wp, &p, buf, sizeof(buf));
		CHECK(n > 0);
		memset(&d, 0, sizeof(d));
		memset(&f, 0, sizeof(f));
		CHECK_EQ(omx_wire_decode(wp, buf, n, &d), OMX_WIRE_OK);
		int got = omx_wire_decode_medium_whole(wp, buf, n, &f);
		if (got != cases[c].whole) {
			CHECK(!"whole-medium decoder took the wrong frames");
			fprintf(stderr, "  %s: length %u fragment %u of %u bytes\n", what, cases[c].length, cases[c].seq,
				cases[c].frag_length);
		}
		if (got) {
			CHECK(memcmp(&f, &d, sizeof(f)) == 0);
			CHECK(f.payload == buf + OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN && f.payload_len == cases[c].frag_length);
			/* one byte short of its payload: refused */
			CHECK_EQ(n, OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN + cases[c].frag_length);
			CHECK_EQ(omx_wire_decode_medium_whole(wp, buf, n - 1, &f), 0);
		}
	}
	/* other types, and a frame shorter than a MEDIUM header */
	head(&p, MAC_B, MAC_A, 7, OMX_PT_SMALL);
	msg_fields(&p);
	p.payload = payload;
	p.u.msg.length = 100;
	p.payload_len = 100;
	size_t n = omx_wire_encode(wp, &p, buf, sizeof(buf));
	CHECK(n > 0 && omx_wire_decode_medium_whole(wp, buf, n, &f) == 0);
	CHECK_EQ(omx_wire_decode_medium_whole(wp, buf, OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN - 1, &f), 0);
	CHECK_EQ(omx_wire_decode_medium_whole(wp, NULL, 100, &f), 0);
}

static void test_decode_medium_whole(void)
{
	whole_medium_one(&P_EXT, "extended");
	whole_medium_one(&P_COMPAT, "compat");
}

/* omx_wire_medium_whole_header_from: the header omx_wire_encode_header writes for a whole-message
 * MEDIUM, from a template of another message to the same partner; lengths it cannot carry in
 * one fragment, an empty message and a short buffer refused. */
static void medium_from_one(const struct omx_wire_params *wp, const char *what)
{
	static uint8_t payload[32768];
	uint8_t gen[128], fast[128], tmpl[OMX_EAGER_HDR_LEN];
	struct omx_pkt p, q, d;
	const size_t hlen = OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN;
	head(&q, MAC_B, MAC_A, 7, OMX_PT_SMALL); /* the template's message */
	msg_fields(&q);
	q.u.msg.src_generation = 3;
	q.u.msg.checksum = 0xBEEF;
	CHECK_EQ(omx_wire_eager_template(&q, tmpl), OMX_EAGER_HDR_LEN);
	const uint32_t F = wp->medium_frag_max, lens[] = { 1, 129, 300, 4096, F };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint32_t L = lens[i];
		p = q;
		p.ptype = OMX_PT_MEDIUM;
		p.u.msg.lib_seqnum = (uint16_t)(0x2345 + i);
		p.u.msg.lib_piggyack = (uint16_t)(0x6789 - i);
		p.u.msg.match = 0xA1B2C3D4E5F60718ull * (i + 1);
		p.u.msg.length = L;
		p.u.msg.frag_length = (uint16_t)L;
		p.u.msg.frag_seqnum = 0;
		p.u.msg.frag_pipeline = wp->frag_pipeline;
		p.payload = payload;
		p.payload_len = L;
		memset(gen, 0xA5, sizeof(gen));
		memset(fast, 0x5A, sizeof(fast));
		size_t g = omx_wire_encode_header(wp, &p, gen, sizeof(gen));
		size_t f = omx_wire_medium_whole_header_from(wp, tmpl, p.u.msg.lib_seqnum, p.u.msg.lib_piggyack,
							     p.u.msg.match, L, fast, sizeof(fast));
		CHECK_EQ(g, hlen);
		CHECK_EQ(f, hlen);
		if (f != g || memcmp(fast, gen, hlen) != 0) {
			CHECK(!"medium header from the template differs from the generic encoder's");
			fprintf(stderr, "  %s: length %u\n", what, L);
		}
		CHECK_EQ(fast[hlen], 0x5A); /* nothing written past the header */
		/* the whole frame decodes back to the message */
		static uint8_t whole[32768 + 128];
		memcpy(whole, fast, hlen);
		memcpy(whole + hlen, payload, L);
		memset(&d, 0, sizeof(d));
		CHECK_EQ(omx_wire_decode_medium_whole(wp, whole, hlen + L, &d), 1);
		CHECK(d.u.msg.length == L && d.u.msg.match == p.u.msg.match && d.u.msg.lib_seqnum == p.u.msg.lib_seqnum &&
		      d.u.msg.session == q.u.msg.session && d.payload_len == L);
		CHECK_EQ(omx_wire_medium_whole_header_from(wp, tmpl, 0, 0, 0, L, fast, hlen - 1), 0);
	}
	CHECK_EQ(omx_wire_medium_whole_header_from(wp, tmpl, 0, 0, 0, 0, fast, sizeof(fast)), 0);
	CHECK_EQ(omx_wire_medium_whole_header_from(wp, tmpl, 0, 0, 0, F + 1, fast, sizeof(fast)), 0);
}

static void test_encode_medium_whole_from(void)
{
	struct omx_wire_params local;
	omx_wire_params_local(&P_EXT, &local); /* the same-host frames': 32 KiB fragments */
	medium_from_one(&P_EXT, "extended");
	medium_from_one(&P_COMPAT, "compat");
	medium_from_one(&local, "extended, same host");
}

/* omx_wire_rndv_from / omx_wire_notify_from: the bytes omx_wire_encode writes for the same RNDV and
 * NOTIFY (to the template's partner) before its padding, the unpadded length omx_wire_frame_len
 * gives, nothing written past them, and a short buffer refused. */
/* A frame a template-based encoder wrote into fast (f bytes, the rest of fast 0x5A): want bytes
 * long, the unpadded length of p, the generic encoder's bytes for p before its padding, nothing
 * written past it; decoded into *d. */
static void from_as_generic(const struct omx_wire_params *wp, const struct omx_pkt *p, const uint8_t *fast, size_t f,
			    size_t want, struct omx_pkt *d, const char *what, uint32_t len)
{
	uint8_t gen[128];
	memset(gen, 0xA5, sizeof(gen));
	size_t g = omx_wire_encode(wp, p, gen, sizeof(gen));
	CHECK_EQ(f, want);
	CHECK_EQ(omx_wire_frame_len(wp, p), f);
	CHECK(g >= f);
	if (memcmp(fast, gen, f) != 0) {
		CHECK(!"frame from the template differs from the generic encoder's");
		fprintf(stderr, "  %s: ptype %u, length %u\n", what, p->ptype, len);
	}
	CHECK_EQ(fast[f], 0x5A);
	memset(d, 0, sizeof(*d));
	CHECK_EQ(omx_wire_decode(wp, fast, f, d), OMX_WIRE_OK);
}

static void rndv_notify_from_one(const struct omx_wire_params *wp, const char *what)
{
	uint8_t fast[128], tmpl[OMX_EAGER_HDR_LEN];
	struct omx_pkt p, q, d;
	head(&q, MAC_B, MAC_A, 7, OMX_PT_TINY); /* the template's message */
	msg_fields(&q);
	q.u.msg.src_generation = 3; /* a RNDV carries it, a NOTIFY does not */
	q.u.msg.checksum = 0xBEEF;
	CHECK_EQ(omx_wire_eager_template(&q, tmpl), OMX_EAGER_HDR_LEN);
	const uint32_t lens[] = { 0, 1, 4097, 1u << 20, 0xFFFFFFFFu };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		/* RNDV */
		p = q;
		p.ptype = OMX_PT_RNDV;
		p.u.msg.lib_seqnum = (uint16_t)(0x2345 + i);
		p.u.msg.lib_piggyack = (uint16_t)(0x6789 - i);
		p.u.msg.match = 0xA1B2C3D4E5F60718ull * (i + 1);
		p.u.msg.length = 8;
		p.u.msg.msg_length = lens[i];
		p.u.msg.rdma_id = (uint8_t)(0xF0 + i);
		p.u.msg.rdma_seqnum = (uint8_t)(0x17 + 3 * i);
		memset(fast, 0x5A, sizeof(fast));
		size_t f = omx_wire_rndv_from(tmpl, p.u.msg.lib_seqnum, p.u.msg.lib_piggyack, p.u.msg.match, lens[i],
					      p.u.msg.rdma_id, p.u.msg.rdma_seqnum, fast, sizeof(fast));
		from_as_generic(wp, &p, fast, f, OMX_RNDV_FRAME_LEN, &d, what, lens[i]);
		CHECK(d.ptype == OMX_PT_RNDV && d.u.msg.msg_length == lens[i] && d.u.msg.match == p.u.msg.match &&
		      d.u.msg.rdma_id == p.u.msg.rdma_id && d.u.msg.rdma_seqnum == p.u.msg.rdma_seqnum &&
		      d.u.msg.session == q.u.msg.session);
		CHECK_EQ(omx_wire_rndv_from(tmpl, 0, 0, 0, 0, 0, 0, fast, OMX_RNDV_FRAME_LEN - 1), 0);
		/* NOTIFY, back to the same partner */
		memset(&p, 0, sizeof(p));
		memcpy(p.dst_mac, q.dst_mac, 6);
		memcpy(p.src_mac, q.src_mac, 6);
		p.peer_index = q.peer_index;
		p.ptype = OMX_PT_NOTIFY;
		p.u.notify.dst_endpoint = q.u.msg.dst_endpoint;
		p.u.notify.src_endpoint = q.u.msg.src_endpoint;
		p.u.notify.session = q.u.msg.session;
		p.u.notify.total_length = lens[i];
		p.u.notify.rdma_id = (uint8_t)(0x0F - i);
		p.u.notify.rdma_seqnum = (uint8_t)(0x17 + 5 * i);
		p.u.notify.lib_seqnum = (uint16_t)(0xFFF0 + i);
		p.u.notify.lib_piggyack = (uint16_t)(0x1357 * (i + 1));
		memset(fast, 0x5A, sizeof(fast));
		f = omx_wire_notify_from(tmpl, p.u.notify.lib_seqnum, p.u.notify.lib_piggyack, lens[i], p.u.notify.rdma_id,
					 p.u.notify.rdma_seqnum, fast, sizeof(fast));
		from_as_generic(wp, &p, fast, f, OMX_NOTIFY_FRAME_LEN, &d, what, lens[i]);
		CHECK_SAME(omx_test_pkt_diff(&p, &d), what);
		CHECK_EQ(omx_wire_notify_from(tmpl, 0, 0, 0, 0, 0, fast, OMX_NOTIFY_FRAME_LEN - 1), 0);
	}
}

static void test_encode_rndv_notify_from(void)
{
	struct omx_wire_params local;
	omx_wire_params_local(&P_EXT, &local);
	rndv_notify_from_one(&P_EXT, "extended");
	rndv_notify_from_one(&P_COMPAT, "compat");
	rndv_notify_from_one(&local, "extended, same host");
}

/* Random valid packets of every type: encode -> bytes/padding -> decode -> same packet. */
static void roundtrip_one(const struct omx_wire_params *wp, struct omx_test_rng *r, uint8_t ptype)
{
	static uint8_t hdr[4096];
	struct omx_pkt p, d;
	size_t hlen, n, want, hn;
	char ctx[64];
	int ok = 1;

	omx_test_gen_pkt(wp, r, ptype, &p, pl);
	hlen = omx_test_pkt_hlen(wp, &p);
	want = hlen + p.payload_len;
	if (ptype == OMX_PT_RAW)
		want = OMX_HEAD_LEN + p.payload_len;
	if (want < OMX_FRAME_MIN)
		want = OMX_FRAME_MIN;
	memset(frame, 0xA5, want + 16);
	n = omx_wire_encode(wp, &p, frame, sizeof(frame));
	snprintf(ctx, sizeof(ctx), "ptype %u mode %d mtu %u", ptype, wp->mode, wp->mtu);
	CHECK_EQ(n, want);
	CHECK_EQ(frame[12] << 8 | frame[13], OMX_ETHERTYPE);
	CHECK_EQ(frame[16], ptype);
	for (size_t i = (ptype == OMX_PT_RAW ? want : hlen + p.payload_len); i < want; i++)
		ok &= frame[i] == 0;
	CHECK(ok); /* padding is zero */
	CHECK_EQ(frame[want], 0xA5); /* nothing written past the frame */
	CHECK_EQ(omx_wire_decode(wp, frame, n, &d), OMX_WIRE_OK);
	CHECK_SAME(omx_test_pkt_diff(&p, &d), ctx);
	if (p.payload_len && ptype != OMX_PT_RAW)
		CHECK(d.payload == frame + omx_wire_header_len(wp, ptype));
	/* encode_header writes the same prefix and never touches the payload */
	hn = omx_wire_encode_header(wp, &p, hdr, sizeof(hdr));
	CHECK_EQ(hn, ptype == OMX_PT_RAW ? OMX_HEAD_LEN : hlen);
	CHECK(hn && memcmp(hdr, frame, hn) == 0);
	if (ptype == OMX_PT_TINY || ptype == OMX_PT_SMALL)
		check_eager(wp, &p, frame);
}

static void test_roundtrip(void)
{
	const struct omx_wire_params *modes[] = {&P_EXT, &P_EXT1500, &P_COMPAT};
	struct omx_wire_params big;
	struct omx_test_rng r;

	omx_wire_params_init(&big, OMX_WIRE_EXTENDED, 65535);
	omx_test_rng_seed(&r, 0x0123456789ABCDEFull);
	for (size_t m = 0; m < 4; m++) {
		const struct omx_wire_params *wp = m < 3 ? modes[m] : &big;

		for (size_t t = 0; t < OMX_TEST_NPTYPES; t++)
			for (int i = 0; i < 300; i++)
				roundtrip_one(wp, &r, omx_test_ptypes[t]);
	}
}

static size_t enc(const struct omx_wire_params *wp, const struct omx_pkt *p)
{
	return omx_wire_encode(wp, p, frame, sizeof(frame));
}

static void test_encode_refusals(void)
{
	struct omx_pkt p;
	struct omx_test_rng r;

	omx_test_rng_seed(&r, 42);
	omx_test_gen_pkt(&P_EXT, &r, OMX_PT_TINY, &p, pl);
	p.payload_len = p.u.msg.length = 5;
	p.payload = pl;
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, 59), 0); /* padded frame needs 60 */
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, 60), 60);
	CHECK_EQ(omx_wire_encode(NULL, &p, frame, 60), 0);
	CHECK_EQ(omx_wire_encode(&P_EXT, NULL, frame, 60), 0);
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, NULL, 60), 0);
	p.u.msg.length = 6; /* disagrees with payload_len */
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.payload_len = p.u.msg.length = 33;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.ptype = OMX_PT_SMALL;
	CHECK_EQ(enc(&P_EXT, &p), 73);
	p.payload_len = p.u.msg.length = 129;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.payload = NULL;
	p.payload_len = p.u.msg.length = 40;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	for (unsigned t = 0; t < 256; t++) {
		p.ptype = (uint8_t)t;
		if (omx_wire_header_len(&P_EXT, (uint8_t)t) == 0)
			CHECK_EQ(enc(&P_EXT, &p), 0);
	}

}

static void test_encode_refusals_medium(void)
{
	struct omx_pkt p;
	struct omx_test_rng r;

	omx_test_rng_seed(&r, 43);
	omx_test_gen_pkt(&P_EXT, &r, OMX_PT_MEDIUM, &p, pl);
	p.u.msg.length = P_EXT.medium_max;
	p.u.msg.frag_seqnum = 31;
	p.u.msg.frag_length = 0;
	p.payload = pl;
	p.payload_len = 8192;
	CHECK_EQ(enc(&P_EXT, &p), 48 + 8192);
	CHECK_EQ(omx_wire_encode(&P_EXT, &p, frame, 48 + 8191), 0);
	p.payload_len = 8193;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.payload_len = 100;
	p.u.msg.frag_seqnum = 32;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.u.msg.frag_seqnum = 1;
	p.u.msg.length = 8192 + 99; /* fragment 1 would end after the message */
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.u.msg.length = 8192 + 100;
	CHECK_EQ(enc(&P_EXT, &p), 60 + 88);
	p.u.msg.length = P_EXT.medium_max + 1;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.u.msg.length = 5000;
	p.u.msg.frag_seqnum = 0;
	p.payload_len = 4097;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);
	p.payload_len = 4096;
	CHECK_EQ(enc(&P_COMPAT, &p), 48 + 4096);
	p.u.msg.frag_seqnum = 8;
	p.u.msg.length = 32768;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);
	p.u.msg.frag_seqnum = 7;
	CHECK_EQ(enc(&P_COMPAT, &p), 48 + 4096);
	p.u.msg.length = 32769;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);
}

static void test_encode_refusals_other(void)
{
	struct omx_pkt p;
	struct omx_test_rng r;
	uint8_t raw_body[1600];

	omx_test_rng_seed(&r, 44);
	/* fields that do not fit the compat PULL layout */
	pull_fields(&p);
	CHECK_EQ(enc(&P_COMPAT, &p), 60);
	p.u.pull.rdma_id = 256;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);
	CHECK_EQ(enc(&P_EXT, &p), 60);
	p.u.pull.rdma_id = 1;
	p.u.pull.rdma_offset = 0x10000;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);
	p.u.pull.rdma_offset = 0;
	p.u.pull.first_frame_offset = 0x10000;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);
	p.u.pull.first_frame_offset = 0;
	p.u.pull.block_length = 0x10000;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);
	CHECK_EQ(enc(&P_EXT, &p), 60);

	/* lengths below the spec minimum, bad truc, oversized payloads */
	omx_test_gen_pkt(&P_EXT, &r, OMX_PT_RNDV, &p, pl);
	p.u.msg.length = 7;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	omx_test_gen_pkt(&P_EXT, &r, OMX_PT_CONNECT, &p, pl);
	p.u.connect.length = 15;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	omx_test_gen_pkt(&P_EXT, &r, OMX_PT_TRUC, &p, pl);
	CHECK_EQ(enc(&P_EXT, &p), 60);
	p.u.truc.length = 15;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.u.truc.length = 16;
	p.u.truc.type = 0x56;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	p.u.truc.type = OMX_TRUC_TYPE_ACK;
	p.u.truc.session_id = p.u.truc.session + 1;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	omx_test_gen_pkt(&P_EXT, &r, OMX_PT_HOST_REPLY, &p, pl);
	p.u.host.length = 80;
	CHECK_EQ(enc(&P_EXT, &p), 112);
	p.u.host.length = 81;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	omx_test_gen_pkt(&P_EXT, &r, OMX_PT_PULL_REPLY, &p, pl);
	p.payload = pl;
	p.u.pull_reply.frame_length = 0;
	p.payload_len = P_EXT1500.pull_reply_max;
	CHECK_EQ(enc(&P_EXT1500, &p), 1500);
	p.payload_len++;
	CHECK_EQ(enc(&P_EXT1500, &p), 0);
	p.payload_len = 4096;
	CHECK_EQ(enc(&P_COMPAT, &p), 4128);
	p.payload_len = 4097;
	CHECK_EQ(enc(&P_COMPAT, &p), 0);

	/* RAW: the body must start with the RAW type and fit the MTU */
	memset(raw_body, 0, sizeof(raw_body));
	head(&p, MAC_A, MAC_B, 0, OMX_PT_RAW);
	p.payload = raw_body;
	p.payload_len = 100;
	CHECK_EQ(enc(&P_EXT, &p), 0);
	raw_body[0] = OMX_PT_RAW;
	CHECK_EQ(enc(&P_EXT, &p), 116);
	p.payload_len = 1500 - 16 + 1;
	CHECK_EQ(enc(&P_EXT1500, &p), 0);
}

static void test_frame_endpoint(void)
{
	uint8_t f[64];

	memset(f, 0, sizeof(f));
	f[12] = 0x86;
	f[13] = 0xDF;
	f[17] = 7;
	f[25] = 9;
	f[31] = 0x85;
	CHECK_EQ(omx_wire_frame_endpoint(NULL, 60), -2);
	for (unsigned t = 0; t < 256; t++) {
		int want;

		f[16] = (uint8_t)t;
		switch (t) {
		case OMX_PT_RAW: case OMX_PT_HOST_QUERY: case OMX_PT_HOST_REPLY:
			want = -1;
			break;
		case OMX_PT_NACK_LIB:
			want = 9;
			break;
		case OMX_PT_PULL_REPLY:
			want = 5;
			break;
		case OMX_PT_TRUC: case OMX_PT_CONNECT: case OMX_PT_TINY: case OMX_PT_SMALL: case OMX_PT_MEDIUM:
		case OMX_PT_RNDV: case OMX_PT_PULL: case OMX_PT_NOTIFY: case OMX_PT_NACK_MCP:
			want = 7;
			break;
		default:
			want = -2;
		}
		CHECK_EQ(omx_wire_frame_endpoint(f, 60), want);
		CHECK_EQ(omx_wire_frame_endpoint(f, 16), -2);
		if (want >= 0) { /* too short for the byte it reads */
			size_t need = t == OMX_PT_NACK_LIB ? 26 : t == OMX_PT_PULL_REPLY ? 32 : 18;

			CHECK_EQ(omx_wire_frame_endpoint(f, need - 1), -2);
			CHECK_EQ(omx_wire_frame_endpoint(f, need), want);
		}
	}
	f[16] = OMX_PT_TINY;
	f[13] = 0xDE;
	CHECK_EQ(omx_wire_frame_endpoint(f, 60), -2);
}

static void test_misc(void)
{
	const char *seen[OMX_WIRE_ERR_COUNT];
	uint8_t mac[6];

	for (int e = 0; e < OMX_WIRE_ERR_COUNT; e++) {
		seen[e] = omx_wire_strerror((enum omx_wire_err)e);
		CHECK(seen[e] && seen[e][0]);
		for (int k = 0; k < e; k++)
			CHECK(strcmp(seen[k], seen[e]) != 0);
	}
	CHECK(omx_wire_strerror((enum omx_wire_err)99) != NULL);
	CHECK_EQ(omx_wire_crc16((const uint8_t *)"123456789", 9, 0), 0x31C3);
	CHECK_EQ(omx_mac_to_nic_id(MAC_B), 0x02000000000bull);
	omx_nic_id_to_mac(0x0123456789abull, mac);
	CHECK(mac[0] == 0x01 && mac[5] == 0xab);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_TINY), 40);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_MEDIUM), 48);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_PULL_REPLY), 32);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_TRUC), 44);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_NOTIFY), 40);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_HOST_REPLY), 32);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_RAW), 16);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_ETHER_NATIVE), 0);
	CHECK_EQ(omx_wire_header_len(&P_EXT, OMX_PT_MAX), 0);
}

int main(void)
{
	if (omx_wire_params_init(&P_EXT, OMX_WIRE_EXTENDED, 9000) || omx_wire_params_init(&P_COMPAT, OMX_WIRE_COMPAT, 4144) ||
	    omx_wire_params_init(&P_EXT1500, OMX_WIRE_EXTENDED, 1500)) {
		fprintf(stderr, "params init failed\n");
		return 1;
	}
	test_vector_connect();
	test_vector_tiny_liback();
	test_layout_medium();
	test_layout_msg();
	test_layout_pull();
	test_layout_notify_nack();
	test_layout_host_raw();
	test_connect_ext();
	test_params();
	test_params_local();
	test_params_jumbo_mix();
	test_roundtrip();
	test_decode_medium_whole();
	test_encode_medium_whole_from();
	test_encode_rndv_notify_from();
	test_encode_refusals();
	test_encode_refusals_medium();
	test_encode_refusals_other();
	test_frame_endpoint();
	test_misc();
	return t_summary("test_wire_codec");
}
