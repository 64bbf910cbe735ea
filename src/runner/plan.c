/* Plan reader (versions 1 and 2): JSON tree -> pt_plan, with the checks of plan.py's
 * Plan.validate plus those only the runner can make (argument kinds, NDRange shape, map/unmap
 * pairing, wait references). */
#define _POSIX_C_SOURCE 200809L
#include "plan.h"
#include "json.h"
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_path;  /* plan file named in every message */

#define BAD(...) bad_plan(__VA_ARGS__)
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static _Noreturn void bad_plan(const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail(EXIT_BAD_INPUT, "bad plan %s: %s", g_path, msg);
}

static const jval *req(const jval *obj, const char *key, jtype type, const char *where)
{
    const jval *v = json_get(obj, key);
    if (!v) BAD("%s: missing key \"%s\"", where, key);
    if (v->type != type) BAD("%s.%s must be of JSON type %s, not %s", where, key, json_type_name(type),
                             json_type_name(v->type));
    return v;
}

static long long get_int(const jval *obj, const char *key, const char *where, int required,
                         long long dflt)
{
    const jval *v = json_get(obj, key);
    if (!v || (!required && v->type == J_NULL)) {
        if (required) BAD("%s: missing key \"%s\"", where, key);
        return dflt;
    }
    if (v->type != J_NUM || !v->is_int) BAD("%s.%s must be an integer", where, key);
    return v->inum;
}

static char *get_str(const jval *obj, const char *key, const char *where, const char *dflt)
{
    const jval *v = json_get(obj, key);
    if (!v || v->type == J_NULL) {
        if (!dflt) BAD("%s: missing key \"%s\"", where, key);
        return xstrdup(dflt);
    }
    if (v->type != J_STR) BAD("%s.%s must be a string", where, key);
    return xstrdup(v->str);
}

static double get_num(const jval *obj, const char *key, const char *where)
{
    const jval *v = req(obj, key, J_NUM, where);
    return v->num;
}

/* Item i of the plan's list `arr`, called `list` in messages ("buffers"): a JSON object, else
 * a bad plan; `where` gets "list[i]" for the item's messages. */
static const jval *list_object(const jval *arr, const char *list, int i, char *where, size_t n)
{
    snprintf(where, n, "%s[%d]", list, i);
    const jval *j = &arr->items[i];
    if (j->type != J_OBJ) BAD("%s must be an object", where);
    return j;
}

static int tensor_id(const pt_plan *p, const jval *v, const char *where)
{
    if (!v || v->type != J_NUM || !v->is_int || v->inum < 0 || v->inum >= p->ntensors)
        BAD("%s: tensor id is not in 0..%d", where, p->ntensors - 1);
    return (int)v->inum;
}

/* "buffers": [{"name": str, "size_bytes": int > 0}] (optional): read before the tensors. */
static void read_buffers(pt_plan *p, const jval *bufs)
{
    if (!bufs || bufs->type == J_NULL) return;
    if (bufs->type != J_ARR) BAD("plan.buffers must be a list of {\"name\", \"size_bytes\"}");
    p->nbuffers = bufs->len;
    p->buffers = xcalloc((size_t)bufs->len + 1, sizeof *p->buffers);
    for (int i = 0; i < bufs->len; i++) {
        char where[48];
        const jval *j = list_object(bufs, "buffers", i, where, sizeof where);
        p->buffers[i].name = get_str(j, "name", where, NULL);
        long long n = get_int(j, "size_bytes", where, 1, 0);
        if (n < 1 || n > (1LL << 40)) BAD("%s.size_bytes must be a positive integer", where);
        p->buffers[i].size_bytes = (size_t)n;
        for (int k = 0; k < i; k++)
            if (!strcmp(p->buffers[k].name, p->buffers[i].name))
                BAD("%s.name \"%s\" is listed twice", where, p->buffers[i].name);
    }
}

/* A tensor's optional "buffer": the name of a shared buffer it fits in. Only a tensor that
 * starts each iteration by being written may share: zeros init, no batches (checked later). */
