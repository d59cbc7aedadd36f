/*
 * open-mx.h - native Open-MX interface of omx.
 *
 * Written from spec/omx-native-api.md sections 1-4. Every name, value, type and
 * layout below is part of the interface; see tests/abi/abi_asserts.c for the pins.
 */
#ifndef __open_mx_h__
#define __open_mx_h__

#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- constants (section 2) ---- */

#define OMX_SIZEOF_ADDR 16
#define OMX_API 0x301
#define OMX_ANY_NIC 0xffffffffU
#define OMX_ANY_ENDPOINT 0xffffffffU
#define OMX_ENDPOINT_CONTEXT_ID_BITS_MAX 16
#define OMX_MAX_SEGMENTS 256
#define OMX_TIMEOUT_INFINITE ((uint32_t) -1)
#define OMX_HOSTNAMELEN_MAX 80
#define OMX_BOARD_ADDR_STRLEN 18

/* ---- opaque handles (section 3.1) ---- */

struct omx_endpoint;
typedef struct omx_endpoint * omx_endpoint_t;

union omx_request;
typedef union omx_request * omx_request_t;

/* ---- return and status codes (section 3.6) ---- */

enum omx_return {
	OMX_SUCCESS = 0,
	OMX_BAD_ERROR = 1,
	OMX_ALREADY_INITIALIZED = 3,
	OMX_NOT_INITIALIZED = 4,
	OMX_NO_DEVICE_FILE = 5,
	OMX_NO_DRIVER = 6,
	OMX_ACCESS_DENIED = 7,
	OMX_BOARD_NOT_FOUND = 8,
	OMX_BAD_ENDPOINT = 9,
	OMX_SEGMENTS_BAD_COUNT = 12,
	OMX_BAD_REQUEST = 13,
	OMX_BAD_MATCH_MASK = 14,
	OMX_NO_RESOURCES = 15,
	OMX_BUSY = 20,
	OMX_BAD_INFO_KEY = 21,
	OMX_BAD_INFO_ADDRESS = 22,
	OMX_ENDPOINT_PARAMS_BAD_LIST = 24,
	OMX_ENDPOINT_PARAM_BAD_KEY = 25,
	OMX_ENDPOINT_PARAM_BAD_VALUE = 26,
	OMX_PEER_NOT_FOUND = 28,
	OMX_TIMEOUT = 30,
	OMX_REMOTE_ENDPOINT_BAD_ID = 32,
	OMX_REMOTE_ENDPOINT_CLOSED = 33,
	OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY = 34,
	OMX_BAD_INFO_LENGTH = 35,
	OMX_NIC_ID_NOT_FOUND = 36,
	OMX_BAD_KERNEL_ABI = 37,
	OMX_BAD_LIB_ABI = 38,
	OMX_BAD_MATCHING_FOR_CONTEXT_ID_MASK = 42,
	OMX_CANCELLED = 90,
	OMX_REMOTE_RDMA_WINDOW_BAD_ID = 91,
	OMX_REMOTE_ENDPOINT_UNREACHABLE = 92,
	OMX_REMOTE_ENDPOINT_BAD_SESSION = 93,
	OMX_MESSAGE_ABORTED = 94,
	OMX_MESSAGE_TRUNCATED = 95,
	OMX_NOT_SUPPORTED_IN_HANDLER = 96,
	OMX_NO_SYSTEM_RESOURCES = 97,
	OMX_NOT_IMPLEMENTED = 99,
	OMX_RETURN_CODE_MAX = 100
};
typedef enum omx_return omx_return_t;

/* ---- endpoint addresses and statuses (sections 3.2, 3.3) ---- */

typedef struct omx_endpoint_addr {
	uint64_t data[OMX_SIZEOF_ADDR / sizeof(uint64_t)];
} omx_endpoint_addr_t;

typedef struct omx_status {
	enum omx_return code;
	omx_endpoint_addr_t addr;
	uint64_t match_info;
	uint32_t msg_length;
	uint32_t xfer_length;
	void *context;
} omx_status_t;

/* ---- error handlers (section 3.1, 3.10) ---- */

typedef omx_return_t (*omx_error_handler_t)(char *str, omx_return_t ret);

extern const omx_error_handler_t OMX_ERRORS_ARE_FATAL;
extern const omx_error_handler_t OMX_ERRORS_RETURN;

