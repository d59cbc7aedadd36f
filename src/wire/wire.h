/*
 * wire.h - the MXoE packet codec (spec: wire.md). Pure: bytes in, typed packets out and back.
 * No I/O, no global state, no allocation. Every multi-byte field is big-endian on the wire;
 * structs here hold host-order values.
 */
#ifndef OMX_WIRE_H
#define OMX_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define OMX_ETHERTYPE 0x86DF
#define OMX_ETH_HLEN 14
#define OMX_HEAD_LEN 16 /* Ethernet header + dst_src_peer_index */
#define OMX_FRAME_MIN 60
#define OMX_PEER_INDEX_UNKNOWN 0xFFFF
#define OMX_TINY_MAX 32
#define OMX_SMALL_MAX 128
#define OMX_PULL_MAGIC_XOR 0x21071980u
#define OMX_TRUC_TYPE_ACK 0x55
/* omx's use of the liback's `resent` byte (0 in the reference, which ignores it): the sender
 * refused messages for lack of unexpected-queue room and has room again; resend what is unacked
 * now rather than at the retransmission timer. */
#define OMX_TRUC_RESEND_ASK 1
#define OMX_HOST_QUERY_MAGIC_START 0x13052008u
#define OMX_HOSTNAME_MAX 80 /* including the NUL */
#define OMX_RAW_FRAME_MAX 1024
#define OMX_MEDIUM_FRAGS_HARD_MAX 32 /* receiver tracks fragments in a 32-bit mask */

/* Body header lengths (bytes after the 16-byte head). */
#define OMX_BODY_MSG_LEN 24        /* TINY, SMALL */
#define OMX_BODY_MEDIUM_LEN 32
#define OMX_BODY_RNDV_LEN 32
#define OMX_BODY_PULL_LEN 44       /* extended mode */
#define OMX_BODY_PULL_COMPAT_LEN 32
#define OMX_BODY_PULL_REPLY_LEN 16
#define OMX_BODY_NOTIFY_LEN 24
#define OMX_BODY_CONNECT_LEN 32
#define OMX_BODY_TRUC_LEN 28
#define OMX_BODY_NACK_LEN 16
#define OMX_BODY_HOST_LEN 16
#define OMX_BODY_RAW_DISCOVERY_LEN 48 /* omxoed discovery frame body (frame = 64 bytes) */

enum omx_ptype {
	OMX_PT_NONE = 0,
	OMX_PT_RAW = 1,
	OMX_PT_MFM_NIC_REPLY = 2,
	OMX_PT_HOST_QUERY = 3,
	OMX_PT_HOST_REPLY = 4,
	OMX_PT_ETHER_UNICAST = 32,
	OMX_PT_ETHER_MULTICAST = 33,
	OMX_PT_ETHER_NATIVE = 34,
	OMX_PT_TRUC = 35,
	OMX_PT_CONNECT = 36,
	OMX_PT_TINY = 37,
	OMX_PT_SMALL = 38,
	OMX_PT_MEDIUM = 39,
	OMX_PT_RNDV = 40,
	OMX_PT_PULL = 41,
	OMX_PT_PULL_REPLY = 42,
	OMX_PT_NOTIFY = 43,
	OMX_PT_NACK_LIB = 44,
	OMX_PT_NACK_MCP = 45,
	OMX_PT_MAX = 255,
};

enum omx_nack_type {
	OMX_NACK_NONE = 0,
	OMX_NACK_BAD_ENDPT = 1,
	OMX_NACK_ENDPT_CLOSED = 2,
	OMX_NACK_BAD_SESSION = 3,
	OMX_NACK_BAD_RDMAWIN = 4,
};

