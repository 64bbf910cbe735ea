/* Record and replay of a step's launches, part of bench-bandwidth: what the host pays per
 * iteration of REPLAY_LAUNCHES kernel launches (about a fused MLP step's 8 to a LeNet-5
 * baseline step's 55) when they are enqueued one by one, as the runner's training iterations
 * do, and when they are replayed from a command buffer recorded once (cl_khr_command_buffer,
 * Khronos OpenCL Extension Specification, provisional 0.9).
 *
 * Four modes, each on its own in-order queue: enqueued with an event per launch on a
 * profiling queue (the runner's way: its trace needs every launch's device time), enqueued
 * without events on a plain queue, and replayed on each of the two queues where the device
 * lists cl_khr_command_buffer. An iteration is the launches (or one replay) and a clFinish,
 * timed on CLOCK_MONOTONIC; the median over the iterations after REPLAY_WARMUP is reported in
 * us. The kernel counts its launches in a buffer, and every mode's count is checked against
 * the launches it enqueued or replayed, so a replay that drops launches fails the bench. */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "modes.h"
#include "stats.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPLAY_LAUNCHES 32
#define REPLAY_WARMUP 2

typedef struct {
    cl_create_command_buffer_khr_fn create;
    cl_command_ndrange_kernel_khr_fn ndrange;
    cl_finalize_command_buffer_khr_fn finalize;
    cl_enqueue_command_buffer_khr_fn enqueue;
    cl_release_command_buffer_khr_fn release;
    cl_get_command_buffer_info_khr_fn info;   /* optional: 0 leaves out the wait below */
} command_buffer_api;

/* The extension's entry points, or 0 when the device does not list it or an entry is missing. */
static int command_buffer_lookup(cl_platform_id plat, cl_device_id dev, command_buffer_api *api)
{
    char *ext = cl_device_str(dev, CL_DEVICE_EXTENSIONS);
    int listed = strstr(ext, "cl_khr_command_buffer") != NULL;
    free(ext);
    if (!listed) return 0;
#define CB_FN(field, name) (*(void **)&api->field = CL.clGetExtensionFunctionAddressForPlatform(plat, name))
    return CB_FN(create, "clCreateCommandBufferKHR") && CB_FN(ndrange, "clCommandNDRangeKernelKHR") &&
           CB_FN(finalize, "clFinalizeCommandBufferKHR") && CB_FN(enqueue, "clEnqueueCommandBufferKHR") &&
           CB_FN(release, "clReleaseCommandBufferKHR") &&
           (CB_FN(info, "clGetCommandBufferInfoKHR"), 1);
#undef CB_FN
}

/* Wait (outside the timed span) until cb has left the Pending state: after clFinish an
 * implementation may move a finished buffer back to Executable a moment later (PoCL does it
 * from its event notification), and enqueueing it while Pending is CL_INVALID_OPERATION
 * (cl_khr_command_buffer, clEnqueueCommandBufferKHR). At most about 2 s; then the enqueue
 * reports the state as the error it is. */
