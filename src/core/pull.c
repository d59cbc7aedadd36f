/*
 * pull.c - large messages (wire.md 9): the receiver pulls the data from the sender's registered
 * region in blocks of B replies of R bytes, 4 blocks outstanding, 1 s retransmission timer,
 * then sends a sequenced NOTIFY. The sender answers PULL requests from its region during
 * progression.
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/counters.h"
#include "shm/shm.h"

#define PULL_WINDOW OMX_PULL_BLOCKS_OUTSTANDING

struct omx_pull {
	struct omx_list elt; /* ep->pull_list */
	union omx_request *req;
	struct omx_partner *partner;
	uint32_t slot, handle;
	uint32_t total;       /* X: bytes to pull */
	uint32_t R;           /* reply size: the interface's, or the same-host frames' (wp_local) */
	uint32_t nframes, nblocks;
	uint32_t first_block; /* oldest incomplete block */
	uint32_t next_block;  /* next block to request */
	uint64_t frame_mask[PULL_WINDOW]; /* received frames of block b at [b % 4] */
	uint8_t rerequested[PULL_WINDOW];
	uint32_t received;
	uint64_t last_activity_ns, deadline_ns;
	uint64_t start_ns;
	int overlapped; /* another pull ran meanwhile: its time says little about its own speed */
};

/* ---- sender side: serving PULL requests ---- */

static void send_nack_mcp(struct omx_endpoint *ep, const struct omx_pkt *pkt, uint8_t type)
{
	struct omx_pkt n;
	memset(&n, 0, sizeof(n));
	memcpy(n.dst_mac, pkt->src_mac, 6);
	struct omx_peer *peer = omx__peer(pkt->peer_index);
	n.peer_index = peer ? peer->reverse_index[ep->board_index] : OMX_PEER_INDEX_UNKNOWN;
	n.ptype = OMX_PT_NACK_MCP;
	n.u.nack_mcp.src_endpoint = pkt->u.pull.src_endpoint;
	n.u.nack_mcp.nack_type = type;
	n.u.nack_mcp.src_pull_handle = pkt->u.pull.src_pull_handle;
	n.u.nack_mcp.src_magic = pkt->u.pull.src_magic;
	omx__send_frame(ep, &n, OMX_C_SEND_NACK_MCP);
}

