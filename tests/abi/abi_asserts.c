/*
 * abi_asserts.c - compile-time pins of the MX and native ABIs for x86-64 (LP64):
 * every size, offset and value given by spec/mx-api.md (2-4, 14) and
 * spec/omx-native-api.md (2-3, 7.7). Built as a program (ctest abi.asserts) that also
 * checks the few macros that are not integer constant expressions.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "myriexpress.h"
#include "mx_extensions.h"
#include "mx_raw.h"
#include "mx_io.h"
#include "mx_internals/mx__fops.h"
#include "mx_internals/mx__driver_interface.h"
#include "open-mx.h"
#include "core/omx_raw.h" /* private raw interface: values shared with mx_raw.h */

#if !defined(__x86_64__) || !defined(__LP64__)
#error "these pins are for x86-64 (LP64)"
#endif

#define SA(cond) _Static_assert(cond, #cond)
#define FIELD(type, field, off, size) \
	SA(offsetof(type, field) == (off)); SA(sizeof(((type *)0)->field) == (size))

/* ---------------- MX: constants (mx-api.md 2) ---------------- */
SA(MX_API == 0x301);
SA(MX_MAX_STR_LEN == 128);
SA(MX_SIZEOF_ADDR == 16);
SA(MX_ANY_NIC == 0xffffffffU);
SA(MX_ANY_ENDPOINT == 0xffffffffU);
SA(MX_INFINITE == 0);
SA(MX_CONTEXT_ID_BITS_MAX == 16);
SA(MX_MAX_SEGMENTS == 256);
SA(MX_MATCH_MASK_NONE == UINT64_MAX);
SA(MX_MAX_HOSTNAME_LEN == 80);
SA(MX_HAS_ICONNECT_V2 == 1);
SA(MX_RAW_POLL_SUPPORTED == 1);
SA(MX_RAW_NO_EVENT == 0);
SA(MX_RAW_SEND_COMPLETE == 1);
SA(MX_RAW_RECV_COMPLETE == 2);
SA(MX_DEAD_RECOVERABLE_SRAM_PARITY_ERROR == 10);
SA(MX_DEAD_SRAM_PARITY_ERROR == 11);
SA(MX_DEAD_WATCHDOG_TIMEOUT == 12);
SA(MX_DEAD_COMMAND_TIMEOUT == 13);
SA(MX_DEAD_ENDPOINT_CLOSE_TIMEOUT == 14);
SA(MX_DEAD_ROUTE_UPDATE_TIMEOUT == 15);
SA(MX_DEAD_PCI_PARITY_ERROR == 16);
SA(MX_DEAD_PCI_MASTER_ABORT == 17);
SA(MX_SET_ROUTE_TAKES_MAGID == 1);
SA(MX_HAS_RAW_LINE_SPEED == 1);
SA(MX_HAS_RAW_SET_NIC_REPLY_INFO == 1);
SA(MX__INVALID_HANDLE == -1);
#ifndef MX_HAS_NET_TYPE
#error "MX_HAS_NET_TYPE must be defined"
#endif

/* ---------------- MX: layouts (mx-api.md 3) ---------------- */
SA(sizeof(mx_endpoint_addr_t) == 16);
SA(_Alignof(mx_endpoint_addr_t) == 8);
FIELD(mx_endpoint_addr_t, stuff, 0, 16);

SA(sizeof(mx_segment_t) == 16);
FIELD(mx_segment_t, segment_ptr, 0, 8);
FIELD(mx_segment_t, segment_length, 8, 4);

SA(sizeof(mx_status_t) == 48);
SA(sizeof(struct mx_status) == 48);
FIELD(mx_status_t, code, 0, 4);
FIELD(mx_status_t, source, 8, 16);
FIELD(mx_status_t, match_info, 24, 8);
FIELD(mx_status_t, msg_length, 32, 4);
FIELD(mx_status_t, xfer_length, 36, 4);
FIELD(mx_status_t, context, 40, 8);

