/*
 * init.c - library initialisation, error handlers and error texts (omx-native-api.md 4.1,
 * 4.9, 5.2), diagnostics output.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

struct omx_globals omx__g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

/* ---- diagnostics ---- */

__attribute__((format(printf, 2, 0))) static void vmsg(const char *tag, const char *fmt, va_list ap)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "%s%s", omx__cfg.verbose_prefix[0] ? omx__cfg.verbose_prefix : "OMX: ",
			 tag);
	if (n < 0 || (size_t)n >= sizeof(buf))
		n = 0;
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	fputs(buf, stderr);
}

void omx__verbose(const char *fmt, ...)
{
	if (!omx__cfg.verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

void omx__warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("WARNING: ", fmt, ap);
	va_end(ap);
}

void omx__fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vmsg("FatalError: ", fmt, ap);
	va_end(ap);
	if (omx__cfg.abort_sleeps) {
		fprintf(stderr, "OMX: sleeping %u seconds before aborting pid %d\n", omx__cfg.abort_sleeps,
			(int)getpid());
		sleep(omx__cfg.abort_sleeps);
	}
	abort();
}

/* ---- error texts ---- */

const char *omx_strerror(omx_return_t ret)
{
	switch ((int)ret) {
	case OMX_SUCCESS: return "Success";
	case OMX_BAD_ERROR: return "Bad error";
	case OMX_ALREADY_INITIALIZED: return "Already initialized";
	case OMX_NOT_INITIALIZED: return "Not initialized";
	case OMX_NO_DEVICE_FILE: return "No device file";
	case OMX_NO_DRIVER: return "Unusable device file (driver loaded?)";
	case OMX_ACCESS_DENIED: return "Access denied";
	case OMX_BOARD_NOT_FOUND: return "Board Not Found";
	case OMX_BAD_ENDPOINT: return "Bad Endpoint";
	case OMX_SEGMENTS_BAD_COUNT: return "Multiple Segments Count Invalid";
	case OMX_BAD_REQUEST: return "This Function cannot be applied to this Request";
	case OMX_BAD_MATCH_MASK: return "Bad match mask.";
	case OMX_NO_RESOURCES: return "No resources available";
	case OMX_BUSY: return "Resource Busy";
	case OMX_BAD_INFO_KEY: return "Bad Info Key";
	case OMX_BAD_INFO_ADDRESS: return "Bad Info Value Address";
	case OMX_ENDPOINT_PARAMS_BAD_LIST: return "Bad Endpoint Parameter List";
	case OMX_ENDPOINT_PARAM_BAD_KEY: return "Bad Endpoint Parameter Key";
	case OMX_ENDPOINT_PARAM_BAD_VALUE: return "Bad Endpoint Parameter Value";
	case OMX_PEER_NOT_FOUND: return "Peer Not Found in the Table";
	case OMX_TIMEOUT: return "Command Timeout";
	case OMX_REMOTE_ENDPOINT_BAD_ID: return "Remote Endpoint Id is Wrong";
	case OMX_REMOTE_ENDPOINT_CLOSED: return "Remote Endpoint is Closed";
	case OMX_REMOTE_ENDPOINT_BAD_CONNECTION_KEY: return "Connection Key to Remote Endpoint is Invalid";
	case OMX_BAD_INFO_LENGTH: return "Bad Info Value Length";
	case OMX_NIC_ID_NOT_FOUND: return "Nic ID not Found in Peer Table";
	case OMX_BAD_KERNEL_ABI: return "Kernel interface too old, rebuild and reload the driver";
	case OMX_BAD_LIB_ABI: return "Library interface too old (or wire configuration mismatch), relink the program";
	case OMX_BAD_MATCHING_FOR_CONTEXT_ID_MASK: return "Matching info does not respect context id mask";
	case OMX_CANCELLED: return "Cancelled";
	case OMX_REMOTE_RDMA_WINDOW_BAD_ID: return "Remote Window Id is Invalid";
	case OMX_REMOTE_ENDPOINT_UNREACHABLE: return "Remote Endpoint Unreachable";
	case OMX_REMOTE_ENDPOINT_BAD_SESSION: return "Wrong Remote Endpoint Session";
	case OMX_MESSAGE_ABORTED: return "Message Aborted";
	case OMX_MESSAGE_TRUNCATED: return "Message Truncated";
	case OMX_NOT_SUPPORTED_IN_HANDLER: return "Operation not supported in the handler";
	case OMX_NO_SYSTEM_RESOURCES: return "No resources available in the system";
	case OMX_NOT_IMPLEMENTED: return "Not implemented";
	case OMX_RETURN_CODE_MAX: return "Maximum return code";
	default: return "Unknown Return Code";
	}
}

