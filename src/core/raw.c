/*
 * raw.c - raw endpoints (one per board, for mappers and discovery daemons) and the peer-table
 * helpers they need (omx_raw.h, mx-api.md 14). A raw endpoint sends complete frames given by
 * the caller and receives the RAW (type 1) frames arriving on its board.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/core.h"
#include "core/omx_raw.h"
#include "core/testhooks.h"

#define RAW_SEND_EVENTS 64

struct omx_raw_endpoint {
	uint32_t board_index;
	struct omx_net *net;
	int lock_fd;
	pthread_mutex_t lock;
	const void *send_events[RAW_SEND_EVENTS];
	unsigned send_head, send_count;
	/* receive copy-out */
	uint8_t *dst;
	uint32_t cap, got_len;
	int got;
};

static struct {
	int configured;
	uint32_t version, size;
	uint64_t mapper_id;
} table_state = { 0, 0, 0, 0xFFFFFFFFFFFFull };

omx_return_t omx_raw_open_endpoint(uint32_t board_number, const omx_endpoint_param_t *params_array,
				   uint32_t params_count, omx_raw_endpoint_t *endpoint)
{
	(void)params_array;
	(void)params_count;
	if (!omx__g.initialized)
		return OMX_NOT_INITIALIZED;
	struct omx_board *b = omx__board(board_number);
	if (!b)
		return OMX_BOARD_NOT_FOUND;
	char path[96];
	const uint8_t *m = b->iface.mac;
	snprintf(path, sizeof(path), "%s/omx-%02x%02x%02x%02x%02x%02x-raw.lock", omx__lock_dir(), m[0], m[1], m[2], m[3],
		 m[4], m[5]);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return OMX_ACCESS_DENIED;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return OMX_BUSY;
	}
	struct omx_raw_endpoint *r = calloc(1, sizeof(*r));
	if (!r) {
		close(fd);
		return OMX_NO_SYSTEM_RESOURCES;
	}
	int err = 0;
	struct omx_memnet *hub = omx__test_memnet();
	if (hub) {
		r->net = omx_net_mem_open(hub, b->iface.mac, b->iface.mtu, 255);
	} else {
		struct omx_net_opts o = { 0 };
		o.all_endpoints = 1;
		omx__broker_opts(&o);
		r->net = omx_net_packet_open(b->iface.name, 255, &o, &err);
	}
	if (!r->net) {
		close(fd);
		free(r);
		return err == -EPERM || err == -EACCES ? OMX_ACCESS_DENIED : OMX_NO_SYSTEM_RESOURCES;
	}
	r->board_index = board_number;
	r->lock_fd = fd;
	pthread_mutex_init(&r->lock, NULL);
	*endpoint = r;
	return OMX_SUCCESS;
}

omx_return_t omx_raw_close_endpoint(omx_raw_endpoint_t r)
{
	if (!r)
		return OMX_SUCCESS;
	r->net->ops->close(r->net);
	close(r->lock_fd);
	pthread_mutex_destroy(&r->lock);
	free(r);
	return OMX_SUCCESS;
}

