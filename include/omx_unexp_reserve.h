/*
 * omx_unexp_reserve.h - reserved unexpected messages: an omx extension, not part of Open-MX's
 * interface.
 *
 * A library that matches messages itself (the libfabric provider: its own tags, sources and
 * ordering) sees every incoming message in an unexpected handler (omx_register_unexp_handler).
 * When no receive of its own wants a large message yet, it can leave the message where it is
 * instead of receiving it into a buffer of its own and copying it again later:
 *
 * - omx_unexp_reserve, called from inside the handler for the message being shown, keeps that
 *   message in omx's unexpected queue under `key`, out of every omx match: omx_irecv,
 *   omx_iprobe, omx_probe and the handler's later calls never see it. The handler then returns
 *   OMX_UNEXP_HANDLER_RECV_CONTINUE (a reservation is ignored if it returns RECV_FINISHED) and
 *   must not also post a receive for the message. Only a large message (announced by a
 *   rendezvous, its data still at the sender) can be reserved: for any other message, and
 *   outside a handler, the call returns OMX_NOT_IMPLEMENTED and changes nothing (no error
 *   handler call: the caller receives the message the usual way).
 * - omx_irecv_reserved receives the message reserved under `key` into segs, as omx_irecvv would
 *   have (truncation, status, completion); the data is pulled from the sender then, straight into
 *   segs. OMX_BAD_ERROR if no message is reserved under `key` (each is taken once). Called on
 *   another thread while the handler that reserved the message has not returned yet (the
 *   message is queued only then), it waits for that handler. If the
 *   sender went away meanwhile (its endpoint closed, unreachable, a new session), the message is
 *   still there and its receive completes at once with that error, as a receive under way would.
 * - Keys are the caller's: any 64-bit value, unique among its live reservations (a pointer to
 *   its own record of the message, say). Reserved messages are freed with the endpoint.
 */
#ifndef OMX_UNEXP_RESERVE_H
#define OMX_UNEXP_RESERVE_H

#include <stdint.h>

#include "open-mx.h"

#ifdef __cplusplus
extern "C" {
#endif

omx_return_t omx_unexp_reserve(omx_endpoint_t ep, uint64_t key);
omx_return_t omx_irecv_reserved(omx_endpoint_t ep, uint64_t key, omx_seg_t *segs, uint32_t nseg, void *context,
				omx_request_t *request);

#ifdef __cplusplus
}
#endif

#endif
