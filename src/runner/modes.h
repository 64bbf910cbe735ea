/* The runner's modes; main.c parses the command line into these options. */
#ifndef PHONETRAIN_MODES_H
#define PHONETRAIN_MODES_H

#include "cl_loader.h"
#include "json.h"

typedef struct {
    const char *plan, *root, *out;
    const char *previous_plan, *previous_out;  /* run: a second plan measured side by side
                                (run.c), its outputs in previous_out; NULL: one plan */
    const char *cl_lib;
    const char *clblast_lib; /* run: explicit libclblast path */
    const char *vk_lib;      /* run, backend vulkan: explicit libvulkan path */
    const char *vk_device;   /* run, backend vulkan: substring of the device name */
    cl_selector sel;
    int threads;             /* 0 = all cores */
    int progress;            /* one stderr line per iteration */
    int no_profiling;        /* run, OpenCL: a queue without profiling and no event per
                                command (trace rows keep host times only) */
    int no_checkpoints;      /* run: keep none of the plan's checkpoints (a process whose
                                steps are not verified: no snapshot, no tail iterations) */
    int no_probe;            /* run: no calibration probe (a process no verdict judges);
                                run.json's "probe" is null */
    double ci_target;        /* run: > 0 measures adaptively until the 95% interval of the
                                location estimate (stats.h ESTIMATE_QUANTILE) is within
                                +-ci_target (relative); 0 = exactly the plan's count */
    int max_iterations;      /* run, adaptive: at most this many measured iterations */
    double min_seconds;      /* run, adaptive: judge the interval only once measuring took
                                this long (>= max_seconds: never stop on the interval) */
    double max_seconds;      /* run, adaptive: stop deciding once measuring took this long */
    int resamples;           /* bootstrap resamples of the confidence interval */
    int power_sample_ms;     /* run: battery power and clock sampling period (0 = off) */
    const char *sysfs_root;  /* folder standing for /sys (NULL: $PHONETRAIN_SYSFS_ROOT, /sys) */
    const char *sources[64]; int nsources;   /* build */
    const char *options;                     /* build */
    long long min_bytes, max_bytes;          /* bench-bandwidth */
    double min_time_ms;      /* bench-bandwidth, bench-gemm, bench-peak: calibration target
                                (per-mode default: main.c's mode table) */
    int repeats;                             /* bench-bandwidth */
    const char *spec;                        /* bench-gemm: SPEC.json */
    long long work_items;    /* bench-peak: compute work-items (0 = CUs x max work-group x 16) */
} runner_opts;

int mode_info(const runner_opts *o);
int mode_build(const runner_opts *o);
int mode_run(const runner_opts *o);
int mode_bench_bandwidth(const runner_opts *o);
/* bench-bandwidth's "replay" object: host us per iteration of a step's launches enqueued one
 * by one and replayed from a cl_khr_command_buffer (null where the device lacks it); fails
 * the run when a mode's kernel did not run once per launch. Layout: bench_replay.c. */
void bench_replay(cl_context ctx, cl_platform_id plat, cl_device_id dev, const runner_opts *o,
                  jwriter *w);
/* bench-gemm --spec SPEC.json --out DIR [selectors] [--clblast-lib PATH] [--min-time-ms T]:
 * GEMM GFLOPS per kernel version (an OpenCL source, CLBlast or the CPU backend); writes
 * DIR/gemm.json. Returns EXIT_OK also when CLBlast or image support is absent: the output then
 * says "status": "skipped" with the reason. Spec and output: bench_gemm.c. */
int mode_bench_gemm(const runner_opts *o);
/* bench-peak --out DIR [selectors] [--min-time-ms T] [--work-items N]: clpeak-style peak
 * compute and read bandwidth (the device's roofline); writes DIR/peaks.json. */
int mode_bench_peak(const runner_opts *o);

/* {"cpu_model", "logical_cores"} of this host (from /proc/cpuinfo and OpenMP). */
void write_host_json(jwriter *w);
/* {"version", "source_hash", "opencl_library"} */
void write_runner_json(jwriter *w);
/* Writes w's buffer to dir/name atomically; fails with EXIT_INTERNAL naming the file. */
void write_output(const char *dir, const char *name, const void *data, size_t len);

#endif