/* ---- error handlers ---- */

static omx_return_t handler_fatal(char *str, omx_return_t ret)
{
	fprintf(stderr, "%s%s: %s\n", omx__cfg.verbose_prefix[0] ? omx__cfg.verbose_prefix : "OMX: ", str,
		omx_strerror(ret));
	if (omx__cfg.abort_sleeps) {
		fprintf(stderr, "OMX: sleeping %u seconds before exiting, pid %d\n", omx__cfg.abort_sleeps, (int)getpid());
		sleep(omx__cfg.abort_sleeps);
	}
	exit(-1);
}

static omx_return_t handler_return(char *str, omx_return_t ret)
{
	(void)str;
	return ret;
}

static omx_return_t handler_before_init(char *str, omx_return_t ret)
{
	fprintf(stderr, "OMX: BeforeInit: %s: %s\n", str, omx_strerror(ret));
	exit(-1);
}

const omx_error_handler_t OMX_ERRORS_ARE_FATAL = handler_fatal;
const omx_error_handler_t OMX_ERRORS_RETURN = handler_return;

static omx_error_handler_t global_handler(void)
{
	omx_error_handler_t h = __atomic_load_n(&omx__g.handler, __ATOMIC_ACQUIRE);
	return h ? h : handler_before_init;
}

__attribute__((format(printf, 3, 0))) static omx_return_t vraise(omx_error_handler_t h, omx_return_t code,
								   const char *fmt, va_list ap)
{
	char msg[256];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	return h(msg, code);
}

omx_return_t omx__error(struct omx_endpoint *ep, omx_return_t code, const char *fmt, ...)
{
	omx_error_handler_t h = (omx__ep_live(ep) && ep->handler) ? ep->handler : global_handler();
	va_list ap;
	va_start(ap, fmt);
	omx_return_t r = vraise(h, code, fmt, ap);
	va_end(ap);
	return r;
}

omx_return_t omx__error_global(omx_return_t code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	omx_return_t r = vraise(global_handler(), code, fmt, ap);
	va_end(ap);
	return r;
}

omx_error_handler_t omx_set_error_handler(omx_endpoint_t ep, omx_error_handler_t handler)
{
	omx_error_handler_t prev;
	if (ep) {
		prev = ep->handler;
		ep->handler = handler;
		return prev;
	}
	pthread_mutex_lock(&omx__g.lock);
	prev = omx__g.handler;
	omx__g.handler = handler ? handler : OMX_ERRORS_ARE_FATAL;
	omx__g.handler_set_by_app = 1;
	pthread_mutex_unlock(&omx__g.lock);
	return prev;
}

/* ---- init / finalize ---- */

omx_return_t omx__init_api(int api)
{
	omx_return_t ret;

	pthread_mutex_lock(&omx__g.lock);
	if (omx__g.initialized) {
		/* [QUIRK fixed] a second init is an idempotent success that changes nothing. */
		pthread_mutex_unlock(&omx__g.lock);
		return OMX_SUCCESS;
	}
	omx__config_load_init();
	if (!omx__g.handler_set_by_app || !omx__g.handler)
		omx__g.handler = omx__cfg.fatal_errors ? OMX_ERRORS_ARE_FATAL : OMX_ERRORS_RETURN;
	if (api == 0 || (api >> 8) != (OMX_API >> 8)) {
		pthread_mutex_unlock(&omx__g.lock);
		return omx__error_global(OMX_BAD_LIB_ABI, "Initializing library (application API 0x%x, library 0x%x)",
					 (unsigned)api, (unsigned)OMX_API);
	}
	if (!omx__g.endpoints.next)
		omx_list_init(&omx__g.endpoints);
	ret = omx__boards_init();
	if (ret != OMX_SUCCESS) {
		pthread_mutex_unlock(&omx__g.lock);
		return omx__error_global(ret, "Initializing library (attaching interfaces from OMX_IFACES)");
	}
	omx__g.initialized = 1;
	omx__debug_signal_install();
	pthread_mutex_unlock(&omx__g.lock);
	return OMX_SUCCESS;
}

omx_return_t omx_finalize(void)
{
	pthread_mutex_lock(&omx__g.lock);
	if (omx__g.initialized && omx_list_empty(&omx__g.endpoints)) {
		omx__boards_fini();
		omx__g.initialized = 0;
	}
	/* With endpoints still open the library stays usable (the reference closed only its
	 * control descriptor); the boards stay attached until the last endpoint is closed. */
	pthread_mutex_unlock(&omx__g.lock);
	return OMX_SUCCESS;
}