void omx__handle_pull(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	const struct omx_pkt_pull *q = &pkt->u.pull;
	int local = omx__via_local(ep, pkt->src_mac);
	const struct omx_wire_params *wp = local ? &ep->wp_local : &ep->wp; /* same host: larger replies */
	uint32_t R = wp->pull_reply_max;
	omx__count(ep->board, OMX_C_RECV_PULL_REQ);
	omx__xfer_touch(ep);
	struct omx_peer *peer = omx__peer(pkt->peer_index);
	if (!peer || !omx_wire_mac_eq(peer->mac, pkt->src_mac)) {
		omx__count(ep->board, OMX_C_DROP_BAD_PEER_INDEX);
		return;
	}
	if (q->dst_endpoint != ep->endpoint_index) {
		send_nack_mcp(ep, pkt, OMX_NACK_ENDPT_CLOSED);
		return;
	}
	if (q->session != ep->session) {
		omx__count(ep->board, OMX_C_DROP_BAD_SESSION);
		send_nack_mcp(ep, pkt, OMX_NACK_BAD_SESSION);
		return;
	}
	uint64_t frames = ((uint64_t)q->first_frame_offset + q->block_length + R - 1) / R;
	if (frames > wp->pull_block_replies || q->first_frame_offset >= R) {
		omx__count(ep->board, OMX_C_DROP_PULL_BAD_REPLIES);
		return;
	}
	union omx_request *r = q->rdma_id < OMX_REGION_MAX ? ep->regions[q->rdma_id].req : NULL;
	if (!r) {
		omx__count(ep->board, OMX_C_DROP_PULL_BAD_REGION);
		send_nack_mcp(ep, pkt, OMX_NACK_BAD_RDMAWIN);
		return;
	}
	r->s.partner->last_heard_ns = ep->now_ns;
	uint64_t off = (uint64_t)q->frame_index * R + q->first_frame_offset;
	if (q->frame_index * (uint64_t)R < q->rdma_offset % R || off + q->block_length > r->s.total_len ||
	    q->rdma_offset != 0) {
		omx__count(ep->board, OMX_C_DROP_PULL_BAD_OFFSET_LENGTH);
		return;
	}
	uint32_t remaining = q->block_length;
	/* One segment: the replies point into the buffer and leave together (omx__send_frames);
	 * several: each is gathered into pullbuf and sent before the next. */
	struct omx_pkt reps[OMX_NET_BATCH_MAX];
	unsigned nrep = 0;
	for (uint32_t i = 0; remaining; i++) {
		struct omx_pkt *rep = &reps[r->s.nseg == 1 ? nrep : 0];
		uint32_t n = (i == 0 ? R - q->first_frame_offset : R);
		if (n > remaining)
			n = remaining;
		memset(rep, 0, sizeof(*rep));
		memcpy(rep->dst_mac, pkt->src_mac, 6);
		rep->peer_index = peer->reverse_index[ep->board_index];
		rep->ptype = OMX_PT_PULL_REPLY;
		rep->u.pull_reply.frame_seqnum = (uint8_t)(q->frame_index + i);
		rep->u.pull_reply.frame_length = (uint16_t)n;
		rep->u.pull_reply.msg_offset = (uint32_t)off;
		rep->u.pull_reply.dst_pull_handle = q->src_pull_handle;
		rep->u.pull_reply.dst_magic = q->src_magic;
		if (r->s.nseg == 1) {
			rep->payload = (const uint8_t *)r->s.segs[0].ptr + off;
		} else {
			omx__copy_from_segs(r->s.segs, r->s.nseg, (uint32_t)off, ep->pullbuf, n);
			rep->payload = ep->pullbuf;
		}
		rep->payload_len = n;
		if (r->s.nseg != 1) {
			omx__send_frame(ep, rep, OMX_C_SEND_PULL_REPLY);
		} else if (++nrep == OMX_NET_BATCH_MAX) {
			omx__send_frames(ep, reps, nrep, OMX_C_SEND_PULL_REPLY);
			nrep = 0;
		}
		off += n;
		remaining -= n;
	}
	if (nrep)
		omx__send_frames(ep, reps, nrep, OMX_C_SEND_PULL_REPLY);
	if (!local)
		omx__lane_bulk_sent(ep);
}

