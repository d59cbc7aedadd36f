/*
 * mx_msg.c - MX messaging and completion calls (mx-api.md 9, 13) on top of the native
 * vector calls (omx-native-api.md 4.4, 4.5, 7.2).
 *
 * Conventions of the mapping:
 *  - segments are passed by cast (mx_segment_t and omx_seg_t have the same layout);
 *  - request handles are copied in and out (never aliased through a cast pointer);
 *  - MX timeouts are converted (MX_INFINITE = 0 -> OMX_TIMEOUT_INFINITE) and move to the
 *    last native argument;
 *  - statuses are written only when the native call succeeded with *result != 0, with the
 *    code translated to MX status numbering; otherwise the caller's status is untouched;
 *  - mx_set_request_timeout passes milliseconds unchanged (0 = give up at once).
 */
#include <time.h>

#include "mx/mx_internal.h"

_Static_assert(sizeof(mx_segment_t) == sizeof(omx_seg_t), "segment layouts differ");
_Static_assert(sizeof(mx_status_t) == sizeof(omx_status_t), "status layouts differ");

static omx_seg_t *segs(mx_segment_t *list)
{
	return (omx_seg_t *)(void *)list;
}

static omx_request_t req_in(const mx_request_t *request)
{
	return request ? (omx_request_t)(void *)*request : NULL;
}

static void req_out(mx_request_t *request, omx_request_t r)
{
	if (request)
		*request = (mx_request_t)(void *)r;
}

/* ---- posting (mx-api.md 9.1) ---- */

mx_return_t mx_isend(mx_endpoint_t endpoint, mx_segment_t *segments_list, uint32_t segments_count,
		     mx_endpoint_addr_t dest_endpoint, uint64_t match_info, void *context,
		     mx_request_t *request)
{
	omx_request_t r = NULL;
	enum mx__call_kind prev = mx__call_enter(MX__CALL_POST);
	omx_return_t ret = omx_isendv(mx__ep(endpoint), segs(segments_list), segments_count,
				      mx__addr(dest_endpoint), match_info, context, request ? &r : NULL);

	mx__call_leave(prev);
	if (ret == OMX_SUCCESS)
		req_out(request, r);
	return mx__ret_to_mx(ret);
}

mx_return_t mx_issend(mx_endpoint_t endpoint, mx_segment_t *segments_list, uint32_t segments_count,
		      mx_endpoint_addr_t dest_endpoint, uint64_t match_info, void *context,
		      mx_request_t *request)
{
	omx_request_t r = NULL;
	enum mx__call_kind prev = mx__call_enter(MX__CALL_POST);
	omx_return_t ret = omx_issendv(mx__ep(endpoint), segs(segments_list), segments_count,
				       mx__addr(dest_endpoint), match_info, context, request ? &r : NULL);

	mx__call_leave(prev);
	if (ret == OMX_SUCCESS)
		req_out(request, r);
	return mx__ret_to_mx(ret);
}

mx_return_t mx_irecv(mx_endpoint_t endpoint, mx_segment_t *segments_list, uint32_t segments_count,
		     uint64_t match_info, uint64_t match_mask, void *context,
		     mx_request_t *request)
{
	omx_request_t r = NULL;
	enum mx__call_kind prev = mx__call_enter(MX__CALL_POST);
	omx_return_t ret = omx_irecvv(mx__ep(endpoint), segs(segments_list), segments_count,
				      match_info, match_mask, context, request ? &r : NULL);

	mx__call_leave(prev);
	if (ret == OMX_SUCCESS)
		req_out(request, r);
	return mx__ret_to_mx(ret);
}

/* ---- completion (mx-api.md 9.8) ---- */

static mx_return_t finish(omx_return_t ret, const omx_status_t *st, mx_status_t *status,
			  uint32_t result)
{
	if (ret == OMX_SUCCESS && result && status)
		mx__status_copy(status, st);
	return mx__ret_to_mx(ret);
}

mx_return_t mx_test(mx_endpoint_t ep, mx_request_t *request, mx_status_t *status, uint32_t *result)
{
	omx_status_t st;
	omx_request_t r = req_in(request);
	omx_return_t ret = omx_test(mx__ep(ep), request ? &r : NULL, &st, result);

	req_out(request, r);
	return finish(ret, &st, status, *result);
}

mx_return_t mx_wait(mx_endpoint_t endpoint, mx_request_t *request, uint32_t timeout,
		    mx_status_t *status, uint32_t *result)
{
	omx_status_t st;
	omx_request_t r = req_in(request);
	omx_return_t ret = omx_wait(mx__ep(endpoint), request ? &r : NULL, &st, result,
				    mx__timeout(timeout));

	req_out(request, r);
	return finish(ret, &st, status, *result);
}

mx_return_t mx_test_any(mx_endpoint_t endpoint, uint64_t match_info, uint64_t match_mask,
			mx_status_t *status, uint32_t *result)
{
	omx_status_t st;
	omx_return_t ret = omx_test_any(mx__ep(endpoint), match_info, match_mask, &st, result);
	return finish(ret, &st, status, *result);
}

