/* run mode: load a plan, set up the backend, run warm-up + measured iterations, write
 * dumps/, checkpoints/, trace.csv and, last, run.json (the completion marker) into the output
 * folder.
 * Measured iterations: exactly the plan's count, or (--ci-target > 0) adaptively: at least
 * the plan's count, then until the 95% bootstrap interval of the iteration time's low quantile
 * ESTIMATE_QUANTILE (the location estimate, stats.h) is within +-ci_target of it, judged once measuring took --min-seconds, at most
 * --max-iterations, and no new decision once measuring took --max-seconds; while the battery is readable, a stop on the interval also
 * waits for the power sampler's second sample (power_energy_pending). The plan's checkpoints from the end (-1, -2) are the last
 * iterations after the decision; a decision whose final interval is still too wide (and no
 * limit reached) is taken back and measuring goes on.
 * The calibration probe (probe.h) runs just before the first and just after the last
 * measured iteration; run.json records it under "probe" (null with --no-probe: a process
 * no verdict judges, such as the train job's events process).
 * On any failure after the output folder is known, the fail hook removes trace.csv and the
 * plan's dumps and writes run.json with "status": "failed", the exit code and the message.
 * A previous run.json and trace.csv are removed at the start, so a run killed midway (timeout,
 * crash) leaves no run.json at all. */
#define _POSIX_C_SOURCE 200809L
#include "conditions.h"
#include "cpus.h"
#include "exec.h"
#include "ledger.h"
#include "modes.h"
#include "power.h"
#include "probe.h"
#include "stats.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_out;
static pt_plan *g_plan;
static const char *g_plan_path;

/* Removes the files checkpoints/<iteration>/<tensor>.f32 and their folders (a previous run's). */
static void remove_checkpoints(void)
{
    char *root = path_join(g_out, "checkpoints");
    DIR *d = opendir(root);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *sub = path_join(root, e->d_name);
        DIR *ds = opendir(sub);
        struct dirent *f;
        while (ds && (f = readdir(ds))) {
            if (f->d_name[0] == '.') continue;
            char *file = path_join(sub, f->d_name);
            unlink(file);
            free(file);
        }
        if (ds) closedir(ds);
        rmdir(sub);
        free(sub);
    }
    if (d) closedir(d);
    rmdir(root);
    free(root);
}

static void remove_outputs(void)
{
    char *p = path_join(g_out, "trace.csv");
    unlink(p);
    free(p);
    remove_checkpoints();
    for (int i = 0; g_plan && i < g_plan->ndumps; i++) {
        char rel[600];
        snprintf(rel, sizeof rel, "dumps/%s.f32", g_plan->tensors[g_plan->dumps[i]].name);
        p = path_join(g_out, rel);
        unlink(p);
        free(p);
    }
}

static void write_failed(int code, const char *message)
{
    remove_outputs();
    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "status"); jw_str(&w, "failed");
    jw_key(&w, "exit_code"); jw_int(&w, code);
    jw_key(&w, "error"); jw_str(&w, message);
    jw_key(&w, "plan_path"); jw_str(&w, g_plan_path);
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    char *path = path_join(g_out, "run.json");
    if (write_file_atomic(path, w.buf, w.len) != 0)
        fprintf(stderr, "runner: also could not write %s: %s\n", path, strerror(errno));
    free(path);
    jw_free(&w);
}

typedef struct { double wall_ms, loss; } iter_rec;

/* The checkpoint tensors' contents after one iteration, concatenated in plan order. */
typedef struct { int iteration; char *data; } ckpt_snap;

/* What the measured iterations were: how the count was decided, the median and its interval,
 * and the conditions around them. */
typedef struct {
    int adaptive;
    const char *stopped;     /* fixed | ci | max_iterations | max_seconds */
    double median_ms, ci_low_ms, ci_high_ms;
    double estimate_ms, low_ms, high_ms;   /* the ESTIMATE_QUANTILE and its interval */
    cond_sample before, after;
    probe_rec probe;
    power_sampler power;     /* battery power and clocks over the measured iterations */
} measure_rec;

