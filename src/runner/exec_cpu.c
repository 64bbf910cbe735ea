/* CPU backend: runs each step on the host with cpu_kernel_run (OpenMP inside the kernels). */
#define _POSIX_C_SOURCE 200809L
#include "exec.h"
#include "util.h"

#include <omp.h>
#include <string.h>

void cpu_setup(run_ctx *rc)
{
    omp_set_num_threads(rc->threads);
    pt_plan *p = rc->plan;
    for (int k = 0; k < p->nsteps; k++) {   /* kernel arguments point at the host copies */
        pt_step *s = &p->steps[k];
        for (int a = 0; a < s->nargs; a++)
            if (s->arg_tensor[a] >= 0) s->args[a].p = p->tensors[s->arg_tensor[a]].host;
    }
}

uint64_t cpu_iteration(run_ctx *rc, int iteration, int warmup)
{
    pt_plan *p = rc->plan;
    for (int k = 0; k < p->nsteps; k++) {
        pt_step *s = &p->steps[k];
        trace_row *r = trace_step(&rc->tr, rc->plan, s, iteration, warmup, k, k);
        char err[512] = "";
        r->host_begin_ns = monotonic_ns();
        int rcode = 0;
        if (s->op == OP_LOAD) plan_load_batch(&p->tensors[s->tensor], iteration);
        else rcode = cpu_kernel_run(s->name, s->args, s->nargs, err, sizeof err);
        r->host_end_ns = monotonic_ns();
        if (rcode == -2) fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d]: unknown kernel \"%s\"", p->path, k, s->name);
        if (rcode != 0) fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): %s", p->path, k, s->name, err);
    }
    return monotonic_ns();
}