static void read_tensor_buffer(const pt_plan *p, pt_tensor *t, const jval *j, const char *where)
{
    t->buffer = -1;
    const jval *v = json_get(j, "buffer");
    if (!v || v->type == J_NULL) return;
    if (v->type != J_STR) BAD("%s.buffer must be the name of an entry of buffers", where);
    for (int b = 0; b < p->nbuffers; b++)
        if (!strcmp(p->buffers[b].name, v->str)) t->buffer = b;
    if (t->buffer < 0) BAD("%s.buffer \"%s\" is not in buffers", where, v->str);
    if (t->size_bytes > p->buffers[t->buffer].size_bytes)
        BAD("%s (%zu bytes) does not fit buffer \"%s\" (%zu bytes)", where, t->size_bytes,
            v->str, p->buffers[t->buffer].size_bytes);
    if (t->init_kind != INIT_ZEROS)
        BAD("%s: a tensor in a shared buffer must have init zeros (its contents are not kept)",
            where);
}

static void read_tensor(pt_plan *p, pt_tensor *t, const jval *tensors, int index)
{
    char where[64];
    const jval *j = list_object(tensors, "tensors", index, where, sizeof where);
    t->id = (int)get_int(j, "id", where, 1, 0);
    if (t->id != index) BAD("%s.id is %d; ids must equal their index", where, t->id);
    t->name = get_str(j, "name", where, NULL);
    for (const char *c = t->name; *c; c++)
        if (*c == '/' || *c == '\\' || (c == t->name && *c == '.'))
            BAD("%s.name \"%s\" must be usable as a file name (no '/', no leading '.')", where, t->name);
    t->role = get_str(j, "role", where, NULL);
    static const char *roles[] = {"param", "grad", "activation", "input", "label", "scratch",
                                  "state", "loss"};
    int ok = 0;
    for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) ok |= !strcmp(t->role, roles[r]);
    if (!ok) BAD("%s.role \"%s\" is not a plan role", where, t->role);
    char *dtype = get_str(j, "dtype", where, "f32");
    if (strcmp(dtype, "f32") && strcmp(dtype, "i32"))
        BAD("%s.dtype \"%s\" must be \"f32\" or \"i32\"", where, dtype);
    t->is_i32 = !strcmp(dtype, "i32");
    free(dtype);
    char *home = get_str(j, "home", where, "host");
    if (strcmp(home, "host") && strcmp(home, "device"))
        BAD("%s.home \"%s\" must be \"host\" or \"device\"", where, home);
    t->home_device = !strcmp(home, "device");
    free(home);
    const jval *shape = req(j, "shape", J_ARR, where);
    if (shape->len < 1 || shape->len > MAX_DIMS) BAD("%s.shape must have 1..%d dims", where, MAX_DIMS);
    t->ndim = shape->len;
    t->numel = 1;
    for (int d = 0; d < shape->len; d++) {
        const jval *e = &shape->items[d];
        if (e->type != J_NUM || !e->is_int || e->inum < 1 || e->inum > (1LL << 40))
            BAD("%s.shape[%d] must be a positive integer", where, d);
        t->shape[d] = (long)e->inum;
        t->numel *= t->shape[d];
        if (t->numel > (1L << 40) / 4) BAD("%s: too many elements", where);
    }
    t->size_bytes = (size_t)t->numel * 4;
    const jval *init = json_get(j, "init");
    t->init_kind = INIT_ZEROS;
    if (init && init->type != J_NULL) {
        if (init->type != J_OBJ) BAD("%s.init must be an object", where);
        char iw[80];
        snprintf(iw, sizeof iw, "%s.init", where);
        char *kind = get_str(init, "kind", iw, NULL);
        if (!strcmp(kind, "zeros")) t->init_kind = INIT_ZEROS;
        else if (!strcmp(kind, "file")) {
            t->init_kind = INIT_FILE;
            t->init_path = get_str(init, "path", iw, NULL);
        } else if (!strcmp(kind, "uniform")) {
            if (t->is_i32) BAD("%s: a uniform init needs dtype f32", iw);
            t->init_kind = INIT_UNIFORM;
            long long seed = get_int(init, "seed", iw, 1, 0);
            if (seed < 0) BAD("%s.seed must be >= 0", iw);
            t->seed = (uint64_t)seed;
            t->low = get_num(init, "low", iw);
            t->high = get_num(init, "high", iw);
        } else BAD("%s.kind \"%s\" must be zeros, file or uniform", iw, kind);
        free(kind);
    }
    read_tensor_buffer(p, t, j, where);
}

