/*
 * mx_codes.c - translation between native (OMX_*) and MX codes, and the MX code texts.
 *
 * Tables: omx-native-api.md 7.3 (return codes), 7.4 (status codes), mx-api.md 12 (texts)
 * and 15 (both numberings side by side).
 *
 * Recommended deviations implemented here (mx-api.md 18, omx-native-api.md 9):
 *  - no translation ever aborts: OMX_NO_SYSTEM_RESOURCES (97) becomes MX_NO_RESOURCES,
 *    other native codes without an MX meaning become MX_BAD_BAD_BAD for function results,
 *    unknown request statuses become MX_STATUS_ABORTED (a generic failure status);
 *  - mx_strerror / mx_strstatus return "Unknown MX error <n>" / "Unknown MX status <n>"
 *    for codes outside the table instead of aborting. These come from a thread-local
 *    buffer (no race between threads; valid until the thread's next unknown-code call).
 */
#include <stdio.h>

#include "mx/mx_internal.h"

/* ---- return codes ---- */

mx_return_t mx__ret_to_mx_loose(omx_return_t code)
{
	switch ((int)code) {
	case OMX_NOT_SUPPORTED_IN_HANDLER:
		return MX_CLOSE_IN_HANDLER;
	case OMX_NO_SYSTEM_RESOURCES:
		return MX_NO_RESOURCES;
	default:
		/* 0-38 and 42 have the same number and meaning in both numberings; anything else
		 * is passed through numerically (non-strict, as the reference's handler path). */
		return (mx_return_t)code;
	}
}

mx_return_t mx__ret_to_mx(omx_return_t code)
{
	int c = (int)code;

	if (c == OMX_NOT_SUPPORTED_IN_HANDLER || c == OMX_NO_SYSTEM_RESOURCES)
		return mx__ret_to_mx_loose(code);
	/* Numbers 0..43 are MX return codes (an MX error handler may legitimately return one
	 * the native layer never produces, e.g. MX_FAILURE): keep them. */
	if (c >= 0 && c <= MX_NOT_SUPPORTED_WITH_CONTEXT_ID && c != MX_CLOSE_IN_HANDLER)
		return (mx_return_t)c;
	return MX_BAD_BAD_BAD;
}

omx_return_t mx__ret_from_mx(mx_return_t code)
{
	switch ((int)code) {
	case MX_CLOSE_IN_HANDLER:
		return OMX_NOT_SUPPORTED_IN_HANDLER;
	case MX_CANCEL_NOT_SUPPORTED:
		return OMX_BAD_REQUEST;
	default:
		return (omx_return_t)code;
	}
}

/* ---- status codes ---- */

static const struct {
	omx_return_t native;
	mx_status_code_t mx;
} status_table[] = {
	{ OMX_SUCCESS, MX_STATUS_SUCCESS },
	{ OMX_TIMEOUT, MX_STATUS_TIMEOUT },
	{ OMX_MESSAGE_TRUNCATED, MX_STATUS_TRUNCATED },
	{ OMX_CANCELLED, MX_STATUS_CANCELLED },
	{ OMX_REMOTE_ENDPOINT_CLOSED, MX_STATUS_ENDPOINT_CLOSED },
	{ OMX_REMOTE_ENDPOINT_UNREACHABLE, MX_STATUS_ENDPOINT_UNREACHABLE },
	{ OMX_REMOTE_ENDPOINT_BAD_SESSION, MX_STATUS_BAD_SESSION },
	{ OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY, MX_STATUS_BAD_KEY },
	{ OMX_REMOTE_ENDPOINT_BAD_ID, MX_STATUS_BAD_ENDPOINT },
	{ OMX_REMOTE_RDMA_WINDOW_BAD_ID, MX_STATUS_BAD_RDMAWIN },
	{ OMX_MESSAGE_ABORTED, MX_STATUS_ABORTED },
	{ OMX_NO_RESOURCES, MX_STATUS_NO_RESOURCES },
};
#define STATUS_TABLE_LEN (sizeof(status_table) / sizeof(status_table[0]))

static int is_private_status(omx_return_t code)
{
	unsigned c = (unsigned)code;
	return c >= MX__PRIVATE_STATUS_BASE && c < MX__PRIVATE_STATUS_BASE + 0x10000u;
}

mx_status_code_t mx__status_to_mx(omx_return_t code)
{
	for (size_t i = 0; i < STATUS_TABLE_LEN; i++)
		if (status_table[i].native == code)
			return status_table[i].mx;
	if (is_private_status(code))
		return (mx_status_code_t)((unsigned)code - MX__PRIVATE_STATUS_BASE);
	/* [QUIRK fixed] the reference aborts here; a generic failure status instead. */
	return MX_STATUS_ABORTED;
}

