/* bench-bandwidth mode: h2d, d2h, map, unmap and d2d over a doubling size sweep, and kernel
 * launch latency, in the manner of clpeak (github.com/krrishnarraj/clpeak): warm-up calls,
 * then an iteration count calibrated so one repeat lasts at least --min-time-ms, then
 * --repeats repeats; the median repeat is reported. Device time comes from the commands'
 * profiling events (start..end), host time from CLOCK_MONOTONIC around the blocking call.
 * Writes DIR/bandwidth.csv (one row per op and size) and DIR/bench.json (device, latency). */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "modes.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_CONTEXT_PLATFORM_PROP 0x1084
#define WARMUP_CALLS 2
#define MAX_ITERS 1000

enum { B_H2D, B_D2H, B_MAP, B_UNMAP, B_D2D, B_NOPS };
static const char *const op_names[B_NOPS] = {"h2d", "d2h", "map", "unmap", "d2d"};

typedef struct {
    cl_context ctx;
    cl_command_queue q;
    cl_mem a, b, mapped;
    void *host;
} bench_env;

static cl_ulong event_ns(cl_event ev)
{
    cl_ulong s = 0, e = 0;
    CL_CHECK(CL.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL), "bench");
    CL_CHECK(CL.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL), "bench");
    CL.clReleaseEvent(ev);
    return e > s ? e - s : 0;
}

/* One timed command of `op` over `size` bytes; adds its device and host ns. */
static void one_call(bench_env *b, int op, size_t size, double *dev_ns, double *host_ns)
{
    cl_event ev = NULL;
    cl_int e = CL_SUCCESS;
    void *p = NULL;
    if (op == B_UNMAP) {   /* untimed map first */
        p = CL.clEnqueueMapBuffer(b->q, b->mapped, CL_TRUE, CL_MAP_WRITE, 0, size, 0, NULL, NULL, &e);
        if (e != CL_SUCCESS) cl_fail("clEnqueueMapBuffer", e, "bench-bandwidth unmap");
    }
    uint64_t t0 = monotonic_ns();
    switch (op) {
    case B_H2D:
        CL_CHECK(CL.clEnqueueWriteBuffer(b->q, b->a, CL_TRUE, 0, size, b->host, 0, NULL, &ev), "bench h2d");
        break;
    case B_D2H:
        CL_CHECK(CL.clEnqueueReadBuffer(b->q, b->a, CL_TRUE, 0, size, b->host, 0, NULL, &ev), "bench d2h");
        break;
    case B_MAP:
        p = CL.clEnqueueMapBuffer(b->q, b->mapped, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0,
                                  NULL, &ev, &e);
        if (e != CL_SUCCESS) cl_fail("clEnqueueMapBuffer", e, "bench-bandwidth map");
        break;
    case B_UNMAP:
        CL_CHECK(CL.clEnqueueUnmapMemObject(b->q, b->mapped, p, 0, NULL, &ev), "bench unmap");
        CL_CHECK(CL.clWaitForEvents(1, &ev), "bench unmap");
        break;
    case B_D2D:
        CL_CHECK(CL.clEnqueueCopyBuffer(b->q, b->a, b->b, 0, 0, size, 0, NULL, &ev), "bench d2d");
        CL_CHECK(CL.clWaitForEvents(1, &ev), "bench d2d");
        break;
    }
    *host_ns += (double)(monotonic_ns() - t0);
    *dev_ns += (double)event_ns(ev);
    if (op == B_MAP) {   /* untimed unmap */
        CL_CHECK(CL.clEnqueueUnmapMemObject(b->q, b->mapped, p, 0, NULL, NULL), "bench map");
        CL_CHECK(CL.clFinish(b->q), "bench map");
    }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void bench_point(bench_env *b, const runner_opts *o, int op, size_t size, jwriter *csv)
{
    double d = 0, h = 0;
    for (int i = 0; i < WARMUP_CALLS; i++) one_call(b, op, size, &d, &h);
    d = h = 0;
    one_call(b, op, size, &d, &h);   /* calibration: one call's host time */
    int iters = h > 0 ? (int)(o->min_time_ms * 1e6 / h) + 1 : MAX_ITERS;
    if (iters > MAX_ITERS) iters = MAX_ITERS;
    double *dev = xcalloc((size_t)o->repeats, sizeof *dev), *host = xcalloc((size_t)o->repeats, sizeof *host);
    for (int r = 0; r < o->repeats; r++) {
        for (int i = 0; i < iters; i++) one_call(b, op, size, &dev[r], &host[r]);
        dev[r] /= iters;
        host[r] /= iters;
    }
    double dm = median(dev, o->repeats), hm = median(host, o->repeats);
    jw_printf(csv, "%s,%zu,%d,%d,%.1f,%.1f,%.6g,%.6g\n", op_names[op], size, iters, o->repeats, dm,
              hm, dm > 0 ? (double)size / dm : 0.0, hm > 0 ? (double)size / hm : 0.0);
    free(dev);
    free(host);
}

/* Empty-kernel launch latency: queued->start and submit->start on the device clock, and the
 * host round trip of enqueue + clFinish; medians over the calibrated number of launches. */
static void bench_latency(bench_env *b, cl_device_id dev, const runner_opts *o, jwriter *w)
{
    static const char *src = "__kernel void empty_kernel(__global float *x) { (void)x; }\n";
    cl_program prog;
    double ms;
    char *log;
    cl_int e = cl_build_source(b->ctx, dev, src, "", &prog, &ms, &log);
    if (e != CL_SUCCESS) { fprintf(stderr, "%s\n", log); fail(EXIT_BUILD, "building the empty kernel failed: %s", cl_error_name(e)); }
    free(log);
    cl_kernel k = CL.clCreateKernel(prog, "empty_kernel", &e);
    if (e != CL_SUCCESS) cl_fail("clCreateKernel", e, "empty_kernel");
    CL_CHECK(CL.clSetKernelArg(k, 0, sizeof b->a, &b->a), "empty_kernel");
    int n = 100 > MAX_ITERS ? MAX_ITERS : 100;
    if (o->min_time_ms < 5) n = 20;
    double *qs = xcalloc((size_t)n, sizeof *qs), *ss = xcalloc((size_t)n, sizeof *ss);
    double *rt = xcalloc((size_t)n, sizeof *rt);
    size_t global = 1;
    for (int i = -WARMUP_CALLS; i < n; i++) {
        cl_event ev;
        uint64_t t0 = monotonic_ns();
        CL_CHECK(CL.clEnqueueNDRangeKernel(b->q, k, 1, NULL, &global, NULL, 0, NULL, &ev), "empty_kernel");
        CL_CHECK(CL.clFinish(b->q), "empty_kernel");
        uint64_t t1 = monotonic_ns();
        cl_ulong qd, sd, st;
        CL_CHECK(CL.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_QUEUED, sizeof qd, &qd, NULL), "latency");
        CL_CHECK(CL.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_SUBMIT, sizeof sd, &sd, NULL), "latency");
        CL_CHECK(CL.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof st, &st, NULL), "latency");
        CL.clReleaseEvent(ev);
        if (i < 0) continue;
        qs[i] = st > qd ? (double)(st - qd) : 0;
        ss[i] = st > sd ? (double)(st - sd) : 0;
        rt[i] = (double)(t1 - t0);
    }
    jw_obj_begin(w);
    jw_key(w, "launches"); jw_int(w, n);
    jw_key(w, "queued_to_start_us"); jw_num(w, median(qs, n) / 1e3);
    jw_key(w, "submit_to_start_us"); jw_num(w, median(ss, n) / 1e3);
    jw_key(w, "host_round_trip_us"); jw_num(w, median(rt, n) / 1e3);
    jw_obj_end(w);
    free(qs); free(ss); free(rt);
    CL.clReleaseKernel(k);
    CL.clReleaseProgram(prog);
}