/* NOTIFY for one of our large sends (in sequence; its piggyack was applied just before). */
void omx__handle_notify(struct omx_endpoint *ep, struct omx_partner *p, const struct omx_pkt *pkt)
{
	uint8_t id = pkt->u.notify.rdma_id;
	union omx_request *r = ep->regions[id].req;
	if (!r || r->s.partner != p || r->s.u.send.region_seqnum != pkt->u.notify.rdma_seqnum)
		return; /* stale NOTIFY (another use of the region) */
	r->s.status.xfer_length = pkt->u.notify.total_length < r->s.total_len ? pkt->u.notify.total_length :
										   r->s.total_len;
	r->s.u.send.notified = 1;
	if (r->s.state & OMX_RS_NEED_ACK)
		return; /* completes when the RNDV is acked */
	omx_list_del(&r->s.queue_elt);
	omx__region_release(ep, r);
	omx__req_complete(r, r->s.status.xfer_length < r->s.status.msg_length ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
	omx__req_clear(r, OMX_RS_NEED_REPLY);
}

/* ---- receiver side: pulling ---- */

void omx__build_notify(union omx_request *r, struct omx_pkt *pkt)
{
	struct omx_partner *p = r->s.partner;
	memset(pkt, 0, sizeof(*pkt));
	memcpy(pkt->dst_mac, p->mac, 6);
	pkt->peer_index = omx__partner_reverse_index(p);
	pkt->ptype = OMX_PT_NOTIFY;
	pkt->u.notify.dst_endpoint = p->endpoint_index;
	pkt->u.notify.src_endpoint = (uint8_t)r->s.ep->endpoint_index;
	pkt->u.notify.session = p->true_session;
	pkt->u.notify.total_length = r->s.u.recv.notify_length;
	pkt->u.notify.rdma_id = r->s.u.recv.rdma_id;
	pkt->u.notify.rdma_seqnum = r->s.u.recv.rdma_seqnum;
	pkt->u.notify.lib_seqnum = r->s.seqnum;
	pkt->u.notify.lib_piggyack = omx__piggyack(p);
}

/* NOTIFY is sequenced: it takes a seqnum and is retransmitted until acked. */
void omx__send_notify(struct omx_endpoint *ep, union omx_request *r, uint32_t total_length)
{
	struct omx_partner *p = r->s.partner;
	(void)ep;
	if (p->next_send_seq == OMX_SEQ_UNCONNECTED)
		return;
	r->s.u.recv.notify_length = total_length;
	r->s.seqnum = p->next_send_seq;
	p->next_send_seq = omx_seq_inc(p->next_send_seq);
	r->s.state |= OMX_RS_NEED_ACK | OMX_RS_NOTIFY_PENDING;
	omx_list_add_tail(&p->non_acked, &r->s.queue_elt);
	omx__send_sequenced(r);
}

static void request_block(struct omx_endpoint *ep, struct omx_pull *pl, uint32_t b)
{
	union omx_request *r = pl->req;
	struct omx_partner *p = pl->partner;
	uint32_t R = pl->R, B = ep->wp.pull_block_replies;
	uint64_t start = (uint64_t)b * B * R;
	struct omx_pkt pkt;
	memset(&pkt, 0, sizeof(pkt));
	memcpy(pkt.dst_mac, p->mac, 6);
	pkt.peer_index = omx__partner_reverse_index(p);
	pkt.ptype = OMX_PT_PULL;
	pkt.u.pull.dst_endpoint = p->endpoint_index;
	pkt.u.pull.src_endpoint = (uint8_t)ep->endpoint_index;
	pkt.u.pull.session = p->true_session;
	pkt.u.pull.total_length = pl->total;
	pkt.u.pull.rdma_id = r->s.u.recv.rdma_id;
	pkt.u.pull.rdma_seqnum = r->s.u.recv.rdma_seqnum;
	pkt.u.pull.src_pull_handle = pl->handle;
	pkt.u.pull.src_magic = ep->endpoint_index ^ OMX_PULL_MAGIC_XOR;
	pkt.u.pull.first_frame_offset = 0;
	pkt.u.pull.block_length = (uint32_t)(pl->total - start < (uint64_t)B * R ? pl->total - start : (uint64_t)B * R);
	pkt.u.pull.frame_index = b * B;
	omx__send_frame(ep, &pkt, OMX_C_SEND_PULL_REQ);
}

static uint32_t block_frames(struct omx_endpoint *ep, struct omx_pull *pl, uint32_t b)
{
	uint32_t B = ep->wp.pull_block_replies;
	uint32_t first = b * B;
	return pl->nframes - first < B ? pl->nframes - first : B;
}

static int block_complete(struct omx_endpoint *ep, struct omx_pull *pl, uint32_t b)
{
	uint32_t n = block_frames(ep, pl, b);
	uint64_t full = n >= 64 ? ~0ull : ((1ull << n) - 1);
	return (pl->frame_mask[b % PULL_WINDOW] & full) == full;
}

static void fill_window(struct omx_endpoint *ep, struct omx_pull *pl)
{
	while (pl->next_block < pl->nblocks && pl->next_block < pl->first_block + PULL_WINDOW) {
		pl->frame_mask[pl->next_block % PULL_WINDOW] = 0;
		pl->rerequested[pl->next_block % PULL_WINDOW] = 0;
		request_block(ep, pl, pl->next_block++);
	}
}

static void pull_free(struct omx_endpoint *ep, struct omx_pull *pl)
{
	omx_list_del(&pl->elt);
	ep->pulls[pl->slot] = NULL;
	ep->pull_gen[pl->slot] = ((ep->pull_gen[pl->slot] + 1) & 0x3FFFFFu) ? (ep->pull_gen[pl->slot] + 1) & 0x3FFFFFu : 1;
	pl->req->s.u.recv.pull = NULL;
	free(pl);
}

/* End of a pull: NOTIFY the sender and complete the receive. */
static void pull_finish(struct omx_endpoint *ep, struct omx_pull *pl, omx_return_t status)
{
	union omx_request *r = pl->req;
	if (status == OMX_SUCCESS && !pl->overlapped)
		omx__shared_pulled(pl->partner, pl->total, pl->start_ns);
	pull_free(ep, pl);
	r->s.state &= ~OMX_RS_PULLING;
	if (status != OMX_SUCCESS)
		r->s.status.xfer_length = 0;
	omx__send_notify(ep, r, status == OMX_SUCCESS ? r->s.status.xfer_length : 0);
	if (status == OMX_SUCCESS && r->s.status.xfer_length < r->s.status.msg_length)
		status = OMX_MESSAGE_TRUNCATED;
	omx__req_complete(r, status);
	omx__req_maybe_free(r);
}

/*
 * OMX_RX_SPLIT=auto: where this pull's replies land. Read split (straight from the socket into the
 * receive buffer) they cost one copy less, but the kernel frees their buffers on our CPU, and a
 * sender that keeps streaming to us then fills buffers last held here: one-way 4 MiB streams ran
 * 1.48x TCP with whole frames against 1.13x split, ping-pongs 1.0x whole against 1.46x split
 * (MTU 65535, docs/performance.md stop 27). So: split while we send bulk data ourselves (our
 * sends reuse the buffers our receives free), whole otherwise. Same-host pulls do not use the
 * network. Mediums longer than split_medium_min follow the pull replies (stop 30); as they come
 * unannounced, the lane also moves when we send bulk data, and back from the timers.
 */
static void set_lane(struct omx_endpoint *ep, int split)
{
	int r = omx_net_packet_pull_lane(ep->pkt, split);
	if (r == 1)
		omx__count(ep->board, OMX_C_X_SPLIT_LANE_SWITCHES);
	if (r >= 0)
		ep->lane_split = split;
}

static void choose_lane(struct omx_endpoint *ep, struct omx_partner *p)
{
	if (!ep->pull_lane_auto || omx__via_local(ep, p->mac))
		return;
	set_lane(ep, ep->bulk_sent_ns && ep->now_ns - ep->bulk_sent_ns < OMX_LANE_RECENT_NS);
}

void omx__lane_bulk_sent(struct omx_endpoint *ep)
{
	ep->bulk_sent_ns = ep->now_ns ? ep->now_ns : 1;
	if (ep->pull_lane_auto && !ep->lane_split)
		set_lane(ep, 1);
}

void omx__lane_timer(struct omx_endpoint *ep, uint64_t now)
{
	if (now - ep->bulk_sent_ns >= OMX_LANE_RECENT_NS)
		set_lane(ep, 0);
}

void omx__large_recv_start(union omx_request *r)
{
	struct omx_endpoint *ep = r->s.ep;
	uint32_t X = r->s.status.xfer_length;
	uint32_t R = omx__wp_for(ep, r->s.partner->mac)->pull_reply_max, B = ep->wp.pull_block_replies;
	omx__xfer_touch(ep);
	r->s.type = OMX_REQ_RECV_LARGE;
	if (X == 0) {
		omx__send_notify(ep, r, 0);
		omx__req_complete(r, r->s.status.msg_length ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
		return;
	}
	if (omx__shared_single_copy(r)) {
		/* Same-host sender: copied straight from its buffer (shared.c); no pull. */
		omx__send_notify(ep, r, X);
		omx__req_complete(r, X < r->s.status.msg_length ? OMX_MESSAGE_TRUNCATED : OMX_SUCCESS);
		return;
	}
	int slot = -1;
	for (int i = 0; i < OMX_PULL_SLOTS; i++)
		if (!ep->pulls[i]) {
			slot = i;
			break;
		}
	struct omx_pull *pl = slot >= 0 ? calloc(1, sizeof(*pl)) : NULL;
	if (!pl) {
		r->s.status.xfer_length = 0;
		omx__send_notify(ep, r, 0);
		omx__req_complete(r, OMX_NO_RESOURCES);
		return;
	}
	pl->req = r;
	pl->partner = r->s.partner;
	pl->slot = (uint32_t)slot;
	pl->handle = ((uint32_t)slot << 22) | ep->pull_gen[slot];
	pl->total = X;
	pl->R = R;
	pl->nframes = (X + R - 1) / R;
	pl->nblocks = (pl->nframes + B - 1) / B;
	pl->last_activity_ns = pl->start_ns = omx_now_ns();
	pl->deadline_ns = ep->pull_timeout_ns == UINT64_MAX ? UINT64_MAX : pl->last_activity_ns + ep->pull_timeout_ns;
	ep->pulls[slot] = pl;
	r->s.u.recv.pull = pl;
	r->s.state |= OMX_RS_PULLING;
	struct omx_list *pos, *tmp;
	pl->overlapped = !omx_list_empty(&ep->pull_list);
	omx_list_for_each_safe(pos, tmp, &ep->pull_list)
		((struct omx_pull *)omx_container_of(pos, struct omx_pull, elt))->overlapped = 1;
	omx_list_add_tail(&ep->pull_list, &pl->elt);
	choose_lane(ep, r->s.partner);
	fill_window(ep, pl);
}

static struct omx_pull *pull_lookup(struct omx_endpoint *ep, uint32_t magic, uint32_t handle, int bad_magic_counter,
				    int bad_handle_counter)
{
	if ((magic ^ OMX_PULL_MAGIC_XOR) != ep->endpoint_index) {
		omx__count(ep->board, bad_magic_counter);
		return NULL;
	}
	uint32_t slot = handle >> 22;
	struct omx_pull *pl = slot < OMX_PULL_SLOTS ? ep->pulls[slot] : NULL;
	if (!pl || pl->handle != handle) {
		omx__count(ep->board, bad_handle_counter);
		return NULL;
	}
	return pl;
}

static void block_done(struct omx_endpoint *ep, struct omx_pull *pl, uint32_t b)
{
	if (b == pl->first_block) {
		while (pl->first_block < pl->next_block && block_complete(ep, pl, pl->first_block))
			pl->first_block++;
		fill_window(ep, pl);
		return;
	}
	/* A later block finished first: re-request earlier incomplete ones once (likely loss). */
	omx__count(ep->board, OMX_C_PULL_NONFIRST_BLOCK_DONE_FIRST);
	for (uint32_t k = pl->first_block; k < b; k++) {
		if (!block_complete(ep, pl, k) && !pl->rerequested[k % PULL_WINDOW]) {
			pl->rerequested[k % PULL_WINDOW] = 1;
			request_block(ep, pl, k);
		}
	}
}

/* Like omx__copy_to_segs, through the copy engine (non-temporal for large messages). */
static void copy_to_segs(union omx_request *r, uint32_t offset, const uint8_t *src, uint32_t len, uint64_t total)
{
	for (uint32_t i = 0; i < r->s.nseg && len; i++) {
		uint32_t sl = r->s.segs[i].len;
		if (offset >= sl) {
			offset -= sl;
			continue;
		}
		uint32_t n = sl - offset < len ? sl - offset : len;
		omx_copy((uint8_t *)r->s.segs[i].ptr + offset, src, n, total);
		src += n;
		len -= n;
		offset = 0;
	}
}

/* The pull a PULL_REPLY belongs to and the bit of its frame, if it is one we still miss (drops
 * counted otherwise). */
static struct omx_pull *pull_reply_check(struct omx_endpoint *ep, const struct omx_pkt *pkt, uint32_t *block,
					 uint64_t *bit)
{
	const struct omx_pkt_pull_reply *q = &pkt->u.pull_reply;
	uint32_t B = ep->wp.pull_block_replies;
	struct omx_pull *pl = pull_lookup(ep, q->dst_magic, q->dst_pull_handle, OMX_C_DROP_PULL_REPLY_BAD_MAGIC_ENDPOINT,
					  OMX_C_DROP_PULL_REPLY_BAD_WIRE_HANDLE);
	if (!pl)
		return NULL;
	uint32_t R = pl->R;
	uint32_t f = q->msg_offset / R;
	if (q->msg_offset % R || (uint8_t)f != q->frame_seqnum) {
		omx__count(ep->board, OMX_C_DROP_PULL_REPLY_BAD_SEQNUM_WRAP);
		return NULL;
	}
	uint32_t b = f / B;
	uint32_t expect = pl->total - q->msg_offset < R ? pl->total - q->msg_offset : R;
	if (f >= pl->nframes || b < pl->first_block || b >= pl->next_block || q->frame_length != expect) {
		omx__count(ep->board, OMX_C_DROP_PULL_REPLY_BAD_SEQNUM);
		return NULL;
	}
	*block = b;
	*bit = 1ull << (f - b * B);
	if (pl->frame_mask[b % PULL_WINDOW] & *bit) {
		omx__count(ep->board, OMX_C_DROP_PULL_REPLY_DUPLICATE);
		return NULL;
	}
	return pl;
}

/* A missing frame of pl arrived (its payload already in place if placed). */
static void pull_reply_accept(struct omx_endpoint *ep, struct omx_pull *pl, const struct omx_pkt *pkt, uint32_t b,
			      uint64_t bit, int placed)
{
	const struct omx_pkt_pull_reply *q = &pkt->u.pull_reply;
	pl->frame_mask[b % PULL_WINDOW] |= bit;
	if (!placed)
		copy_to_segs(pl->req, q->msg_offset, pkt->payload, q->frame_length, pl->total);
	pl->received += q->frame_length;
	/* Also the transfer's step for omx__wait: split-lane replies come here without
	 * omx__handle_pull_reply. Counted there only, a puller on the split lane went to poll()
	 * between passes from 100 us into each pull on (blocking 4 MiB ping-pongs at MTU 9000:
	 * 2227 -> 2776 MB/s with this, docs/performance.md stop 35). One clock read for both. */
	omx__xfer_touch(ep);
	pl->last_activity_ns = ep->xfer_active_ns;
	if (pl->received >= pl->total) {
		pull_finish(ep, pl, OMX_SUCCESS);
		return;
	}
	if (block_complete(ep, pl, b))
		block_done(ep, pl, b);
}

void omx__handle_pull_reply(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	uint32_t b;
	uint64_t bit;
	omx__count(ep->board, OMX_C_RECV_PULL_REPLY);
	struct omx_pull *pl = pull_reply_check(ep, pkt, &b, &bit);
	if (pl)
		pull_reply_accept(ep, pl, pkt, b, bit, 0);
}

/*
 * Split receive (net.h): a large frame whose head is in the RX ring and whole frame in the
 * socket. A PULL_REPLY we still miss, for a receive buffer of one segment, or a MEDIUM fragment
 * of a receive matched (or about to be) in one segment (recv.c, omx__medium_place), is read with
 * its payload straight into that buffer: one copy in all (kernel to user), as TCP does, instead of
 * kernel to ring to buffer. Anything else goes the ordinary way (returns 0).
 */
/* The longest headers of a frame read split (MEDIUM's; PULL_REPLY's are shorter). */
#define SPLIT_HDR_MAX (OMX_HEAD_LEN + OMX_BODY_MEDIUM_LEN)
_Static_assert(OMX_BODY_MEDIUM_LEN >= OMX_BODY_PULL_REPLY_LEN, "SPLIT_HDR_MAX holds either header");

/* Read a split frame whose headers are hdr (<= SPLIT_HDR_MAX) bytes with its payload (len bytes)
 * straight into dst: 1 if the whole frame came, 0 if not (lost; the transport resynchronises). */
static int split_read_into(struct omx_net_split *s, size_t hdr, uint8_t *dst, uint32_t len, size_t frame_len)
{
	uint8_t hbuf[SPLIT_HDR_MAX], tail[64];
	struct iovec iov[3] = { { hbuf, hdr }, { dst, len }, { tail, sizeof(tail) } };
	return omx_net_split_read(s, iov, 3) == (long)frame_len;
}

static int split_medium(struct omx_endpoint *ep, struct omx_pkt *pkt, size_t hdr, size_t frame_len,
			struct omx_net_split *s)
{
	uint8_t *dst = omx__medium_place(ep, pkt);
	if (!dst)
		return 0;
	/* A failed read leaves bytes of another frame where this fragment goes, still missing:
	 * its retransmission overwrites them. */
	if (!split_read_into(s, hdr, dst, pkt->payload_len, frame_len))
		return 1; /* lost; the sender retransmits */
	omx__count_add(ep->board, OMX_C_X_SPLIT_PLACED_BYTES, pkt->payload_len);
	omx__recv_medium_placed(ep, pkt);
	return 1;
}

static int split_pull_reply(struct omx_endpoint *ep, const struct omx_pkt *pkt, size_t hdr, size_t frame_len,
			    struct omx_net_split *s)
{
	uint32_t b;
	uint64_t bit;
	struct omx_pull *pl = pull_reply_check(ep, pkt, &b, &bit);
	if (!pl) {
		omx__count(ep->board, OMX_C_RECV_PULL_REPLY);
		return 1; /* a drop (counted by the check) is not worth reading */
	}
	union omx_request *r = pl->req;
	uint8_t *dst = omx__segs_place(r->s.segs, r->s.nseg, pkt->u.pull_reply.msg_offset, pkt->payload_len);
	if (!dst)
		return 0; /* across segments: the ordinary way (it counts the frame) */
	int got = split_read_into(s, hdr, dst, pkt->payload_len, frame_len);
	omx__count(ep->board, OMX_C_RECV_PULL_REPLY);
	if (!got)
		return 1; /* lost; the pull asks again */
	omx__count_add(ep->board, OMX_C_X_SPLIT_PLACED_BYTES, pkt->payload_len);
	pull_reply_accept(ep, pl, pkt, b, bit, 1);
	return 1;
}

int omx__recv_split(void *arg, const uint8_t *head, size_t head_len, size_t frame_len, struct omx_net_split *s)
{
	struct omx_endpoint *ep = arg;
	struct omx_pkt pkt;
	if (head_len <= OMX_HEAD_LEN)
		return 0;
	uint8_t ptype = head[OMX_HEAD_LEN];
	size_t body = ptype == OMX_PT_MEDIUM ? OMX_BODY_MEDIUM_LEN : ptype == OMX_PT_PULL_REPLY ? OMX_BODY_PULL_REPLY_LEN : 0;
	/* The decoder reads only the headers (checked to be in head); it is given the frame's true
	 * length so that it validates the payload length against it. */
	if (!body || head_len < OMX_HEAD_LEN + body || omx_wire_decode(&ep->wp, head, frame_len, &pkt) != OMX_WIRE_OK)
		return 0;
	size_t hdr = (size_t)(pkt.payload - head);
	if (hdr > head_len || hdr > SPLIT_HDR_MAX)
		return 0;
	return ptype == OMX_PT_MEDIUM ? split_medium(ep, &pkt, hdr, frame_len, s) : split_pull_reply(ep, &pkt, hdr, frame_len, s);
}

void omx__handle_nack_mcp(struct omx_endpoint *ep, const struct omx_pkt *pkt)
{
	const struct omx_pkt_nack_mcp *n = &pkt->u.nack_mcp;
	omx__count(ep->board, OMX_C_RECV_NACK_MCP);
	struct omx_pull *pl = pull_lookup(ep, n->src_magic, n->src_pull_handle, OMX_C_DROP_NACK_MCP_BAD_MAGIC_ENDPOINT,
					  OMX_C_DROP_NACK_MCP_BAD_WIRE_HANDLE);
	if (!pl)
		return;
	omx_return_t st;
	switch (n->nack_type) {
	case OMX_NACK_BAD_ENDPT: st = OMX_REMOTE_ENDPOINT_BAD_ID; break;
	case OMX_NACK_ENDPT_CLOSED: st = OMX_REMOTE_ENDPOINT_CLOSED; break;
	case OMX_NACK_BAD_SESSION: st = OMX_REMOTE_ENDPOINT_BAD_SESSION; break;
	case OMX_NACK_BAD_RDMAWIN: st = OMX_REMOTE_RDMA_WINDOW_BAD_ID; break;
	default: return;
	}
	pull_finish(ep, pl, st);
}

void omx__pull_timers(struct omx_endpoint *ep, uint64_t now)
{
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &ep->pull_list) {
		struct omx_pull *pl = omx_container_of(pos, struct omx_pull, elt);
		if (now < pl->last_activity_ns + omx__cfg.pull_resend_ns)
			continue;
		if (now >= pl->deadline_ns) {
			omx__count(ep->board, OMX_C_PULL_TIMEOUT_ABORT);
			pull_finish(ep, pl, OMX_REMOTE_ENDPOINT_UNREACHABLE);
			continue;
		}
		pl->last_activity_ns = now;
		for (uint32_t b = pl->first_block; b < pl->next_block; b++) {
			if (block_complete(ep, pl, b))
				continue;
			omx__count(ep->board, b == pl->first_block ? OMX_C_PULL_TIMEOUT_FIRST : OMX_C_PULL_TIMEOUT_NONFIRST);
			omx__count(ep->board, OMX_C_X_RETRANSMIT_PULL);
			request_block(ep, pl, b);
		}
	}
}

uint64_t omx__pull_next_deadline(struct omx_endpoint *ep)
{
	uint64_t t = 0;
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &ep->pull_list) {
		struct omx_pull *pl = omx_container_of(pos, struct omx_pull, elt);
		uint64_t d = pl->last_activity_ns + omx__cfg.pull_resend_ns;
		if (!t || d < t)
			t = d;
	}
	return t;
}

void omx__pulls_abort_partner(struct omx_endpoint *ep, struct omx_partner *p, omx_return_t status)
{
	struct omx_list *pos, *tmp;
	omx_list_for_each_safe(pos, tmp, &ep->pull_list) {
		struct omx_pull *pl = omx_container_of(pos, struct omx_pull, elt);
		if (pl->partner == p)
			pull_finish(ep, pl, status);
	}
}