/* ---- endpoint parameters (sections 3.5, 3.7) ---- */

enum omx_endpoint_param_key {
	OMX_ENDPOINT_PARAM_ERROR_HANDLER = 0,
	OMX_ENDPOINT_PARAM_UNEXP_QUEUE_MAX = 1,
	OMX_ENDPOINT_PARAM_CONTEXT_ID = 2
};
typedef enum omx_endpoint_param_key omx_endpoint_param_key_t;

typedef struct {
	omx_endpoint_param_key_t key;
	union {
		omx_error_handler_t error_handler;
		uint32_t unexp_queue_max;
		struct {
			uint8_t bits;
			uint8_t shift;
		} context_id;
	} val;
} omx_endpoint_param_t;

/* ---- segments (section 3.4) ---- */

typedef void * omx_seg_ptr_t;

typedef struct omx_seg {
	omx_seg_ptr_t ptr;
	uint32_t len;
} omx_seg_t;

/* ---- unexpected handler (sections 3.1, 3.8) ---- */

enum omx_unexp_handler_action {
	OMX_UNEXP_HANDLER_RECV_CONTINUE = 0,
	OMX_UNEXP_HANDLER_RECV_FINISHED = 1
};
typedef enum omx_unexp_handler_action omx_unexp_handler_action_t;

typedef omx_unexp_handler_action_t (*omx_unexp_handler_t)(void *context, omx_endpoint_addr_t source,
							  uint64_t match_info, uint32_t msg_length,
							  void *data_if_available);

/* ---- information keys (section 3.9; values are the declaration order) ---- */

enum omx_info_key {
	OMX_INFO_BOARD_MAX,
	OMX_INFO_ENDPOINT_MAX,
	OMX_INFO_BOARD_COUNT,
	OMX_INFO_BOARD_IDS,
	OMX_INFO_BOARD_HOSTNAME,
	OMX_INFO_BOARD_IFACENAME,
	OMX_INFO_BOARD_NUMA_NODE,
	OMX_INFO_COUNTER_MAX,
	OMX_INFO_COUNTER_VALUES,
	OMX_INFO_COUNTER_LABEL
};
typedef enum omx_info_key omx_info_key_t;

/* ---- functions (section 4) ---- */

/* 4.1 initialisation */
omx_return_t omx__init_api(int api);

static inline omx_return_t omx_init(void)
{
	return omx__init_api(OMX_API);
}

omx_return_t omx_finalize(void);
const char * omx_strerror(omx_return_t ret);

/* 4.2 boards and peers */
omx_return_t omx_board_number_to_nic_id(uint32_t board_number, uint64_t *nic_id);
omx_return_t omx_nic_id_to_board_number(uint64_t nic_id, uint32_t *board_number);
omx_return_t omx_hostname_to_nic_id(char *hostname, uint64_t *board_addr);
omx_return_t omx_nic_id_to_hostname(uint64_t board_addr, char *hostname);

/* 4.3 endpoints */
omx_return_t omx_open_endpoint(uint32_t board_index, uint32_t endpoint_index, uint32_t key,
			       omx_endpoint_param_t * param_array, uint32_t param_count,
			       omx_endpoint_t *epp);
omx_return_t omx_close_endpoint(omx_endpoint_t ep);
omx_return_t omx_get_endpoint_addr(omx_endpoint_t endpoint, omx_endpoint_addr_t *endpoint_addr);
omx_return_t omx_wakeup(omx_endpoint_t ep);
omx_return_t omx_progress(omx_endpoint_t ep);
omx_return_t omx_disable_progression(omx_endpoint_t ep);
omx_return_t omx_reenable_progression(omx_endpoint_t ep);

/* 4.4 sending and receiving */
omx_return_t omx_isend(omx_endpoint_t ep, void *buffer, size_t length,
		       omx_endpoint_addr_t dest_endpoint, uint64_t match_info,
		       void * context, omx_request_t * request);
omx_return_t omx_issend(omx_endpoint_t ep, void *buffer, size_t length,
			omx_endpoint_addr_t dest_endpoint, uint64_t match_info,
			void * context, omx_request_t * request);
omx_return_t omx_irecv(omx_endpoint_t ep, void *buffer, size_t length,
		       uint64_t match_info, uint64_t match_mask,
		       void *context, omx_request_t * request);