/* Why a frame was rejected by the decoder (0 = accepted). Each maps to a drop counter. */
enum omx_wire_err {
	OMX_WIRE_OK = 0,
	OMX_WIRE_ERR_TRUNCATED_HEAD,  /* shorter than the 16-byte head + 1 (no ptype) */
	OMX_WIRE_ERR_ETHERTYPE,       /* not our EtherType */
	OMX_WIRE_ERR_UNKNOWN_PTYPE,   /* Drop Unknown Packet Type */
	OMX_WIRE_ERR_INVALID_PTYPE,   /* 2, 32, 33, 34: Drop Invalid Packet Type */
	OMX_WIRE_ERR_SHORT_HEADER,    /* body shorter than its fixed header: Drop Bad Data Length for Headers */
	OMX_WIRE_ERR_BAD_DATA_LENGTH, /* length field too big/small for the class: Drop Bad Data Length */
	OMX_WIRE_ERR_SHORT_PAYLOAD,   /* frame shorter than header + payload: Drop Bad Skbuff Length */
	OMX_WIRE_ERR_BAD_TRUC,        /* TRUC with unknown type or session_id != session */
	OMX_WIRE_ERR_BAD_FRAG,        /* MEDIUM frag number/length outside the mode's limits */
	OMX_WIRE_ERR_COUNT
};
const char *omx_wire_strerror(enum omx_wire_err e);

/* Wire mode: chosen at run time per endpoint, exchanged in the connect handshake. */
enum omx_wire_mode {
	OMX_WIRE_EXTENDED = 0, /* Open-MX default ("non-compat"): full MTU, 32-bit lengths */
	OMX_WIRE_COMPAT = 1,   /* MX-wire compatible: 4 KiB payloads, 8 replies per block */
};

/* Sizes that follow from the mode and the frame MTU (wire.md section 1). */
struct omx_wire_params {
	enum omx_wire_mode mode;
	uint32_t mtu;                /* max frame bytes, Ethernet header included, FCS excluded */
	uint32_t medium_frag_max;    /* F */
	uint32_t medium_frags_max;   /* 32 extended, 8 compat */
	uint32_t medium_max;         /* largest medium message */
	uint32_t pull_reply_max;     /* R */
	uint32_t pull_block_replies; /* B */
	uint8_t frag_pipeline;       /* compat: 12 (log2 F); extended: 0 (unused) */
	uint8_t frags_exact;         /* decode: every fragment F bytes but the last (same host) */
};

#define OMX_WIRE_COMPAT_MTU 4144
#define OMX_WIRE_MTU_MIN 256
#define OMX_WIRE_MTU_MAX 65535

/*
 * Fill *p for a mode and a frame MTU. Extended mode follows wire.md's formula
 * (P = mtu-48; F = P if P <= 4096, else the largest power of two <= P, capped at 32768 -- for
 * mtu <= 9000 this equals the reference's 8192/4096 rule -- and from P = 49152 P rounded down to
 * a multiple of 64: 65472 at MTU 65535), R = mtu-32, B = 32.
 * Compat mode ignores mtu beyond requiring mtu >= 4144 and uses the fixed sizes (p->mtu = 4144).
 * Returns 0, or -1 if the MTU is outside [OMX_WIRE_MTU_MIN, OMX_WIRE_MTU_MAX] or too small.
 */
int omx_wire_params_init(struct omx_wire_params *p, enum omx_wire_mode mode, uint32_t mtu);
/* Extended mode: from this P (MTU 49200), medium fragments fill the frame (64-byte multiples). */
#define OMX_WIRE_FRAG_WHOLE_MIN 49152u
/* The parameters of frames between endpoints of one host, which never cross an Ethernet link: the
 * extended mode's medium fragments are OMX_WIRE_LOCAL_FRAG (and mtu grows to carry them)
 * whatever the interface MTU; everything else, and the compatible mode, as in wp. Their decoding
 * insists on fragments of exactly F bytes (but the last), so that the smaller fragments of an
 * older build on the same host are refused rather than placed at the wrong offsets. */
#define OMX_WIRE_LOCAL_FRAG 32768u
void omx_wire_params_local(const struct omx_wire_params *wp, struct omx_wire_params *local);

