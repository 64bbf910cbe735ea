/* runner: executes phonetrain plans on a device's CPU or OpenCL device.
 *
 *   runner info [--cl-lib PATH]
 *   runner build --source A.cl [--source B.cl ...] [--options "..."] --out DIR [selectors]
 *   runner run --plan PLAN.json --root DIR --out DIR [--threads N] [--progress] [--no-profiling]
 *              [--no-checkpoints] [--no-probe] [--previous-plan PLAN.json --previous-out DIR]
 *              [--ci-target F --max-iterations N --min-seconds S --max-seconds S]
 *              [--resamples B]
 *              [--power-sample-ms MS] [--sysfs-root DIR] [selectors]
 *   runner bench-bandwidth --out DIR [--min-bytes N] [--max-bytes N] [--min-time-ms T]
 *                          [--repeats R] [selectors]
 *   runner bench-gemm --spec SPEC.json --out DIR [--clblast-lib PATH] [--min-time-ms T]
 *                     [selectors]
 *   runner bench-peak --out DIR [--min-time-ms T] [--work-items N] [selectors]
 *   selectors: [--platform SUBSTR] [--device SUBSTR] [--device-type gpu|cpu|accelerator|all]
 *              [--cl-lib PATH]
 *
 * One parser (parse) reads the options of every mode; the mode table (modes) maps a mode's
 * name to its function and its defaults that differ between modes.
 * Exit codes: see util.h and README.md. */
#define _POSIX_C_SOURCE 200809L
#include "conditions.h"
#include "modes.h"
#include "util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: runner info|build|run|bench-bandwidth|bench-gemm|bench-peak [options]\n"
    "  run --plan FILE --root DIR --out DIR [--threads N] [--progress] [--no-profiling] [--no-checkpoints] [--no-probe] [--clblast-lib PATH]\n"
    "      [--vk-lib PATH] [--vk-device SUBSTR] (backend vulkan: its library and device; without\n"
    "      --vk-device the first GPU, else the first device; the OpenCL selectors are ignored)\n"
    "      [--ci-target F] [--max-iterations N] [--min-seconds S] [--max-seconds S]\n"
    "      [--resamples B] [--power-sample-ms MS] [--sysfs-root DIR]\n"
    "      [--previous-plan FILE --previous-out DIR] (a second plan of the same backend measured\n"
    "      side by side in this process, iterations alternating; its outputs in its own folder)\n"
    "  build --source FILE.cl [--source ...] [--options STR] --out DIR\n"
    "  bench-bandwidth --out DIR [--min-bytes N] [--max-bytes N] [--min-time-ms T] [--repeats R]\n"
    "  bench-gemm --spec FILE --out DIR [--clblast-lib PATH] [--min-time-ms T]\n"
    "  bench-peak --out DIR [--min-time-ms T] [--work-items N]\n"
    "  OpenCL selectors: --platform SUBSTR --device SUBSTR --device-type gpu|cpu|accelerator|all"
    " --cl-lib PATH\n";

typedef struct {
    const char *name;
    int (*fn)(const runner_opts *o);
    double min_time_ms;   /* --min-time-ms default */
} runner_mode;

/* bench-gemm and bench-peak calibrate each timed repeat to 200 ms by default (a bench-gemm
 * spec's "min_time_ms" overrides it), bench-bandwidth to 20 ms: each mode keeps its own
 * documented default for the same option. */
static const runner_mode modes[] = {
    {"info", mode_info, 20},
    {"build", mode_build, 20},
    {"run", mode_run, 20},
    {"bench-bandwidth", mode_bench_bandwidth, 20},
    {"bench-gemm", mode_bench_gemm, 200},
    {"bench-peak", mode_bench_peak, 200},
};

static long long parse_ll(const char *opt, const char *v, long long lo)
{
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || end == v || x < lo) fail(EXIT_BAD_INPUT, "%s %s: expected an integer >= %lld", opt, v, lo);
    return x;
}

/* An int option: a larger value would be cut to 32 bits and run another count than asked. */
static int parse_int(const char *opt, const char *v, int lo)
{
    long long x = parse_ll(opt, v, lo);
    if (x > INT_MAX) fail(EXIT_BAD_INPUT, "%s %s: expected an integer %d..%d", opt, v, lo, INT_MAX);
    return (int)x;
}

