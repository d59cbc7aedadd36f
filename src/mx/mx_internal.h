/*
 * mx_internal.h - private declarations shared by the files of the MX layer (src/mx/).
 *
 * The MX layer is a thin mapping of the MX interface (myriexpress.h, mx_extensions.h,
 * mx_raw.h) onto the native one (open-mx.h), as in omx-native-api.md section 7:
 * identical layouts are passed by cast, codes are translated, MX timeouts converted.
 */
#ifndef OMX_MX_INTERNAL_H
#define OMX_MX_INTERNAL_H

#include <stddef.h>
#include <string.h>

#include "myriexpress.h"
#include "mx_extensions.h"
#include "open-mx.h"

/* Functions shared between the MX layer's files only: not exported from libopen-mx.so. */
#define MX_INTERNAL __attribute__((visibility("hidden")))

/* ---- handles and addresses (identical layouts, see tests/abi/abi_asserts.c) ---- */

static inline omx_endpoint_t mx__ep(mx_endpoint_t ep)
{
	return (omx_endpoint_t)(void *)ep;
}

static inline mx_endpoint_t mx__to_mx_ep(omx_endpoint_t ep)
{
	return (mx_endpoint_t)(void *)ep;
}

static inline omx_endpoint_addr_t mx__addr(mx_endpoint_addr_t a)
{
	omx_endpoint_addr_t o;
	memcpy(&o, &a, sizeof(o));
	return o;
}

static inline mx_endpoint_addr_t mx__to_mx_addr(omx_endpoint_addr_t o)
{
	mx_endpoint_addr_t a;
	memcpy(&a, &o, sizeof(a));
	return a;
}

/* MX timeouts: MX_INFINITE (0) means for ever, natively that is OMX_TIMEOUT_INFINITE. */
static inline uint32_t mx__timeout(uint32_t mx_timeout)
{
	return mx_timeout == MX_INFINITE ? OMX_TIMEOUT_INFINITE : mx_timeout;
}

/* ---- code translation (mx_codes.c; omx-native-api.md 7.3/7.4, mx-api.md 15) ---- */

/*
 * Private native status values (never seen by native applications): an MX status value s
 * with no native equivalent, returned by an MX error handler for a request completion, is
 * stored natively as MX__PRIVATE_STATUS_BASE + s so that it converts back exactly.
 */
#define MX__PRIVATE_STATUS_BASE 0x1000u

/* Native return code -> MX return code, for function results. Never aborts: codes without
 * an MX meaning become MX_BAD_BAD_BAD (97 -> MX_NO_RESOURCES, 96 -> MX_CLOSE_IN_HANDLER). */
MX_INTERNAL mx_return_t mx__ret_to_mx(omx_return_t code);
/* Native -> MX return numbering for the error-handler path (non-strict: unknown numbers are
 * passed through unchanged). */
MX_INTERNAL mx_return_t mx__ret_to_mx_loose(omx_return_t code);
/* MX return code -> native (41 -> 96, 40 -> OMX_BAD_REQUEST, others unchanged). */
MX_INTERNAL omx_return_t mx__ret_from_mx(mx_return_t code);
/* Native request status -> MX status (table of 7.4; unknown -> MX_STATUS_ABORTED). */
MX_INTERNAL mx_status_code_t mx__status_to_mx(omx_return_t code);
/* MX status -> native request status (inverse table; others -> private range). */
MX_INTERNAL omx_return_t mx__status_from_mx(mx_status_code_t code);
/* Copy a native status into an MX one (identical layout) and translate the code. */
MX_INTERNAL void mx__status_copy(mx_status_t *dst, const omx_status_t *src);

/* ---- error handlers (mx_errors.c) ---- */

/* What the calling thread is doing inside the MX layer: lets the handler bridge tell
 * function errors from request-completion errors for codes that can be both. */
enum mx__call_kind { MX__CALL_OTHER = 0, MX__CALL_CONNECT, MX__CALL_POST };
MX_INTERNAL enum mx__call_kind mx__call_enter(enum mx__call_kind kind);
MX_INTERNAL void mx__call_leave(enum mx__call_kind previous);

/* The native handler that implements MX handler h (NULL = MX_ERRORS_ARE_FATAL). */
MX_INTERNAL omx_error_handler_t mx__native_handler_for(mx_error_handler_t h);

/* ---- glue with core internals (mx_core_glue.c) ---- */

/* Report an error detected by the MX layer itself through the handler the native layer
 * would use: the endpoint's if ep != NULL (falling back to the global one), else global.
 * Returns the MX code the handler decided on. */
MX_INTERNAL mx_return_t mx__raise(mx_endpoint_t ep, omx_return_t code, const char *msg);
/* Current remote rendezvous threshold (MX_COPY_SEND_MAX). */
MX_INTERNAL uint32_t mx__copy_send_max(void);
/* 1 when the library speaks the MX-compatible wire mode (MX_LINE_SPEED). */
MX_INTERNAL int mx__wire_compat(void);

/* ---- miscellaneous ---- */

/* Print the "not implemented" notice of an MX entry point and return MX_BAD_BAD_BAD. */
MX_INTERNAL mx_return_t mx__not_implemented(const char *function, const char *why);

/* Not declared in any public header (mx-api.md 1.4), exported for Open MPI. */
int mx__regcache_clean(void *ptr, size_t len);

#endif /* OMX_MX_INTERNAL_H */