static void wait_executable(const command_buffer_api *api, cl_command_buffer_khr cb)
{
    if (!api->info) return;
    for (int tries = 0; tries < 20000; tries++) {
        cl_uint state = 0;
        if (api->info(cb, CL_COMMAND_BUFFER_STATE_KHR, sizeof state, &state, NULL) != CL_SUCCESS ||
            state != CL_COMMAND_BUFFER_STATE_PENDING_KHR)
            return;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* One mode's iterations: returns the median host us per iteration; fails when the kernel's
 * launch count differs from what was enqueued. */
static double time_mode(cl_command_queue q, cl_kernel k, cl_mem count, const command_buffer_api *api,
                        cl_command_buffer_khr cb, int with_events, int iterations, const char *mode)
{
    static const cl_int zero = 0;
    size_t global = 1;
    CL_CHECK(CL.clEnqueueWriteBuffer(q, count, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL), mode);
    double *us = xcalloc((size_t)iterations, sizeof *us);
    for (int i = -REPLAY_WARMUP; i < iterations; i++) {
        cl_event ev[REPLAY_LAUNCHES] = {0};
        if (cb) wait_executable(api, cb);
        uint64_t t0 = monotonic_ns();
        if (cb) {
            CL_CHECK(api->enqueue(1, &q, cb, 0, NULL, NULL), mode);
        } else {
            for (int l = 0; l < REPLAY_LAUNCHES; l++)
                CL_CHECK(CL.clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL,
                                                   with_events ? &ev[l] : NULL), mode);
        }
        CL_CHECK(CL.clFinish(q), mode);
        uint64_t t1 = monotonic_ns();
        for (int l = 0; l < REPLAY_LAUNCHES; l++) if (ev[l]) CL.clReleaseEvent(ev[l]);
        if (i >= 0) us[i] = (double)(t1 - t0) / 1e3;
    }
    cl_int counted = 0;
    CL_CHECK(CL.clEnqueueReadBuffer(q, count, CL_TRUE, 0, sizeof counted, &counted, 0, NULL, NULL), mode);
    long long expected = (long long)(iterations + REPLAY_WARMUP) * REPLAY_LAUNCHES;
    if (counted != expected)
        fail(EXIT_CL_RUNTIME, "bench-bandwidth replay (%s): the kernel ran %d times, %lld launches were "
             "%s", mode, counted, expected, cb ? "recorded and replayed" : "enqueued");
    double median = stats_median(us, iterations);
    free(us);
    return median;
}

/* A command buffer of REPLAY_LAUNCHES launches of k, recorded for q and finalized. */
static cl_command_buffer_khr record(const command_buffer_api *api, cl_command_queue q, cl_kernel k)
{
    cl_int e;
    size_t global = 1;
    cl_command_buffer_khr cb = api->create(1, &q, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateCommandBufferKHR", e, "bench-bandwidth replay");
    for (int l = 0; l < REPLAY_LAUNCHES; l++)
        CL_CHECK(api->ndrange(cb, NULL, NULL, k, 1, NULL, &global, NULL, 0, NULL, NULL, NULL),
                 "bench-bandwidth replay");
    CL_CHECK(api->finalize(cb), "bench-bandwidth replay");
    return cb;
}

void bench_replay(cl_context ctx, cl_platform_id plat, cl_device_id dev, const runner_opts *o, jwriter *w)
{
    static const char *src = "__kernel void count_launch(__global int *n) { n[0] += 1; }\n";
    cl_program prog;
    double build_ms;
    char *log;
    cl_int e = cl_build_source(ctx, dev, src, "", &prog, &build_ms, &log);
    if (e != CL_SUCCESS) { fprintf(stderr, "%s\n", log); fail(EXIT_BUILD, "building the launch-counting kernel failed: %s", cl_error_name(e)); }
    free(log);
    cl_kernel k = CL.clCreateKernel(prog, "count_launch", &e);
    if (e != CL_SUCCESS) cl_fail("clCreateKernel", e, "count_launch");
    cl_mem count = CL.clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(cl_int), NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateBuffer", e, "the launch counter");
    CL_CHECK(CL.clSetKernelArg(k, 0, sizeof count, &count), "count_launch");
    cl_command_queue q[2];   /* [0] profiling (the runner's), [1] plain */
    for (int i = 0; i < 2; i++) {
        q[i] = CL.clCreateCommandQueue(ctx, dev, i == 0 ? CL_QUEUE_PROFILING_ENABLE : 0, &e);
        if (e != CL_SUCCESS) cl_fail("clCreateCommandQueue", e, "bench-bandwidth replay");
    }
    int iterations = o->min_time_ms < 5 ? 10 : 50;
    command_buffer_api api = {0};
    int has_cb = command_buffer_lookup(plat, dev, &api);
    jw_obj_begin(w);
    jw_key(w, "launches_per_iteration"); jw_int(w, REPLAY_LAUNCHES);
    jw_key(w, "iterations"); jw_int(w, iterations);
    jw_key(w, "command_buffer"); jw_str(w, has_cb ? "cl_khr_command_buffer" : NULL);
    jw_key(w, "enqueue_profiled_us"); jw_num(w, time_mode(q[0], k, count, NULL, NULL, 1, iterations, "enqueued, profiled"));
    jw_key(w, "enqueue_plain_us"); jw_num(w, time_mode(q[1], k, count, NULL, NULL, 0, iterations, "enqueued, plain"));
    for (int i = 0; i < 2; i++) {
        jw_key(w, i == 0 ? "replay_profiled_us" : "replay_plain_us");
        if (!has_cb) { jw_null(w); continue; }
        cl_command_buffer_khr cb = record(&api, q[i], k);
        jw_num(w, time_mode(q[i], k, count, &api, cb, 0, iterations, i == 0 ? "replayed, profiled" : "replayed, plain"));
        api.release(cb);
    }
    jw_obj_end(w);
    for (int i = 0; i < 2; i++) CL.clReleaseCommandQueue(q[i]);
    CL.clReleaseMemObject(count);
    CL.clReleaseKernel(k);
    CL.clReleaseProgram(prog);
}
