/* Runner modes bench-gemm and bench-peak (modes.h; main.c parses their options).
 *
 * bench-gemm spec (JSON, written by phonetrain.kernels.gemm):
 *   {"backend": "opencl" | "cpu", "threads": 0,
 *    "source": "kernels/tiled/gemm.cl" | "clblast",  (a .cl path, or CLBlast's SGEMM)
 *    "options": "-DTSM=64 ...", "min_time_ms": 100, "repeats": 5, "seed": 1,
 *    "b_image_width4": 1024,   (optional: B as an image2d_t view, min(ceil(K*N/4), this) wide)
 *    "previous": {"source": "kernels/tiled.previous/gemm.cl", "options": "...",
 *                 "b_image_width4": 0, "first": 1},   (optional: a previous build, below)
 *    "sweep": {"max_launch_s": 5, "plateau_gain": 0.05, "plateau_cases": 2,
 *              "max_case_s": 2, "min_repeats": 3},   (optional: a square sweep, below)
 *    "cases": [{"kernel": "gemm_nn", "M": 32, "N": 256, "K": 784,
 *               "global": [64, 8], "local": [16, 4] | null,
 *               "options": "-DTSM=32 ...",   (optional: this case's build options, below)
 *               "previous": {...}}]}   (optional: the previous build's case, its own sizes)
 * Output DIR/gemm.json:
 *   {"mode": "bench-gemm", "status": "ok" | "skipped", "reason": "...", "device": {...},
 *    "backend", "source", "options", "build_ms",
 *    "cases": [{kernel, M, N, K, global, local, "status": "ok" | "wrong" | "error",
 *               "error": "...", "iterations", "repeat_ms": [...], "median_ms", "low_ms",
 *               "high_ms", "gflops", "max_err"}]}
 * A case's "options" (an OpenCL kernel source, without "previous") builds the source with
 * those options for that case: each distinct string is built once per process, when the first
 * case that needs it runs, and such a case echoes "options" and, when it built, "build_ms";
 * a build that fails makes each case of those options status "error", "build_failed": true,
 * "error" naming the options (the compiler log goes to stderr), and the process goes on. The
 * spec's own "options" are built (up front; a failure fails the process with the runner's
 * build exit code) only when some case has no options of its own.
 * With "sweep" the cases are a GEMM sweep's squares in ascending size, measured in order,
 * and before each case two rules may skip it (status "skipped", "skipped_by" naming the
 * rule; no other keys): "max_launch_s" when one launch, estimated at the GFLOPS of the last
 * case that passed (2 M N K / GFLOPS), would take longer than max_launch_s; else "plateau"
 * when each of the last plateau_cases cases that passed reached less than (1 + plateau_gain)
 * x the best GFLOPS of the passed cases before it (plateau_gain absent, null or 0: never).
 * A measured case takes `repeats`, or, when max_case_s > 0 and a case passed before it,
 * floor(max_case_s / estimated launch s) within min_repeats .. repeats, and echoes it as
 * "repeats". These are the rules of phonetrain.stages.gemm (plateaued, sweep_repeats),
 * applied here (gemm_sweep.c) so that a version's squares share one process, context and
 * program build.
 * Method per case: a checked launch with alpha = 1.5, beta = 0.5 against a float64 reference
 * (every element for small C, else 32 rows x 32 columns including the edges), one warm-up
 * launch (none when the checked launch took 2 x min_time_ms or more: it warmed the kernel up,
 * and a repeat is then one launch whatever the warm launch takes, so a long call spends no
 * launch on it), calibration (launches per repeat so a repeat lasts min_time_ms, clpeak's method),
 * `repeats` timed repeats (host monotonic clock around the launches and clFinish, so a
 * multi-kernel CLBlast call is timed whole), then a second check of the timed launches'
 * output (alpha = 1, beta = 0). With b_image_width4, each launch is preceded by the refresh of
 * B's image (a clEnqueueCopyBufferToImage where the device cannot view the buffer as an image),
 * timed with it as in a training run; a device without images gives "skipped". max_err = max |C - ref| / (|alpha| K + |beta|) with inputs
 * uniform in [-1, 1]; above 1e-5 the case is "wrong". GFLOPS = 2 M N K / median time.
 * low_ms..high_ms: the 95% percentile-bootstrap interval of the median over the repeats
 * (stats.h, 1000 resamples; with few repeats it spans nearly their range).
 * With "previous" (an OpenCL source only), that build is compiled in the same process and
 * every case is measured on both builds with their repeats alternating (the previous build
 * first in even repeats when "first" is 1, else the new one first; same inputs, own buffers,
 * own calibration); the previous build's case keys go under the case's "previous" and its
 * build under the document's "previous". Side-by-side reruns use it so that the host's state
 * during a case falls on both builds alike.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cl_image.h"
#include "cl_loader.h"
#include "clblast.h"
#include "cpu_kernels.h"
#include "conditions.h"
#include "cpus.h"
#include "gemm_sweep.h"
#include "json.h"
#include "modes.h"
#include "plan.h"
#include "stats.h"
#include "util.h"

#define ERR_TOL 1e-5
#define MAX_CHECK 32

/* Creates the output folder `dir` (fails with EXIT_INTERNAL naming it). */
static void make_out_dir(const char *dir)
{
    if (make_dirs(dir) != 0) fail(EXIT_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
}

/* ------------------------------------------------------------------ OpenCL set-up */

typedef struct {
    cl_platform_id platform;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
} cl_env;

static void env_open(cl_env *e, const runner_opts *o)
{
    cl_int err;
    cl_select(o->cl_lib, &o->sel, &e->platform, &e->dev);
    e->ctx = CL.clCreateContext(NULL, 1, &e->dev, NULL, NULL, &err);
    if (err != CL_SUCCESS) cl_fail("clCreateContext", err, "bench");
    e->q = CL.clCreateCommandQueue(e->ctx, e->dev, 0, &err);
    if (err != CL_SUCCESS) cl_fail("clCreateCommandQueue", err, "bench");
}

/* Builds `src` with `options`; a compiler error prints the log and returns NULL with the
 * message in `why` (n bytes) when `why` is given, else fails with EXIT_BUILD. */
static cl_program try_build(cl_env *e, const char *src, const char *options, const char *what,
                            char *why, size_t n)
{
    cl_int err;
    cl_program p = CL.clCreateProgramWithSource(e->ctx, 1, &src, NULL, &err);
    if (err != CL_SUCCESS) cl_fail("clCreateProgramWithSource", err, what);
    err = CL.clBuildProgram(p, 1, &e->dev, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t len = 0;
        CL.clGetProgramBuildInfo(p, e->dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
        char *log = xcalloc(len + 1, 1);
        CL.clGetProgramBuildInfo(p, e->dev, CL_PROGRAM_BUILD_LOG, len, log, NULL);
        fprintf(stderr, "%s\n", log);
        free(log);
        if (!why)
            fail(EXIT_BUILD, "building %s with options \"%s\" failed (%s); compiler log above",
                 what, options, cl_error_name(err));
        snprintf(why, n, "building %s with options \"%s\" failed (%s); compiler log in the "
                 "runner's stderr", what, options, cl_error_name(err));
        CL.clReleaseProgram(p);
        return NULL;
    }
    return p;
}

/* Builds `src` with `options`; a compiler error fails with EXIT_BUILD and the log. */
static cl_program build(cl_env *e, const char *src, const char *options, const char *what)
{
    return try_build(e, src, options, what, NULL, 0);
}

static cl_mem make_buffer(cl_env *e, const float *host, long n)
{
    cl_int err;
    cl_mem m = CL.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, (size_t)n * 4, NULL, &err);
    if (err != CL_SUCCESS) cl_fail("clCreateBuffer", err, "bench buffer");
    if (host)
        CL_CHECK(CL.clEnqueueWriteBuffer(e->q, m, CL_TRUE, 0, (size_t)n * 4, host, 0, NULL, NULL),
                 "bench buffer");
    return m;
}

/* ------------------------------------------------------------------ one GEMM case */

typedef struct {
    const char *kernel;
    int M, N, K, ta, tb;
    size_t global[2], local[2];
    int has_local;
    int b_width4;      /* > 0: B is read through an image view this wide (pixels) */
    cl_image_view bimg;
    /* state */
    float *a, *b, *c0, *c;
    cl_mem A, B, C;
    cl_kernel k;
} gemm_case;

enum { SRC_KERNEL, SRC_CLBLAST, SRC_CPU };

/* One GEMM call: returns 0, or an error code (OpenCL or CLBlast) with a message in err. */
static int launch(int src, cl_env *e, gemm_case *g, float alpha, float beta, char *err, size_t n)
{
    if (src == SRC_CPU) {
        rt_arg args[8] = {{.kind = 'i', .i = g->M}, {.kind = 'i', .i = g->N},
                          {.kind = 'i', .i = g->K}, {.kind = 'f', .f = alpha},
                          {.kind = 't', .p = g->a, .numel = (long)g->M * g->K},
                          {.kind = 't', .p = g->b, .numel = (long)g->K * g->N},
                          {.kind = 'f', .f = beta},
                          {.kind = 't', .p = g->c, .numel = (long)g->M * g->N}};
        return cpu_kernel_run(g->kernel, args, 8, err, (int)n);
    }
    if (src == SRC_CLBLAST) {
        int s = clblast_gemm(g->kernel, g->M, g->N, g->K, alpha, g->A, g->B, beta, g->C, e->q);
        if (s) snprintf(err, n, "CLBlastSgemm returned status %d", s);
        return s;
    }
    cl_int r = 0;
    r |= CL.clSetKernelArg(g->k, 0, sizeof(int), &g->M);
    r |= CL.clSetKernelArg(g->k, 1, sizeof(int), &g->N);
    r |= CL.clSetKernelArg(g->k, 2, sizeof(int), &g->K);
    r |= CL.clSetKernelArg(g->k, 3, sizeof(float), &alpha);
    r |= CL.clSetKernelArg(g->k, 4, sizeof(cl_mem), &g->A);
    r |= CL.clSetKernelArg(g->k, 5, sizeof(cl_mem), g->b_width4 ? &g->bimg.image : &g->B);
    r |= CL.clSetKernelArg(g->k, 6, sizeof(float), &beta);
    r |= CL.clSetKernelArg(g->k, 7, sizeof(cl_mem), &g->C);
    if (r) {
        snprintf(err, n, "clSetKernelArg failed for %s", g->kernel);
        return -1;
    }
    if (g->b_width4) {
        cl_event ev;
        r = image_view_refresh(e->q, g->B, &g->bimg, &ev);
        if (ev) CL.clReleaseEvent(ev);
        if (r) {
            snprintf(err, n, "clEnqueueCopyBufferToImage (B of %s): %s", g->kernel, cl_error_name(r));
            return r;
        }
    }
    r = CL.clEnqueueNDRangeKernel(e->q, g->k, 2, NULL, g->global, g->has_local ? g->local : NULL,
                                  0, NULL, NULL);
    if (r) snprintf(err, n, "clEnqueueNDRangeKernel(%s, global %zux%zu, local %zux%zu): %s",
                    g->kernel, g->global[0], g->global[1], g->local[0], g->local[1],
                    cl_error_name(r));
    return r;
}

static void finish(int src, cl_env *e)
{
    if (src != SRC_CPU) CL_CHECK(CL.clFinish(e->q), "bench-gemm");
}

/* Max |C - ref| / (|alpha| K + |beta|) over the checked elements (module comment). */
static double check(int src, cl_env *e, gemm_case *g, float alpha, float beta)
{
    if (src != SRC_CPU)
        CL_CHECK(CL.clEnqueueReadBuffer(e->q, g->C, CL_TRUE, 0, (size_t)g->M * g->N * 4, g->c, 0,
                                        NULL, NULL), "bench-gemm check");
    int all = (long)g->M * g->N <= 65536;
    int nr = all || g->M <= MAX_CHECK ? g->M : MAX_CHECK, nc = all || g->N <= MAX_CHECK ? g->N : MAX_CHECK;
    double worst = 0;
    for (int ri = 0; ri < nr; ri++) {
        /* rows 0 and M-1 always, the rest spread with a stride coprime-ish to tile sizes */
        int m = nr == g->M ? ri : ri == nr - 1 ? g->M - 1 : (int)((long)ri * 7919 % g->M);
        for (int ci = 0; ci < nc; ci++) {
            int n = nc == g->N ? ci : ci == nc - 1 ? g->N - 1 : (int)((long)ci * 7907 % g->N);
            double s = 0;
            for (int k = 0; k < g->K; k++)
                s += (double)(g->ta ? g->a[(long)k * g->M + m] : g->a[(long)m * g->K + k]) *
                     (g->tb ? g->b[(long)n * g->K + k] : g->b[(long)k * g->N + n]);
            double ref = alpha * s + (beta != 0 ? beta * g->c0[(long)m * g->N + n] : 0);
            double d = fabs(g->c[(long)m * g->N + n] - ref);
            if (!(d <= worst)) worst = d;   /* NaN-safe: a NaN result becomes the worst */
        }
    }
    return worst / (fabs(alpha) * g->K + fabs(beta));
}

/* B's image view: B's buffer again, padded with zeros to whole image rows (cl_image.h). */
static void make_b_image(cl_env *e, gemm_case *g, long nb)
{
    size_t bytes = image_alloc_bytes(nb, g->b_width4);
    float *padded = xcalloc(bytes, 1);
    memcpy(padded, g->b, (size_t)nb * 4);
    CL.clReleaseMemObject(g->B);
    g->B = make_buffer(e, padded, (long)(bytes / 4));
    free(padded);
    CL_CHECK(image_view_make(e->ctx, e->dev, g->B, nb, g->b_width4, &g->bimg), "B's image view");
}

static void case_alloc(int src, cl_env *e, gemm_case *g, long seed)
{
    long na = (long)g->M * g->K, nb = (long)g->K * g->N, nc = (long)g->M * g->N;
    g->a = xmalloc((size_t)na * 4);
    g->b = xmalloc((size_t)nb * 4);
    g->c0 = xmalloc((size_t)nc * 4);
    g->c = xmalloc((size_t)nc * 4);
    fill_uniform(g->a, na, (uint64_t)seed, -1, 1);
    fill_uniform(g->b, nb, (uint64_t)seed + 1, -1, 1);
    fill_uniform(g->c0, nc, (uint64_t)seed + 2, -1, 1);
    if (src != SRC_CPU) {
        g->A = make_buffer(e, g->a, na);
        g->B = make_buffer(e, g->b, nb);
        if (g->b_width4) make_b_image(e, g, nb);
        g->C = make_buffer(e, NULL, nc);
    }
}

static void case_free(int src, gemm_case *g)
{
    if (g->bimg.image) CL.clReleaseMemObject(g->bimg.image);
    if (src != SRC_CPU) {
        CL.clReleaseMemObject(g->A);
        CL.clReleaseMemObject(g->B);
        CL.clReleaseMemObject(g->C);
        if (g->k) CL.clReleaseKernel(g->k);
    }
    free(g->a); free(g->b); free(g->c0); free(g->c);
}

/* One build's side of a case: its buffers and kernel, the checked launch, the calibrated
 * launches per repeat and the timed repeats (module comment for the method). */
typedef struct {
    gemm_case g;
    cl_program prog;
    int rc;
    char err[512];
    double err1, err2, *rep_ms;
    long iters;
} gemm_side;

/* Allocates the side's case, makes its kernel, runs the checked launch, the warm-up and the
 * calibration; a failure leaves rc and err set. */
static void side_setup(int src, cl_env *e, gemm_side *s, int repeats, double min_time_ms,
                       long seed)
{
    gemm_case *g = &s->g;
    double first_ms = 0;
    s->rep_ms = xcalloc((size_t)repeats, sizeof *s->rep_ms);
    s->iters = 1;
    case_alloc(src, e, g, seed);
    if (src == SRC_KERNEL) {
        cl_int ke;
        g->k = CL.clCreateKernel(s->prog, g->kernel, &ke);
        if (ke) {
            snprintf(s->err, sizeof s->err, "clCreateKernel(%s): %s", g->kernel, cl_error_name(ke));
            s->rc = ke;
        }
    }
    if (!s->rc) {
        memcpy(g->c, g->c0, (size_t)g->M * g->N * 4);
        if (src != SRC_CPU)
            CL_CHECK(CL.clEnqueueWriteBuffer(e->q, g->C, CL_TRUE, 0, (size_t)g->M * g->N * 4, g->c0,
                                             0, NULL, NULL), "bench-gemm");
        uint64_t t0 = monotonic_ns();
        s->rc = launch(src, e, g, 1.5f, 0.5f, s->err, sizeof s->err);
        if (!s->rc) {
            finish(src, e);
            first_ms = (double)(monotonic_ns() - t0) / 1e6;
            s->err1 = check(src, e, g, 1.5f, 0.5f);
        }
    }
    if (!s->rc) {   /* warm-up, then calibrate launches per repeat */
        double one_ms = first_ms;
        if (first_ms < 2 * min_time_ms) {   /* else the checked launch warmed it up: 1 per repeat */
            uint64_t t0 = monotonic_ns();
            s->rc = launch(src, e, g, 1.0f, 0.0f, s->err, sizeof s->err);
            finish(src, e);
            one_ms = (double)(monotonic_ns() - t0) / 1e6;
        }
        s->iters = one_ms > 0 ? (long)(min_time_ms / one_ms) : 1000;
        s->iters = s->iters < 1 ? 1 : s->iters > 100000 ? 100000 : s->iters;
    }
}

/* Timed repeat r of the side: its calibrated launches, then clFinish; ms per launch. */
static void side_repeat(int src, cl_env *e, gemm_side *s, int r)
{
    if (s->rc) return;
    uint64_t t0 = monotonic_ns();
    for (long i = 0; i < s->iters && !s->rc; i++)
        s->rc = launch(src, e, &s->g, 1.0f, 0.0f, s->err, sizeof s->err);
    finish(src, e);
    s->rep_ms[r] = (double)(monotonic_ns() - t0) / 1e6 / (double)s->iters;
}

/* The second check, then the side's result keys (status .. max_err); frees the side.
 * Returns the side's GFLOPS when its status is "ok", else NAN. */
static double side_write(int src, cl_env *e, gemm_side *s, int repeats, jwriter *w)
{
    gemm_case *g = &s->g;
    if (!s->rc) s->err2 = check(src, e, g, 1.0f, 0.0f);
    double worst = s->err1 > s->err2 || isnan(s->err1) ? s->err1 : s->err2;
    jw_key(w, "status"); jw_str(w, s->rc ? "error" : (worst <= ERR_TOL ? "ok" : "wrong"));
    jw_key(w, "error"); jw_str(w, s->rc ? s->err : NULL);
    jw_key(w, "iterations"); jw_int(w, s->iters);
    jw_key(w, "repeat_ms"); jw_arr_begin(w);
    for (int r = 0; r < repeats && !s->rc; r++) jw_num(w, s->rep_ms[r]);
    jw_arr_end(w);
    double med = s->rc ? NAN : stats_median(s->rep_ms, repeats), lo = NAN, hi = NAN;
    if (!s->rc) stats_median_ci(s->rep_ms, repeats, 1000, BOOTSTRAP_SEED, &lo, &hi);
    jw_key(w, "median_ms"); jw_num(w, med);
    jw_key(w, "low_ms"); jw_num(w, lo);
    jw_key(w, "high_ms"); jw_num(w, hi);
    jw_key(w, "gflops"); jw_num(w, 2.0 * g->M * g->N * (double)g->K / (med * 1e6));
    jw_key(w, "max_err"); jw_num(w, s->rc ? NAN : worst);
    free(s->rep_ms);
    case_free(src, g);
    return !s->rc && worst <= ERR_TOL ? 2.0 * g->M * g->N * (double)g->K / (med * 1e6) : NAN;
}

/* Runs one case and writes its result keys. With a previous build (`prev`, its program
 * built in this process), the two builds' repeats alternate within the process -- previous
 * first in even repeats when `previous_first`, else new first -- so whatever the host does
 * during the case falls on both; the previous build's keys go under "previous". Returns the
 * new build's GFLOPS when its status is "ok", else NAN. */
static double run_case(int src, cl_env *e, cl_program prog, const gemm_case *g, int repeats,
                     double min_time_ms, long seed, jwriter *w, cl_program prev,
                     const gemm_case *gprev, int previous_first)
{
    gemm_side now = {.g = *g, .prog = prog}, old = {0};
    side_setup(src, e, &now, repeats, min_time_ms, seed);
    if (prev) {
        old.g = *gprev;
        old.prog = prev;
        side_setup(src, e, &old, repeats, min_time_ms, seed);
    }
    for (int r = 0; r < repeats; r++) {
        int old_first = prev && ((r % 2 == 0) == (previous_first != 0));
        if (old_first) side_repeat(src, e, &old, r);
        side_repeat(src, e, &now, r);
        if (prev && !old_first) side_repeat(src, e, &old, r);
    }
    double gflops = side_write(src, e, &now, repeats, w);
    if (prev) {
        jw_key(w, "previous"); jw_obj_begin(w);
        side_write(src, e, &old, repeats, w);
        jw_obj_end(w);
    }
    return gflops;
}

static int jint(const jval *o, const char *key, const char *where)
{
    const jval *v = json_get(o, key);
    if (!v || v->type != J_NUM || !v->is_int || v->inum < 1)
        fail(EXIT_BAD_INPUT, "%s: key %s must be a positive integer", where, key);
    return (int)v->inum;
}

static const char *jstr(const jval *o, const char *key, const char *dflt)
{
    const jval *v = json_get(o, key);
    return v && v->type == J_STR ? v->str : dflt;
}

static double jnum(const jval *o, const char *key, double dflt)
{
    const jval *v = json_get(o, key);
    return v && v->type == J_NUM ? v->num : dflt;
}

static void parse_case(const jval *c, int idx, const char *spec, int b_width4, gemm_case *g)
{
    char where[600];
    snprintf(where, sizeof where, "%s cases[%d]", spec, idx);
    memset(g, 0, sizeof *g);
    g->kernel = jstr(c, "kernel", "");
    if (!clblast_handles(g->kernel))
        fail(EXIT_BAD_INPUT, "%s: kernel \"%s\" must be gemm_nn, gemm_nt or gemm_tn", where, g->kernel);
    g->ta = !strcmp(g->kernel, "gemm_tn");
    g->tb = !strcmp(g->kernel, "gemm_nt");
    g->M = jint(c, "M", where); g->N = jint(c, "N", where); g->K = jint(c, "K", where);
    if (b_width4 > 0) {
        long q = ((long)g->K * g->N + 3) / 4;
        g->b_width4 = q < b_width4 ? (int)q : b_width4;
    }
    const jval *gl = json_get(c, "global"), *lo = json_get(c, "local");
    g->global[0] = (size_t)g->N; g->global[1] = (size_t)g->M;
    if (gl && gl->type == J_ARR && gl->len == 2)
        for (int i = 0; i < 2; i++) g->global[i] = (size_t)gl->items[i].num;
    if (lo && lo->type == J_ARR && lo->len == 2) {
        g->has_local = 1;
        for (int i = 0; i < 2; i++) g->local[i] = (size_t)lo->items[i].num;
    }
}


/* The programs of one process, one per distinct build options string (built on first use);
 * a build that failed is kept as NULL with its message. */
typedef struct {
    const char **options;
    cl_program *progs;
    char (*why)[512];
    int n;
} program_cache;

/* The program of `source` built with `options`: from the cache, else built now, its build
 * time written as the current object's "build_ms". With `why_out` a failed build returns
 * NULL and its message there; without, it fails the process (EXIT_BUILD). */
static cl_program cached_build(program_cache *pc, cl_env *e, const char *cl_src,
                               const char *options, const char *source, jwriter *w,
                               const char **why_out)
{
    for (int i = 0; i < pc->n; i++)
        if (!strcmp(pc->options[i], options)) {
            if (why_out) *why_out = pc->why[i];
            return pc->progs[i];
        }
    uint64_t t0 = monotonic_ns();
    cl_program p = try_build(e, cl_src, options, source, why_out ? pc->why[pc->n] : NULL,
                             sizeof pc->why[pc->n]);
    if (p) { jw_key(w, "build_ms"); jw_num(w, (double)(monotonic_ns() - t0) / 1e6); }
    if (why_out) *why_out = pc->why[pc->n];
    pc->options[pc->n] = options;
    pc->progs[pc->n++] = p;
    return p;
}

/* A version the device cannot run (no CLBlast, no image support): gemm.json says skipped and
 * why, so the pipeline records the reason instead of failing. */
static int write_skipped(jwriter *w, const char *out, const char *why)
{
    jw_key(w, "status"); jw_str(w, "skipped");
    jw_key(w, "reason"); jw_str(w, why);
    jw_obj_end(w);
    write_output(out, "gemm.json", w->buf, w->len);
    fprintf(stderr, "runner: bench-gemm skipped: %s\n", why);
    return EXIT_OK;
}

int mode_bench_gemm(const runner_opts *o)
{
    if (!o->out) fail(EXIT_BAD_INPUT, "bench-gemm: --out DIR is required");
    if (!o->spec) fail(EXIT_BAD_INPUT, "bench-gemm: --spec SPEC.json is required");
    size_t len;
    char *text = read_file(o->spec, &len), perr[256];
    if (!text) fail(EXIT_BAD_INPUT, "bench-gemm: cannot read spec %s", o->spec);
    jval *spec = json_parse(text, perr, sizeof perr);
    if (!spec) fail(EXIT_BAD_INPUT, "bench-gemm: %s: %s", o->spec, perr);
    const char *backend = jstr(spec, "backend", "opencl"), *source = jstr(spec, "source", "");
    const char *options = jstr(spec, "options", "");
    int repeats = (int)jnum(spec, "repeats", 5), threads = (int)jnum(spec, "threads", 0);
    double min_ms = jnum(spec, "min_time_ms", o->min_time_ms);
    int b_width4 = (int)jnum(spec, "b_image_width4", 0);
    long seed = (long)jnum(spec, "seed", 1);
    const jval *cases = json_get(spec, "cases");
    if (!cases || cases->type != J_ARR) fail(EXIT_BAD_INPUT, "bench-gemm: %s: cases must be a list", o->spec);
    if (repeats < 1) repeats = 1;
    const jval *pv = json_get(spec, "previous");
    if (pv && pv->type != J_OBJ)
        fail(EXIT_BAD_INPUT, "bench-gemm: %s: previous must be an object", o->spec);
    const char *prev_source = pv ? jstr(pv, "source", "") : NULL;
    const char *prev_options = pv ? jstr(pv, "options", "") : NULL;
    int prev_width4 = pv ? (int)jnum(pv, "b_image_width4", 0) : 0;
    int previous_first = pv ? (int)jnum(pv, "first", 1) : 0;
    int src = !strcmp(backend, "cpu") ? SRC_CPU : !strcmp(source, "clblast") ? SRC_CLBLAST : SRC_KERNEL;
    if (strcmp(backend, "cpu") && strcmp(backend, "opencl"))
        fail(EXIT_BAD_INPUT, "bench-gemm: %s: backend \"%s\" must be cpu or opencl", o->spec, backend);
    if (pv && src != SRC_KERNEL)
        fail(EXIT_BAD_INPUT, "bench-gemm: %s: previous needs an OpenCL kernel source, not %s",
             o->spec, src == SRC_CPU ? "the cpu backend" : "clblast");
    for (int i = 0; i < cases->len; i++) {   /* a case's own options: kernel sources alone */
        const jval *co = cases->items[i].type == J_OBJ ? json_get(&cases->items[i], "options") : NULL;
        if (!co) continue;
        if (co->type != J_STR)
            fail(EXIT_BAD_INPUT, "bench-gemm: %s cases[%d]: options must be a string", o->spec, i);
        if (pv || (src != SRC_KERNEL && co->str[0]))
            fail(EXIT_BAD_INPUT, "bench-gemm: %s cases[%d]: a case's own options need an OpenCL "
                 "kernel source and no previous build; leave options out of the case", o->spec, i);
    }
    gemm_sweep sweep;
    sweep_parse(spec, o->spec, cases->len, &sweep);
    make_out_dir(o->out);

    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "mode"); jw_str(&w, "bench-gemm");
    jw_key(&w, "backend"); jw_str(&w, backend);
    jw_key(&w, "source"); jw_str(&w, source);
    jw_key(&w, "options"); jw_str(&w, options);
    cl_env e = {0};
    cl_program prog = NULL;
    char why[512];
    if (src == SRC_CLBLAST && clblast_load(o->clblast_lib, why, sizeof why) != 0) {
        return write_skipped(&w, o->out, why);
    }
    if (src == SRC_CPU) {
#ifdef _OPENMP
        omp_set_num_threads(threads > 0 ? threads : cpus_usable(cond_sysfs_root()));
        threads = omp_get_max_threads();
#endif
        jw_key(&w, "threads"); jw_int(&w, threads);
        cpu_avail avail;
        cpus_read(&avail, cond_sysfs_root());
        cpus_write_json(&w, &avail);
    } else {
        env_open(&e, o);
        jw_key(&w, "device"); cl_write_device_json(&w, e.platform, e.dev);
    }
    if (src == SRC_KERNEL && b_width4 > 0 &&
        !cl_device_ulong(e.dev, CL_DEVICE_IMAGE_SUPPORT)) {   /* like an absent CLBlast */
        snprintf(why, sizeof why, "the device has no image support (CL_DEVICE_IMAGE_SUPPORT is "
                 "false); the image version needs it");
        return write_skipped(&w, o->out, why);
    }
    char *kernel_src = NULL;
    program_cache pc = {xcalloc((size_t)cases->len + 1, sizeof(char *)),
                        xcalloc((size_t)cases->len + 1, sizeof(cl_program)),
                        xcalloc((size_t)cases->len + 1, sizeof *pc.why), 0};
    if (src == SRC_KERNEL) {
        kernel_src = read_file(source, &len);
        if (!kernel_src) fail(EXIT_BAD_INPUT, "bench-gemm: %s: cannot read source %s", o->spec, source);
        int spec_options_used = 0;
        for (int i = 0; i < cases->len && !spec_options_used; i++)
            spec_options_used = !json_get(&cases->items[i], "options");
        if (spec_options_used) prog = cached_build(&pc, &e, kernel_src, options, source, &w, NULL);
    }
    cl_program prev = NULL;
    if (pv) {   /* the previous build, measured beside this one case by case */
        char *cl_src = read_file(prev_source, &len);
        if (!cl_src)
            fail(EXIT_BAD_INPUT, "bench-gemm: %s: cannot read previous source %s", o->spec, prev_source);
        uint64_t t0 = monotonic_ns();
        prev = build(&e, cl_src, prev_options, prev_source);
        jw_key(&w, "previous"); jw_obj_begin(&w);
        jw_key(&w, "source"); jw_str(&w, prev_source);
        jw_key(&w, "options"); jw_str(&w, prev_options);
        jw_key(&w, "build_ms"); jw_num(&w, (double)(monotonic_ns() - t0) / 1e6);
        jw_key(&w, "first"); jw_int(&w, previous_first != 0);
        jw_obj_end(&w);
        free(cl_src);
    }
    jw_key(&w, "status"); jw_str(&w, "ok");
    jw_key(&w, "cases"); jw_arr_begin(&w);
    for (int i = 0; i < cases->len; i++) {
        gemm_case g, gp;
        parse_case(&cases->items[i], i, o->spec, src == SRC_KERNEL ? b_width4 : 0, &g);
        if (prev) {   /* the previous build's launch sizes: the case's "previous", if any */
            const jval *cp = json_get(&cases->items[i], "previous");
            parse_case(cp && cp->type == J_OBJ ? cp : &cases->items[i], i, o->spec, prev_width4, &gp);
            if (gp.M != g.M || gp.N != g.N || gp.K != g.K || strcmp(gp.kernel, g.kernel))
                fail(EXIT_BAD_INPUT, "bench-gemm: %s cases[%d]: previous must be the same kernel "
                     "and M, N, K", o->spec, i);
        }
        jw_obj_begin(&w);
        jw_key(&w, "kernel"); jw_str(&w, g.kernel);
        jw_key(&w, "M"); jw_int(&w, g.M);
        jw_key(&w, "N"); jw_int(&w, g.N);
        jw_key(&w, "K"); jw_int(&w, g.K);
        const char *rule = sweep_skip(&sweep, g.M, g.N, g.K);
        if (rule) {
            jw_key(&w, "status"); jw_str(&w, "skipped");
            jw_key(&w, "skipped_by"); jw_str(&w, rule);
            jw_obj_end(&w);
            continue;
        }
        cl_program case_prog = prog;
        const jval *co = json_get(&cases->items[i], "options");
        if (co && src == SRC_KERNEL) {
            const char *why = NULL;
            jw_key(&w, "options"); jw_str(&w, co->str);
            case_prog = cached_build(&pc, &e, kernel_src, co->str, source, &w, &why);
            if (!case_prog) {
                jw_key(&w, "status"); jw_str(&w, "error");
                jw_key(&w, "build_failed"); jw_bool(&w, 1);
                jw_key(&w, "error"); jw_str(&w, why);
                jw_obj_end(&w);
                continue;
            }
        }
        int case_repeats = sweep_repeats(&sweep, g.M, g.N, g.K, repeats);
        if (sweep.on) { jw_key(&w, "repeats"); jw_int(&w, case_repeats); }
        jw_key(&w, "global"); jw_arr_begin(&w); jw_int(&w, (long long)g.global[0]);
        jw_int(&w, (long long)g.global[1]); jw_arr_end(&w);
        jw_key(&w, "local");
        if (g.has_local) { jw_arr_begin(&w); jw_int(&w, (long long)g.local[0]);
                           jw_int(&w, (long long)g.local[1]); jw_arr_end(&w); }
        else jw_null(&w);
        double gflops = run_case(src, &e, case_prog, &g, case_repeats, min_ms, seed + 3 * i, &w,
                                 prev, prev ? &gp : NULL, previous_first);
        if (sweep.on && !isnan(gflops)) sweep.gflops[sweep.n++] = gflops;
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    write_output(o->out, "gemm.json", w.buf, w.len);
    jw_free(&w);
    for (int i = 0; i < pc.n; i++) if (pc.progs[i]) CL.clReleaseProgram(pc.progs[i]);
    free(pc.options); free(pc.progs); free(pc.why); free(kernel_src); free(sweep.gflops);
    json_free(spec);
    free(text);
    return EXIT_OK;
}

/* ------------------------------------------------------------------ bench-peak
 * clpeak's method (github.com/krrishnarraj/clpeak, compute_sp and global_bandwidth kernels):
 * peak compute = chains of dependent mad() over float, float2, float4, float8, float16, two
 * interleaved chains per pair and eight independent pairs per work-item (enough
 * independent mads to cover FMA latency on CPUs, which do not interleave work-items), 4096 lane-mads (8192 FLOPs) per work-item for every width;
 * peak bandwidth = each work-item sums 16 float4 loads spaced one global size apart (coalesced
 * reads of a whole buffer). Each measurement: warm-up launch, calibration to min_time_ms,
 * 5 repeats, median; host clock around launches + clFinish.
 * Output DIR/peaks.json: {"mode": "bench-peak", "device": {...}, "compute": [{"type", "width",
 * "work_items", "median_ms", "gflops"}], "bandwidth": [{"kernel", "size_bytes", "median_ms",
 * "gbps"}]}. */

static const char *PEAK_SRC =
    "#define MAD_4(x, y) x = mad(y, x, y); y = mad(x, y, x); x = mad(y, x, y); y = mad(x, y, x);\n"
    "#define MAD_16(x, y) MAD_4(x, y) MAD_4(x, y) MAD_4(x, y) MAD_4(x, y)\n"
    "#define PEAK(T, W, INIT) __kernel void compute_##T(__global T *out, float A) {\\\n"
    "  T x0 = INIT, x1 = x0 + (T)(1), x2 = x0 + (T)(2), x3 = x0 + (T)(3);\\\n"
    "  T x4 = x0 + (T)(4), x5 = x0 + (T)(5), x6 = x0 + (T)(6), x7 = x0 + (T)(7);\\\n"
    "  T y0 = (T)(get_local_id(0)), y1 = y0 + (T)(1), y2 = y0 + (T)(2), y3 = y0 + (T)(3);\\\n"
    "  T y4 = y0 + (T)(4), y5 = y0 + (T)(5), y6 = y0 + (T)(6), y7 = y0 + (T)(7);\\\n"
    "  for (int i = 0; i < 32 / W; i++) {\\\n"
    "    MAD_16(x0, y0) MAD_16(x1, y1) MAD_16(x2, y2) MAD_16(x3, y3)\\\n"
    "    MAD_16(x4, y4) MAD_16(x5, y5) MAD_16(x6, y6) MAD_16(x7, y7) }\\\n"
    "  out[get_global_id(0)] = y0 + y1 + y2 + y3 + y4 + y5 + y6 + y7; }\n"
    "PEAK(float, 1, A)\n"
    "PEAK(float2, 2, ((float2)(A, A + 1)))\n"
    "PEAK(float4, 4, ((float4)(A, A + 1, A + 2, A + 3)))\n"
    "PEAK(float8, 8, ((float8)(A, A + 1, A + 2, A + 3, A + 4, A + 5, A + 6, A + 7)))\n"
    "PEAK(float16, 16, ((float16)(A, A + 1, A + 2, A + 3, A + 4, A + 5, A + 6, A + 7, A + 8, "
    "A + 9, A + 10, A + 11, A + 12, A + 13, A + 14, A + 15)))\n"
    "__kernel void read_float4(__global const float4 *in, __global float *out) {\n"
    "  const int g = get_global_id(0), s = get_global_size(0); float4 acc = (float4)(0.0f);\n"
    "  for (int i = 0; i < 16; i++) acc += in[g + i * s];\n"
    "  out[g] = acc.s0 + acc.s1 + acc.s2 + acc.s3; }\n";

/* Median ms per launch of kernel k over global work-items (local = NULL: driver's choice). */
static double time_kernel(cl_env *e, cl_kernel k, size_t global, double min_time_ms)
{
    double rep[5];
    CL_CHECK(CL.clEnqueueNDRangeKernel(e->q, k, 1, NULL, &global, NULL, 0, NULL, NULL), "bench-peak");
    uint64_t t0 = monotonic_ns();
    CL_CHECK(CL.clEnqueueNDRangeKernel(e->q, k, 1, NULL, &global, NULL, 0, NULL, NULL), "bench-peak");
    CL_CHECK(CL.clFinish(e->q), "bench-peak");
    double one = (double)(monotonic_ns() - t0) / 1e6;
    long iters = one > 0 ? (long)(min_time_ms / one) : 1000;
    iters = iters < 1 ? 1 : iters > 100000 ? 100000 : iters;
    for (int r = 0; r < 5; r++) {
        t0 = monotonic_ns();
        for (long i = 0; i < iters; i++)
            CL_CHECK(CL.clEnqueueNDRangeKernel(e->q, k, 1, NULL, &global, NULL, 0, NULL, NULL),
                     "bench-peak");
        CL_CHECK(CL.clFinish(e->q), "bench-peak");
        rep[r] = (double)(monotonic_ns() - t0) / 1e6 / (double)iters;
    }
    return stats_median(rep, 5);
}

int mode_bench_peak(const runner_opts *o)
{
    cl_env e = {0};
    cl_int err;
    if (!o->out) fail(EXIT_BAD_INPUT, "bench-peak: --out DIR is required");
    env_open(&e, o);
    make_out_dir(o->out);
    cl_program p = build(&e, PEAK_SRC, "", "the bench-peak kernels");
    size_t cus = (size_t)cl_device_ulong(e.dev, CL_DEVICE_MAX_COMPUTE_UNITS);
    size_t wg = (size_t)cl_device_ulong(e.dev, CL_DEVICE_MAX_WORK_GROUP_SIZE);
    size_t global = o->work_items > 0 ? ((size_t)o->work_items + 15) / 16 * 16
                                     : (cus ? cus : 1) * (wg ? wg : 256) * 16;
    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "mode"); jw_str(&w, "bench-peak");
    jw_key(&w, "device"); cl_write_device_json(&w, e.platform, e.dev);
    jw_key(&w, "compute"); jw_arr_begin(&w);
    const char *types[] = {"float", "float2", "float4", "float8", "float16"};
    const int widths[] = {1, 2, 4, 8, 16};
    for (int t = 0; t < 5; t++) {
        size_t n = global / (size_t)widths[t];
        cl_mem out = make_buffer(&e, NULL, (long)global);
        char name[32];
        float A = 1.3f;
        snprintf(name, sizeof name, "compute_%s", types[t]);
        cl_kernel k = CL.clCreateKernel(p, name, &err);
        if (err) cl_fail("clCreateKernel", err, name);
        CL_CHECK(CL.clSetKernelArg(k, 0, sizeof out, &out), name);
        CL_CHECK(CL.clSetKernelArg(k, 1, sizeof A, &A), name);
        double ms = time_kernel(&e, k, n, o->min_time_ms);
        /* per work-item: 32/W iterations x 128 mads x W lanes x 2 FLOPs = 8192 FLOPs */
        jw_obj_begin(&w);
        jw_key(&w, "type"); jw_str(&w, types[t]);
        jw_key(&w, "width"); jw_int(&w, widths[t]);
        jw_key(&w, "work_items"); jw_int(&w, (long long)n);
        jw_key(&w, "median_ms"); jw_num(&w, ms);
        jw_key(&w, "gflops"); jw_num(&w, 8192.0 * (double)n / (ms * 1e6));
        jw_obj_end(&w);
        CL.clReleaseKernel(k);
        CL.clReleaseMemObject(out);
    }
    jw_arr_end(&w);
    /* bandwidth: a buffer of min(max_alloc / 2, 256 MiB), 16 float4 (256 bytes) per work-item */
    size_t bytes = (size_t)cl_device_ulong(e.dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE) / 2;
    bytes = bytes > ((size_t)256 << 20) || bytes == 0 ? (size_t)256 << 20 : bytes;
    size_t items = bytes / 256;
    bytes = items * 256;
    cl_mem in = make_buffer(&e, NULL, (long)(bytes / 4)), out = make_buffer(&e, NULL, (long)items);
    cl_kernel k = CL.clCreateKernel(p, "read_float4", &err);
    if (err) cl_fail("clCreateKernel", err, "read_float4");
    CL_CHECK(CL.clSetKernelArg(k, 0, sizeof in, &in), "read_float4");
    CL_CHECK(CL.clSetKernelArg(k, 1, sizeof out, &out), "read_float4");
    double ms = time_kernel(&e, k, items, o->min_time_ms);
    jw_key(&w, "bandwidth"); jw_arr_begin(&w);
    jw_obj_begin(&w);
    jw_key(&w, "kernel"); jw_str(&w, "read_float4");
    jw_key(&w, "size_bytes"); jw_int(&w, (long long)bytes);
    jw_key(&w, "median_ms"); jw_num(&w, ms);
    jw_key(&w, "gbps"); jw_num(&w, (double)bytes / (ms * 1e6));
    jw_obj_end(&w);
    jw_arr_end(&w);
    jw_obj_end(&w);
    write_output(o->out, "peaks.json", w.buf, w.len);
    jw_free(&w);
    return EXIT_OK;
}
