/* bench-bandwidth mode: h2d, d2h, d2d, map and unmap over a doubling size sweep, and kernel
 * launch latency, in the manner of clpeak (github.com/krrishnarraj/clpeak): warm-up calls,
 * then an iteration count calibrated so one repeat lasts at least --min-time-ms, then
 * --repeats repeats; the median repeat is reported. Device time comes from the commands'
 * profiling events (start..end), host time from CLOCK_MONOTONIC around the blocking call.
 *
 * Each op's sweep grows the size until its time grows with size: the host time (of the
 * fastest repeat: the least disturbed) rises by LINEAR_RATIO or more at two consecutive
 * doublings, each time at least KNEE_FLOOR times the smallest time of the sweep ("knee"; the
 * fixed per-call cost is then under ~10% of a call: the bandwidth regime). knee_bytes is the
 * last size before the time first rose by KNEE_RATIO (over KNEE_FLOOR times the smallest):
 * where the per-call cost stops hiding the transfer. Otherwise the sweep ends at the cap: --max-bytes, the device's largest allocation
 * and a quarter of its global memory ("cap"). map and unmap (host<->device ops) also stop once
 * the size is FLAT_FACTOR times what the best h2d/d2h bandwidth moves in their measured time
 * ("flat": a copy at that bandwidth would have grown far past them; zero-copy).
 * map times a CL_MAP_READ map (device -> host, as a training step's read), unmap the unmap of
 * a CL_MAP_WRITE_INVALIDATE_REGION map (host -> device, as a write), the flags the training
 * path uses (exec_cl.c); the companion call is untimed.
 * Writes DIR/bandwidth.csv (one row per op and size: medians of the repeats, and
 * host_gbps_low..host_gbps_high, the GB/s of the 95% percentile-bootstrap interval of the
 * median host time, stats.h) and DIR/bench.json (device, latency, record-and-replay host
 * times (bench_replay.c), and per op why its sweep stopped). */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "modes.h"
#include "stats.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_CONTEXT_PLATFORM_PROP 0x1084
#define WARMUP_CALLS 2
#define MAX_ITERS 1000
#define KNEE_RATIO 1.5
#define LINEAR_RATIO 1.8
#define KNEE_FLOOR 3.0
#define FLAT_FACTOR 16.0

enum { B_H2D, B_D2H, B_D2D, B_MAP, B_UNMAP, B_NOPS };
static const char *const op_names[B_NOPS] = {"h2d", "d2h", "d2d", "map", "unmap"};