SA(sizeof(mx_param_t) == 16);
FIELD(mx_param_t, key, 0, 4);
FIELD(mx_param_t, val, 8, 8);
FIELD(mx_param_t, val.error_handler, 8, 8);
FIELD(mx_param_t, val.unexp_queue_max, 8, 4);
FIELD(mx_param_t, val.context_id.bits, 8, 1);
FIELD(mx_param_t, val.context_id.shift, 9, 1);

SA(sizeof(mx_mapper_state_t) == 36);
FIELD(mx_mapper_state_t, board_number, 0, 4);
FIELD(mx_mapper_state_t, mapper_mac, 4, 6);
FIELD(mx_mapper_state_t, iport, 10, 2);
FIELD(mx_mapper_state_t, map_version, 12, 4);
FIELD(mx_mapper_state_t, num_hosts, 16, 4);
FIELD(mx_mapper_state_t, network_configured, 20, 4);
FIELD(mx_mapper_state_t, routes_valid, 24, 4);
FIELD(mx_mapper_state_t, level, 28, 4);
FIELD(mx_mapper_state_t, flags, 32, 4);

SA(sizeof(mx_endpoint_t) == 8);
SA(sizeof(mx_request_t) == 8);
SA(sizeof(mx_segment_ptr_t) == 8);
SA(sizeof(mx_error_handler_t) == 8);
SA(sizeof(MX_ERRORS_ARE_FATAL) == 8);
SA(sizeof(MX_ERRORS_RETURN) == 8);
SA(sizeof(mx_raw_endpoint_t) == 8);
SA(sizeof(mx_raw_status_t) == sizeof(int));
SA(sizeof(mx_endpt_handle_t) == sizeof(int));

/* all enums are plain 4-byte C enums */
SA(sizeof(mx_return_t) == 4);
SA(sizeof(mx_status_code_t) == 4);
SA(sizeof(mx_param_key_t) == 4);
SA(sizeof(mx_get_info_key_t) == 4);
SA(sizeof(mx_line_speed_t) == 4);
SA(sizeof(enum mx_net_type) == 4);
SA(sizeof(mx_unexp_handler_action_t) == 4);
SA(sizeof(mx_host_type_t) == 4);

/* ---------------- MX: enumerations (mx-api.md 4) ---------------- */
SA(MX_SUCCESS == 0); SA(MX_BAD_BAD_BAD == 1); SA(MX_FAILURE == 2);
SA(MX_ALREADY_INITIALIZED == 3); SA(MX_NOT_INITIALIZED == 4); SA(MX_NO_DEV == 5);
SA(MX_NO_DRIVER == 6); SA(MX_NO_PERM == 7); SA(MX_BOARD_UNKNOWN == 8);
SA(MX_BAD_ENDPOINT == 9); SA(MX_BAD_SEG_LIST == 10); SA(MX_BAD_SEG_MEM == 11);
SA(MX_BAD_SEG_CNT == 12); SA(MX_BAD_REQUEST == 13); SA(MX_BAD_MATCH_MASK == 14);
SA(MX_NO_RESOURCES == 15); SA(MX_BAD_ADDR_LIST == 16); SA(MX_BAD_ADDR_COUNT == 17);
SA(MX_BAD_ROOT == 18); SA(MX_NOT_COMPLETED == 19); SA(MX_BUSY == 20);
SA(MX_BAD_INFO_KEY == 21); SA(MX_BAD_INFO_VAL == 22); SA(MX_BAD_NIC == 23);
SA(MX_BAD_PARAM_LIST == 24); SA(MX_BAD_PARAM_NAME == 25); SA(MX_BAD_PARAM_VAL == 26);
SA(MX_BAD_HOSTNAME_ARGS == 27); SA(MX_HOST_NOT_FOUND == 28); SA(MX_REQUEST_PENDING == 29);
SA(MX_TIMEOUT == 30); SA(MX_NO_MATCH == 31); SA(MX_BAD_ENDPOINT_ID == 32);
SA(MX_CONNECTION_FAILED == 33); SA(MX_BAD_CONNECTION_KEY == 34); SA(MX_BAD_INFO_LENGTH == 35);
SA(MX_NIC_NOT_FOUND == 36); SA(MX_BAD_KERNEL_VERSION == 37); SA(MX_BAD_LIB_VERSION == 38);
SA(MX_NIC_DEAD == 39); SA(MX_CANCEL_NOT_SUPPORTED == 40); SA(MX_CLOSE_IN_HANDLER == 41);
SA(MX_BAD_MATCHING_FOR_CONTEXT_ID_MASK == 42); SA(MX_NOT_SUPPORTED_WITH_CONTEXT_ID == 43);