static double parse_double(const char *opt, const char *v, double lo)
{
    char *end;
    double x = strtod(v, &end);
    if (*end || end == v || !(x >= lo)) fail(EXIT_BAD_INPUT, "%s %s: expected a number >= %g", opt, v, lo);
    return x;
}

static void parse(int argc, char **argv, const runner_mode *m, runner_opts *o)
{
    memset(o, 0, sizeof *o);
    o->min_bytes = 4096;
    o->max_bytes = 64ll << 20;
    o->min_time_ms = m->min_time_ms;
    o->repeats = 3;
    o->options = "";
    o->max_iterations = 1000;
    o->max_seconds = 30;
    o->resamples = 1000;
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--progress")) { o->progress = 1; continue; }
        if (!strcmp(k, "--no-profiling")) { o->no_profiling = 1; continue; }
        if (!strcmp(k, "--no-checkpoints")) { o->no_checkpoints = 1; continue; }
        if (!strcmp(k, "--no-probe")) { o->no_probe = 1; continue; }
        if (i + 1 >= argc) fail(EXIT_BAD_INPUT, "%s %s needs a value\n%s", argv[1], k, usage);
        const char *v = argv[++i];
        if (!strcmp(k, "--plan")) o->plan = v;
        else if (!strcmp(k, "--root")) o->root = v;
        else if (!strcmp(k, "--out")) o->out = v;
        else if (!strcmp(k, "--previous-plan")) o->previous_plan = v;
        else if (!strcmp(k, "--previous-out")) o->previous_out = v;
        else if (!strcmp(k, "--threads")) o->threads = parse_int(k, v, 0);
        else if (!strcmp(k, "--platform")) o->sel.platform = v;
        else if (!strcmp(k, "--device")) o->sel.device = v;
        else if (!strcmp(k, "--device-type")) o->sel.type = v;
        else if (!strcmp(k, "--cl-lib")) o->cl_lib = v;
        else if (!strcmp(k, "--clblast-lib")) o->clblast_lib = v;
        else if (!strcmp(k, "--vk-lib")) o->vk_lib = v;
        else if (!strcmp(k, "--vk-device")) o->vk_device = v;
        else if (!strcmp(k, "--options")) o->options = v;
        else if (!strcmp(k, "--min-bytes")) o->min_bytes = parse_ll(k, v, 4);
        else if (!strcmp(k, "--max-bytes")) o->max_bytes = parse_ll(k, v, 4);
        else if (!strcmp(k, "--min-time-ms")) o->min_time_ms = parse_double(k, v, 0);
        else if (!strcmp(k, "--repeats")) o->repeats = parse_int(k, v, 1);
        else if (!strcmp(k, "--ci-target")) o->ci_target = parse_double(k, v, 0);
        else if (!strcmp(k, "--max-iterations")) o->max_iterations = parse_int(k, v, 1);
        else if (!strcmp(k, "--min-seconds")) o->min_seconds = parse_double(k, v, 0);
        else if (!strcmp(k, "--max-seconds")) o->max_seconds = parse_double(k, v, 0);
        else if (!strcmp(k, "--resamples")) o->resamples = parse_int(k, v, 2);
        else if (!strcmp(k, "--power-sample-ms")) o->power_sample_ms = parse_int(k, v, 0);
        else if (!strcmp(k, "--sysfs-root")) o->sysfs_root = v;
        else if (!strcmp(k, "--spec")) o->spec = v;
        else if (!strcmp(k, "--work-items")) o->work_items = parse_ll(k, v, 0);
        else if (!strcmp(k, "--source")) {
            if (o->nsources == 64) fail(EXIT_BAD_INPUT, "build: at most 64 --source files");
            o->sources[o->nsources++] = v;
        } else fail(EXIT_BAD_INPUT, "%s: unknown option %s\n%s", argv[1], k, usage);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_BAD_INPUT : EXIT_OK;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "--version")) { printf("runner %s %s\n", RUNNER_VERSION, RUNNER_SOURCE_HASH); return 0; }
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(mode, modes[i].name)) continue;
        runner_opts o;
        parse(argc, argv, &modes[i], &o);
        cond_set_sysfs_root(o.sysfs_root);
        return modes[i].fn(&o);
    }
    fail(EXIT_BAD_INPUT, "unknown mode \"%s\"\n%s", mode, usage);
}
