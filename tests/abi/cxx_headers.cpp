// cxx_headers.cpp - every public header compiles as C++ and declares its functions with
// C linkage: this program is linked against libopen-mx (a missing extern "C" would leave
// mangled, unresolvable references).
#include <myriexpress.h>
#include <mx_extensions.h>
#include <mx_raw.h>
#include <mx_io.h>
#include <mx_internals/mx__fops.h>
#include <mx_internals/mx__driver_interface.h>
#include <open-mx.h>
#include <omx_shared_alloc.h>
#include <omx_unexp_reserve.h>

#include <cstdio>
#include <cstring>

typedef void (*any_fn)();

// One function of each header, referenced without being called (no network needed).
static any_fn const volatile fns[] = {
	reinterpret_cast<any_fn>(&mx_isend),             // myriexpress.h
	reinterpret_cast<any_fn>(&mx_iconnect),          // mx_extensions.h
	reinterpret_cast<any_fn>(&mx_raw_open_endpoint), // mx_raw.h
	reinterpret_cast<any_fn>(&mx_open_board),        // mx_internals/mx__fops.h
	reinterpret_cast<any_fn>(&mx__get_mapper_state), // mx_internals/mx__driver_interface.h
	reinterpret_cast<any_fn>(&omx_isend),            // open-mx.h
	reinterpret_cast<any_fn>(&omx__init_api),
	reinterpret_cast<any_fn>(&omx_shared_alloc),     // omx_shared_alloc.h (extension)
	reinterpret_cast<any_fn>(&omx_irecv_reserved),   // omx_unexp_reserve.h (extension)
};

int main()
{
	static_assert(sizeof(mx_status_t) == 48, "mx_status_t");
	static_assert(sizeof(omx_status_t) == 48, "omx_status_t");
	static_assert(sizeof(mx_mapper_state_t) == 36, "mx_mapper_state_t");
	mx_endpt_handle_t handle = MX__INVALID_HANDLE;
	int bad = 0;

	for (unsigned i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		bad += fns[i] == 0;
	bad += std::strcmp(mx_strerror(MX_SUCCESS), "Success") != 0;
	bad += std::strcmp(omx_strerror(OMX_SUCCESS), "Success") != 0;
	bad += MX_ERRORS_RETURN(0, MX_BUSY) != MX_BUSY;
	bad += OMX_ERRORS_RETURN(0, OMX_BUSY) != OMX_BUSY;
	bad += mx_open_board(0, &handle) != MX_SUCCESS || handle != MX__INVALID_HANDLE;
	if (bad) {
		std::fprintf(stderr, "abi_cxx_headers: %d failure(s)\n", bad);
		return 1;
	}
	std::printf("abi_cxx_headers: ok\n");
	return 0;
}
