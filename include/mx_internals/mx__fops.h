/*
 * mx__fops.h - declares mx_open_board (a stub Open MPI's MX components call).
 * Written from spec/mx-api.md sections 1.1, 14.
 *
 * The spec lists only <stddef.h>; myriexpress.h and mx_io.h are included too so that the
 * header is usable on its own (both are guarded). The reference tested a misspelled C++
 * macro here; this header uses the correct extern "C" wrapper.
 */
#ifndef MX__FOPS_H
#define MX__FOPS_H

#include <stddef.h>
#include "myriexpress.h"
#include "mx_io.h"

#ifdef __cplusplus
extern "C" {
#endif

mx_return_t mx_open_board(int i, mx_endpt_handle_t *handle);

#ifdef __cplusplus
}
#endif

#endif /* MX__FOPS_H */