omx_return_t omx_isendv(omx_endpoint_t ep, omx_seg_t *segs, uint32_t nseg,
			omx_endpoint_addr_t dest_endpoint, uint64_t match_info,
			void * context, omx_request_t * request);
omx_return_t omx_issendv(omx_endpoint_t ep, omx_seg_t *segs, uint32_t nseg,
			 omx_endpoint_addr_t dest_endpoint, uint64_t match_info,
			 void * context, omx_request_t * request);
omx_return_t omx_irecvv(omx_endpoint_t ep, omx_seg_t *segs, uint32_t nseg,
			uint64_t match_info, uint64_t match_mask,
			void *context, omx_request_t * request);

/* 4.5 completion and request management */
omx_return_t omx_test(omx_endpoint_t ep, omx_request_t * request,
		      omx_status_t *status, uint32_t * result);
omx_return_t omx_wait(omx_endpoint_t ep, omx_request_t * request,
		      omx_status_t *status, uint32_t * result, uint32_t timeout);
omx_return_t omx_test_any(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask,
			  omx_status_t *status, uint32_t *result);
omx_return_t omx_wait_any(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask,
			  omx_status_t *status, uint32_t *result, uint32_t timeout);
omx_return_t omx_ipeek(omx_endpoint_t ep, omx_request_t * request, uint32_t *result);
omx_return_t omx_peek(omx_endpoint_t ep, omx_request_t * request, uint32_t *result,
		      uint32_t timeout);
omx_return_t omx_iprobe(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask,
			omx_status_t *status, uint32_t *result);
omx_return_t omx_probe(omx_endpoint_t ep, uint64_t match_info, uint64_t match_mask,
		       omx_status_t *status, uint32_t *result, uint32_t timeout);
omx_return_t omx_ibuffered(omx_endpoint_t ep, omx_request_t *request, uint32_t * result);
omx_return_t omx_context(omx_request_t *request, void ** context);
omx_return_t omx_forget(omx_endpoint_t ep, omx_request_t *request);
omx_return_t omx_cancel(omx_endpoint_t ep, omx_request_t *request, uint32_t *result);
omx_return_t omx_cancel_notest(omx_endpoint_t ep, omx_request_t *request, uint32_t *result);
omx_return_t omx_set_request_timeout(omx_endpoint_t endpoint, omx_request_t request,
				     uint32_t milliseconds);

/* 4.5.6 address context */
omx_return_t omx_set_endpoint_addr_context(omx_endpoint_addr_t endpoint_addr, void *context);
omx_return_t omx_get_endpoint_addr_context(omx_endpoint_addr_t endpoint_addr, void **context);

/* 4.6 connections and addresses */
omx_return_t omx_connect(omx_endpoint_t endpoint, uint64_t nic_id, uint32_t endpoint_id,
			 uint32_t key, uint32_t timeout, omx_endpoint_addr_t *addr);
omx_return_t omx_iconnect(omx_endpoint_t ep, uint64_t nic_id, uint32_t endpoint_id, uint32_t key,
			  uint64_t match_info, void *context, omx_request_t *request);
omx_return_t omx_disconnect(omx_endpoint_t ep, omx_endpoint_addr_t addr);
omx_return_t omx_decompose_endpoint_addr(omx_endpoint_addr_t endpoint_addr,
					 uint64_t *nic_id, uint32_t *endpoint_id);
omx_return_t omx_decompose_endpoint_addr_with_session(omx_endpoint_addr_t endpoint_addr,
						      uint64_t *nic_id, uint32_t *endpoint_id,
						      uint32_t *session_id);

/* 4.7 unexpected handler */
omx_return_t omx_register_unexp_handler(omx_endpoint_t ep, omx_unexp_handler_t handler,
					void *context);

/* 4.8 information */
omx_return_t omx_get_info(omx_endpoint_t ep, omx_info_key_t key,
			  const void * in_val, uint32_t in_len,
			  void * out_val, uint32_t out_len);

/* 4.9 error handler selection (ep == NULL: process-wide); returns the previous handler */
omx_error_handler_t omx_set_error_handler(omx_endpoint_t ep, omx_error_handler_t handler);

#ifdef __cplusplus
}
#endif

#endif /* __open_mx_h__ */
