/*
 * mx_internals.c - MX entry points that have no native counterpart: the unimplemented
 * calls (mx-api.md 10.2, 13) and the internal symbols Open MPI uses (mx-api.md 14).
 */
#include <stdio.h>

#include "core/omx_raw.h"
#include "mx/mx_internal.h"
#include "mx_internals/mx__driver_interface.h"
#include "mx_internals/mx__fops.h"

mx_return_t mx__not_implemented(const char *function, const char *why)
{
	fprintf(stderr, "MX: %s is not implemented by Open-MX (%s); returning MX_BAD_BAD_BAD\n",
		function, why);
	return MX_BAD_BAD_BAD;
}

/*
 * The reference aborted the process in these three. Recommended here: keep the symbols,
 * print a clear message and return MX_BAD_BAD_BAD (without going through the error
 * handler, so a fatal default handler does not turn it into an exit).
 */
mx_return_t mx_register_unexp_callback(mx_endpoint_t ep, mx_matching_callback_t cb, void *ctxt)
{
	(void)ep, (void)cb, (void)ctxt;
	return mx__not_implemented("mx_register_unexp_callback",
				   "deprecated, use mx_register_unexp_handler");
}

mx_return_t mx_iput(mx_endpoint_t endpoint, void *local_addr, uint32_t length,
		    mx_endpoint_addr_t dest_endpoint, uint64_t remote_addr, void *context,
		    mx_request_t *request)
{
	(void)endpoint, (void)local_addr, (void)length, (void)dest_endpoint, (void)remote_addr;
	(void)context, (void)request;
	return mx__not_implemented("mx_iput", "no RDMA semantics defined");
}

mx_return_t mx_iget(mx_endpoint_t endpoint, void *local_addr, uint32_t length,
		    mx_endpoint_addr_t dest_endpoint, uint64_t remote_addr, void *context,
		    mx_request_t *request)
{
	(void)endpoint, (void)local_addr, (void)length, (void)dest_endpoint, (void)remote_addr;
	(void)context, (void)request;
	return mx__not_implemented("mx_iget", "no RDMA semantics defined");
}

/* ---- Open MPI helpers (mx-api.md 14) ---- */

/* Does nothing; *handle is left untouched. */
mx_return_t mx_open_board(int i, mx_endpt_handle_t *handle)
{
	(void)i, (void)handle;
	return MX_SUCCESS;
}

/*
 * Fills only map_version and mapper_mac (mapper id, most significant byte first) from the
 * peer-table state; other fields are untouched. The peer table is process-wide in omx, so
 * the handle is not used.
 */
mx_return_t mx__get_mapper_state(mx_endpt_handle_t handle, mx_mapper_state_t *p)
{
	uint32_t version = 0;
	uint64_t mapper_id = 0;
	omx_return_t ret;

	(void)handle;
	ret = omx__peer_table_get_state(NULL, &version, NULL, &mapper_id);
	if (ret != OMX_SUCCESS)
		return mx__ret_to_mx(ret);
	p->map_version = version;
	for (int i = 0; i < 6; i++)
		p->mapper_mac[i] = (uint8_t)(mapper_id >> (8 * (5 - i)));
	return MX_SUCCESS;
}

/*
 * omx has no registration cache (large messages are pulled without pinning user memory),
 * so there is never a cached registration to invalidate: the call is the "cache off"
 * no-op of the reference and returns 0.
 */
int mx__regcache_clean(void *ptr, size_t len)
{
	(void)ptr, (void)len;
	return 0;
}
