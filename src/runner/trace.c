/* Trace rows and CSV output: see trace.h. */
#define _POSIX_C_SOURCE 200809L
#include "trace.h"
#include "json.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

trace_row *trace_add(trace *t)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        trace_row *nr = realloc(t->rows, (size_t)t->cap * sizeof *nr);
        if (!nr) fail(EXIT_INTERNAL, "out of host memory growing the trace");
        t->rows = nr;
    }
    trace_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    r->queued_ns = r->submit_ns = r->start_ns = r->end_ns = -1;
    r->layer = r->phase = r->name = "";
    return r;
}

trace_row *trace_step(trace *t, const pt_plan *p, const pt_step *s, int iteration, int warmup,
                      int seq, int k)
{
    trace_row *r = trace_add(t);
    r->iteration = iteration;
    r->warmup = warmup;
    r->seq = seq;
    r->step = k;
    r->queue = s->queue;
    r->op = op_name(s->op);
    r->kind = step_kind(s);
    r->name = s->op == OP_KERNEL ? s->name : p->tensors[s->tensor].name;
    r->layer = s->layer;
    r->phase = s->phase;
    r->bytes = s->bytes;
    r->flops = s->flops;
    return r;
}

void trace_map_copy(trace *t, const pt_plan *p, const pt_step *s, int iteration, int warmup,
                    int seq, int k)
{
    const pt_tensor *x = &p->tensors[s->tensor];
    trace_row *r = trace_step(t, p, s, iteration, warmup, seq, k);
    r->op = "map_copy";
    r->kind = "host";
    r->flops = 0;
    r->host_begin_ns = monotonic_ns();
    if (s->map_write) memcpy(x->mapped, x->host, x->size_bytes);
    else memcpy(x->host, x->mapped, x->size_bytes);
    r->host_end_ns = monotonic_ns();
}

/* CSV field: quoted only when it holds a comma, quote or newline (RFC 4180). */
static void csv_str(jwriter *w, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) { jw_raw(w, s, strlen(s)); return; }
    jw_raw(w, "\"", 1);
    for (; *s; s++) {
        if (*s == '"') jw_raw(w, "\"\"", 2); else jw_raw(w, s, 1);
    }
    jw_raw(w, "\"", 1);
}

static void csv_ns(jwriter *w, int64_t v)
{
    if (v >= 0) jw_printf(w, ",%lld", (long long)v); else jw_raw(w, ",", 1);
}

char *trace_csv(const trace *t, size_t *len)
{
    jwriter w;
    jw_init(&w);
    jw_printf(&w, "iteration,warmup,seq,step,op,kind,name,layer,phase,bytes,flops,queued_ns,"
                  "submit_ns,start_ns,end_ns,host_begin_ns,host_end_ns,queue\n");
    for (int i = 0; i < t->n; i++) {
        const trace_row *r = &t->rows[i];
        jw_printf(&w, "%d,%d,%d,%d,%s,%s,", r->iteration, r->warmup, r->seq, r->step, r->op, r->kind);
        csv_str(&w, r->name);
        jw_raw(&w, ",", 1);
        csv_str(&w, r->layer);
        jw_raw(&w, ",", 1);
        csv_str(&w, r->phase);
        jw_printf(&w, ",%lld,%lld", r->bytes, r->flops);
        csv_ns(&w, r->queued_ns);
        csv_ns(&w, r->submit_ns);
        csv_ns(&w, r->start_ns);
        csv_ns(&w, r->end_ns);
        jw_printf(&w, ",%llu,%llu,%d\n", (unsigned long long)r->host_begin_ns,
                  (unsigned long long)r->host_end_ns, r->queue);
    }
    if (!w.buf) jw_raw(&w, "", 0);
    *len = w.len;
    return w.buf;
}
