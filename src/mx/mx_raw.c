/*
 * mx_raw.c - the MX raw (mapper) interface of mx_raw.h (mx-api.md 14) on top of the core's
 * private raw interface (src/core/omx_raw.h). No error handler is involved: codes are
 * returned directly, translated to MX numbering. Routes do not exist on Ethernet: the route
 * calls only record peers.
 */
#include "core/omx_raw.h"
#include "mx/mx_internal.h"
#include "mx_raw.h"

_Static_assert(MX_RAW_NO_EVENT == OMX_RAW_NO_EVENT, "raw status values differ");
_Static_assert(MX_RAW_SEND_COMPLETE == OMX_RAW_SEND_COMPLETE, "raw status values differ");
_Static_assert(MX_RAW_RECV_COMPLETE == OMX_RAW_RECV_COMPLETE, "raw status values differ");

mx_endpt_handle_t mx_raw_handle(mx_raw_endpoint_t ep)
{
	return omx__raw_handle(ep);
}

mx_return_t mx_raw_open_endpoint(uint32_t board_number, mx_param_t *params_array,
				 uint32_t params_count, mx_raw_endpoint_t *endpoint)
{
	/* Parameters are ignored by the raw interface; same layout anyway. */
	return mx__ret_to_mx(omx_raw_open_endpoint(board_number,
						   (const omx_endpoint_param_t *)(const void *)params_array,
						   params_count, endpoint));
}

mx_return_t mx_raw_close_endpoint(mx_raw_endpoint_t endpoint)
{
	return mx__ret_to_mx(omx_raw_close_endpoint(endpoint));
}

/* send_buffer is a complete Ethernet frame; port and route are ignored; a send-complete
 * event carrying context is queued. */
mx_return_t mx_raw_send(mx_raw_endpoint_t endpoint, uint32_t physical_port, void *route_pointer,
			uint32_t route_length, void *send_buffer, uint32_t buffer_length,
			void *context)
{
	(void)physical_port, (void)route_pointer, (void)route_length;
	return mx__ret_to_mx(omx__raw_send(endpoint, send_buffer, buffer_length, 1, context));
}

mx_return_t mx_raw_next_event(mx_raw_endpoint_t endpoint, uint32_t *incoming_port, void **context,
			      void *recv_buffer, uint32_t *recv_bytes, uint32_t timeout_ms,
			      mx_raw_status_t *status)
{
	return mx__ret_to_mx(omx__raw_next_event(endpoint, incoming_port, context, recv_buffer,
						 recv_bytes, timeout_ms, status, 1));
}

mx_return_t mx_raw_set_route_begin(mx_raw_endpoint_t endpoint)
{
	(void)endpoint;
	return MX_SUCCESS;
}

mx_return_t mx_raw_set_route_end(mx_raw_endpoint_t endpoint)
{
	(void)endpoint;
	return MX_SUCCESS;
}

mx_return_t mx_raw_set_route_mag(mx_raw_endpoint_t endpoint, uint64_t destination_id, void *route,
				 uint32_t route_length, uint32_t input_port, uint32_t output_port,
				 mx_host_type_t host_type, uint32_t mag_id)
{
	(void)endpoint, (void)route, (void)route_length, (void)input_port, (void)output_port;
	(void)host_type, (void)mag_id;
	return mx__ret_to_mx(omx__peer_add_or_rename(destination_id, NULL));
}

mx_return_t mx_raw_set_route(mx_raw_endpoint_t endpoint, uint64_t destination_id, void *route,
			     uint32_t route_length, uint32_t input_port, uint32_t output_port,
			     mx_host_type_t host_type)
{
	(void)endpoint, (void)route, (void)route_length, (void)input_port, (void)output_port;
	(void)host_type;
	return mx__ret_to_mx(omx__peer_add_or_rename(destination_id, NULL));
}

mx_return_t mx_raw_clear_routes(mx_raw_endpoint_t endpoint, uint64_t destination_id, uint32_t port)
{
	(void)endpoint, (void)destination_id, (void)port;
	return MX_SUCCESS;
}

/* The reference aborted; like the other unimplemented calls, report and fail instead. */
mx_return_t mx_raw_remove_peer(mx_raw_endpoint_t endpoint, uint64_t destination_id)
{
	(void)endpoint, (void)destination_id;
	return mx__not_implemented("mx_raw_remove_peer", "peers are never removed from the table");
}

mx_return_t mx_raw_set_map_version(mx_raw_endpoint_t endpoint, uint32_t physical_port,
				   uint64_t mapper_id, uint32_t map_version, uint32_t num_nodes,
				   uint32_t mapping_complete)
{
	(void)endpoint, (void)physical_port;
	return mx__ret_to_mx(omx__peer_table_set_state(mapping_complete != 0, map_version, num_nodes,
						       mapper_id));
}

mx_return_t mx_raw_num_ports(mx_raw_endpoint_t endpoint, uint32_t *num_ports)
{
	(void)endpoint;
	*num_ports = 1;
	return MX_SUCCESS;
}

mx_return_t mx_raw_line_speed(mx_raw_endpoint_t endpoint, mx_line_speed_t *speed)
{
	(void)endpoint;
	*speed = MX_SPEED_10G;
	return MX_SUCCESS;
}

mx_return_t mx_raw_set_hostname(mx_raw_endpoint_t endpoint, char *hostname)
{
	return mx__ret_to_mx(omx__board_set_hostname(omx__raw_board_index(endpoint), hostname));
}

mx_return_t mx_raw_set_peer_name(mx_raw_endpoint_t endpoint, uint64_t nic_id, char *hostname)
{
	(void)endpoint;
	return mx__ret_to_mx(omx__peer_add_or_rename(nic_id, hostname));
}

mx_return_t mx_raw_set_nic_reply_info(mx_raw_endpoint_t ep, void *blob, uint32_t size)
{
	(void)ep, (void)blob, (void)size;
	return MX_SUCCESS;
}