int mode_bench_bandwidth(const runner_opts *o)
{
    if (!o->out) fail(EXIT_BAD_INPUT, "bench-bandwidth needs --out DIR");
    if (o->min_bytes > o->max_bytes) fail(EXIT_BAD_INPUT, "--min-bytes %lld exceeds --max-bytes %lld", o->min_bytes, o->max_bytes);
    cl_platform_id plat;
    cl_device_id dev;
    cl_select(o->cl_lib, &o->sel, &plat, &dev);
    if (make_dirs(o->out) != 0) fail(EXIT_INTERNAL, "cannot create %s: %s", o->out, strerror(errno));
    bench_env b;
    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM_PROP, (cl_context_properties)plat, 0};
    b.ctx = CL.clCreateContext(props, 1, &dev, NULL, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateContext", e, "bench-bandwidth");
    b.q = CL.clCreateCommandQueue(b.ctx, dev, CL_QUEUE_PROFILING_ENABLE, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateCommandQueue", e, "bench-bandwidth");
    size_t maxb = (size_t)o->max_bytes;
    b.a = CL.clCreateBuffer(b.ctx, CL_MEM_READ_WRITE, maxb, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateBuffer", e, "bench-bandwidth");
    b.b = CL.clCreateBuffer(b.ctx, CL_MEM_READ_WRITE, maxb, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateBuffer", e, "bench-bandwidth");
    b.mapped = CL.clCreateBuffer(b.ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, maxb, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateBuffer", e, "bench-bandwidth (CL_MEM_ALLOC_HOST_PTR)");
    b.host = xcalloc(1, maxb);

    jwriter csv;
    jw_init(&csv);
    jw_printf(&csv, "op,size_bytes,iterations,repeats,device_ns,host_ns,device_gbps,host_gbps\n");
    for (int op = 0; op < B_NOPS; op++)
        for (size_t size = (size_t)o->min_bytes; size <= maxb; size *= 2)
            bench_point(&b, o, op, size, &csv);

    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "status"); jw_str(&w, "ok");
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_key(&w, "device"); cl_write_device_json(&w, plat, dev);
    jw_key(&w, "min_time_ms"); jw_num(&w, o->min_time_ms);
    jw_key(&w, "repeats"); jw_int(&w, o->repeats);
    jw_key(&w, "latency"); bench_latency(&b, dev, o, &w);
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    write_output(o->out, "bandwidth.csv", csv.buf, csv.len);
    write_output(o->out, "bench.json", w.buf, w.len);
    jw_free(&w);
    jw_free(&csv);
    free(b.host);
    return EXIT_OK;
}
