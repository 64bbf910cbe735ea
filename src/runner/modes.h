/* The runner's modes; main.c parses the command line into these options. */
#ifndef PHONETRAIN_MODES_H
#define PHONETRAIN_MODES_H

#include "cl_loader.h"
#include "json.h"

typedef struct {
    const char *plan, *root, *out;
    const char *cl_lib;
    const char *clblast_lib; /* run: explicit libclblast path */
    cl_selector sel;
    int threads;             /* 0 = all cores */
    int progress;            /* one stderr line per iteration */
    double ci_target;        /* run: > 0 measures adaptively until the median's 95% interval
                                is within +-ci_target (relative); 0 = exactly the plan's count */
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
    double min_time_ms;                      /* bench-bandwidth calibration target */
    int repeats;                             /* bench-bandwidth */
} runner_opts;

int mode_info(const runner_opts *o);
int mode_build(const runner_opts *o);
int mode_run(const runner_opts *o);
int mode_bench_bandwidth(const runner_opts *o);

/* {"cpu_model", "logical_cores"} of this host (from /proc/cpuinfo and OpenMP). */
void write_host_json(jwriter *w);
/* {"version", "source_hash", "opencl_library"} */
void write_runner_json(jwriter *w);
/* Writes w's buffer to dir/name atomically; fails with EXIT_INTERNAL naming the file. */
void write_output(const char *dir, const char *name, const void *data, size_t len);

#endif