SA(MX_STATUS_SUCCESS == 0); SA(MX_STATUS_PENDING == 1); SA(MX_STATUS_BUFFERED == 2);
SA(MX_STATUS_REJECTED == 3); SA(MX_STATUS_TIMEOUT == 4); SA(MX_STATUS_TRUNCATED == 5);
SA(MX_STATUS_CANCELLED == 6); SA(MX_STATUS_ENDPOINT_UNKNOWN == 7);
SA(MX_STATUS_ENDPOINT_CLOSED == 8); SA(MX_STATUS_ENDPOINT_UNREACHABLE == 9);
SA(MX_STATUS_BAD_SESSION == 10); SA(MX_STATUS_BAD_KEY == 11); SA(MX_STATUS_BAD_ENDPOINT == 12);
SA(MX_STATUS_BAD_RDMAWIN == 13); SA(MX_STATUS_ABORTED == 14); SA(MX_STATUS_EVENTQ_FULL == 15);
SA(MX_STATUS_NO_RESOURCES == 16);

SA(MX_PARAM_ERROR_HANDLER == 0); SA(MX_PARAM_UNEXP_QUEUE_MAX == 1); SA(MX_PARAM_CONTEXT_ID == 2);

SA(MX_NIC_COUNT == 1); SA(MX_NIC_IDS == 2); SA(MX_MAX_NATIVE_ENDPOINTS == 3);
SA(MX_NATIVE_REQUESTS == 4); SA(MX_COUNTERS_COUNT == 5); SA(MX_COUNTERS_LABELS == 6);
SA(MX_COUNTERS_VALUES == 7); SA(MX_PRODUCT_CODE == 8); SA(MX_PART_NUMBER == 9);
SA(MX_SERIAL_NUMBER == 10); SA(MX_PORT_COUNT == 11); SA(MX_PIO_SEND_MAX == 12);
SA(MX_COPY_SEND_MAX == 13); SA(MX_NUMA_NODE == 14); SA(MX_NET_TYPE == 15); SA(MX_LINE_SPEED == 16);

SA(MX_SPEED_2G == 0); SA(MX_SPEED_10G == 1); SA(MX_SPEED_OPEN_MX == 2);
SA(MX_NET_MYRI == 0); SA(MX_NET_ETHER == 1);
SA(MX_RECV_CONTINUE == 0); SA(MX_RECV_FINISHED == 1);
SA(MX_HOST_GM == 1); SA(MX_HOST_XM == 2); SA(MX_HOST_MX == 3); SA(MX_HOST_MXvM == 4);

/* ---------------- native: constants (omx-native-api.md 2) ---------------- */
SA(OMX_SIZEOF_ADDR == 16);
SA(OMX_API == 0x301);
SA(OMX_ANY_NIC == 0xffffffffU);
SA(OMX_ANY_ENDPOINT == 0xffffffffU);
SA(OMX_ENDPOINT_CONTEXT_ID_BITS_MAX == 16);
SA(OMX_MAX_SEGMENTS == 256);
SA(OMX_TIMEOUT_INFINITE == 0xFFFFFFFFu);
SA(sizeof(OMX_TIMEOUT_INFINITE) == 4);
SA(OMX_HOSTNAMELEN_MAX == 80);
SA(OMX_BOARD_ADDR_STRLEN == 18);

/* ---------------- native: layouts (omx-native-api.md 3) ---------------- */
SA(sizeof(omx_endpoint_addr_t) == 16);
SA(_Alignof(omx_endpoint_addr_t) == 8);
FIELD(omx_endpoint_addr_t, data, 0, 16);