omx_return_t mx__status_from_mx(mx_status_code_t code)
{
	for (size_t i = 0; i < STATUS_TABLE_LEN; i++)
		if (status_table[i].mx == code)
			return status_table[i].native;
	return (omx_return_t)(MX__PRIVATE_STATUS_BASE + ((unsigned)code & 0xFFFFu));
}

void mx__status_copy(mx_status_t *dst, const omx_status_t *src)
{
	memcpy(dst, src, sizeof(*dst));
	dst->code = mx__status_to_mx(src->code);
}

/* ---- texts (mx-api.md 12) ---- */

static const char *const return_texts[MX_NOT_SUPPORTED_WITH_CONTEXT_ID + 1] = {
	[MX_SUCCESS] = "Success",
	[MX_BAD_BAD_BAD] = "Bad error",
	[MX_ALREADY_INITIALIZED] = "Already initialized",
	[MX_NOT_INITIALIZED] = "Not initialized",
	[MX_NO_DEV] = "No device file",
	[MX_NO_DRIVER] = "Unusable device file (driver loaded?)",
	[MX_NO_PERM] = "Access denied",
	[MX_BOARD_UNKNOWN] = "Board Not Found",
	[MX_BAD_ENDPOINT] = "Bad Endpoint",
	[MX_BAD_SEG_CNT] = "Multiple Segments Count Invalid",
	[MX_BAD_REQUEST] = "This Function cannot be applied to this Request",
	[MX_BAD_MATCH_MASK] = "Bad match mask.",
	[MX_NO_RESOURCES] = "No resources available",
	[MX_BUSY] = "Resource Busy",
	[MX_BAD_INFO_KEY] = "Bad Info Key",
	[MX_BAD_INFO_VAL] = "Bad Info Value Address",
	[MX_BAD_PARAM_LIST] = "Bad Endpoint Parameter List",
	[MX_BAD_PARAM_NAME] = "Bad Endpoint Parameter Key",
	[MX_BAD_PARAM_VAL] = "Bad Endpoint Parameter Value",
	[MX_HOST_NOT_FOUND] = "Peer Not Found in the Table",
	[MX_TIMEOUT] = "Command Timeout",
	[MX_BAD_ENDPOINT_ID] = "Remote Endpoint Id is Wrong",
	[MX_CONNECTION_FAILED] = "Remote Endpoint is Closed",
	[MX_BAD_CONNECTION_KEY] = "Connection Key to Remote Endpoint is Invalid",
	[MX_BAD_INFO_LENGTH] = "Bad Info Value Length",
	[MX_NIC_NOT_FOUND] = "Nic ID not Found in Peer Table",
	[MX_BAD_KERNEL_VERSION] = "Driver interface too old, rebuild and reload the driver",
	[MX_BAD_LIB_VERSION] = "Library interface too old, relink the program",
	[MX_CANCEL_NOT_SUPPORTED] = "This Function cannot be applied to this Request",
	[MX_CLOSE_IN_HANDLER] = "Operation not supported in the handler",
	[MX_BAD_MATCHING_FOR_CONTEXT_ID_MASK] = "Matching info does not respect context id mask",
};

static const char *const status_texts[MX_STATUS_NO_RESOURCES + 1] = {
	[MX_STATUS_SUCCESS] = "Success",
	[MX_STATUS_TIMEOUT] = "Command Timeout",
	[MX_STATUS_TRUNCATED] = "Message Truncated",
	[MX_STATUS_CANCELLED] = "Cancelled",
	[MX_STATUS_ENDPOINT_CLOSED] = "Remote Endpoint is Closed",
	[MX_STATUS_ENDPOINT_UNREACHABLE] = "Remote Endpoint Unreachable",
	[MX_STATUS_BAD_SESSION] = "Wrong Remote Endpoint Session",
	[MX_STATUS_BAD_KEY] = "Connection Key to Remote Endpoint is Invalid",
	[MX_STATUS_BAD_ENDPOINT] = "Remote Endpoint Id is Wrong",
	[MX_STATUS_BAD_RDMAWIN] = "Remote Window Id is Invalid",
	[MX_STATUS_ABORTED] = "Message Aborted",
	[MX_STATUS_NO_RESOURCES] = "No resources available",
};

static _Thread_local char unknown_text[48];

const char *mx_strerror(mx_return_t return_code)
{
	unsigned c = (unsigned)return_code;

	if (c < sizeof(return_texts) / sizeof(return_texts[0]) && return_texts[c])
		return return_texts[c];
	snprintf(unknown_text, sizeof(unknown_text), "Unknown MX error %d", (int)return_code);
	return unknown_text;
}

const char *mx_strstatus(mx_status_code_t status)
{
	unsigned c = (unsigned)status;

	if (c < sizeof(status_texts) / sizeof(status_texts[0]) && status_texts[c])
		return status_texts[c];
	snprintf(unknown_text, sizeof(unknown_text), "Unknown MX status %d", (int)status);
	return unknown_text;
}