omx_return_t omx__raw_send(omx_raw_endpoint_t r, const void *buf, uint32_t len, int need_event, const void *ctx)
{
	struct omx_board *b = omx__board(r->board_index);
	if (!b || len < OMX_ETH_HLEN || len > b->iface.mtu + OMX_ETH_HLEN)
		return OMX_BAD_REQUEST;
	uint8_t pad[OMX_FRAME_MIN] = { 0 };
	struct iovec iov[2] = { { (void *)(uintptr_t)buf, len }, { pad, 0 } };
	if (len < OMX_FRAME_MIN)
		iov[1].iov_len = OMX_FRAME_MIN - len;
	pthread_mutex_lock(&r->lock);
	int e = r->net->ops->send(r->net, iov, 2);
	if (e == 0) {
		omx__count(b, OMX_C_SEND_RAW);
		if (need_event && r->send_count < RAW_SEND_EVENTS) {
			r->send_events[(r->send_head + r->send_count) % RAW_SEND_EVENTS] = ctx;
			r->send_count++;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return e == 0 ? OMX_SUCCESS : OMX_NO_SYSTEM_RESOURCES;
}

static void raw_rx(void *arg, const uint8_t *frame, size_t len)
{
	struct omx_raw_endpoint *r = arg;
	struct omx_board *b = omx__board(r->board_index);
	if (r->got || len <= 16 || frame[16] != OMX_PT_RAW)
		return;
	if (len > OMX_RAW_FRAME_MAX) {
		if (b)
			omx__count(b, 68); /* Drop Raw Packet Too Large */
		return;
	}
	if (b)
		omx__count(b, OMX_C_RECV_RAW);
	uint32_t n = len < r->cap ? (uint32_t)len : r->cap;
	memcpy(r->dst, frame, n);
	r->got_len = (uint32_t)len;
	r->got = 1;
}

omx_return_t omx__raw_next_event(omx_raw_endpoint_t r, uint32_t *incoming_port, void **context, void *recv_buffer,
				 uint32_t *recv_bytes, uint32_t timeout_ms, omx_raw_status_t *status, int maybe_send)
{
	uint64_t end = timeout_ms == OMX_TIMEOUT_INFINITE ? UINT64_MAX : omx_now_ns() + omx__ms_to_ns(timeout_ms);
	*status = OMX_RAW_NO_EVENT;
	for (;;) {
		pthread_mutex_lock(&r->lock);
		if (maybe_send && r->send_count) {
			if (context)
				*context = (void *)(uintptr_t)r->send_events[r->send_head];
			r->send_head = (r->send_head + 1) % RAW_SEND_EVENTS;
			r->send_count--;
			*status = OMX_RAW_SEND_COMPLETE;
			pthread_mutex_unlock(&r->lock);
			return OMX_SUCCESS;
		}
		r->dst = recv_buffer;
		r->cap = recv_bytes ? *recv_bytes : 0;
		r->got = 0;
		while (!r->got && r->net->ops->recv_burst(r->net, raw_rx, r, 1) > 0)
			;
		int got = r->got;
		pthread_mutex_unlock(&r->lock);
		if (got) {
			if (recv_bytes)
				*recv_bytes = r->got_len;
			if (incoming_port)
				*incoming_port = 0;
			*status = OMX_RAW_RECV_COMPLETE;
			return OMX_SUCCESS;
		}
		uint64_t now = omx_now_ns();
		if (now >= end)
			return OMX_SUCCESS;
		struct pollfd pfd = { r->net->fd, POLLIN, 0 };
		uint64_t left = end - now;
		poll(&pfd, 1, left > 100000000ull ? 100 : (int)(left / 1000000ull) + 1);
	}
}

int omx__raw_handle(omx_raw_endpoint_t r)
{
	return r && r->net ? r->net->fd : -1;
}

uint32_t omx__raw_board_index(omx_raw_endpoint_t r)
{
	return r->board_index;
}

omx_return_t omx__peer_add_or_rename(uint64_t nic_id, const char *hostname)
{
	if (!omx__g.initialized)
		return OMX_NOT_INITIALIZED;
	pthread_mutex_lock(&omx__g.lock);
	int idx = omx__peer_by_nic_id(nic_id);
	if (idx >= 0 && !hostname) {
		pthread_mutex_unlock(&omx__g.lock);
		return OMX_SUCCESS; /* known, name kept */
	}
	idx = omx__peer_add(nic_id, hostname);
	pthread_mutex_unlock(&omx__g.lock);
	return idx < 0 ? OMX_NO_RESOURCES : OMX_SUCCESS;
}

omx_return_t omx__peer_table_set_state(int configured, uint32_t version, uint32_t size, uint64_t mapper_id)
{
	if (!omx__g.initialized)
		return OMX_NOT_INITIALIZED;
	pthread_mutex_lock(&omx__g.lock);
	table_state.configured = configured;
	table_state.version = version;
	table_state.size = size;
	table_state.mapper_id = mapper_id;
	omx__g.peers_configured = configured;
	pthread_mutex_unlock(&omx__g.lock);
	return OMX_SUCCESS;
}

omx_return_t omx__peer_table_get_state(int *configured, uint32_t *version, uint32_t *size, uint64_t *mapper_id)
{
	if (!omx__g.initialized)
		return OMX_NOT_INITIALIZED;
	pthread_mutex_lock(&omx__g.lock);
	if (configured)
		*configured = table_state.configured || omx__g.peers_configured;
	if (version)
		*version = table_state.version;
	if (size)
		*size = table_state.size ? table_state.size : omx__g.peer_count;
	if (mapper_id)
		*mapper_id = table_state.mapper_id;
	pthread_mutex_unlock(&omx__g.lock);
	return OMX_SUCCESS;
}

omx_return_t omx__board_set_hostname(uint32_t board_index, const char *hostname)
{
	struct omx_board *b = omx__board(board_index);
	if (!b)
		return OMX_BOARD_NOT_FOUND;
	pthread_mutex_lock(&omx__g.lock);
	omx__strcpy(b->hostname, sizeof(b->hostname), hostname);
	int idx = omx__peer_by_nic_id(b->nic_id);
	if (idx >= 0)
		omx__strcpy(omx__g.peers[idx].hostname, sizeof(omx__g.peers[idx].hostname), hostname);
	pthread_mutex_unlock(&omx__g.lock);
	return OMX_SUCCESS;
}
