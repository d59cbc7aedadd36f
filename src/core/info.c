/*
 * info.c - board and peer translation calls (omx-native-api.md 4.2), omx_get_info (4.8), and
 * the counter labels (behaviour.md 12).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/counters.h"

const char *const omx__counter_labels[OMX_COUNTER_COUNT] = {
	"Send Tiny", "Send Small", "Send MediumSQ Frag", "Send MediumVA Frag", "Send Rndv", "Send Notify",
	"Send Connect Request", "Send Connect Reply", "Send LibAck", "Send Nack Lib", "Send Nack MCP",
	"Send Pull Request", "Send Pull Reply", "Send Raw", "Send Host Query", "Send Host Reply", "Recv Tiny",
	"Recv Small", "Recv Medium Frag", "Recv Rndv", "Recv Notify", "Recv Connect Request", "Recv Connect Reply",
	"Recv LibAck", "Recv Nack Lib", "Recv Nack MCP", "Recv Pull Request", "Recv Pull Reply", "Recv Raw",
	"Recv Host Query", "Recv Host Reply", "DMA Recv Medium Frag", "DMA Recv Medium Frag Only Partial",
	"DMA Recv Pull Reply", "DMA Recv Pull Reply Only Partial", "DMA Recv Pull Reply with Deferred Wait",
	"Recv Open-MX Header as Non-Linear", "Expected Event Queue Full", "Unexpected Event Queue Full",
	"Send Skbuff Alloc Failed", "Send Medium Deferred Event Alloc Failed", "MediumSQ Frag Sent as Linear",
	"Pull Non-First Block Done before First One", "Pull Request for Not Only the First Block at Once",
	"Pull Timeout Handler Requests First Block", "Pull Timeout Handler Requests Non-First Block",
	"Pull Timeout Abort", "Pull Reply Sent as Linear", "Pull Reply Recv Fill Pages Failed",
	"Drop Bad Data Length for Headers", "Drop Bad Data Length", "Drop Bad Skbuff Length", "Drop Bad Peer Addr",
	"Drop Bad Peer Index", "Drop Bad Endpoint", "Drop Bad Session", "Drop Pull Bad Number of Replies",
	"Drop Pull Bad Region", "Drop Pull Bad Offset or Length", "Drop Pull Reply Bad Endpoint in Magic",
	"Drop Pull Reply Bad Wire Handle", "Drop Pull Reply Bad Frame SeqNum WrapAround",
	"Drop Pull Reply Bad Frame SeqNum", "Drop Pull Reply Duplicate", "Drop Nack MCP Bad Endpoint in Magic",
	"Drop Nack MCP Bad Wire Handle", "Drop Host Reply with Bad Magic", "Drop Raw Queue Full",
	"Drop Raw Packet Too Large", "Drop Not Implemented Packet Type", "Drop Invalid Packet Type",
	"Drop Unknown Packet Type", "Shared Tiny", "Shared Small", "Shared MediumSQ Frag", "Shared MediumVA",
	"Shared Rndv", "Shared Notify", "Shared Connect Request", "Shared Connect Reply", "Shared LibAck",
	"Shared Pull", "DMA Shared Medium Frag", "DMA Shared Large", "DMA Shared Large only Partial",
};

omx_return_t omx_board_number_to_nic_id(uint32_t board_number, uint64_t *nic_id)
{
	if (!omx__g.initialized)
		return omx__error_global(OMX_NOT_INITIALIZED, "Getting nic id of board %u", board_number);
	struct omx_board *b = omx__board(board_number);
	if (!b)
		return omx__error_global(OMX_BOARD_NOT_FOUND, "Getting nic id of board %u", board_number);
	*nic_id = b->nic_id;
	return OMX_SUCCESS;
}

omx_return_t omx_nic_id_to_board_number(uint64_t nic_id, uint32_t *board_number)
{
	if (!omx__g.initialized)
		return omx__error_global(OMX_NOT_INITIALIZED, "Getting board of nic id %012llx", (unsigned long long)nic_id);
	for (uint32_t i = 0; i < omx__g.board_count; i++) {
		if (omx__g.boards[i].attached && omx__g.boards[i].nic_id == nic_id) {
			*board_number = i;
			return OMX_SUCCESS;
		}
	}
	return omx__error_global(OMX_BOARD_NOT_FOUND, "Getting board of nic id %012llx", (unsigned long long)nic_id);
}

/* Dynamic discovery: a name may still be on its way. Progress our open endpoints (the frames
 * that bring it arrive there) for up to OMX_DISCOVERY_WAIT_MS (default 3000), while the table is
 * incomplete or the name unknown. omx__g.lock held on entry and exit (dropped while waiting). */
