/* Loading the OpenCL library with dlopen, error names, and platform/device selection. */
#ifndef PHONETRAIN_CL_LOADER_H
#define PHONETRAIN_CL_LOADER_H

#include "cl_api.h"

extern cl_api CL;   /* entry points, valid after cl_load() succeeded */

/* Tries `explicit_path` (if non-NULL) first, then the search list (src/runner/README.md).
 * Returns 0, or -1 with a message listing what was tried in err. */
int cl_load(const char *explicit_path, char *err, size_t errlen);
const char *cl_loaded_path(void);

const char *cl_error_name(cl_int code);

/* Fails with EXIT_CL_RUNTIME naming the call, the error and the context. */
#define CL_CHECK(call, ctx) do { cl_int _e = (call); if (_e != CL_SUCCESS) \
    cl_fail(#call, _e, ctx); } while (0)
_Noreturn void cl_fail(const char *call, cl_int err, const char *ctx);

typedef struct {
    const char *platform;     /* case-insensitive substring of the platform name, or NULL */
    const char *device;       /* case-insensitive substring of the device name, or NULL */
    const char *type;         /* "gpu", "cpu", "accelerator", "all"; NULL = prefer a GPU */
} cl_selector;

/* Loads the library (cl_lib may be NULL) and picks the first device that matches; fails with
 * EXIT_NO_DEVICE listing the available devices when none does. */
void cl_select(const char *cl_lib, const cl_selector *sel, cl_platform_id *platform,
               cl_device_id *device);

/* Malloc'd string properties (never NULL; "" when the query fails). */
char *cl_platform_str(cl_platform_id p, cl_platform_info what);
char *cl_device_str(cl_device_id d, cl_device_info what);
cl_ulong cl_device_ulong(cl_device_id d, cl_device_info what);   /* cl_ulong/cl_uint/size_t/bool */

/* Writes the JSON object describing device d (name, versions, limits; info mode and run.json). */
#include "json.h"
void cl_write_device_json(jwriter *w, cl_platform_id p, cl_device_id d);

/* All platforms' devices in platform order (at most cap); 0 when there is no platform. */
int cl_list_pairs(cl_platform_id *plats, cl_device_id *devs, int cap);

#endif
