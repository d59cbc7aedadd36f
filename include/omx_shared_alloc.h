/*
 * omx_shared_alloc.h - shared buffers: an omx extension, not part of Open-MX's interface.
 *
 * Memory from omx_shared_alloc lives in a file of the host's shared-memory directory that the
 * process's same-host partners can map. A large message sent from such a buffer to an endpoint
 * of the same host is read by the receiver with one memcpy from those pages, instead of a
 * process_vm_readv or two copies through shared memory (docs/architecture.md, "Shared buffers").
 * Nothing else changes: the buffers work with every partner and every call, as any memory does.
 *
 * - The memory is zero-filled, page-aligned, and taken from a reservation of OMX_SHARED_POOL_MB
 *   (address space and a sparse file). Its pages are allocated by the call, in the shared-memory
 *   directory's file system (OMX_SHM_DIR, /dev/shm): NULL when the reservation is full, that file
 *   system cannot hold them, or the file cannot be made (OMX_VERBOSE says why).
 * - omx_shared_free gives the pages back at once; OMX_BAD_ERROR for a pointer omx_shared_alloc
 *   did not return (or already freed), OMX_SUCCESS for NULL. Free a buffer only once the
 *   requests that use it are complete, as with any buffer.
 * - omx_shared_size: the length usable at ptr (the request rounded up to pages) if ptr is a
 *   live buffer of omx_shared_alloc, else 0.
 * - Other processes of the same user can read these pages (the file is 0600). After fork the
 *   child has private copies of its parent's buffers at the same addresses, as of malloc'ed
 *   memory (it may free them; same-host receivers read them with process_vm_readv), and
 *   allocates from a pool of its own. The copy is made in fork, for every live buffer.
 * - LD_PRELOAD=libomx-shared-heap.so gives a program's large mallocs (OMX_SHARED_HEAP_MIN) these
 *   buffers without changing its code (docs/architecture.md, "Shared heap").
 */
#ifndef OMX_SHARED_ALLOC_H
#define OMX_SHARED_ALLOC_H

#include <stddef.h>

#include "open-mx.h"

#ifdef __cplusplus
extern "C" {
#endif

void *omx_shared_alloc(size_t length);
omx_return_t omx_shared_free(void *ptr);
size_t omx_shared_size(const void *ptr);

#ifdef __cplusplus
}
#endif

#endif