static void read_args(pt_plan *p, pt_step *s, const jval *args, const char *where)
{
    if (args->len > MAX_KERNEL_ARGS) BAD("%s.args: more than %d arguments", where, MAX_KERNEL_ARGS);
    s->nargs = args->len;
    for (int a = 0; a < args->len; a++) {
        const jval *arg = &args->items[a];
        char aw[96];
        snprintf(aw, sizeof aw, "%s.args[%d]", where, a);
        const jval *img = arg->type == J_OBJ ? json_get(arg, "image_width4") : NULL;
        if (arg->type != J_OBJ || arg->len != 1 + (img != NULL))
            BAD("%s must be one of {\"i\": int}, {\"f\": float}, {\"t\": tensor id}, "
                "{\"t\": tensor id, \"image_width4\": W}", aw);
        rt_arg *r = &s->args[a];
        memset(r, 0, sizeof *r);
        s->arg_tensor[a] = -1;
        s->arg_image[a] = 0;
        if (img) {   /* read through an image2d_t on the opencl backend; a buffer on cpu */
            if (strcmp(arg->keys[0], "t") && strcmp(arg->keys[1], "t"))
                BAD("%s: image_width4 needs \"t\" (the tensor) beside it", aw);
            if (img->type != J_NUM || !img->is_int || img->inum < 1 || img->inum > 1 << 20)
                BAD("%s.image_width4 must be a positive integer (pixels per image row)", aw);
            int t = tensor_id(p, json_get(arg, "t"), aw);
            pt_tensor *tt = &p->tensors[t];
            if (tt->image_width4 && tt->image_width4 != (int)img->inum)
                BAD("%s: tensor \"%s\" is already read as an image %d pixels wide; use one "
                    "image_width4 per tensor", aw, tt->name, tt->image_width4);
            if (tt->buffer >= 0)
                BAD("%s: tensor \"%s\" is in a shared buffer; an image view needs a buffer "
                    "padded for it alone", aw, tt->name);
            tt->image_width4 = (int)img->inum;
            r->kind = 't';
            s->arg_tensor[a] = t;
            s->arg_image[a] = 1;
            s->has_image = 1;
            r->numel = tt->numel;
            continue;
        }
        const char *k = arg->keys[0];
        const jval *v = &arg->items[0];
        if (!strcmp(k, "i")) {
            if (v->type != J_NUM || !v->is_int || v->inum < -2147483648LL || v->inum > 2147483647LL)
                BAD("%s.i must be a 32-bit integer", aw);
            r->kind = 'i';
            r->i = (int)v->inum;
        } else if (!strcmp(k, "f")) {
            if (v->type != J_NUM) BAD("%s.f must be a number", aw);
            r->kind = 'f';
            r->f = (float)v->num;
        } else if (!strcmp(k, "t")) {
            r->kind = 't';
            s->arg_tensor[a] = tensor_id(p, v, aw);
            r->numel = p->tensors[s->arg_tensor[a]].numel;
        } else BAD("%s: key \"%s\" must be \"i\", \"f\" or \"t\"", aw, k);
    }
}

static int read_sizes(const jval *v, size_t out[3], const char *what, const char *where)
{
    if (v->type != J_ARR || v->len < 1 || v->len > 3)
        BAD("%s.%s must be a list of 1 to 3 positive integers", where, what);
    for (int d = 0; d < v->len; d++) {
        const jval *e = &v->items[d];
        if (e->type != J_NUM || !e->is_int || e->inum < 1)
            BAD("%s.%s[%d] must be a positive integer", where, what, d);
        out[d] = (size_t)e->inum;
    }
    return v->len;
}

/* v2 "queue" (0 or 1) and "wait" (indices of earlier kernel/h2d/d2h steps of the same
 * iteration). Only device commands that take an event wait list may carry them. */
