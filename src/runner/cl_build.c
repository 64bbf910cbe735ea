/* Building OpenCL programs from source, shared by the build and run modes. */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

cl_int cl_build_source(cl_context ctx, cl_device_id d, const char *source, const char *options,
                       cl_program *program, double *build_ms, char **log)
{
    cl_int err;
    size_t len = strlen(source);
    *log = xstrdup("");
    *build_ms = 0;
    uint64_t t0 = monotonic_ns();
    *program = CL.clCreateProgramWithSource(ctx, 1, &source, &len, &err);
    if (err != CL_SUCCESS) return err;
    err = CL.clBuildProgram(*program, 1, &d, options ? options : "", NULL, NULL);
    *build_ms = (double)(monotonic_ns() - t0) / 1e6;
    size_t n = 0;
    if (CL.clGetProgramBuildInfo(*program, d, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n) {
        free(*log);
        *log = xcalloc(n + 1, 1);
        CL.clGetProgramBuildInfo(*program, d, CL_PROGRAM_BUILD_LOG, n, *log, NULL);
        /* trim trailing whitespace and NULs that drivers leave */
        size_t k = strlen(*log);
        while (k && (*log)[k - 1] <= ' ') (*log)[--k] = '\0';
    }
    return err;
}