static void read_home(run_ctx *rc, pt_tensor *t, void *dst)
{
    if (rc->plan->backend == BACKEND_OPENCL) cl_read_home(rc, t, dst);
    else if (rc->plan->backend == BACKEND_VULKAN) vk_read_home(rc, t, dst);
    else memcpy(dst, t->host, t->size_bytes);
}

static void write_dumps(run_ctx *rc, const char *out)
{
    pt_plan *p = rc->plan;
    if (!p->ndumps) return;
    char *dir = path_join(out, "dumps");
    if (make_dirs(dir) != 0) fail(EXIT_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    for (int i = 0; i < p->ndumps; i++) {
        pt_tensor *t = &p->tensors[p->dumps[i]];
        void *buf = xmalloc(t->size_bytes);
        read_home(rc, t, buf);
        char name[600];
        snprintf(name, sizeof name, "%s.f32", t->name);
        write_output(dir, name, buf, t->size_bytes);
        char rel[620];
        snprintf(rel, sizeof rel, "dumps/%s", name);
        ledger_record(rel, buf, t->size_bytes);
        free(buf);
    }
    free(dir);
}

static size_t ckpt_bytes(const pt_plan *p)
{
    size_t n = 0;
    for (int i = 0; i < p->nckpt_tensors; i++) n += p->tensors[p->ckpt_tensors[i]].size_bytes;
    return n;
}

/* Is iteration `it` a checkpoint? Counts from the end (negative entries) need the total. */
static int is_checkpoint(const pt_plan *p, int it, int total)
{
    for (int i = 0; i < p->nckpt_iters; i++) {
        int c = p->ckpt_iters[i];
        if (c >= 0 ? c == it : (total > 0 && total + c == it)) return 1;
    }
    return 0;
}

/* How many iterations the checkpoints counted from the end need after a decision. */
static int ckpt_tail(const pt_plan *p)
{
    int tail = 0;
    for (int i = 0; i < p->nckpt_iters; i++)
        if (-p->ckpt_iters[i] > tail) tail = -p->ckpt_iters[i];
    return tail;
}

static void snapshot(run_ctx *rc, ckpt_snap **snaps, int *nsnaps, int it)
{
    pt_plan *p = rc->plan;
    for (int i = 0; i < *nsnaps; i++) if ((*snaps)[i].iteration == it) return;
    *snaps = realloc(*snaps, (size_t)(*nsnaps + 1) * sizeof **snaps);
    if (!*snaps) fail(EXIT_INTERNAL, "out of host memory keeping a checkpoint");
    ckpt_snap *s = &(*snaps)[(*nsnaps)++];
    s->iteration = it;
    s->data = xmalloc(ckpt_bytes(p) + 1);
    size_t off = 0;
    for (int i = 0; i < p->nckpt_tensors; i++) {
        pt_tensor *t = &p->tensors[p->ckpt_tensors[i]];
        read_home(rc, t, s->data + off);
        off += t->size_bytes;
    }
}

/* Forgets snapshots of iterations >= first that no count from the start asks for. */
static void drop_tail(const pt_plan *p, ckpt_snap *snaps, int *nsnaps, int first)
{
    int k = 0;
    for (int i = 0; i < *nsnaps; i++) {
        if (snaps[i].iteration >= first && !is_checkpoint(p, snaps[i].iteration, -1)) {
            free(snaps[i].data);
            continue;
        }
        snaps[k++] = snaps[i];
    }
    *nsnaps = k;
}

static void write_checkpoints(const pt_plan *p, const char *out, const ckpt_snap *snaps, int n)
{
    for (int k = 0; k < n; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "checkpoints/%d", snaps[k].iteration);
        char *dir = path_join(out, rel);
        if (make_dirs(dir) != 0) fail(EXIT_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
        size_t off = 0;
        for (int i = 0; i < p->nckpt_tensors; i++) {
            pt_tensor *t = &p->tensors[p->ckpt_tensors[i]];
            char name[600];
            snprintf(name, sizeof name, "%s.f32", t->name);
            write_output(dir, name, snaps[k].data + off, t->size_bytes);
            char path[700];
            snprintf(path, sizeof path, "%s/%s", rel, name);
            ledger_record(path, snaps[k].data + off, t->size_bytes);
            off += t->size_bytes;
        }
        free(dir);
    }
}

static void write_measure_json(jwriter *w, const runner_opts *o, const measure_rec *m)
{
    jw_obj_begin(w);
    jw_key(w, "mode"); jw_str(w, m->adaptive ? "adaptive" : "fixed");
    jw_key(w, "stopped"); jw_str(w, m->stopped);
    jw_key(w, "ci_target"); jw_num(w, o->ci_target);
    jw_key(w, "max_iterations"); jw_int(w, o->max_iterations);
    jw_key(w, "min_seconds"); jw_num(w, o->min_seconds);
    jw_key(w, "max_seconds"); jw_num(w, o->max_seconds);
    jw_key(w, "resamples"); jw_int(w, o->resamples);
    jw_key(w, "bootstrap_seed"); jw_int(w, (long long)BOOTSTRAP_SEED);
    jw_key(w, "median_ms"); jw_num(w, m->median_ms);
    jw_key(w, "ci_low_ms"); jw_num(w, m->ci_low_ms);
    jw_key(w, "ci_high_ms"); jw_num(w, m->ci_high_ms);
    jw_key(w, "estimate_quantile"); jw_num(w, ESTIMATE_QUANTILE);
    jw_key(w, "estimate_ms"); jw_num(w, m->estimate_ms);
    jw_key(w, "low_ms"); jw_num(w, m->low_ms);
    jw_key(w, "high_ms"); jw_num(w, m->high_ms);
    jw_obj_end(w);
}

static void write_run_json(run_ctx *rc, const runner_opts *o, const iter_rec *iters, int total,
                           double setup_ms, const measure_rec *m, const ckpt_snap *snaps,
                           int nsnaps)
{
    pt_plan *p = rc->plan;
    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "status"); jw_str(&w, "ok");
    jw_key(&w, "exit_code"); jw_int(&w, 0);
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_key(&w, "plan_path"); jw_str(&w, o->plan);
    jw_key(&w, "plan_name"); jw_str(&w, p->name);
    jw_key(&w, "plan_version"); jw_int(&w, p->version);
    jw_key(&w, "backend");
    jw_str(&w, p->backend == BACKEND_CPU ? "cpu" : p->backend == BACKEND_OPENCL ? "opencl" : "vulkan");
    jw_key(&w, "threads"); jw_int(&w, rc->threads);
    jw_key(&w, "profiling"); jw_bool(&w, p->backend != BACKEND_CPU && rc->profiling);
    jw_key(&w, "host"); write_host_json(&w);
    jw_key(&w, "device");
    if (p->backend == BACKEND_OPENCL) cl_write_device_json(&w, rc->platform, rc->device);
    else if (p->backend == BACKEND_VULKAN) vk_write_run_device(rc, &w);
    else jw_null(&w);
    jw_key(&w, "timer_resolution_ns");
    if (p->backend == BACKEND_OPENCL)
        jw_int(&w, (long long)cl_device_ulong(rc->device, CL_DEVICE_PROFILING_TIMER_RESOLUTION));
    else if (p->backend == BACKEND_VULKAN) jw_num(&w, vk_timer_resolution_ns(rc));
    else jw_null(&w);
    jw_key(&w, "build");
    if (p->backend != BACKEND_CPU) jw_value_raw(&w, rc->build_json.buf, rc->build_json.len);
    else { jw_arr_begin(&w); jw_arr_end(&w); }
    jw_key(&w, "warmup"); jw_int(&w, p->warmup);
    jw_key(&w, "iterations"); jw_int(&w, total - p->warmup);
    jw_key(&w, "plan_iterations"); jw_int(&w, p->iterations);
    jw_key(&w, "measurement"); write_measure_json(&w, o, m);
    jw_key(&w, "conditions"); cond_write_json(&w, &m->before, &m->after, rc->threads);
    jw_key(&w, "probe");
    if (o->no_probe) jw_null(&w);
    else probe_write_json(&w, &m->probe);
    double measured_ms = 0;
    for (int i = p->warmup; i < total; i++) measured_ms += iters[i].wall_ms;
    jw_key(&w, "power"); power_write_json(&w, &m->power, measured_ms, total - p->warmup);
    jw_key(&w, "setup_ms"); jw_num(&w, setup_ms);
    jw_key(&w, "iters");
    jw_arr_begin(&w);
    for (int i = 0; i < total; i++) {
        jw_obj_begin(&w);
        jw_key(&w, "iteration"); jw_int(&w, i);
        jw_key(&w, "warmup"); jw_bool(&w, i < p->warmup);
        jw_key(&w, "wall_ms"); jw_num(&w, iters[i].wall_ms);
        jw_key(&w, "loss");
        if (p->loss_tensor >= 0) jw_num(&w, iters[i].loss); else jw_null(&w);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "peak_rss_bytes"); jw_int(&w, peak_rss_bytes());
    jw_key(&w, "device_bytes_allocated"); jw_int(&w, rc->device_bytes);
    jw_key(&w, "trace_rows"); jw_int(&w, rc->tr.n);
    jw_key(&w, "checkpoints");
    jw_arr_begin(&w);
    for (int k = 0; k < nsnaps; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "checkpoints/%d", snaps[k].iteration);
        jw_obj_begin(&w);
        jw_key(&w, "iteration"); jw_int(&w, snaps[k].iteration);
        jw_key(&w, "dir"); jw_str(&w, rel);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "files"); ledger_write_json(&w);
    jw_key(&w, "dumps");
    jw_arr_begin(&w);
    for (int i = 0; i < p->ndumps; i++) {
        char rel[600];
        snprintf(rel, sizeof rel, "dumps/%s.f32", p->tensors[p->dumps[i]].name);
        jw_str(&w, rel);
    }
    for (int k = 0; k < nsnaps; k++)
        for (int i = 0; i < p->nckpt_tensors; i++) {
            char rel[700];
            snprintf(rel, sizeof rel, "checkpoints/%d/%s.f32", snaps[k].iteration,
                     p->tensors[p->ckpt_tensors[i]].name);
            jw_str(&w, rel);
        }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    write_output(o->out, "run.json", w.buf, w.len);
    jw_free(&w);
}