static void read_queue(pt_plan *p, pt_step *s, const jval *j, int k, const char *where)
{
    const jval *q = json_get(j, "queue"), *w = json_get(j, "wait");
    if ((q || w) && p->version < 2)
        BAD("%s: \"queue\"/\"wait\" need plan_version 2 (this plan says 1); re-lower the plan",
            where);
    int device_cmd = s->op == OP_KERNEL || s->op == OP_H2D || s->op == OP_D2H;
    if (q && q->type != J_NULL) {
        if (q->type != J_NUM || !q->is_int || q->inum < 0 || q->inum >= MAX_QUEUES)
            BAD("%s.queue must be 0 (compute) or 1 (transfers)", where);
        s->queue = (int)q->inum;
        if (s->queue && !device_cmd)
            BAD("%s: op \"%s\" runs on queue 0 only (queue 1 takes kernel, h2d and d2h steps)",
                where, op_name(s->op));
    }
    if (s->queue + 1 > p->nqueues) p->nqueues = s->queue + 1;
    if (!w || w->type == J_NULL) return;
    if (w->type != J_ARR) BAD("%s.wait must be a list of earlier step indices", where);
    if (w->len && !device_cmd)
        BAD("%s: op \"%s\" cannot wait for events (only kernel, h2d and d2h steps can)", where,
            op_name(s->op));
    s->nwait = w->len;
    s->wait = xcalloc((size_t)w->len + 1, sizeof *s->wait);
    for (int i = 0; i < w->len; i++) {
        const jval *e = &w->items[i];
        if (e->type != J_NUM || !e->is_int)
            BAD("%s.wait[%d] must be an integer step index", where, i);
        if (e->inum < 0 || e->inum >= k)
            BAD("%s.wait[%d] = %lld names no earlier step: a step waits only for steps 0..%d of "
                "the same iteration; fix the lowering that wrote it", where, i, e->inum, k - 1);
        const pt_step *t = &p->steps[e->inum];
        if (t->op != OP_KERNEL && t->op != OP_H2D && t->op != OP_D2H)
            BAD("%s.wait[%d] = %lld names steps[%lld] (op \"%s\"), which has no event; wait only "
                "for kernel, h2d and d2h steps", where, i, e->inum, e->inum, op_name(t->op));
        s->wait[i] = (int)e->inum;
    }
}

static void read_step(pt_plan *p, pt_step *s, const jval *steps, int k)
{
    char where[64];
    const jval *j = list_object(steps, "steps", k, where, sizeof where);
    char *op = get_str(j, "op", where, NULL);
    static const char *ops[] = {"kernel", "h2d", "d2h", "map", "unmap", "load"};
    s->op = -1;
    for (int o = 0; o < 6; o++) if (!strcmp(op, ops[o])) s->op = o;
    if (s->op < 0) BAD("%s.op \"%s\" is not one of kernel, h2d, d2h, map, unmap, load", where, op);
    free(op);
    s->layer = get_str(j, "layer", where, "");
    s->phase = get_str(j, "phase", where, "");
    s->flops = get_int(j, "flops", where, 0, 0);
    s->bytes = get_int(j, "bytes", where, 0, 0);
    s->tensor = -1;
    read_queue(p, s, j, k, where);
    if (s->op != OP_KERNEL) {
        s->tensor = tensor_id(p, json_get(j, "tensor"), where);
        if (s->bytes == 0) s->bytes = (long long)p->tensors[s->tensor].size_bytes;
        if (s->op == OP_MAP) {
            char *access = get_str(j, "access", where, NULL);
            if (strcmp(access, "read") && strcmp(access, "write"))
                BAD("%s.access \"%s\" must be \"read\" or \"write\"", where, access);
            s->map_write = !strcmp(access, "write");
            free(access);
        }
        return;
    }
    s->name = get_str(j, "name", where, NULL);
    if (!cpu_kernel_known(s->name))
        BAD("%s: unknown kernel \"%s\" (not in the kernel ABI, src/kernels/README.md)", where, s->name);
    read_args(p, s, req(j, "args", J_ARR, where), where);
    s->work_dim = read_sizes(req(j, "global", J_ARR, where), s->global, "global", where);
    const jval *local = json_get(j, "local");
    if (local && local->type != J_NULL) {
        int ld = read_sizes(local, s->local, "local", where);
        if (ld != s->work_dim) BAD("%s.local has %d dims but global has %d", where, ld, s->work_dim);
        for (int d = 0; d < ld; d++)
            if (s->global[d] % s->local[d])
                BAD("%s: global[%d]=%zu is not a multiple of local[%d]=%zu (OpenCL 1.2 needs it)",
                    where, d, s->global[d], d, s->local[d]);
        s->has_local = 1;
    }
}