/* Decoded packet bodies (host order). Fields named as in wire.md section 5. */
struct omx_pkt_msg { /* TINY, SMALL, MEDIUM, RNDV */
	uint8_t dst_endpoint, src_endpoint, src_generation;
	uint16_t checksum;
	uint16_t lib_seqnum, lib_piggyack;
	uint64_t match;   /* match_a << 32 | match_b */
	uint32_t session; /* destination endpoint session */
	uint32_t length;  /* TINY/SMALL: payload length; MEDIUM: total message length; RNDV: 8 */
	/* MEDIUM only */
	uint16_t frag_length;
	uint8_t frag_seqnum;
	uint8_t frag_pipeline; /* compat mode */
	/* RNDV only */
	uint32_t msg_length;
	uint8_t rdma_id, rdma_seqnum;
	uint16_t rdma_offset;
};

struct omx_pkt_pull {
	uint8_t dst_endpoint, src_endpoint;
	uint32_t session, total_length;
	uint32_t rdma_id; /* 8-bit in compat mode */
	uint8_t rdma_seqnum;
	uint32_t rdma_offset; /* 16-bit in compat mode */
	uint32_t src_pull_handle, src_magic;
	uint32_t first_frame_offset; /* 16-bit in compat mode */
	uint32_t block_length;       /* 16-bit in compat mode */
	uint32_t frame_index;
};

struct omx_pkt_pull_reply {
	uint8_t frame_seqnum;
	uint16_t frame_length;
	uint32_t msg_offset, dst_pull_handle, dst_magic;
};

struct omx_pkt_notify {
	uint8_t dst_endpoint, src_endpoint;
	uint32_t session, total_length;
	uint8_t rdma_id, rdma_seqnum;
	uint16_t lib_seqnum, lib_piggyack;
};

/*
 * omx extension carried in the CONNECT pad2 field (body offset 12..15), which the reference
 * leaves unused: byte 12 = 'X' (0x58), byte 13 = mode + 1 (1 extended, 2 compat), bytes 14-15
 * = frame MTU (BE16; 0 means 65536 is not representable, so MTU is capped at 65535).
 * A peer that does not send it (reference Open-MX) has ext_present = 0.
 */
#define OMX_CONNECT_EXT_MAGIC 0x58
struct omx_pkt_connect {
	uint8_t dst_endpoint, src_endpoint;
	uint8_t length; /* 16 */
	uint16_t lib_seqnum;
	uint16_t src_dst_peer_index;
	uint32_t src_session_id;
	uint32_t app_key;           /* request */
	uint32_t target_session_id; /* reply (same bytes as app_key) */
	uint16_t target_recv_seqnum_start;
	uint8_t is_reply, connect_seqnum;
	uint8_t status_code; /* reply: 0 success, 11 bad key, (omx) 0x80 wire mode mismatch */
	uint8_t ext_present;
	enum omx_wire_mode ext_mode;
	uint16_t ext_mtu;
};
#define OMX_CONNECT_STATUS_SUCCESS 0
#define OMX_CONNECT_STATUS_BAD_KEY 11
#define OMX_CONNECT_STATUS_WIRE_MISMATCH 0x80

struct omx_pkt_truc { /* liback */
	uint8_t dst_endpoint, src_endpoint;
	uint8_t length; /* 16 */
	uint32_t session;
	uint8_t type; /* 0x55 */
	uint16_t lib_seqnum; /* ack value */
	uint32_t session_id;
	uint32_t acknum;
	uint16_t send_seq;
	uint8_t resent;
};

struct omx_pkt_nack_lib {
	uint8_t src_endpoint, nack_type, dst_endpoint;
	uint16_t dst_src_peer_index, lib_seqnum;
};

struct omx_pkt_nack_mcp {
	uint8_t src_endpoint, nack_type;
	uint32_t src_pull_handle, src_magic;
};