SA(sizeof(omx_status_t) == 48);
FIELD(omx_status_t, code, 0, 4);
FIELD(omx_status_t, addr, 8, 16);
FIELD(omx_status_t, match_info, 24, 8);
FIELD(omx_status_t, msg_length, 32, 4);
FIELD(omx_status_t, xfer_length, 36, 4);
FIELD(omx_status_t, context, 40, 8);

SA(sizeof(omx_seg_t) == 16);
FIELD(omx_seg_t, ptr, 0, 8);
FIELD(omx_seg_t, len, 8, 4);

SA(sizeof(omx_endpoint_param_t) == 16);
FIELD(omx_endpoint_param_t, key, 0, 4);
FIELD(omx_endpoint_param_t, val, 8, 8);
FIELD(omx_endpoint_param_t, val.error_handler, 8, 8);
FIELD(omx_endpoint_param_t, val.unexp_queue_max, 8, 4);
FIELD(omx_endpoint_param_t, val.context_id.bits, 8, 1);
FIELD(omx_endpoint_param_t, val.context_id.shift, 9, 1);

SA(sizeof(omx_endpoint_t) == 8);
SA(sizeof(omx_request_t) == 8);
SA(sizeof(omx_seg_ptr_t) == 8);
SA(sizeof(omx_error_handler_t) == 8);
SA(sizeof(OMX_ERRORS_ARE_FATAL) == 8);
SA(sizeof(OMX_ERRORS_RETURN) == 8);
SA(sizeof(omx_return_t) == 4);
SA(sizeof(omx_endpoint_param_key_t) == 4);
SA(sizeof(omx_unexp_handler_action_t) == 4);
SA(sizeof(omx_info_key_t) == 4);

/* ---------------- native: enumerations (omx-native-api.md 3.6-3.9) ---------------- */
SA(OMX_SUCCESS == 0); SA(OMX_BAD_ERROR == 1); SA(OMX_ALREADY_INITIALIZED == 3);
SA(OMX_NOT_INITIALIZED == 4); SA(OMX_NO_DEVICE_FILE == 5); SA(OMX_NO_DRIVER == 6);
SA(OMX_ACCESS_DENIED == 7); SA(OMX_BOARD_NOT_FOUND == 8); SA(OMX_BAD_ENDPOINT == 9);
SA(OMX_SEGMENTS_BAD_COUNT == 12); SA(OMX_BAD_REQUEST == 13); SA(OMX_BAD_MATCH_MASK == 14);
SA(OMX_NO_RESOURCES == 15); SA(OMX_BUSY == 20); SA(OMX_BAD_INFO_KEY == 21);
SA(OMX_BAD_INFO_ADDRESS == 22); SA(OMX_ENDPOINT_PARAMS_BAD_LIST == 24);
SA(OMX_ENDPOINT_PARAM_BAD_KEY == 25); SA(OMX_ENDPOINT_PARAM_BAD_VALUE == 26);
SA(OMX_PEER_NOT_FOUND == 28); SA(OMX_TIMEOUT == 30); SA(OMX_REMOTE_ENDPOINT_BAD_ID == 32);
SA(OMX_REMOTE_ENDPOINT_CLOSED == 33); SA(OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY == 34);
SA(OMX_BAD_INFO_LENGTH == 35); SA(OMX_NIC_ID_NOT_FOUND == 36); SA(OMX_BAD_KERNEL_ABI == 37);
SA(OMX_BAD_LIB_ABI == 38); SA(OMX_BAD_MATCHING_FOR_CONTEXT_ID_MASK == 42);
SA(OMX_CANCELLED == 90); SA(OMX_REMOTE_RDMA_WINDOW_BAD_ID == 91);
SA(OMX_REMOTE_ENDPOINT_UNREACHABLE == 92); SA(OMX_REMOTE_ENDPOINT_BAD_SESSION == 93);
SA(OMX_MESSAGE_ABORTED == 94); SA(OMX_MESSAGE_TRUNCATED == 95);
SA(OMX_NOT_SUPPORTED_IN_HANDLER == 96); SA(OMX_NO_SYSTEM_RESOURCES == 97);
SA(OMX_NOT_IMPLEMENTED == 99); SA(OMX_RETURN_CODE_MAX == 100);