/* "checkpoints": {"iterations": [0, 1, -2, -1], "tensors": [ids]} (optional). */
static void read_checkpoints(pt_plan *p, const jval *c)
{
    if (!c || c->type == J_NULL) return;
    if (c->type != J_OBJ) BAD("plan.checkpoints must be an object {\"iterations\", \"tensors\"}");
    const jval *its = req(c, "iterations", J_ARR, "checkpoints");
    const jval *ts = req(c, "tensors", J_ARR, "checkpoints");
    p->nckpt_iters = its->len;
    p->ckpt_iters = xcalloc((size_t)its->len + 1, sizeof *p->ckpt_iters);
    for (int i = 0; i < its->len; i++) {
        const jval *v = &its->items[i];
        if (v->type != J_NUM || !v->is_int || v->inum < -1000000 || v->inum > 1000000000)
            BAD("checkpoints.iterations[%d] must be an integer (negative counts from the end)", i);
        p->ckpt_iters[i] = (int)v->inum;
    }
    p->nckpt_tensors = ts->len;
    p->ckpt_tensors = xcalloc((size_t)ts->len + 1, sizeof *p->ckpt_tensors);
    for (int i = 0; i < ts->len; i++)
        p->ckpt_tensors[i] = tensor_id(p, &ts->items[i], "checkpoints.tensors");
}

/* Marks which tensors need device buffers and checks that maps and unmaps pair up within
 * the iteration, with no kernel or transfer touching a mapped tensor. */
static void check_transfers(pt_plan *p)
{
    int *mapped = xcalloc((size_t)p->ntensors, sizeof *mapped);
    for (int k = 0; k < p->nsteps; k++) {
        pt_step *s = &p->steps[k];
        if (p->backend == BACKEND_CPU && s->op != OP_KERNEL && s->op != OP_LOAD)
            BAD("steps[%d]: op \"%s\" needs backend \"opencl\" or \"vulkan\" (this plan's backend is \"cpu\")",
                k, op_name(s->op));
        if (s->op == OP_KERNEL) {
            for (int a = 0; a < s->nargs; a++) {
                int t = s->arg_tensor[a];
                if (t < 0) continue;
                if (mapped[t]) BAD("steps[%d] (%s): tensor \"%s\" is still mapped; unmap it first",
                                   k, s->name, p->tensors[t].name);
                p->tensors[t].needs_buffer = 1;
            }
            continue;
        }
        pt_tensor *t = &p->tensors[s->tensor];
        if (s->op == OP_LOAD) continue;
        t->needs_buffer = 1;
        if (s->op == OP_MAP) {
            if (mapped[s->tensor]) BAD("steps[%d]: tensor \"%s\" is mapped twice", k, t->name);
            mapped[s->tensor] = 1;
            t->needs_map = 1;
        } else if (s->op == OP_UNMAP) {
            if (!mapped[s->tensor]) BAD("steps[%d]: unmap of tensor \"%s\" that is not mapped", k, t->name);
            mapped[s->tensor] = 0;
        } else if (mapped[s->tensor]) {
            BAD("steps[%d] (%s): tensor \"%s\" is mapped; unmap it first", k, op_name(s->op), t->name);
        }
    }
    for (int t = 0; t < p->ntensors; t++)
        if (mapped[t]) BAD("tensor \"%s\" is still mapped at the end of the iteration; add an unmap step",
                           p->tensors[t].name);
    free(mapped);
}

