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
 * crash) leaves no run.json at all.
 *
 * Side by side (--previous-plan P --previous-out D): a second plan, of the same backend, is
 * loaded and set up beside the first on the same device (two run contexts: a `side` each).
 * Both warm up, then their measured iterations alternate, the order reversed every round
 * (previous, new, new, previous, ...), so that what the host does while measuring falls on
 * both. Each side decides its own adaptive stop as above (one --max-seconds for the
 * process: both sides' clocks start together) and, once stopped, waits while the other goes
 * on. The probe, the conditions and the power sampler run once, around both sides' measured
 * iterations, and go into both run.json. Each side writes its own folder exactly as a
 * one-plan run does, plus run.json "side_by_side"; a failure writes a failed run.json into
 * both folders. */
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

/* One plan measured in this process: its run context, output folder, iterations and
 * checkpoints, and the adaptive decision. A side-by-side run has two. */
typedef struct {
    const char *plan_path, *out;
    const char *name;        /* side by side: "previous" | "new"; NULL: the one plan */
    run_ctx rc;
    uint64_t setup_t0;       /* when loading its plan began (setup_ms counts from it) */
    double setup_ms;
    measure_rec m;
    iter_rec *iters;
    int cap;                 /* iters' length */
    int it;                  /* the next iteration */
    int total;               /* warm-up + measured iterations; -1 while adaptively undecided */
    int next_check;          /* adaptive: the measured count of the next interval check */
    ckpt_snap *snaps;
    int nsnaps;
} side;

/* The sides whose folders the fail hook writes (set before any plan is loaded). */
static side *g_sides[2];
static int g_nsides;

static const char *backend_name(int backend)
{
    return backend == BACKEND_CPU ? "cpu" : backend == BACKEND_OPENCL ? "opencl" : "vulkan";
}

/* Removes the files checkpoints/<iteration>/<tensor>.f32 and their folders (a previous run's). */
static void remove_checkpoints(const char *out)
{
    char *root = path_join(out, "checkpoints");
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

static void remove_outputs(const side *s)
{
    const pt_plan *plan = s->rc.plan;
    char *p = path_join(s->out, "trace.csv");
    unlink(p);
    free(p);
    remove_checkpoints(s->out);
    for (int i = 0; plan && i < plan->ndumps; i++) {
        char rel[600];
        snprintf(rel, sizeof rel, "dumps/%s.f32", plan->tensors[plan->dumps[i]].name);
        p = path_join(s->out, rel);
        unlink(p);
        free(p);
    }
}

static void write_failed_side(const side *s, int code, const char *message)
{
    remove_outputs(s);
    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "status"); jw_str(&w, "failed");
    jw_key(&w, "exit_code"); jw_int(&w, code);
    jw_key(&w, "error"); jw_str(&w, message);
    jw_key(&w, "plan_path"); jw_str(&w, s->plan_path);
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    char *path = path_join(s->out, "run.json");
    if (write_file_atomic(path, w.buf, w.len) != 0)
        fprintf(stderr, "runner: also could not write %s: %s\n", path, strerror(errno));
    free(path);
    jw_free(&w);
}

/* The fail hook: a failed run.json in every side's folder. */
static void write_failed(int code, const char *message)
{
    for (int i = 0; i < g_nsides; i++) write_failed_side(g_sides[i], code, message);
}

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

/* run.json "side_by_side": which side this folder is and where the other one's is. */
static void write_side_json(jwriter *w, const side *s, const side *other)
{
    jw_obj_begin(w);
    jw_key(w, "side"); jw_str(w, s->name);
    jw_key(w, "first"); jw_str(w, "previous");   /* round 0's first; reversed every round */
    jw_key(w, "other_plan_path"); jw_str(w, other->plan_path);
    jw_key(w, "other_out"); jw_str(w, other->out);
    jw_obj_end(w);
}

/* Side s's run.json; `other`: the other side of a side-by-side run, else NULL. */
static void write_run_json(side *s, const side *other, const runner_opts *o)
{
    run_ctx *rc = &s->rc;
    pt_plan *p = rc->plan;
    const iter_rec *iters = s->iters;
    const measure_rec *m = &s->m;
    const ckpt_snap *snaps = s->snaps;
    int total = s->total, nsnaps = s->nsnaps;
    jwriter w;
    jw_init(&w);
    jw_obj_begin(&w);
    jw_key(&w, "status"); jw_str(&w, "ok");
    jw_key(&w, "exit_code"); jw_int(&w, 0);
    jw_key(&w, "runner"); write_runner_json(&w);
    jw_key(&w, "plan_path"); jw_str(&w, s->plan_path);
    jw_key(&w, "plan_name"); jw_str(&w, p->name);
    jw_key(&w, "plan_version"); jw_int(&w, p->version);
    jw_key(&w, "backend");
    jw_str(&w, backend_name(p->backend));
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
    jw_key(&w, "setup_ms"); jw_num(&w, s->setup_ms);
    if (other) { jw_key(&w, "side_by_side"); write_side_json(&w, s, other); }
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
    write_output(s->out, "run.json", w.buf, w.len);
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

/* Prepares side s's output folder: created, and a stale run.json (it would make a killed or
 * crashed run look complete) and the outputs of an earlier run removed. */
static void side_open(side *s, const char *plan_path, const char *out, const char *name)
{
    s->plan_path = plan_path;
    s->out = out;
    s->name = name;
    if (make_dirs(out) != 0)
        fail(EXIT_INTERNAL, "cannot create output folder %s: %s", out, strerror(errno));
    char *stale = path_join(out, "run.json");
    unlink(stale);
    free(stale);
    remove_outputs(s);
}

/* Loads side s's plan and checks it against the options. */
static void side_load(side *s, const runner_opts *o)
{
    s->setup_t0 = monotonic_ns();
    run_ctx *rc = &s->rc;
    rc->plan = plan_load(s->plan_path);
    rc->root = o->root ? o->root : ".";
    rc->cl_lib = o->cl_lib;
    rc->clblast_lib = o->clblast_lib;
    rc->vk_lib = o->vk_lib;
    rc->vk_select = o->vk_device;
    rc->sel = o->sel;
    rc->profiling = !o->no_profiling;
    pt_plan *p = rc->plan;
    /* --no-checkpoints: a process whose steps nobody verifies (the train job verifies one
     * process per run) keeps no state, so it neither copies the checkpoint tensors back nor
     * measures the iterations the checkpoints counted from the end would add after a decision */
    if (o->no_checkpoints) p->nckpt_iters = 0;
    /* a transfer queue's commands wait for events of queue 0: they cannot go without them */
    if (o->no_profiling && p->backend == BACKEND_OPENCL && p->nqueues > 1)
        fail(EXIT_BAD_INPUT, "--no-profiling: plan %s uses a transfer queue (pipelined placement), "
             "whose wait lists need every command's event; run it with profiling", s->plan_path);
    int usable = cpus_usable(cond_sysfs_root());
    rc->threads = o->threads > 0 ? o->threads : usable;
    if (p->backend == BACKEND_CPU && rc->threads > usable)
        fprintf(stderr, "runner: warning: %d threads on %d usable CPUs (oversubscribed: "
                "threads wait for each other); --threads 0 takes the CPUs available\n",
                rc->threads, usable);
    if (o->ci_target > 0 && o->max_iterations < p->iterations)
        fail(EXIT_BAD_INPUT, "--max-iterations %d is below the plan's %d measured iterations%s%s",
             o->max_iterations, p->iterations, s->name ? " in plan " : "",
             s->name ? s->plan_path : "");
}

/* Sets up side s's backend (its data, untimed uploads, builds) and its iteration records. */
static void side_setup(side *s, const runner_opts *o)
{
    run_ctx *rc = &s->rc;
    pt_plan *p = rc->plan;
    plan_load_data(p, rc->root);
    if (p->backend == BACKEND_CPU) cpu_setup(rc);
    else if (p->backend == BACKEND_VULKAN) { omp_set_num_threads(rc->threads); vk_setup(rc); }
    else { omp_set_num_threads(rc->threads); cl_setup(rc); }
    s->setup_ms = (double)(monotonic_ns() - s->setup_t0) / 1e6;
    s->m = (measure_rec){.adaptive = o->ci_target > 0, .stopped = "fixed"};
    s->total = s->m.adaptive ? -1 : p->warmup + p->iterations;
    s->cap = p->warmup + (s->m.adaptive ? o->max_iterations : p->iterations) + 1;
    s->iters = xcalloc((size_t)s->cap, sizeof *s->iters);
    s->next_check = 1;
}

static int side_warming(const side *s) { return s->it < s->rc.plan->warmup; }
static int side_running(const side *s) { return s->total < 0 || s->it < s->total; }

/* Runs side s's next iteration: its wall time and loss, the adaptive decision (the clock
 * started at measure_t0), a checkpoint's snapshot. */
static void side_iteration(side *s, const runner_opts *o, uint64_t measure_t0, int energy_pending)
{
    run_ctx *rc = &s->rc;
    pt_plan *p = rc->plan;
    int it = s->it++, warm = it < p->warmup;
    if (it >= s->cap) {
        s->iters = realloc(s->iters, (size_t)(s->cap *= 2) * sizeof *s->iters);
        if (!s->iters) fail(EXIT_INTERNAL, "out of host memory recording iterations");
    }
    iter_rec *r = &s->iters[it];
    uint64_t begin = monotonic_ns();
    uint64_t end = p->backend == BACKEND_CPU ? cpu_iteration(rc, it, warm)
                   : p->backend == BACKEND_VULKAN ? vk_iteration(rc, it, warm)
                                                  : cl_iteration(rc, it, warm);
    r->wall_ms = (double)(end - begin) / 1e6;
    r->loss = NAN;
    if (p->loss_tensor >= 0) {
        r->loss = ((const float *)p->tensors[p->loss_tensor].host)[0];
        if (!isfinite(r->loss))
            fail(EXIT_NONFINITE, "loss tensor \"%s\" is %s after iteration %d%s%s%s; lower the "
                 "learning rate or check the kernels", p->tensors[p->loss_tensor].name,
                 isnan(r->loss) ? "NaN" : "infinite", it, warm ? " (warm-up)" : "",
                 s->name ? " of plan " : "", s->name ? s->plan_path : "");
    }
    const char *tag = s->name ? s->name : "", *gap = s->name ? " " : "";
    if (o->progress && s->total > 0)
        fprintf(stderr, "%s%siteration %d/%d%s wall_ms=%.3f loss=%.6g\n", tag, gap, it + 1,
                s->total, warm ? " (warm-up)" : "", r->wall_ms, r->loss);
    else if (o->progress)
        fprintf(stderr, "%s%siteration %d (measuring until the interval is within +-%g%%)%s "
                "wall_ms=%.3f loss=%.6g\n", tag, gap, it + 1, 100 * o->ci_target,
                warm ? " (warm-up)" : "", r->wall_ms, r->loss);
    if (s->m.adaptive && !warm) {
        int was = s->total;
        s->total = decide(o, p, s->iters, it, s->total, measure_t0, energy_pending,
                          &s->next_check, &s->m.stopped);
        if (was > 0 && s->total < 0) {   /* taken back: its tail is no longer the end */
            s->next_check = it - p->warmup + 2;
            drop_tail(p, s->snaps, &s->nsnaps, was - ckpt_tail(p));
        }
    }
    if (is_checkpoint(p, it, s->total)) snapshot(rc, &s->snaps, &s->nsnaps, it);
}

/* Side s's figures (with the process's probe, conditions and power, `shared`) and its
 * folder: dumps, checkpoints, trace.csv and, last, run.json. */
static void side_write(side *s, const side *other, const runner_opts *o, const measure_rec *shared)
{
    pt_plan *p = s->rc.plan;
    s->m.probe = shared->probe;
    s->m.before = shared->before;
    s->m.after = shared->after;
    s->m.power = shared->power;
    measured_ci(s->iters, p->warmup, s->total, o->resamples, &s->m.median_ms, &s->m.ci_low_ms,
                &s->m.ci_high_ms);
    estimate_ci(s->iters, p->warmup, s->total, o->resamples, &s->m.estimate_ms, &s->m.low_ms,
                &s->m.high_ms);
    ledger_reset();
    write_dumps(&s->rc, s->out);
    write_checkpoints(p, s->out, s->snaps, s->nsnaps);
    size_t len;
    char *csv = trace_csv(&s->rc.tr, &len);
    write_output(s->out, "trace.csv", csv, len);
    ledger_record("trace.csv", csv, len);
    free(csv);
    write_run_json(s, other, o);
}

static void side_free(side *s)
{
    for (int k = 0; k < s->nsnaps; k++) free(s->snaps[k].data);
    free(s->snaps);
    free(s->iters);
}

/* The side-by-side options: both given, another folder, a plan that can be read. */
static void check_previous(const runner_opts *o)
{
    if (!o->previous_plan && !o->previous_out) return;
    if (!o->previous_plan || !o->previous_out)
        fail(EXIT_BAD_INPUT, "run: %s needs %s too (the previous build's plan and its own "
             "output folder, measured side by side)",
             o->previous_plan ? "--previous-plan" : "--previous-out",
             o->previous_plan ? "--previous-out DIR" : "--previous-plan FILE");
    if (!strcmp(o->previous_out, o->out))
        fail(EXIT_BAD_INPUT, "run: --previous-out %s is the --out folder; give each side its "
             "own folder", o->previous_out);
}

int mode_run(const runner_opts *o)
{
    if (!o->plan || !o->out) fail(EXIT_BAD_INPUT, "run needs --plan FILE and --out DIR");
    check_previous(o);
    int paired = o->previous_plan != NULL;
    /* side by side: sides[0] the previous plan, the first of round 0; sides[1] the new one */
    side sides[2];
    memset(sides, 0, sizeof sides);
    side *nw = &sides[paired];
    if (paired) side_open(&sides[0], o->previous_plan, o->previous_out, "previous");
    side_open(nw, o->plan, o->out, paired ? "new" : NULL);
    g_nsides = paired + 1;
    for (int i = 0; i < g_nsides; i++) g_sides[i] = &sides[i];
    set_fail_hook(write_failed);
    if (paired && access(o->previous_plan, R_OK) != 0)
        fail(EXIT_BAD_INPUT, "run: --previous-plan %s: %s; give the previous build's plan as "
             "the runner sees it", o->previous_plan, strerror(errno));
    side_load(nw, o);
    if (paired) {
        side_load(&sides[0], o);
        int a = sides[0].rc.plan->backend, b = nw->rc.plan->backend;
        if (a != b)
            fail(EXIT_BAD_INPUT, "run: --previous-plan %s is for backend %s, --plan %s for %s; "
                 "a side-by-side pair runs both plans on one backend and device",
                 o->previous_plan, backend_name(a), o->plan, backend_name(b));
    }
    for (int i = 0; i < g_nsides; i++) side_setup(&sides[i], o);

    /* warm-up, then the measured iterations: one of each running side per round, the
     * order reversed every round */
    measure_rec shared = {0};
    uint64_t measure_t0 = 0;
    for (int measuring = 0; measuring < 2; measuring++) {
        if (measuring) {
            shared.probe.threads = nw->rc.threads;
            if (!o->no_probe) {
                shared.probe.before_ms = probe_ms(nw->rc.threads);
                if (nw->rc.plan->backend != BACKEND_CPU) probe_release_threads();
            }
            cond_sample_now(&shared.before);
            power_start(&shared.power, o->power_sample_ms);
            measure_t0 = monotonic_ns();
        }
        for (int round = 0, busy = 1; busy; round++) {
            busy = 0;
            for (int k = 0; k < g_nsides; k++) {
                side *s = &sides[round % 2 ? g_nsides - 1 - k : k];
                if (!side_running(s) || (!measuring && !side_warming(s))) continue;
                side_iteration(s, o, measure_t0, power_energy_pending(&shared.power));
                busy = 1;
            }
        }
    }
    power_stop(&shared.power);
    cond_sample_now(&shared.after);
    if (!o->no_probe) shared.probe.after_ms = probe_ms(nw->rc.threads);
    for (int i = 0; i < g_nsides; i++)
        side_write(&sides[i], paired ? &sides[1 - i] : NULL, o, &shared);
    for (int i = 0; i < g_nsides; i++) side_free(&sides[i]);
    power_free(&shared.power);
    return EXIT_OK;
}