static int discovery_wait(const char *hostname)
{
	const char *w = omx__getenv("OMX_DISCOVERY_WAIT_MS", NULL);
	uint64_t wait_ms = w ? strtoull(w, NULL, 10) : 3000;
	uint64_t end = omx_now_ns() + wait_ms * 1000000ull;
	int idx = -1;
	while (idx < 0 && omx_now_ns() < end) {
		struct omx_endpoint *eps[16];
		int n = 0;
		struct omx_list *pos, *tmp;
		omx_list_for_each_safe(pos, tmp, &omx__g.endpoints) {
			if (n < 16)
				eps[n++] = omx_container_of(pos, struct omx_endpoint, list_elt);
		}
		pthread_mutex_unlock(&omx__g.lock);
		for (int i = 0; i < n; i++) {
			omx__eplock(&eps[i]->lock);
			if (omx__ep_live(eps[i]))
				omx__progress(eps[i]);
			omx__epunlock(&eps[i]->lock);
		}
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&omx__g.lock);
		omx__discovery_sync();
		idx = omx__peer_by_hostname(hostname);
	}
	return idx;
}

omx_return_t omx_hostname_to_nic_id(char *hostname, uint64_t *board_addr)
{
	if (!omx__g.initialized)
		return omx__error_global(OMX_NOT_INITIALIZED, "Looking up hostname");
	if (!hostname || !board_addr)
		return omx__error_global(OMX_PEER_NOT_FOUND, "Looking up a NULL hostname");
	pthread_mutex_lock(&omx__g.lock);
	int idx = omx__peer_by_hostname(hostname);
	if (idx < 0 && omx__discovery_enabled())
		idx = discovery_wait(hostname);
	if (idx >= 0)
		*board_addr = omx__g.peers[idx].nic_id;
	pthread_mutex_unlock(&omx__g.lock);
	if (idx < 0)
		return omx__error_global(OMX_PEER_NOT_FOUND, "Looking up hostname '%.80s'", hostname);
	return OMX_SUCCESS;
}

omx_return_t omx_nic_id_to_hostname(uint64_t board_addr, char *hostname)
{
	if (!omx__g.initialized)
		return omx__error_global(OMX_NOT_INITIALIZED, "Looking up nic id");
	pthread_mutex_lock(&omx__g.lock);
	int idx = omx__peer_by_nic_id(board_addr);
	if (idx >= 0)
		omx__strcpy(hostname, OMX_HOSTNAME_MAX, omx__g.peers[idx].hostname);
	pthread_mutex_unlock(&omx__g.lock);
	if (idx < 0)
		return omx__error_global(OMX_PEER_NOT_FOUND, "Looking up nic id %012llx", (unsigned long long)board_addr);
	return OMX_SUCCESS;
}

/* Board-indexed keys: the endpoint's board, else the byte at in_val. */
static omx_return_t info_board(omx_endpoint_t ep, const void *in_val, uint32_t in_len, struct omx_board **out)
{
	if (ep) {
		*out = ep->board;
		return OMX_SUCCESS;
	}
	if (!in_val)
		return OMX_BAD_INFO_ADDRESS;
	if (in_len == 0)
		return OMX_BAD_INFO_LENGTH;
	*out = omx__board(*(const uint8_t *)in_val);
	return *out ? OMX_SUCCESS : OMX_BOARD_NOT_FOUND;
}

static omx_return_t put_u32(void *out, uint32_t out_len, uint32_t v)
{
	if (out_len < 4)
		return OMX_BAD_INFO_LENGTH;
	memcpy(out, &v, 4);
	return OMX_SUCCESS;
}

static omx_return_t put_str(void *out, uint32_t out_len, const char *s)
{
	if (out_len == 0)
		return OMX_BAD_INFO_LENGTH;
	omx__strcpy(out, out_len, s); /* always NUL-terminated (recommended deviation) */
	return OMX_SUCCESS;
}

