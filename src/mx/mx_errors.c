/*
 * mx_errors.c - MX error handlers and their bridging onto native handlers
 * (mx-api.md 5.3, omx-native-api.md 5.2 and 7.5).
 *
 * The native layer calls one handler per error: (message, native code) -> native code.
 * Every MX handler is run through a native "trampoline" that translates the code to MX
 * numbering, calls the MX handler and translates its answer back:
 *
 *  - function errors reach MX handlers as MX return codes (mx_return_t, mx-api.md 4.1);
 *  - request-completion errors (truncation, NACKs, unreachable peer, pull errors, failed
 *    mx_iconnect) reach MX handlers as MX *status* codes (mx_status_code_t values of
 *    mx-api.md 4.2, passed in the mx_return_t argument), and the handler's answer is taken
 *    as an MX status code. This is the recommendation of mx-api.md 5.3 [AMBIGUOUS] (native
 *    MX numbering) instead of the reference's raw internal numbers 90-97. A handler that
 *    returns its argument unchanged stays transparent in both cases.
 *    The native layer passes only the code, so the kind is deduced from it: 90-95 are
 *    always completions; 32/33/34 (bad endpoint id / endpoint closed / bad key) are function
 *    errors while this thread is inside mx_connect and completions otherwise; 15 (no
 *    resources) is a function error inside a posting call (mx_isend/issend/irecv/iconnect)
 *    and a completion otherwise; everything else is a function error.
 *  - handlers given with MX_PARAM_ERROR_HANDLER at mx_open_endpoint are bridged the same
 *    way (the reference passed them native numbers; here every MX handler sees MX numbers).
 *
 * Recommended deviations (mx-api.md 18 #2, 5.3): mx_set_error_handler returns the
 * previously installed MX-visible handler and treats NULL as MX_ERRORS_ARE_FATAL.
 * MX_ERRORS_ARE_FATAL / MX_ERRORS_RETURN map directly onto the native built-in handlers.
 */
#include <pthread.h>
#include <stdio.h>

#include "mx/mx_internal.h"

/* ---- what the calling thread is doing ---- */

static _Thread_local enum mx__call_kind call_kind;

enum mx__call_kind mx__call_enter(enum mx__call_kind kind)
{
	enum mx__call_kind prev = call_kind;
	call_kind = kind;
	return prev;
}

void mx__call_leave(enum mx__call_kind previous)
{
	call_kind = previous;
}

/* Domain of the code currently passed to an MX handler by a trampoline on this thread,
 * so that MX_ERRORS_ARE_FATAL prints the right text when an application handler chains
 * to it with the code it received. */
static _Thread_local int bridging_status;

static int is_completion_code(omx_return_t code)
{
	switch ((int)code) {
	case OMX_CANCELLED:
	case OMX_REMOTE_RDMA_WINDOW_BAD_ID:
	case OMX_REMOTE_ENDPOINT_UNREACHABLE:
	case OMX_REMOTE_ENDPOINT_BAD_SESSION:
	case OMX_MESSAGE_ABORTED:
	case OMX_MESSAGE_TRUNCATED:
		return 1;
	case OMX_REMOTE_ENDPOINT_BAD_ID:
	case OMX_REMOTE_ENDPOINT_CLOSED:
	case OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY:
		return call_kind != MX__CALL_CONNECT;
	case OMX_NO_RESOURCES:
		return call_kind != MX__CALL_POST;
	default:
		return (unsigned)code >= MX__PRIVATE_STATUS_BASE;
	}
}

/* ---- the two built-in MX handlers (exported as data objects) ---- */

static mx_return_t mx_handler_fatal(char *str, mx_return_t ret)
{
	omx_return_t native = bridging_status ? mx__status_from_mx((mx_status_code_t)ret)
					      : mx__ret_from_mx(ret);
	return mx__ret_to_mx_loose(OMX_ERRORS_ARE_FATAL(str, native));
}

static mx_return_t mx_handler_return(char *str, mx_return_t ret)
{
	(void)str;
	return ret;
}

/* Real 8-byte (LP64) const data objects holding function addresses (mx-api.md 1.4):
 * applications reference them through copy relocations. */
const mx_error_handler_t MX_ERRORS_ARE_FATAL = mx_handler_fatal;
const mx_error_handler_t MX_ERRORS_RETURN = mx_handler_return;