pt_plan *plan_load(const char *path)
{
    g_path = path;
    size_t len;
    char *text = read_file(path, &len);
    if (!text) fail(EXIT_BAD_INPUT, "cannot read plan %s: %s", path, strerror(errno));
    char err[256];
    jval *root = json_parse(text, err, sizeof err);
    free(text);
    if (!root) fail(EXIT_BAD_INPUT, "plan %s is not valid JSON: %s", path, err);
    if (root->type != J_OBJ) BAD("the document must be a JSON object");
    const jval *ver = json_get(root, "plan_version");
    if (!ver || ver->type != J_NUM || !ver->is_int || ver->inum < 1 || ver->inum > PLAN_VERSION)
        BAD("plan_version is %s; this runner reads versions 1 to %d only (re-lower the plan with "
            "a matching phonetrain)", ver && ver->type == J_NUM ? "not 1 or 2" : "missing",
            PLAN_VERSION);

    pt_plan *p = xcalloc(1, sizeof *p);
    p->version = (int)ver->inum;
    p->nqueues = 1;
    p->path = xstrdup(path);
    p->name = get_str(root, "name", "plan", NULL);
    char *backend = get_str(root, "backend", "plan", NULL);
    if (!strcmp(backend, "cpu")) p->backend = BACKEND_CPU;
    else if (!strcmp(backend, "opencl")) p->backend = BACKEND_OPENCL;
    else if (!strcmp(backend, "vulkan")) p->backend = BACKEND_VULKAN;
    else BAD("backend \"%s\" must be \"cpu\", \"opencl\" or \"vulkan\"", backend);
    free(backend);
    p->warmup = (int)get_int(root, "warmup", "plan", 0, 0);
    p->iterations = (int)get_int(root, "iterations", "plan", 1, 0);
    if (p->warmup < 0 || p->iterations < 1) BAD("warmup must be >= 0 and iterations >= 1");

    const jval *tensors = req(root, "tensors", J_ARR, "plan");
    p->ntensors = tensors->len;
    p->tensors = xcalloc((size_t)p->ntensors, sizeof *p->tensors);
    read_buffers(p, json_get(root, "buffers"));
    for (int i = 0; i < p->ntensors; i++) read_tensor(p, &p->tensors[i], tensors, i);

    const jval *progs = json_get(root, "programs");
    if (progs && progs->type != J_ARR) BAD("plan.programs must be a list");
    p->nprograms = progs ? progs->len : 0;
    p->programs = xcalloc((size_t)p->nprograms, sizeof *p->programs);
    for (int i = 0; i < p->nprograms; i++) {
        char where[48];
        const jval *j = list_object(progs, "programs", i, where, sizeof where);
        p->programs[i].name = get_str(j, "name", where, NULL);
        p->programs[i].source = get_str(j, "source", where, NULL);
        p->programs[i].options = get_str(j, "options", where, "");
    }
    if (p->backend != BACKEND_CPU && p->nprograms == 0)
        BAD("backend \"%s\" needs at least one entry in programs",
            p->backend == BACKEND_OPENCL ? "opencl" : "vulkan");

    const jval *steps = req(root, "steps", J_ARR, "plan");
    p->nsteps = steps->len;
    p->steps = xcalloc((size_t)p->nsteps, sizeof *p->steps);
    for (int k = 0; k < p->nsteps; k++) read_step(p, &p->steps[k], steps, k);

    const jval *batches = json_get(root, "batches");
    if (batches && batches->type != J_ARR) BAD("plan.batches must be a list");
    for (int b = 0; batches && b < batches->len; b++) {
        char where[48];
        const jval *j = list_object(batches, "batches", b, where, sizeof where);
        pt_tensor *t = &p->tensors[tensor_id(p, json_get(j, "tensor"), where)];
        if (t->batch_count) BAD("%s: tensor \"%s\" has two batch sources", where, t->name);
        if (t->buffer >= 0) BAD("%s: tensor \"%s\" is in a shared buffer; a batch needs its own",
                                where, t->name);
        t->batch_count = get_int(j, "count", where, 1, 0);
        if (t->batch_count < 1) BAD("%s.count must be >= 1", where);
        t->batch_path = get_str(j, "path", where, NULL);
    }
    for (int k = 0; k < p->nsteps; k++)
        if (p->steps[k].op == OP_LOAD && !p->tensors[p->steps[k].tensor].batch_count)
            BAD("steps[%d]: load of tensor \"%s\" which has no entry in batches", k,
                p->tensors[p->steps[k].tensor].name);

    p->loss_tensor = (int)get_int(root, "loss_tensor", "plan", 0, -1);
    if (p->loss_tensor != -1) {
        if (p->loss_tensor < 0 || p->loss_tensor >= p->ntensors) BAD("loss_tensor %d is not a tensor id", p->loss_tensor);
        if (p->tensors[p->loss_tensor].is_i32) BAD("loss_tensor must have dtype f32");
    }
    const jval *dumps = json_get(root, "dumps");
    if (dumps && dumps->type != J_ARR) BAD("plan.dumps must be a list");
    p->ndumps = dumps ? dumps->len : 0;
    p->dumps = xcalloc((size_t)p->ndumps, sizeof *p->dumps);
    for (int i = 0; i < p->ndumps; i++) p->dumps[i] = tensor_id(p, &dumps->items[i], "dumps");
    read_checkpoints(p, json_get(root, "checkpoints"));
    check_transfers(p);
    json_free(root);
    return p;
}

