/* run mode: load a plan, set up the backend, run warm-up + measured iterations, write
 * dumps/, trace.csv and, last, run.json (the completion marker) into the output folder.
 * On any failure after the output folder is known, the fail hook removes trace.csv and the
 * plan's dumps and writes run.json with "status": "failed", the exit code and the message.
 * A previous run.json and trace.csv are removed at the start, so a run killed midway (timeout,
 * crash) leaves no run.json at all. */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "ledger.h"
#include "modes.h"
#include "util.h"

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

static void remove_outputs(void)
{
    char *p = path_join(g_out, "trace.csv");
    unlink(p);
    free(p);
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

static void write_dumps(run_ctx *rc, const char *out)
{
    pt_plan *p = rc->plan;
    if (!p->ndumps) return;
    char *dir = path_join(out, "dumps");
    if (make_dirs(dir) != 0) fail(EXIT_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    for (int i = 0; i < p->ndumps; i++) {
        pt_tensor *t = &p->tensors[p->dumps[i]];
        void *buf = xmalloc(t->size_bytes);
        if (p->backend == BACKEND_OPENCL) cl_read_home(rc, t, buf);
        else memcpy(buf, t->host, t->size_bytes);
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

static void write_run_json(run_ctx *rc, const runner_opts *o, const iter_rec *iters, double setup_ms)
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
    jw_key(&w, "plan_version"); jw_int(&w, PLAN_VERSION);
    jw_key(&w, "backend"); jw_str(&w, p->backend == BACKEND_CPU ? "cpu" : "opencl");
    jw_key(&w, "threads"); jw_int(&w, rc->threads);
    jw_key(&w, "host"); write_host_json(&w);
    jw_key(&w, "device");
    if (p->backend == BACKEND_OPENCL) cl_write_device_json(&w, rc->platform, rc->device); else jw_null(&w);
    jw_key(&w, "timer_resolution_ns");
    if (p->backend == BACKEND_OPENCL)
        jw_int(&w, (long long)cl_device_ulong(rc->device, CL_DEVICE_PROFILING_TIMER_RESOLUTION));
    else jw_null(&w);
    jw_key(&w, "build");
    if (p->backend == BACKEND_OPENCL) jw_value_raw(&w, rc->build_json.buf, rc->build_json.len);
    else { jw_arr_begin(&w); jw_arr_end(&w); }
    jw_key(&w, "warmup"); jw_int(&w, p->warmup);
    jw_key(&w, "iterations"); jw_int(&w, p->iterations);
    jw_key(&w, "setup_ms"); jw_num(&w, setup_ms);
    jw_key(&w, "iters");
    jw_arr_begin(&w);
    for (int i = 0; i < p->warmup + p->iterations; i++) {
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
    jw_key(&w, "files"); ledger_write_json(&w);
    jw_key(&w, "dumps");
    jw_arr_begin(&w);
    for (int i = 0; i < p->ndumps; i++) {
        char rel[600];
        snprintf(rel, sizeof rel, "dumps/%s.f32", p->tensors[p->dumps[i]].name);
        jw_str(&w, rel);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_raw(&w, "\n", 1);
    write_output(o->out, "run.json", w.buf, w.len);
    jw_free(&w);
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
    rc.sel = o->sel;
    pt_plan *p = rc.plan;
    rc.threads = o->threads > 0 ? o->threads : omp_get_num_procs();
    plan_load_data(p, rc.root);
    if (p->backend == BACKEND_CPU) cpu_setup(&rc);
    else { omp_set_num_threads(rc.threads); cl_setup(&rc); }
    double setup_ms = (double)(monotonic_ns() - t0) / 1e6;

    int total = p->warmup + p->iterations;
    iter_rec *iters = xcalloc((size_t)total, sizeof *iters);
    for (int it = 0; it < total; it++) {
        int warm = it < p->warmup;
        uint64_t begin = monotonic_ns();
        uint64_t end = p->backend == BACKEND_CPU ? cpu_iteration(&rc, it, warm) : cl_iteration(&rc, it, warm);
        iters[it].wall_ms = (double)(end - begin) / 1e6;
        iters[it].loss = NAN;
        if (p->loss_tensor >= 0) {
            iters[it].loss = ((const float *)p->tensors[p->loss_tensor].host)[0];
            if (!isfinite(iters[it].loss))
                fail(EXIT_NONFINITE, "loss tensor \"%s\" is %s after iteration %d%s; lower the learning "
                     "rate or check the kernels", p->tensors[p->loss_tensor].name,
                     isnan(iters[it].loss) ? "NaN" : "infinite", it, warm ? " (warm-up)" : "");
        }
        if (o->progress)
            fprintf(stderr, "iteration %d/%d%s wall_ms=%.3f loss=%.6g\n", it + 1, total,
                    warm ? " (warm-up)" : "", iters[it].wall_ms, iters[it].loss);
    }
    write_dumps(&rc, o->out);
    size_t len;
    char *csv = trace_csv(&rc.tr, &len);
    write_output(o->out, "trace.csv", csv, len);
    ledger_record("trace.csv", csv, len);
    free(csv);
    write_run_json(&rc, o, iters, setup_ms);
    free(iters);
    return EXIT_OK;
}