SA(OMX_ENDPOINT_PARAM_ERROR_HANDLER == 0); SA(OMX_ENDPOINT_PARAM_UNEXP_QUEUE_MAX == 1);
SA(OMX_ENDPOINT_PARAM_CONTEXT_ID == 2);
SA(OMX_UNEXP_HANDLER_RECV_CONTINUE == 0); SA(OMX_UNEXP_HANDLER_RECV_FINISHED == 1);

SA(OMX_INFO_BOARD_MAX == 0); SA(OMX_INFO_ENDPOINT_MAX == 1); SA(OMX_INFO_BOARD_COUNT == 2);
SA(OMX_INFO_BOARD_IDS == 3); SA(OMX_INFO_BOARD_HOSTNAME == 4); SA(OMX_INFO_BOARD_IFACENAME == 5);
SA(OMX_INFO_BOARD_NUMA_NODE == 6); SA(OMX_INFO_COUNTER_MAX == 7);
SA(OMX_INFO_COUNTER_VALUES == 8); SA(OMX_INFO_COUNTER_LABEL == 9);

/* ---------------- identities between MX and native (omx-native-api.md 7.7) ---------------- */
SA(MX_ANY_NIC == OMX_ANY_NIC);
SA(MX_ANY_ENDPOINT == OMX_ANY_ENDPOINT);
SA(MX_SIZEOF_ADDR == OMX_SIZEOF_ADDR);
SA(MX_MAX_SEGMENTS == OMX_MAX_SEGMENTS);
SA(MX_CONTEXT_ID_BITS_MAX == OMX_ENDPOINT_CONTEXT_ID_BITS_MAX);
SA(MX_MAX_HOSTNAME_LEN == OMX_HOSTNAMELEN_MAX);
SA(MX_API == OMX_API);
SA((int)MX_PARAM_ERROR_HANDLER == (int)OMX_ENDPOINT_PARAM_ERROR_HANDLER);
SA((int)MX_PARAM_UNEXP_QUEUE_MAX == (int)OMX_ENDPOINT_PARAM_UNEXP_QUEUE_MAX);
SA((int)MX_PARAM_CONTEXT_ID == (int)OMX_ENDPOINT_PARAM_CONTEXT_ID);
SA((int)MX_RECV_CONTINUE == (int)OMX_UNEXP_HANDLER_RECV_CONTINUE);
SA((int)MX_RECV_FINISHED == (int)OMX_UNEXP_HANDLER_RECV_FINISHED);
SA(sizeof(mx_return_t) == sizeof(omx_return_t));
SA(sizeof(mx_status_code_t) == sizeof(omx_return_t));
SA(sizeof(mx_endpoint_addr_t) == sizeof(omx_endpoint_addr_t));
SA(sizeof(mx_error_handler_t) == sizeof(omx_error_handler_t));

SA(sizeof(mx_segment_t) == sizeof(omx_seg_t));
SA(offsetof(mx_segment_t, segment_ptr) == offsetof(omx_seg_t, ptr));
SA(sizeof(((mx_segment_t *)0)->segment_ptr) == sizeof(((omx_seg_t *)0)->ptr));
SA(offsetof(mx_segment_t, segment_length) == offsetof(omx_seg_t, len));
SA(sizeof(((mx_segment_t *)0)->segment_length) == sizeof(((omx_seg_t *)0)->len));

#define SAME_STATUS_FIELD(mxf, omxf) \
	SA(offsetof(mx_status_t, mxf) == offsetof(omx_status_t, omxf)); \
	SA(sizeof(((mx_status_t *)0)->mxf) == sizeof(((omx_status_t *)0)->omxf))
SA(MX_RAW_NO_EVENT == OMX_RAW_NO_EVENT);
SA(MX_RAW_SEND_COMPLETE == OMX_RAW_SEND_COMPLETE);
SA(MX_RAW_RECV_COMPLETE == OMX_RAW_RECV_COMPLETE);
SA(sizeof(mx_raw_status_t) == sizeof(omx_raw_status_t));
SA(_Generic((omx_raw_endpoint_t)0, mx_raw_endpoint_t: 1, default: 0));