/* ---- trampolines: one native handler per distinct MX handler function ---- */

#define MX_TRAMPOLINES 16
static mx_error_handler_t tramp_target[MX_TRAMPOLINES];
static pthread_mutex_t tramp_lock = PTHREAD_MUTEX_INITIALIZER;

static omx_return_t bridge(int slot, char *str, omx_return_t code)
{
	mx_error_handler_t h = __atomic_load_n(&tramp_target[slot], __ATOMIC_ACQUIRE);
	int status = is_completion_code(code);
	int saved = bridging_status;
	mx_return_t in, out;

	in = status ? (mx_return_t)mx__status_to_mx(code) : mx__ret_to_mx_loose(code);
	bridging_status = status;
	out = h(str, in);
	bridging_status = saved;
	return status ? mx__status_from_mx((mx_status_code_t)out) : mx__ret_from_mx(out);
}

#define TRAMPOLINE(n) \
	static omx_return_t tramp_##n(char *str, omx_return_t code) { return bridge(n, str, code); }
TRAMPOLINE(0) TRAMPOLINE(1) TRAMPOLINE(2) TRAMPOLINE(3)
TRAMPOLINE(4) TRAMPOLINE(5) TRAMPOLINE(6) TRAMPOLINE(7)
TRAMPOLINE(8) TRAMPOLINE(9) TRAMPOLINE(10) TRAMPOLINE(11)
TRAMPOLINE(12) TRAMPOLINE(13) TRAMPOLINE(14) TRAMPOLINE(15)

static const omx_error_handler_t trampolines[MX_TRAMPOLINES] = {
	tramp_0, tramp_1, tramp_2, tramp_3, tramp_4, tramp_5, tramp_6, tramp_7,
	tramp_8, tramp_9, tramp_10, tramp_11, tramp_12, tramp_13, tramp_14, tramp_15,
};

/* Same ABI (int-sized enums, same arguments): only used when no trampoline is left. */
static omx_error_handler_t cast_to_native(mx_error_handler_t h)
{
	return (omx_error_handler_t)(void (*)(void))h;
}

static mx_error_handler_t cast_to_mx(omx_error_handler_t h)
{
	return (mx_error_handler_t)(void (*)(void))h;
}

omx_error_handler_t mx__native_handler_for(mx_error_handler_t h)
{
	static int warned;
	omx_error_handler_t native = NULL;
	int i;

	if (h == NULL || h == mx_handler_fatal)
		return OMX_ERRORS_ARE_FATAL;
	if (h == mx_handler_return)
		return OMX_ERRORS_RETURN;

	pthread_mutex_lock(&tramp_lock);
	for (i = 0; i < MX_TRAMPOLINES && tramp_target[i]; i++)
		if (tramp_target[i] == h)
			break;
	if (i < MX_TRAMPOLINES) {
		if (!tramp_target[i])
			__atomic_store_n(&tramp_target[i], h, __ATOMIC_RELEASE);
		native = trampolines[i];
	}
	pthread_mutex_unlock(&tramp_lock);
	if (native)
		return native;

	/* Out of trampolines (more than 16 distinct handler functions in one process): fall
	 * back to the reference behaviour, the handler then sees native numbering. */
	if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "MX: more than %d distinct error handlers, later ones receive "
			"Open-MX native codes\n", MX_TRAMPOLINES);
	return cast_to_native(h);
}

static mx_error_handler_t mx_handler_from_native(omx_error_handler_t native)
{
	/* NULL: nothing installed yet, the library's "before init" handler is fatal. */
	if (native == NULL || native == OMX_ERRORS_ARE_FATAL)
		return mx_handler_fatal;
	if (native == OMX_ERRORS_RETURN)
		return mx_handler_return;
	for (int i = 0; i < MX_TRAMPOLINES; i++)
		if (native == trampolines[i])
			return __atomic_load_n(&tramp_target[i], __ATOMIC_ACQUIRE);
	/* Installed through the native interface: same ABI, native numbering. */
	return cast_to_mx(native);
}

mx_error_handler_t mx_set_error_handler(mx_error_handler_t handler)
{
	omx_error_handler_t prev = omx_set_error_handler(NULL, mx__native_handler_for(handler));
	return mx_handler_from_native(prev);
}