/* The measured iterations' wall times, or NULL (*n 0) when there are none. */
static double *measured_walls(const iter_rec *iters, int warmup, int end, int *n)
{
    *n = end - warmup;
    if (*n < 1) { *n = 0; return NULL; }
    double *x = xmalloc((size_t)*n * sizeof *x);
    for (int i = 0; i < *n; i++) x[i] = iters[warmup + i].wall_ms;
    return x;
}

/* The ESTIMATE_QUANTILE of the measured iterations' wall times and its 95% interval. */
static void estimate_ci(const iter_rec *iters, int warmup, int end, int resamples, double *est,
                        double *lo, double *hi)
{
    int n;
    double *x = measured_walls(iters, warmup, end, &n);
    if (!n) { *est = *lo = *hi = NAN; return; }
    *est = stats_quantile(x, n, ESTIMATE_QUANTILE);
    stats_quantile_ci(x, n, ESTIMATE_QUANTILE, resamples, BOOTSTRAP_SEED, lo, hi);
    free(x);
}

/* The median of the measured iterations' wall times and its 95% interval. */
static void measured_ci(const iter_rec *iters, int warmup, int end, int resamples, double *med,
                        double *lo, double *hi)
{
    int n;
    double *x = measured_walls(iters, warmup, end, &n);
    if (!n) { *med = *lo = *hi = NAN; return; }
    *med = stats_median(x, n);
    stats_median_ci(x, n, resamples, BOOTSTRAP_SEED, lo, hi);
    free(x);
}