mx_return_t mx_wait_any(mx_endpoint_t endpoint, uint32_t timeout, uint64_t match_info,
			uint64_t match_mask, mx_status_t *status, uint32_t *result)
{
	omx_status_t st;
	omx_return_t ret = omx_wait_any(mx__ep(endpoint), match_info, match_mask, &st, result,
					mx__timeout(timeout));
	return finish(ret, &st, status, *result);
}

mx_return_t mx_ipeek(mx_endpoint_t endpoint, mx_request_t *request, uint32_t *result)
{
	omx_request_t r = NULL;
	omx_return_t ret = omx_ipeek(mx__ep(endpoint), &r, result);

	if (ret == OMX_SUCCESS && *result)
		req_out(request, r);
	return mx__ret_to_mx(ret);
}

mx_return_t mx_peek(mx_endpoint_t endpoint, uint32_t timeout, mx_request_t *request,
		    uint32_t *result)
{
	omx_request_t r = NULL;
	omx_return_t ret = omx_peek(mx__ep(endpoint), &r, result, mx__timeout(timeout));

	if (ret == OMX_SUCCESS && *result)
		req_out(request, r);
	return mx__ret_to_mx(ret);
}

/* Probe results: MX defines xfer_length = msg_length, and the context as NULL
 * (mx-api.md 9.8 [AMBIGUOUS], 18 #10). */
static mx_return_t finish_probe(omx_return_t ret, omx_status_t *st, mx_status_t *status,
				uint32_t result)
{
	st->xfer_length = st->msg_length;
	st->context = NULL;
	return finish(ret, st, status, result);
}

mx_return_t mx_iprobe(mx_endpoint_t endpoint, uint64_t match_info, uint64_t match_mask,
		      mx_status_t *status, uint32_t *result)
{
	omx_status_t st;
	omx_return_t ret = omx_iprobe(mx__ep(endpoint), match_info, match_mask, &st, result);

	if (ret != OMX_SUCCESS || !*result)
		return mx__ret_to_mx(ret);
	return finish_probe(ret, &st, status, *result);
}

mx_return_t mx_probe(mx_endpoint_t endpoint, uint32_t timeout, uint64_t match_info,
		     uint64_t match_mask, mx_status_t *status, uint32_t *result)
{
	omx_status_t st;
	omx_return_t ret = omx_probe(mx__ep(endpoint), match_info, match_mask, &st, result,
				     mx__timeout(timeout));

	if (ret != OMX_SUCCESS || !*result)
		return mx__ret_to_mx(ret);
	return finish_probe(ret, &st, status, *result);
}

mx_return_t mx_ibuffered(mx_endpoint_t endpoint, mx_request_t *request, uint32_t *result)
{
	omx_request_t r = req_in(request);
	return mx__ret_to_mx(omx_ibuffered(mx__ep(endpoint), request ? &r : NULL, result));
}

mx_return_t mx_context(mx_request_t *request, void **context)
{
	omx_request_t r = req_in(request);
	return mx__ret_to_mx(omx_context(request ? &r : NULL, context));
}

/* ---- request management (mx-api.md 9.9-9.11) ---- */

mx_return_t mx_forget(mx_endpoint_t endpoint, mx_request_t *request)
{
	omx_request_t r = req_in(request);
	omx_return_t ret = omx_forget(mx__ep(endpoint), request ? &r : NULL);

	req_out(request, r);
	return mx__ret_to_mx(ret);
}

/* Cancelling a send gives MX_BAD_REQUEST, never MX_CANCEL_NOT_SUPPORTED (mx-api.md 9.10). */
mx_return_t mx_cancel(mx_endpoint_t endpoint, mx_request_t *request, uint32_t *result)
{
	omx_request_t r = req_in(request);
	omx_return_t ret = omx_cancel(mx__ep(endpoint), request ? &r : NULL, result);

	req_out(request, r);
	return mx__ret_to_mx(ret);
}

mx_return_t mx_set_request_timeout(mx_endpoint_t endpoint, mx_request_t request,
				   uint32_t milli_seconds)
{
	return mx__ret_to_mx(omx_set_request_timeout(mx__ep(endpoint), (omx_request_t)(void *)request,
						     milli_seconds));
}

/* ---- mx_buffered: blocking mx_ibuffered (mx-api.md 13, recommended implementation) ---- */

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/*
 * Loops over mx_ibuffered (each call progresses the endpoint) until the send buffer is
 * reusable or the timeout (ms, MX_INFINITE = for ever) expires. Like the other blocking
 * calls, expiry returns MX_SUCCESS with *result = 0. Errors of mx_ibuffered (e.g.
 * MX_BAD_REQUEST for a receive) are returned at once.
 */
mx_return_t mx_buffered(mx_endpoint_t endpoint, mx_request_t *request, uint32_t timeout,
			uint32_t *result)
{
	const struct timespec pause = { 0, 50 * 1000 };
	uint64_t deadline = now_ms() + timeout;
	mx_return_t ret;

	for (unsigned spins = 0;; spins++) {
		ret = mx_ibuffered(endpoint, request, result);
		if (ret != MX_SUCCESS || *result)
			return ret;
		if (timeout != MX_INFINITE && now_ms() >= deadline)
			return MX_SUCCESS;
		if (spins >= 1000)
			nanosleep(&pause, NULL);
	}
}
