/*
 * mx_core_glue.c - the only MX-layer file that looks at core internals (core/core.h):
 * error routing for errors the MX layer detects itself, and two configuration values
 * that mx_get_info reports. Everything else in src/mx/ uses the native API only.
 */
#include <pthread.h>

#include "core/core.h"
#include "mx/mx_internal.h"

mx_return_t mx__raise(mx_endpoint_t ep, omx_return_t code, const char *msg)
{
	omx_return_t r;

	if (ep)
		r = omx__error((struct omx_endpoint *)(void *)ep, code, "%s", msg);
	else
		r = omx__error_global(code, "%s", msg);
	return mx__ret_to_mx(r);
}

/*
 * The open-time configuration is normally read at the first endpoint open. The reference
 * reported 0 for MX_COPY_SEND_MAX before that ([QUIRK], mx-api.md 11); here the
 * configuration is read on demand (the same values the first open will use), under the
 * global lock like the open path.
 */
static void ensure_open_config(void)
{
	if (__atomic_load_n(&omx__cfg.loaded, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&omx__g.lock);
	omx__config_load_open();
	pthread_mutex_unlock(&omx__g.lock);
}

uint32_t mx__copy_send_max(void)
{
	ensure_open_config();
	return omx__cfg.rndv_threshold;
}

int mx__wire_compat(void)
{
	ensure_open_config();
	return omx__cfg.wire_mode == OMX_WIRE_COMPAT;
}