static int ci_within(const iter_rec *iters, int warmup, int end, const runner_opts *o)
{
    double est, lo, hi;
    estimate_ci(iters, warmup, end, o->resamples, &est, &lo, &hi);
    return stats_rel_half_width(est, lo, hi) <= o->ci_target;
}

/* Adaptive measurement after iteration `it` (measured or not): returns the new total, or -1
 * while undecided; *stopped names the reason of a decision. A decision adds the tail (the
 * checkpoints counted from the end), so the limit is reached when m + tail measured
 * iterations would reach --max-iterations; the interval is judged from 3 measured on, not
 * before measuring took --min-seconds, and not while energy_pending (the power sampler has
 * not yet read the battery twice). */
static int decide(const runner_opts *o, const pt_plan *p, const iter_rec *iters, int it, int total,
                  uint64_t measure_t0, int energy_pending, int *next_check, const char **stopped)
{
    int tail = ckpt_tail(p), m = it - p->warmup + 1;
    if (m < 1) return total;
    int at_max = m + tail >= o->max_iterations;
    double elapsed_s = (double)(monotonic_ns() - measure_t0) / 1e9;
    int timed_out = elapsed_s >= o->max_seconds;
    if (total < 0) {   /* undecided */
        if (m + tail < p->iterations) return -1;
        if (at_max) { *stopped = "max_iterations"; return it + 1 + tail; }
        if (timed_out) { *stopped = "max_seconds"; return it + 1 + tail; }
        if (m >= 3 && m >= *next_check && !energy_pending && elapsed_s >= o->min_seconds) {
            *next_check = m + (m / 8 > 1 ? m / 8 : 1);
            if (ci_within(iters, p->warmup, it + 1, o)) { *stopped = "ci"; return it + 1 + tail; }
        }
        return -1;
    }
    if (it < total - 1) return total;
    /* the last iteration of a decision: keep it unless the interval widened and no limit hit */
    if (!strcmp(*stopped, "ci") && !ci_within(iters, p->warmup, it + 1, o) && !at_max && !timed_out)
        return -1;
    return total;
}