struct omx_pkt_host { /* HOST_QUERY and HOST_REPLY */
	uint16_t src_dst_peer_index;
	uint32_t magic;
	uint8_t length; /* reply: hostname length including NUL (<= 80) */
	char hostname[OMX_HOSTNAME_MAX + 1]; /* reply: NUL-terminated copy (forced) */
};

struct omx_pkt_raw_discovery { /* RAW frame of the omxoed discovery protocol (wire.md 12) */
	uint64_t nic_id;
	uint32_t serial;
};

struct omx_pkt {
	uint8_t dst_mac[6], src_mac[6];
	uint16_t peer_index; /* head dst_src_peer_index */
	uint8_t ptype;
	union {
		struct omx_pkt_msg msg;
		struct omx_pkt_pull pull;
		struct omx_pkt_pull_reply pull_reply;
		struct omx_pkt_notify notify;
		struct omx_pkt_connect connect;
		struct omx_pkt_truc truc;
		struct omx_pkt_nack_lib nack_lib;
		struct omx_pkt_nack_mcp nack_mcp;
		struct omx_pkt_host host;
		struct omx_pkt_raw_discovery raw;
	} u;
	/* Decode: points into the frame (TINY, SMALL, MEDIUM, PULL_REPLY, RAW); never past its end.
	 * Encode: payload to append after the header (may be NULL when payload_len == 0). */
	const uint8_t *payload;
	uint32_t payload_len;
};

/*
 * Decode a whole Ethernet frame (FCS excluded). Never reads outside [frame, frame+len).
 * Trailing padding is ignored. Returns OMX_WIRE_OK or the reason for rejection.
 * For MEDIUM, also rejects frag_seqnum >= medium_frags_max, frag_length > medium_frag_max,
 * and a total length > medium_max (extended: F*32; compat: 32768).
 * Also (BAD_FRAG) a MEDIUM fragment not inside the message (frag_seqnum*F + frag_length >
 * length) and, in compat mode, frag_pipeline != 12; (BAD_DATA_LENGTH) a PULL_REPLY with
 * frame_length > pull_reply_max and a HOST_REPLY with length > 80.
 * On error, only the head fields (MACs, peer_index, ptype) of *out are meaningful (zeroed if
 * the head itself was rejected). CONNECT: app_key and target_session_id both hold bytes
 * 20..23; status_code is 0 for a request. HOST_QUERY: u.host.length = 0.
 * RAW: payload = the whole body (ptype included); u.raw is filled when the body has the
 * 48 bytes of the discovery frame, zero otherwise. payload = NULL for types without payload.
 */
enum omx_wire_err omx_wire_decode(const struct omx_wire_params *wp, const uint8_t *frame, size_t len,
				  struct omx_pkt *out);
/*
 * The commonest frames, TINY and SMALL (the same in every mode), decoded without the rest: 1 if
 * the frame is one omx_wire_decode accepts, with the head, u.msg, payload and payload_len set
 * as it sets them (the other members of the union are left as they were); 0 for anything else,
 * *out then meaningless (decode it with omx_wire_decode). The fuzzer holds the two together.
 */
int omx_wire_decode_eager(const uint8_t *frame, size_t len, struct omx_pkt *out);
/* The same for a MEDIUM frame that holds a whole message (omx_wire_medium_whole):
 * 1 if omx_wire_decode accepts it and it is one, decoded as it decodes it; 0 for anything else. */
int omx_wire_decode_medium_whole(const struct omx_wire_params *wp, const uint8_t *frame, size_t len, struct omx_pkt *out);
/* Two MACs equal: GCC calls memcmp for memcmp(a, b, 6) (~20 instructions and a call on every
 * received frame's sender check); a 4- and a 2-byte load each side instead. */
