/*
 * mx_endpoint.c - MX initialisation, endpoints, connections, addresses and peer lookups
 * (mx-api.md 5, 6, 8, 10.1, 10.3) as thin wrappers of the native calls
 * (omx-native-api.md 7.2). Return codes are translated with mx__ret_to_mx.
 */
#include <stdlib.h>

#include "mx/mx_internal.h"

/* ---- initialisation (mx-api.md 5.1, 5.2) ---- */

/*
 * mx_init() expands to mx__init_api(MX_API). A repeated call is an idempotent success that
 * changes no state ([QUIRK] fixed as recommended; the native layer implements it, and it
 * never reports MX_ALREADY_INITIALIZED).
 */
mx_return_t mx__init_api(int api)
{
	return mx__ret_to_mx(omx__init_api(api));
}

mx_return_t mx_finalize(void)
{
	return mx__ret_to_mx(omx_finalize());
}

/* ---- endpoints (mx-api.md 6) ---- */

/* Copy of the parameter array with MX error handlers replaced by their native bridges
 * (see mx_errors.c). Same layout and key values as omx_endpoint_param_t. */
static omx_endpoint_param_t *convert_params(const mx_param_t *params, uint32_t count,
					     omx_endpoint_param_t *small, uint32_t small_count)
{
	omx_endpoint_param_t *out = small;

	if (count > small_count) {
		out = calloc(count, sizeof(*out));
		if (!out)
			return NULL;
	}
	memcpy(out, params, (size_t)count * sizeof(*out));
	/* A NULL handler keeps its native meaning: fall back to the global handler. */
	for (uint32_t i = 0; i < count; i++)
		if (params[i].key == MX_PARAM_ERROR_HANDLER && params[i].val.error_handler)
			out[i].val.error_handler = mx__native_handler_for(params[i].val.error_handler);
	return out;
}

mx_return_t mx_open_endpoint(uint32_t board_number, uint32_t endpoint_id, uint32_t endpoint_key,
			     mx_param_t *params_array, uint32_t params_count,
			     mx_endpoint_t *endpoint)
{
	omx_endpoint_param_t small[8];
	omx_endpoint_param_t *params = NULL;
	omx_endpoint_t ep = NULL;
	omx_return_t ret;

	if (params_array && params_count) {
		params = convert_params(params_array, params_count, small, 8);
		if (!params)
			return mx__raise(NULL, OMX_NO_RESOURCES, "Allocating endpoint parameters");
	}
	/* NULL array with a non-zero count: the native call reports MX_BAD_PARAM_LIST. */
	ret = omx_open_endpoint(board_number, endpoint_id, endpoint_key,
				params ? params : (omx_endpoint_param_t *)(void *)params_array,
				params_count, &ep);
	if (params && params != small)
		free(params);
	if (ret == OMX_SUCCESS)
		*endpoint = mx__to_mx_ep(ep);
	return mx__ret_to_mx(ret);
}

mx_return_t mx_close_endpoint(mx_endpoint_t endpoint)
{
	return mx__ret_to_mx(omx_close_endpoint(mx__ep(endpoint)));
}

mx_return_t mx_wakeup(mx_endpoint_t endpoint)
{
	return mx__ret_to_mx(omx_wakeup(mx__ep(endpoint)));
}

mx_return_t mx_disable_progression(mx_endpoint_t ep)
{
	return mx__ret_to_mx(omx_disable_progression(mx__ep(ep)));
}

mx_return_t mx_reenable_progression(mx_endpoint_t ep)
{
	return mx__ret_to_mx(omx_reenable_progression(mx__ep(ep)));
}

mx_return_t mx_progress(mx_endpoint_t ep)
{
	return mx__ret_to_mx(omx_progress(mx__ep(ep)));
}

mx_return_t mx_get_endpoint_addr(mx_endpoint_t endpoint, mx_endpoint_addr_t *endpoint_addr)
{
	omx_endpoint_addr_t a;
	omx_return_t ret = omx_get_endpoint_addr(mx__ep(endpoint), &a);

	if (ret == OMX_SUCCESS)
		*endpoint_addr = mx__to_mx_addr(a);
	return mx__ret_to_mx(ret);
}

