/*
 * mx__driver_interface.h - declares mx__get_mapper_state (used by Open MPI).
 * Written from spec/mx-api.md sections 1.1, 14.
 *
 * myriexpress.h is included in addition to the spec's "mx_io.h" and "mx__fops.h" so that
 * mx_return_t is always declared. Correct extern "C" wrapper (the reference misspelled it).
 */
#ifndef MX__DRIVER_INTERFACE_H
#define MX__DRIVER_INTERFACE_H

#include "myriexpress.h"
#include "mx_io.h"
#include "mx__fops.h"

#ifdef __cplusplus
extern "C" {
#endif

mx_return_t mx__get_mapper_state(mx_endpt_handle_t handle, mx_mapper_state_t *p);

#ifdef __cplusplus
}
#endif

#endif /* MX__DRIVER_INTERFACE_H */