static omx_return_t get_info(omx_endpoint_t ep, omx_info_key_t key, const void *in_val, uint32_t in_len,
			     void *out_val, uint32_t out_len)
{
	struct omx_board *b;
	omx_return_t r;
	if (key != OMX_INFO_BOARD_COUNT && key != OMX_INFO_COUNTER_MAX && key != OMX_INFO_COUNTER_LABEL &&
	    !omx__g.initialized)
		return OMX_NOT_INITIALIZED;
	switch (key) {
	case OMX_INFO_BOARD_MAX:
		return put_u32(out_val, out_len, OMX_BOARD_MAX);
	case OMX_INFO_ENDPOINT_MAX:
		return put_u32(out_val, out_len, omx__cfg.loaded ? omx__cfg.endpoint_max : OMX_ENDPOINT_MAX_DEFAULT);
	case OMX_INFO_BOARD_COUNT:
		if (!omx__g.initialized)
			return OMX_NOT_INITIALIZED;
		return put_u32(out_val, out_len, omx__g.board_count);
	case OMX_INFO_BOARD_IDS: {
		uint32_t n = omx__g.board_count;
		if (out_len < 8 * (n + 1))
			return OMX_BAD_INFO_LENGTH;
		uint64_t *ids = out_val;
		for (uint32_t i = 0; i < n; i++)
			ids[i] = omx__g.boards[i].nic_id;
		ids[n] = 0;
		return OMX_SUCCESS;
	}
	case OMX_INFO_BOARD_HOSTNAME:
	case OMX_INFO_BOARD_IFACENAME:
		if ((r = info_board(ep, in_val, in_len, &b)) != OMX_SUCCESS)
			return r;
		return put_str(out_val, out_len, key == OMX_INFO_BOARD_HOSTNAME ? b->hostname : b->iface.name);
	case OMX_INFO_BOARD_NUMA_NODE:
		if ((r = info_board(ep, in_val, in_len, &b)) != OMX_SUCCESS)
			return r;
		return put_u32(out_val, out_len, b->iface.numa_node < 0 ? 0xFFFFFFFFu : (uint32_t)b->iface.numa_node);
	case OMX_INFO_COUNTER_MAX:
		return put_u32(out_val, out_len, OMX_COUNTER_COUNT);
	case OMX_INFO_COUNTER_VALUES:
		if ((r = info_board(ep, in_val, in_len, &b)) != OMX_SUCCESS)
			return r;
		if (out_len < 4 * OMX_COUNTER_COUNT)
			return OMX_BAD_INFO_LENGTH;
		{
			const uint64_t *v = omx__counters_values(b);
			for (int i = 0; i < OMX_COUNTER_COUNT; i++)
				((uint32_t *)out_val)[i] = (uint32_t)__atomic_load_n(&v[i], __ATOMIC_RELAXED);
		}
		return OMX_SUCCESS;
	case OMX_INFO_COUNTER_LABEL: {
		if (!in_val)
			return OMX_BAD_INFO_ADDRESS;
		uint8_t i = *(const uint8_t *)in_val;
		if (i >= OMX_COUNTER_COUNT)
			return OMX_BAD_INFO_KEY;
		if (out_len < strlen(omx__counter_labels[i]) + 1)
			return OMX_BAD_INFO_LENGTH;
		return put_str(out_val, out_len, omx__counter_labels[i]);
	}
	default:
		return OMX_BAD_INFO_KEY;
	}
}

omx_return_t omx_get_info(omx_endpoint_t ep, omx_info_key_t key, const void *in_val, uint32_t in_len, void *out_val,
			  uint32_t out_len)
{
	if (!out_val) {
		if (ep)
			return omx__error(ep, OMX_BAD_INFO_ADDRESS, "Getting info with a NULL output");
		return omx__error_global(OMX_BAD_INFO_ADDRESS, "Getting info with a NULL output");
	}
	omx_return_t r = get_info(ep, key, in_val, in_len, out_val, out_len);
	if (r == OMX_NOT_INITIALIZED && key == OMX_INFO_BOARD_COUNT)
		return r; /* reference: no handler for this one */
	if (r != OMX_SUCCESS)
		return omx__error_global(r, "Getting info (key %d)", (int)key);
	return OMX_SUCCESS;
}