typedef struct {
    cl_context ctx;
    cl_command_queue q;
    cl_mem a, b, mapped;       /* sized for the current point (re-created as it grows) */
    size_t size;
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

static void release(bench_env *b)
{
    if (b->a) CL.clReleaseMemObject(b->a);
    if (b->b) CL.clReleaseMemObject(b->b);
    if (b->mapped) CL.clReleaseMemObject(b->mapped);
    free(b->host);
    b->a = b->b = b->mapped = NULL;
    b->host = NULL;
    b->size = 0;
}

static cl_mem buffer(bench_env *b, cl_mem_flags flags, size_t size, const char *what)
{
    cl_int e;
    cl_mem m = CL.clCreateBuffer(b->ctx, flags, size, NULL, &e);
    char ctx[160];
    snprintf(ctx, sizeof ctx, "bench-bandwidth: %zu bytes for %s", size, what);
    if (e != CL_SUCCESS) cl_fail("clCreateBuffer", e, ctx);
    return m;
}

/* The buffers op needs, `size` bytes each (untimed; written once so pages are resident). */
static void prepare(bench_env *b, int op, size_t size)
{
    if (b->size == size) return;
    release(b);
    b->size = size;
    b->host = xcalloc(1, size);
    if (op == B_MAP || op == B_UNMAP) {
        b->mapped = buffer(b, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, op_names[op]);
        return;
    }
    b->a = buffer(b, CL_MEM_READ_WRITE, size, op_names[op]);
    CL_CHECK(CL.clEnqueueWriteBuffer(b->q, b->a, CL_TRUE, 0, size, b->host, 0, NULL, NULL), "bench");
    if (op == B_D2D) b->b = buffer(b, CL_MEM_READ_WRITE, size, op_names[op]);
}

/* One timed command of `op` over `size` bytes; adds its device and host ns. */
static void one_call(bench_env *b, int op, size_t size, double *dev_ns, double *host_ns)
{
    cl_event ev = NULL;
    cl_int e = CL_SUCCESS;
    void *p = NULL;
    if (op == B_UNMAP) {   /* untimed write map first */
        p = CL.clEnqueueMapBuffer(b->q, b->mapped, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, size,
                                  0, NULL, NULL, &e);
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
        p = CL.clEnqueueMapBuffer(b->q, b->mapped, CL_TRUE, CL_MAP_READ, 0, size, 0, NULL, &ev, &e);
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

/* Measures one point, appends its CSV row (medians of the repeats); returns the fastest
 * repeat's host ns per call (the least disturbed: the sweep's stop rules use it). */
static double bench_point(bench_env *b, const runner_opts *o, int op, size_t size, jwriter *csv,
                          double *gbps)
{
    prepare(b, op, size);
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
    double fastest = host[0];
    for (int r = 1; r < o->repeats; r++) if (host[r] < fastest) fastest = host[r];
    double dm = stats_median(dev, o->repeats), hm = stats_median(host, o->repeats), hlo, hhi;
    stats_median_ci(host, o->repeats, 1000, BOOTSTRAP_SEED, &hlo, &hhi);
    jw_printf(csv, "%s,%zu,%d,%d,%.1f,%.1f,%.6g,%.6g,%.6g,%.6g\n", op_names[op], size, iters,
              o->repeats, dm, hm, dm > 0 ? (double)size / dm : 0.0,
              hm > 0 ? (double)size / hm : 0.0, hhi > 0 ? (double)size / hhi : 0.0,
              hlo > 0 ? (double)size / hlo : 0.0);
    *gbps = fastest > 0 ? (double)size / fastest : 0.0;
    free(dev);
    free(host);
    return fastest;
}

/* One op's sweep to its knee, flatness or the cap; its record goes into bench.json. */
static void sweep_op(bench_env *b, const runner_opts *o, int op, size_t cap, double *link_gbps,
                     jwriter *csv, jwriter *w)
{
    double prev = 0, floor = 0, gbps = 0;
    int rising = 0;
    size_t size = (size_t)o->min_bytes, knee = 0, last = 0;
    const char *stopped = "cap";
    for (; size <= cap; size *= 2) {
        double t = bench_point(b, o, op, size, csv, &gbps);
        last = size;
        if ((op == B_H2D || op == B_D2H) && gbps > *link_gbps) *link_gbps = gbps;
        if (floor == 0 || t < floor) floor = t;
        int grows = prev > 0 && t >= KNEE_FLOOR * floor;
        if (!knee && grows && t >= KNEE_RATIO * prev) knee = size / 2;
        rising = grows && t >= LINEAR_RATIO * prev ? rising + 1 : 0;
        prev = t;
        if (rising == 2) { stopped = "knee"; break; }
        if ((op == B_MAP || op == B_UNMAP) && *link_gbps > 0 && t > 0 &&
            (double)size / *link_gbps >= FLAT_FACTOR * t) { stopped = "flat"; break; }
        if (size > cap / 2) break;
    }
    release(b);
    jw_key(w, op_names[op]);
    jw_obj_begin(w);
    jw_key(w, "stopped"); jw_str(w, stopped);
    jw_key(w, "knee_bytes"); if (knee) jw_int(w, (long long)knee); else jw_null(w);
    jw_key(w, "last_bytes"); jw_int(w, (long long)last);
    jw_key(w, "link_gbps"); jw_num(w, *link_gbps);
    jw_obj_end(w);
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
    jw_key(w, "queued_to_start_us"); jw_num(w, stats_median(qs, n) / 1e3);
    jw_key(w, "submit_to_start_us"); jw_num(w, stats_median(ss, n) / 1e3);
    jw_key(w, "host_round_trip_us"); jw_num(w, stats_median(rt, n) / 1e3);
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
    memset(&b, 0, sizeof b);
    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM_PROP, (cl_context_properties)plat, 0};
    b.ctx = CL.clCreateContext(props, 1, &dev, NULL, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateContext", e, "bench-bandwidth");
    b.q = CL.clCreateCommandQueue(b.ctx, dev, CL_QUEUE_PROFILING_ENABLE, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateCommandQueue", e, "bench-bandwidth");
    size_t cap = (size_t)o->max_bytes;
    size_t alloc = (size_t)cl_device_ulong(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    size_t quarter = (size_t)(cl_device_ulong(dev, CL_DEVICE_GLOBAL_MEM_SIZE) / 4);
    if (alloc && alloc < cap) cap = alloc;
    if (quarter && quarter < cap) cap = quarter;
    if (cap < (size_t)o->min_bytes) cap = (size_t)o->min_bytes;

    jwriter csv, w;
    jw_init(&csv);
    jw_printf(&csv, "op,size_bytes,iterations,repeats,device_ns,host_ns,device_gbps,host_gbps,"
              "host_gbps_low,host_gbps_high\n");
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "status"); jw_str(&w, "ok");
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_key(&w, "device"); cl_write_device_json(&w, plat, dev);
    jw_key(&w, "min_time_ms"); jw_num(&w, o->min_time_ms);
    jw_key(&w, "repeats"); jw_int(&w, o->repeats);
    jw_key(&w, "cap_bytes"); jw_int(&w, (long long)cap);
    jw_key(&w, "max_bytes"); jw_int(&w, o->max_bytes);
    jw_key(&w, "knee_ratio"); jw_num(&w, KNEE_RATIO);
    jw_key(&w, "linear_ratio"); jw_num(&w, LINEAR_RATIO);
    jw_key(&w, "knee_floor"); jw_num(&w, KNEE_FLOOR);
    jw_key(&w, "flat_factor"); jw_num(&w, FLAT_FACTOR);
    jw_key(&w, "sweeps");
    jw_obj_begin(&w);
    double link_gbps = 0;
    for (int op = 0; op < B_NOPS; op++) sweep_op(&b, o, op, cap, &link_gbps, &csv, &w);
    jw_obj_end(&w);
    prepare(&b, B_D2D, (size_t)o->min_bytes);
    jw_key(&w, "latency"); bench_latency(&b, dev, o, &w);
    jw_key(&w, "replay"); bench_replay(b.ctx, plat, dev, o, &w);
    release(&b);
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    write_output(o->out, "bandwidth.csv", csv.buf, csv.len);
    write_output(o->out, "bench.json", w.buf, w.len);
    jw_free(&w);
    jw_free(&csv);
    return EXIT_OK;
}