static inline int omx_wire_mac_eq(const uint8_t a[6], const uint8_t b[6])
{
	uint32_t a4, b4;
	uint16_t a2, b2;
	memcpy(&a4, a, 4), memcpy(&b4, b, 4), memcpy(&a2, a + 4, 2), memcpy(&b2, b + 4, 2);
	return ((a4 ^ b4) | (uint32_t)(a2 ^ b2)) == 0;
}
/* A decoded MEDIUM that is a whole message in one frame: fragment 0, as long as the message. */
static inline int omx_wire_medium_whole(const struct omx_pkt *pkt)
{
	return pkt->ptype == OMX_PT_MEDIUM && pkt->u.msg.frag_seqnum == 0 && pkt->u.msg.frag_length == pkt->u.msg.length;
}

/*
 * Encode a whole frame into buf: Ethernet header, peer index, body header, payload, then zero
 * padding up to OMX_FRAME_MIN. Unused/pad fields are written as zeros. Returns the frame length,
 * or 0 if cap is too small or the packet cannot be encoded in this mode (e.g. a field that
 * does not fit the compat layout).
 */
size_t omx_wire_encode(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *buf, size_t cap);
/* The length of pkt's frame without the padding to OMX_FRAME_MIN (0 if it cannot be encoded). Its
 * first bytes decode on their own: frames that never cross an Ethernet link (same-host rings)
 * are sent this long, so that a tiny message fits one cache line. */
size_t omx_wire_frame_len(const struct omx_wire_params *wp, const struct omx_pkt *pkt);
/*
 * Encoder details (the encoder refuses what omx_wire_decode would reject, so its output always
 * decodes back to the same packet):
 *  - TINY/SMALL: length field = payload_len (u.msg.length must be 0 or equal to it).
 *  - MEDIUM: frag_length = payload_len (u.msg.frag_length 0 or equal); u.msg.length = total;
 *    frag_pipeline comes from wp (12 in compat), the struct value is ignored.
 *  - PULL_REPLY: frame_length = payload_len (u.pull_reply.frame_length 0 or equal).
 *  - RNDV/CONNECT/TRUC: a length of 0 means the spec value (8/16/16); TRUC type 0 means 0x55,
 *    session_id 0 means session.
 *  - CONNECT: app_key is written for a request, target_session_id (+ status_code) for a reply
 *    (is_reply != 0); the omx extension is written when ext_present.
 *  - HOST_REPLY: u.host.length bytes (<= 80, the caller counts the NUL): the hostname, then zeros.
 *  - RAW: payload_len > 0: payload is the whole body (payload[0] must be OMX_PT_RAW);
 *    payload_len == 0: the 64-byte omxoed discovery frame from u.raw.
 *  - payload/payload_len are ignored for the other types. Frames longer than wp->mtu are refused.
 *
 * omx_wire_encode_header: same, but writes only the head + body header (HOST_REPLY: + name;
 * RAW with payload: the head only) using payload_len for the length fields, without reading the
 * payload and without padding, for scatter/gather sends. Returns the header length or 0. The
 * caller appends payload_len bytes and pads the frame to OMX_FRAME_MIN with zeros.
 */
size_t omx_wire_encode_header(const struct omx_wire_params *wp, const struct omx_pkt *pkt, uint8_t *buf,
			      size_t cap);

/*
 * A TINY or SMALL frame with less work than omx_wire_encode, for the same-host path's per-message
 * cost: the same bytes as omx_wire_encode without the padding to OMX_FRAME_MIN (the length
 * omx_wire_frame_len gives: frames that never cross an Ethernet link). Reads only the head
 * fields (MACs, peer_index, ptype), payload, payload_len, and u.msg's dst_endpoint,
 * src_endpoint, src_generation, lib_seqnum, lib_piggyack, match, session and checksum (the caller
 * need not clear the rest of *pkt; the length field is payload_len). Both wire modes lay
 * these types out alike. Returns the frame length, or 0 (another type, payload too long for the
 * type, or cap too small).
 */
size_t omx_wire_encode_eager(const struct omx_pkt *pkt, uint8_t *buf, size_t cap);

