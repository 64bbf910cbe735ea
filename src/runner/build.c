/* build mode: compile each --source on the selected device; DIR/build.json records per
 * program the build time, log and binary size, and DIR/<stem>.bin holds each binary.
 * On a failed build, build.json says "status": "failed" and the log goes to stderr too. */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "modes.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_CONTEXT_PLATFORM_PROP 0x1084
#define CL_PROGRAM_BINARIES_INFO 0x1166

/* "dir/gemm.cl" -> "gemm" */
static void stem(const char *path, char *out, size_t n)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out, n, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && dot != out) *dot = '\0';
}

static void write_binary(cl_program prog, const char *out, const char *name, size_t size)
{
    if (!size) return;
    unsigned char *bin = xmalloc(size);
    unsigned char *ptrs[1] = {bin};
    CL_CHECK(CL.clGetProgramInfo(prog, CL_PROGRAM_BINARIES_INFO, sizeof ptrs, ptrs, NULL), name);
    char file[600];
    snprintf(file, sizeof file, "%s.bin", name);
    write_output(out, file, bin, size);
    free(bin);
}

int mode_build(const runner_opts *o)
{
    if (!o->nsources || !o->out) fail(EXIT_BAD_INPUT, "build needs --source FILE.cl (repeatable) and --out DIR");
    cl_platform_id plat;
    cl_device_id dev;
    cl_select(o->cl_lib, &o->sel, &plat, &dev);
    if (make_dirs(o->out) != 0) fail(EXIT_INTERNAL, "cannot create %s: %s", o->out, strerror(errno));
    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM_PROP, (cl_context_properties)plat, 0};
    cl_context ctx = CL.clCreateContext(props, 1, &dev, NULL, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateContext", e, "build");
    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_key(&w, "device"); cl_write_device_json(&w, plat, dev);
    jw_key(&w, "options"); jw_str(&w, o->options);
    jw_key(&w, "programs");
    jw_arr_begin(&w);
    int failed = -1;
    char *failed_log = NULL;
    cl_int failed_err = CL_SUCCESS;
    for (int i = 0; i < o->nsources && failed < 0; i++) {
        char *src = read_file(o->sources[i], NULL);
        if (!src) fail(EXIT_BUNDLE, "kernel source %s cannot be read: %s", o->sources[i], strerror(errno));
        char name[256];
        stem(o->sources[i], name, sizeof name);
        cl_program prog = NULL;
        double ms;
        char *log;
        e = cl_build_source(ctx, dev, src, o->options, &prog, &ms, &log);
        size_t bin = 0;
        if (e == CL_SUCCESS) {
            CL.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bin, &bin, NULL);
            write_binary(prog, o->out, name, bin);
        }
        jw_obj_begin(&w);
        jw_key(&w, "program"); jw_str(&w, name);
        jw_key(&w, "source"); jw_str(&w, o->sources[i]);
        jw_key(&w, "status"); jw_str(&w, e == CL_SUCCESS ? "ok" : "failed");
        jw_key(&w, "error"); jw_str(&w, e == CL_SUCCESS ? NULL : cl_error_name(e));
        jw_key(&w, "build_ms"); jw_num(&w, ms);
        jw_key(&w, "binary_size_bytes"); jw_int(&w, (long long)bin);
        jw_key(&w, "binary"); if (bin) { char f[600]; snprintf(f, sizeof f, "%s.bin", name); jw_str(&w, f); } else jw_null(&w);
        jw_key(&w, "log"); jw_str(&w, log);
        jw_obj_end(&w);
        if (e != CL_SUCCESS) { failed = i; failed_log = log; failed_err = e; } else free(log);
        if (prog) CL.clReleaseProgram(prog);
        free(src);
    }
    jw_arr_end(&w);
    jw_key(&w, "status"); jw_str(&w, failed < 0 ? "ok" : "failed");
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    write_output(o->out, "build.json", w.buf, w.len);
    jw_free(&w);
    if (failed >= 0) {
        fprintf(stderr, "%s\n", failed_log);
        fail(EXIT_BUILD, "kernel build failed: %s (options \"%s\"): %s; the compiler log is above",
             o->sources[failed], o->options, cl_error_name(failed_err));
    }
    return EXIT_OK;
}