static void read_bundle_file(const char *root, const char *rel, size_t expect, char *dst,
                             const char *what)
{
    char *path = path_join(root, rel);
    size_t len;
    char *data = read_file(path, &len);
    if (!data) fail(EXIT_BUNDLE, "bundle file %s (%s) cannot be read: %s; re-run the lowering or "
                    "deploy step that writes it", path, what, strerror(errno));
    if (len != expect)
        fail(EXIT_BUNDLE, "bundle file %s (%s) has %zu bytes; the plan needs exactly %zu", path,
             what, len, expect);
    memcpy(dst, data, len);
    free(data);
    free(path);
}

void plan_load_data(pt_plan *p, const char *root)
{
    for (int i = 0; i < p->ntensors; i++) {
        pt_tensor *t = &p->tensors[i];
        if (t->buffer >= 0) {   /* shared: zeros init, no batches (plan_load checked) */
            pt_buffer *b = &p->buffers[t->buffer];
            if (!b->host && !(b->host = calloc(1, b->size_bytes)))
                fail(EXIT_OUT_OF_MEMORY, "out of host memory: %zu bytes for shared buffer \"%s\"",
                     b->size_bytes, b->name);
            t->host = b->host;
            continue;
        }
        t->host = calloc(1, t->size_bytes ? t->size_bytes : 1);
        if (!t->host)
            fail(EXIT_OUT_OF_MEMORY, "out of host memory: %zu bytes for tensor \"%s\"",
                 t->size_bytes, t->name);
        char what[256];
        if (t->batch_count) {
            snprintf(what, sizeof what, "batches of tensor \"%s\"", t->name);
            t->batch_data = xmalloc(t->size_bytes * (size_t)t->batch_count);
            read_bundle_file(root, t->batch_path, t->size_bytes * (size_t)t->batch_count,
                             t->batch_data, what);
        }
        if (t->init_kind == INIT_FILE) {
            snprintf(what, sizeof what, "init of tensor \"%s\"", t->name);
            read_bundle_file(root, t->init_path, t->size_bytes, t->host, what);
        } else if (t->init_kind == INIT_UNIFORM) {
            fill_uniform(t->host, t->numel, t->seed, t->low, t->high);
        }
    }
}

void plan_load_batch(pt_tensor *t, int iteration)
{
    long b = iteration % t->batch_count;
    memcpy(t->host, t->batch_data + (size_t)b * t->size_bytes, t->size_bytes);
}

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF   /* low + (high-low)*u must not become an fma: numpy rounds twice */
#endif
void fill_uniform(float *out, long n, uint64_t seed, double low, double high)
{
    volatile double span = high - low;   /* volatile: keep GCC from contracting into an fma */
    for (long i = 0; i < n; i++) {
        uint64_t z = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z = z ^ (z >> 31);
        double u = (double)(z >> 40) / 16777216.0;
        double scaled = span * u;
        volatile double keep = scaled;
        out[i] = (float)(low + keep);
    }
}

const char *op_name(int op)
{
    static const char *names[] = {"kernel", "h2d", "d2h", "map", "unmap", "load"};
    return names[op];
}

const char *step_kind(const pt_step *s)
{
    return s->op == OP_LOAD ? "host" : op_name(s->op);
}