/* Same signature up to identical types (enums of equal values, 16-byte address passed by
 * value): passed by cast, as the reference does (omx-native-api.md 7.2). */
mx_return_t mx_register_unexp_handler(mx_endpoint_t ep, mx_unexp_handler_t handler, void *context)
{
	omx_unexp_handler_t native = (omx_unexp_handler_t)(void (*)(void))handler;
	return mx__ret_to_mx(omx_register_unexp_handler(mx__ep(ep), native, context));
}

/* ---- connections (mx-api.md 8.1-8.3) ---- */

mx_return_t mx_connect(mx_endpoint_t endpoint, uint64_t nic_id, uint32_t endpoint_id,
		       uint32_t key, uint32_t timeout, mx_endpoint_addr_t *addr)
{
	omx_endpoint_addr_t a;
	enum mx__call_kind prev = mx__call_enter(MX__CALL_CONNECT);
	omx_return_t ret = omx_connect(mx__ep(endpoint), nic_id, endpoint_id, key, mx__timeout(timeout), &a);

	mx__call_leave(prev);
	if (ret == OMX_SUCCESS)
		*addr = mx__to_mx_addr(a);
	return mx__ret_to_mx(ret);
}

mx_return_t mx_iconnect(mx_endpoint_t ep, uint64_t nic_id, uint32_t eid, uint32_t key,
			uint64_t match_info, void *context, mx_request_t *request)
{
	omx_request_t r = NULL;
	enum mx__call_kind prev = mx__call_enter(MX__CALL_POST);
	omx_return_t ret = omx_iconnect(mx__ep(ep), nic_id, eid, key, match_info, context,
					request ? &r : NULL);

	mx__call_leave(prev);
	if (ret == OMX_SUCCESS && request)
		*request = (mx_request_t)(void *)r;
	return mx__ret_to_mx(ret);
}

mx_return_t mx_disconnect(mx_endpoint_t ep, mx_endpoint_addr_t addr)
{
	return mx__ret_to_mx(omx_disconnect(mx__ep(ep), mx__addr(addr)));
}

/* ---- addresses (mx-api.md 8.4, 8.6) ---- */

mx_return_t mx_decompose_endpoint_addr(mx_endpoint_addr_t endpoint_addr, uint64_t *nic_id,
				       uint32_t *endpoint_id)
{
	return mx__ret_to_mx(omx_decompose_endpoint_addr(mx__addr(endpoint_addr), nic_id, endpoint_id));
}

mx_return_t mx_decompose_endpoint_addr2(mx_endpoint_addr_t endpoint_addr, uint64_t *nic_id,
					uint32_t *endpoint_id, uint32_t *session_id)
{
	return mx__ret_to_mx(omx_decompose_endpoint_addr_with_session(mx__addr(endpoint_addr), nic_id,
								      endpoint_id, session_id));
}

mx_return_t mx_set_endpoint_addr_context(mx_endpoint_addr_t endpoint_addr, void *context)
{
	return mx__ret_to_mx(omx_set_endpoint_addr_context(mx__addr(endpoint_addr), context));
}

mx_return_t mx_get_endpoint_addr_context(mx_endpoint_addr_t endpoint_addr, void **context)
{
	return mx__ret_to_mx(omx_get_endpoint_addr_context(mx__addr(endpoint_addr), context));
}

/* ---- boards and peers (mx-api.md 8.5) ---- */

mx_return_t mx_hostname_to_nic_id(char *hostname, uint64_t *nic_id)
{
	return mx__ret_to_mx(omx_hostname_to_nic_id(hostname, nic_id));
}

mx_return_t mx_nic_id_to_hostname(uint64_t nic_id, char *hostname)
{
	return mx__ret_to_mx(omx_nic_id_to_hostname(nic_id, hostname));
}

mx_return_t mx_board_number_to_nic_id(uint32_t board_number, uint64_t *nic_id)
{
	return mx__ret_to_mx(omx_board_number_to_nic_id(board_number, nic_id));
}

mx_return_t mx_nic_id_to_board_number(uint64_t nic_id, uint32_t *board_number)
{
	return mx__ret_to_mx(omx_nic_id_to_board_number(nic_id, board_number));
}