SA(sizeof(mx_status_t) == sizeof(omx_status_t));
SAME_STATUS_FIELD(code, code);
SAME_STATUS_FIELD(source, addr);
SAME_STATUS_FIELD(match_info, match_info);
SAME_STATUS_FIELD(msg_length, msg_length);
SAME_STATUS_FIELD(xfer_length, xfer_length);
SAME_STATUS_FIELD(context, context);

#define SAME_PARAM_FIELD(f) \
	SA(offsetof(mx_param_t, f) == offsetof(omx_endpoint_param_t, f)); \
	SA(sizeof(((mx_param_t *)0)->f) == sizeof(((omx_endpoint_param_t *)0)->f))
SA(sizeof(mx_param_t) == sizeof(omx_endpoint_param_t));
SAME_PARAM_FIELD(key);
SAME_PARAM_FIELD(val);
SAME_PARAM_FIELD(val.error_handler);
SAME_PARAM_FIELD(val.unexp_queue_max);
SAME_PARAM_FIELD(val.context_id.bits);
SAME_PARAM_FIELD(val.context_id.shift);

/* Return codes with the same number in both numberings (mx-api.md 15). */
SA((int)MX_BAD_BAD_BAD == (int)OMX_BAD_ERROR);
SA((int)MX_NOT_INITIALIZED == (int)OMX_NOT_INITIALIZED);
SA((int)MX_BOARD_UNKNOWN == (int)OMX_BOARD_NOT_FOUND);
SA((int)MX_BAD_SEG_CNT == (int)OMX_SEGMENTS_BAD_COUNT);
SA((int)MX_BAD_INFO_VAL == (int)OMX_BAD_INFO_ADDRESS);
SA((int)MX_HOST_NOT_FOUND == (int)OMX_PEER_NOT_FOUND);
SA((int)MX_NIC_NOT_FOUND == (int)OMX_NIC_ID_NOT_FOUND);
SA((int)MX_BAD_LIB_VERSION == (int)OMX_BAD_LIB_ABI);

/* Handler and callback types: the MX layer passes unexpected handlers by cast. */
SA(_Generic((mx_error_handler_t)0, mx_return_t (*)(char *, mx_return_t): 1, default: 0));
SA(_Generic((omx_error_handler_t)0, omx_return_t (*)(char *, omx_return_t): 1, default: 0));
SA(_Generic((mx_unexp_handler_t)0,
	    mx_unexp_handler_action_t (*)(void *, mx_endpoint_addr_t, uint64_t, uint32_t, void *): 1,
	    default: 0));
SA(_Generic((omx_unexp_handler_t)0,
	    omx_unexp_handler_action_t (*)(void *, omx_endpoint_addr_t, uint64_t, uint32_t, void *): 1,
	    default: 0));
SA(_Generic((mx_matching_callback_t)0, void (*)(void *, uint64_t, int): 1, default: 0));
SA(_Generic((mx_raw_endpoint_t)0, struct omx_raw_endpoint *: 1, default: 0));

/* Run-time checks of the macros that are not integer constant expressions. */
int main(void)
{
	uint64_t big = 0x123456789abcdef0ull;
	uint32_t small = 0xdeadbeefu;
	int side = 0;
	int failures = 0;

	if (MX_U32(big) != 0x12345678u || MX_L32(big) != 0x9abcdef0u)
		failures++, fprintf(stderr, "MX_U32/MX_L32 of a 64-bit value\n");
	if (MX_U32(small) != 0 || MX_L32(small) != 0xdeadbeefu)
		failures++, fprintf(stderr, "MX_U32/MX_L32 of a 32-bit value\n");
	if (MX_U32(side++) != 0 || side != 1)
		failures++, fprintf(stderr, "MX_U32 must evaluate a narrow argument once\n");
	if (failures)
		return 1;
	printf("abi asserts: ok\n");
	return 0;
}