/* The same frames from a template: the 40 header bytes of a TINY/SMALL with the fields that stay
 * the same between one partner's messages (addresses, peer index, endpoints, generation,
 * checksum, session) taken from pkt (0 if pkt is not a TINY/SMALL), then per message the type,
 * sequence numbers, match and payload written over a copy of it. Byte for byte what
 * omx_wire_encode_eager writes for the same packet; its length, 0 if it does not fit or plen is
 * too long for ptype. */
#define OMX_EAGER_HDR_LEN 40
size_t omx_wire_eager_template(const struct omx_pkt *pkt, uint8_t tmpl[OMX_EAGER_HDR_LEN]);
size_t omx_wire_encode_eager_from(const uint8_t tmpl[OMX_EAGER_HDR_LEN], uint8_t ptype, uint16_t lib_seqnum,
				  uint16_t lib_piggyack, uint64_t match, const void *payload, size_t plen, uint8_t *buf,
				  size_t cap);

/* From the same template, the header of a MEDIUM frame holding a whole message of plen bytes
 * (fragment 0, as long as the message; the payload follows, from the caller): byte for byte what
 * omx_wire_encode_header writes for that packet in this mode. Its length (head + medium body
 * header), 0 if plen is 0 or too long for one fragment, the frame too long, or cap too small. */
size_t omx_wire_medium_whole_header_from(const struct omx_wire_params *wp, const uint8_t tmpl[OMX_EAGER_HDR_LEN],
					 uint16_t lib_seqnum, uint16_t lib_piggyack, uint64_t match, size_t plen,
					 uint8_t *buf, size_t cap);

/* From the same template, a whole RNDV frame (48 bytes, unpadded) and a whole NOTIFY (40 bytes,
 * unpadded) to that partner: byte for byte what omx_wire_encode writes for them before its padding
 * (the NOTIFY takes the template's endpoints and session; both wire modes lay them out alike).
 * Their length, 0 if cap is too small. */
#define OMX_RNDV_FRAME_LEN (OMX_HEAD_LEN + OMX_BODY_RNDV_LEN)
#define OMX_NOTIFY_FRAME_LEN (OMX_HEAD_LEN + OMX_BODY_NOTIFY_LEN)
size_t omx_wire_rndv_from(const uint8_t tmpl[OMX_EAGER_HDR_LEN], uint16_t lib_seqnum, uint16_t lib_piggyack,
			  uint64_t match, uint32_t msg_length, uint8_t rdma_id, uint8_t rdma_seqnum, uint8_t *buf,
			  size_t cap);
size_t omx_wire_notify_from(const uint8_t tmpl[OMX_EAGER_HDR_LEN], uint16_t lib_seqnum, uint16_t lib_piggyack,
			    uint32_t total_length, uint8_t rdma_id, uint8_t rdma_seqnum, uint8_t *buf, size_t cap);

/* Header bytes (head + body header, no payload) a packet type takes in this mode; 0 if unknown
 * or invalid. RAW: 16 (its whole body is payload); HOST_REPLY: 32 (the name not included). */
size_t omx_wire_header_len(const struct omx_wire_params *wp, uint8_t ptype);

/*
 * Which local endpoint a raw frame is for, reading only fixed offsets (this is exactly what the
 * kernel packet filter tests): frame byte 17 for most types, byte 25 for NACK_LIB, byte 31 XOR
 * 0x80 for PULL_REPLY. Returns -1 for frames every endpoint of the board should see (HOST_QUERY,
 * HOST_REPLY, RAW), -2 for frames that are not ours or too short.
 */
int omx_wire_frame_endpoint(const uint8_t *frame, size_t len);

/* CRC-16/XMODEM (poly 0x1021, init 0), the debug checksum of wire.md 2.3. */
uint16_t omx_wire_crc16(const uint8_t *data, size_t len, uint16_t crc);

/* nic id <-> MAC (first MAC byte = bits 47..40). */
uint64_t omx_mac_to_nic_id(const uint8_t mac[6]);
void omx_nic_id_to_mac(uint64_t nic_id, uint8_t mac[6]);

#endif
