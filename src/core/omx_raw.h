/*
 * omx_raw.h - private raw (mapper) interface and peer-table helpers of the core.
 * Not installed. Declarations only: the core implements them (src/core/), the MX layer's
 * mx_raw_* functions (src/mx/mx_raw.c) and the tools call them.
 *
 * Based on omx-native-api.md section 6 (informative there; names kept for the raw endpoint
 * calls) and mx-api.md section 14 (what each mx_raw_* call must achieve). None of these
 * functions calls an error handler: they return the code directly.
 */
#ifndef OMX_RAW_H
#define OMX_RAW_H

#include <stdint.h>

#include "open-mx.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A raw endpoint: one per board and process-wide at most one opener per board (the MX
 * "raw" interface used by mappers/discovery daemons). Opaque here: the core defines
 * struct omx_raw_endpoint (the reference's was { int board_index; int fd; }; ours may hold
 * more, e.g. the packet socket and a queue of send-complete events). mx_raw.h names the
 * same tag, so mx_raw_endpoint_t and omx_raw_endpoint_t are the same pointer type.
 */
struct omx_raw_endpoint;
typedef struct omx_raw_endpoint * omx_raw_endpoint_t;

/* Raw event kinds; equal to MX_RAW_NO_EVENT / MX_RAW_SEND_COMPLETE / MX_RAW_RECV_COMPLETE. */
typedef int omx_raw_status_t;
#define OMX_RAW_NO_EVENT 0
#define OMX_RAW_SEND_COMPLETE 1
#define OMX_RAW_RECV_COMPLETE 2

/*
 * Attach board board_number's single raw endpoint. Parameters are ignored (may be NULL).
 * Absent board -> OMX_BOARD_NOT_FOUND; already opened (by anyone) -> OMX_BUSY; system errors
 * mapped like omx_open_endpoint's (OMX_ACCESS_DENIED, OMX_NO_SYSTEM_RESOURCES, ...).
 * Requires omx_init (OMX_NOT_INITIALIZED otherwise).
 */
omx_return_t omx_raw_open_endpoint(uint32_t board_number, const omx_endpoint_param_t *params_array,
				   uint32_t params_count, omx_raw_endpoint_t *endpoint);

/* Release the raw endpoint; always OMX_SUCCESS. */
omx_return_t omx_raw_close_endpoint(omx_raw_endpoint_t endpoint);

/*
 * Send one complete Ethernet frame (destination MAC, source MAC, EtherType, payload) as
 * given. With need_event, a later omx__raw_next_event reports OMX_RAW_SEND_COMPLETE carrying
 * event_context. Frames longer than the board MTU allows -> OMX_BAD_REQUEST (or similar).
 */
omx_return_t omx__raw_send(omx_raw_endpoint_t endpoint, const void *send_buffer,
			   uint32_t buffer_length, int need_event, const void *event_context);

/*
 * Wait up to timeout_ms (0 = check once; OMX_TIMEOUT_INFINITE = for ever) for one raw event.
 * Receive: copies the whole frame into recv_buffer (in: *recv_bytes = buffer size, out:
 * frame length, truncated copy if the buffer is short), *incoming_port = 0,
 * *status = OMX_RAW_RECV_COMPLETE. Send completion (only reported when maybe_send != 0):
 * *context = event_context of the send, *status = OMX_RAW_SEND_COMPLETE. Nothing:
 * *status = OMX_RAW_NO_EVENT. incoming_port and context may be NULL.
 */
omx_return_t omx__raw_next_event(omx_raw_endpoint_t endpoint, uint32_t *incoming_port, void **context,
				 void *recv_buffer, uint32_t *recv_bytes, uint32_t timeout_ms,
				 omx_raw_status_t *status, int maybe_send);

static inline omx_return_t omx_raw_send(omx_raw_endpoint_t endpoint, const void *send_buffer,
					uint32_t buffer_length)
{
	return omx__raw_send(endpoint, send_buffer, buffer_length, 0, NULL);
}

static inline omx_return_t omx_raw_next_event(omx_raw_endpoint_t endpoint, void *recv_buffer,
					      uint32_t *recv_bytes, uint32_t timeout_ms,
					      omx_raw_status_t *status)
{
	return omx__raw_next_event(endpoint, NULL, NULL, recv_buffer, recv_bytes, timeout_ms, status, 0);
}

/* A file descriptor an application may poll() for raw events (mx_raw_handle); -1 if none. */
int omx__raw_handle(omx_raw_endpoint_t endpoint);

/* Board index the raw endpoint is attached to. */
uint32_t omx__raw_board_index(omx_raw_endpoint_t endpoint);

/*
 * Peer table (process-wide) helpers for mappers.
 *
 * omx__peer_add_or_rename: add nic_id to the peer table if absent. hostname == NULL adds it
 * by address only (mx_raw_set_route*) and leaves an existing name alone; a non-NULL hostname
 * sets/replaces the peer's name (mx_raw_set_peer_name). Returns OMX_SUCCESS, or
 * OMX_NO_RESOURCES when the table is full, OMX_NOT_INITIALIZED before omx_init.
 */
omx_return_t omx__peer_add_or_rename(uint64_t nic_id, const char *hostname);

/*
 * Peer-table state as written by a mapper (mx_raw_set_map_version, omx_init_peers -d):
 * configured flag, map version, number of nodes, mapper id (48-bit MAC, first byte in bits
 * 47..40). Both return OMX_NOT_INITIALIZED before omx_init, else OMX_SUCCESS. Any output
 * pointer of the getter may be NULL.
 */
omx_return_t omx__peer_table_set_state(int configured, uint32_t version, uint32_t size,
				       uint64_t mapper_id);
omx_return_t omx__peer_table_get_state(int *configured, uint32_t *version, uint32_t *size,
				       uint64_t *mapper_id);

/*
 * Set the hostname of local board board_index (as announced to peers and returned by
 * OMX_INFO_BOARD_HOSTNAME); at most OMX_HOSTNAMELEN_MAX - 1 characters are kept.
 * Unknown board -> OMX_BOARD_NOT_FOUND.
 */
omx_return_t omx__board_set_hostname(uint32_t board_index, const char *hostname);

#ifdef __cplusplus
}
#endif

#endif /* OMX_RAW_H */
