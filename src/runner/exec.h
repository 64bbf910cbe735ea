/* The run mode's shared state and the three executors (exec_cpu.c, exec_cl.c, exec_vk.c). */
#ifndef PHONETRAIN_EXEC_H
#define PHONETRAIN_EXEC_H

#include "cl_loader.h"
#include "json.h"
#include "plan.h"
#include "trace.h"

typedef struct {
    pt_plan *plan;
    const char *root;          /* bundle root: plan paths are relative to it */
    int threads;               /* CPU backend threads actually used */
    trace tr;
    /* opencl backend */
    const char *cl_lib;
    const char *clblast_lib;   /* explicit libclblast path, or NULL */
    int use_clblast;           /* a program has "source": "clblast" */
    cl_selector sel;
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;    /* queue 0: kernels and every v1 command */
    cl_command_queue queue1;   /* queue 1 (plan v2): non-blocking transfers; NULL if unused */
    cl_event *step_events;     /* this iteration's event per step (wait lists name them) */
    int profiling;             /* queue 0 profiles and every command returns an event (the
                                  trace's device times); 0: --no-profiling, host times only */
    int q0_writes_pending;     /* a non-blocking upload on queue 0 may still read a host copy */
    cl_program *programs;
    long long device_bytes;    /* sum of device buffer sizes allocated */
    jwriter build_json;        /* array of per-program build records, for run.json */
    /* vulkan backend */
    const char *vk_lib;        /* explicit libvulkan path, or NULL */
    const char *vk_select;     /* substring of the Vulkan device name, or NULL */
    void *vk_device;           /* vk_device * (vk_api.h) once vk_setup chose it */
    void *vk_state;            /* the executor's state (exec_vk.c vk_state), from vk_setup */
} run_ctx;

/* CPU backend: thread count; each iteration runs every step with cpu_kernel_run. */
void cpu_setup(run_ctx *rc);
uint64_t cpu_iteration(run_ctx *rc, int iteration, int warmup);   /* returns the end time (ns) */

/* OpenCL backend: device, programs, kernels (arguments set once), buffers initialized from
 * the host copies (untimed). Each iteration enqueues every step with a profiling event on
 * its queue (0, or 1 for a v2 plan's transfer queue: non-blocking, with the step's wait
 * list), waits for every queue, then reads the events into the trace. With rc->profiling 0
 * (one-queue plans only) no command returns an event and the trace keeps host times. */
void cl_setup(run_ctx *rc);
uint64_t cl_iteration(run_ctx *rc, int iteration, int warmup);    /* after clFinish; rows get device times */
/* Copies the authoritative ("home") contents of tensor t into dst (size_bytes). */
void cl_read_home(run_ctx *rc, pt_tensor *t, void *dst);

/* Vulkan backend (exec_vk.c): device, SPIR-V pipelines (one per kernel and work-group size),
 * buffers initialized from the host copies (untimed), one descriptor set and push-constant
 * block per kernel step. Each iteration records the steps into command buffers, submits and
 * waits where the host needs results (downloads, maps, the end), then reads the timestamp
 * queries into the trace's device times. */
void vk_setup(run_ctx *rc);
uint64_t vk_iteration(run_ctx *rc, int iteration, int warmup);   /* after the last wait */
void vk_read_home(run_ctx *rc, pt_tensor *t, void *dst);
void vk_write_run_device(run_ctx *rc, jwriter *w);    /* run.json "device" */
double vk_timer_resolution_ns(run_ctx *rc);            /* the timestamp period */

/* Builds one program from source for device d. Returns the cl_int status of clBuildProgram
 * (or of program creation); *log gets the malloc'd build log, *build_ms the wall time. */
cl_int cl_build_source(cl_context ctx, cl_device_id d, const char *source, const char *options,
                       cl_program *program, double *build_ms, char **log);

#endif