int mode_run(const runner_opts *o)
{
    if (!o->plan || !o->out) fail(EXIT_BAD_INPUT, "run needs --plan FILE and --out DIR");
    if (make_dirs(o->out) != 0) fail(EXIT_INTERNAL, "cannot create output folder %s: %s", o->out, strerror(errno));
    g_out = o->out;
    g_plan_path = o->plan;
    /* A stale run.json would make a killed or crashed run look complete: remove it first. */
    char *stale = path_join(o->out, "run.json");
    unlink(stale);
    free(stale);
    remove_outputs();
    set_fail_hook(write_failed);
    uint64_t t0 = monotonic_ns();
    run_ctx rc;
    memset(&rc, 0, sizeof rc);
    rc.plan = g_plan = plan_load(o->plan);
    rc.root = o->root ? o->root : ".";
    rc.cl_lib = o->cl_lib;
    rc.clblast_lib = o->clblast_lib;
    rc.vk_lib = o->vk_lib;
    rc.vk_select = o->vk_device;
    rc.sel = o->sel;
    rc.profiling = !o->no_profiling;
    pt_plan *p = rc.plan;
    /* --no-checkpoints: a process whose steps nobody verifies (the train job verifies one
     * process per run) keeps no state, so it neither copies the checkpoint tensors back nor
     * measures the iterations the checkpoints counted from the end would add after a decision */
    if (o->no_checkpoints) p->nckpt_iters = 0;
    /* a transfer queue's commands wait for events of queue 0: they cannot go without them */
    if (o->no_profiling && p->backend == BACKEND_OPENCL && p->nqueues > 1)
        fail(EXIT_BAD_INPUT, "--no-profiling: plan %s uses a transfer queue (pipelined placement), "
             "whose wait lists need every command's event; run it with profiling", o->plan);
    int usable = cpus_usable(cond_sysfs_root());
    rc.threads = o->threads > 0 ? o->threads : usable;
    if (p->backend == BACKEND_CPU && rc.threads > usable)
        fprintf(stderr, "runner: warning: %d threads on %d usable CPUs (oversubscribed: "
                "threads wait for each other); --threads 0 takes the CPUs available\n",
                rc.threads, usable);
    if (o->ci_target > 0 && o->max_iterations < p->iterations)
        fail(EXIT_BAD_INPUT, "--max-iterations %d is below the plan's %d measured iterations",
             o->max_iterations, p->iterations);
    plan_load_data(p, rc.root);
    if (p->backend == BACKEND_CPU) cpu_setup(&rc);
    else if (p->backend == BACKEND_VULKAN) { omp_set_num_threads(rc.threads); vk_setup(&rc); }
    else { omp_set_num_threads(rc.threads); cl_setup(&rc); }
    double setup_ms = (double)(monotonic_ns() - t0) / 1e6;

    measure_rec m = {.adaptive = o->ci_target > 0, .stopped = "fixed"};
    int total = m.adaptive ? -1 : p->warmup + p->iterations;
    int cap = p->warmup + (m.adaptive ? o->max_iterations : p->iterations) + 1;
    iter_rec *iters = xcalloc((size_t)cap, sizeof *iters);
    ckpt_snap *snaps = NULL;
    int nsnaps = 0, next_check = 1;
    uint64_t measure_t0 = 0;
    for (int it = 0; total < 0 || it < total; it++) {
        int warm = it < p->warmup;
        if (it == p->warmup) {
            m.probe.threads = rc.threads;
            if (!o->no_probe) {
                m.probe.before_ms = probe_ms(rc.threads);
                if (p->backend != BACKEND_CPU) probe_release_threads();
            }
            cond_sample_now(&m.before);
            power_start(&m.power, o->power_sample_ms);
            measure_t0 = monotonic_ns();
        }
        if (it >= cap) {
            iters = realloc(iters, (size_t)(cap *= 2) * sizeof *iters);
            if (!iters) fail(EXIT_INTERNAL, "out of host memory recording iterations");
        }
        uint64_t begin = monotonic_ns();
        uint64_t end = p->backend == BACKEND_CPU ? cpu_iteration(&rc, it, warm)
                       : p->backend == BACKEND_VULKAN ? vk_iteration(&rc, it, warm)
                                                      : cl_iteration(&rc, it, warm);
        iters[it].wall_ms = (double)(end - begin) / 1e6;
        iters[it].loss = NAN;
        if (p->loss_tensor >= 0) {
            iters[it].loss = ((const float *)p->tensors[p->loss_tensor].host)[0];
            if (!isfinite(iters[it].loss))
                fail(EXIT_NONFINITE, "loss tensor \"%s\" is %s after iteration %d%s; lower the learning "
                     "rate or check the kernels", p->tensors[p->loss_tensor].name,
                     isnan(iters[it].loss) ? "NaN" : "infinite", it, warm ? " (warm-up)" : "");
        }
        if (o->progress && total > 0)
            fprintf(stderr, "iteration %d/%d%s wall_ms=%.3f loss=%.6g\n", it + 1, total,
                    warm ? " (warm-up)" : "", iters[it].wall_ms, iters[it].loss);
        else if (o->progress)
            fprintf(stderr, "iteration %d (measuring until the interval is within +-%g%%)%s "
                    "wall_ms=%.3f loss=%.6g\n", it + 1, 100 * o->ci_target,
                    warm ? " (warm-up)" : "", iters[it].wall_ms, iters[it].loss);
        if (m.adaptive && !warm) {
            int was = total;
            total = decide(o, p, iters, it, total, measure_t0, power_energy_pending(&m.power),
                           &next_check, &m.stopped);
            if (was > 0 && total < 0) {   /* taken back: its tail is no longer the end */
                next_check = it - p->warmup + 2;
                drop_tail(p, snaps, &nsnaps, was - ckpt_tail(p));
            }
        }
        if (is_checkpoint(p, it, total)) snapshot(&rc, &snaps, &nsnaps, it);
    }
    power_stop(&m.power);
    cond_sample_now(&m.after);
    if (!o->no_probe) m.probe.after_ms = probe_ms(rc.threads);
    measured_ci(iters, p->warmup, total, o->resamples, &m.median_ms, &m.ci_low_ms, &m.ci_high_ms);
    estimate_ci(iters, p->warmup, total, o->resamples, &m.estimate_ms, &m.low_ms, &m.high_ms);
    write_dumps(&rc, o->out);
    write_checkpoints(p, o->out, snaps, nsnaps);
    size_t len;
    char *csv = trace_csv(&rc.tr, &len);
    write_output(o->out, "trace.csv", csv, len);
    ledger_record("trace.csv", csv, len);
    free(csv);
    write_run_json(&rc, o, iters, total, setup_ms, &m, snaps, nsnaps);
    for (int k = 0; k < nsnaps; k++) free(snaps[k].data);
    free(snaps);
    free(iters);
    power_free(&m.power);
    return EXIT_OK;
}
