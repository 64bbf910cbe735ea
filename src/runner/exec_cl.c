/* OpenCL backend: one in-order profiling queue, plus a second one where a v2 plan puts
 * steps on queue 1 (non-blocking transfers whose ordering against the kernels is only what
 * the steps' wait lists say); every command gets an event whose queued/submit/start/end
 * times go into the trace after the iteration's clFinish of every queue. A one-queue plan's
 * uploads are non-blocking too, so the host enqueues the kernels while the batch crosses. */
#define _POSIX_C_SOURCE 200809L
#include "cl_image.h"
#include "clblast.h"
#include "exec.h"
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_CONTEXT_PLATFORM_PROP 0x1084

/* A program with "source": "clblast": GEMM steps call CLBlast instead of a kernel. */
static void use_clblast(run_ctx *rc, const pt_program *pg)
{
    char err[512];
    if (clblast_load(rc->clblast_lib, err, sizeof err) != 0)
        fail(EXIT_NO_LIBRARY, "program \"%s\" needs CLBlast: %s; install libclblast1 or pass "
             "--clblast-lib PATH", pg->name, err);
    rc->use_clblast = 1;
    jwriter *w = &rc->build_json;
    jw_obj_begin(w);
    jw_key(w, "program"); jw_str(w, pg->name);
    jw_key(w, "source"); jw_str(w, pg->source);
    jw_key(w, "options"); jw_str(w, pg->options);
    jw_key(w, "build_ms"); jw_num(w, 0);
    jw_key(w, "binary_size_bytes"); jw_int(w, 0);
    jw_key(w, "log"); jw_str(w, "external: CLBlast");
    jw_obj_end(w);
}

/* `src` with its comments blanked (each comment character a space), newly allocated. */
static char *without_comments(const char *src)
{
    char *out = xmalloc(strlen(src) + 1), *o = out;
    for (const char *c = src; *c;) {
        if (c[0] == '/' && c[1] == '*') {
            const char *end = strstr(c + 2, "*/");
            end = end ? end + 2 : c + strlen(c);
            while (c < end) { *o++ = ' '; c++; }
        } else if (c[0] == '/' && c[1] == '/') {
            while (*c && *c != '\n') { *o++ = ' '; c++; }
        } else {
            *o++ = *c++;
        }
    }
    *o = '\0';
    return out;
}

static int ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Whether comment-free `code` holds `name` where a kernel is defined: a whole identifier after
 * `void` (`__kernel void name(`) or after `(` (a macro that defines it: `GEMM_KERNEL(name, ...)`). */
static int defines(const char *code, const char *name)
{
    size_t n = strlen(name);
    for (const char *at = strstr(code, name); at && n; at = strstr(at + 1, name)) {
        if ((at > code && ident_char(at[-1])) || ident_char(at[n])) continue;
        const char *b = at;
        while (b > code && isspace((unsigned char)b[-1])) b--;
        if (b > code && b[-1] == '(') return 1;
        if (b - code >= 4 && !strncmp(b - 4, "void", 4) && (b - code == 4 || !ident_char(b[-5])))
            return 1;
    }
    return 0;
}

/* Whether a program's source defines a kernel some step of the plan launches (`defines`). A
 * plan lists every file of its kernel version, and each build costs tens of ms from PoCL's
 * cache and seconds cold, so a program that defines none is not built (find_kernel still
 * builds it should a kernel be defined some other way). */
static int defines_a_step(const pt_plan *p, const char *src)
{
    char *code = without_comments(src);
    int found = 0;
    for (int k = 0; k < p->nsteps && !found; k++)
        found = p->steps[k].op == OP_KERNEL && defines(code, p->steps[k].name);
    free(code);
    return found;
}

/* Builds program i into rc->programs[i]; with `record`, its build.json entry. */
static void build_program(run_ctx *rc, int i, int record)
{
    pt_program *pg = &rc->plan->programs[i];
    char *path = path_join(rc->root, pg->source);
    char *src = read_file(path, NULL);
    if (!src) fail(EXIT_BUNDLE, "kernel source %s (program \"%s\") cannot be read: %s; deploy "
                   "the kernel version first", path, pg->name, strerror(errno));
    jwriter *w = &rc->build_json;
    if (record && !defines_a_step(rc->plan, src)) {
        jw_obj_begin(w);
        jw_key(w, "program"); jw_str(w, pg->name);
        jw_key(w, "source"); jw_str(w, pg->source);
        jw_key(w, "options"); jw_str(w, pg->options);
        jw_key(w, "skipped"); jw_str(w, "defines no kernel the plan launches");
        jw_obj_end(w);
        free(src);
        free(path);
        return;
    }
    double ms;
    char *log;
    cl_int e = cl_build_source(rc->context, rc->device, src, pg->options, &rc->programs[i],
                               &ms, &log);
    if (e != CL_SUCCESS) {
        char *dev = cl_device_str(rc->device, CL_DEVICE_NAME);
        fprintf(stderr, "%s\n", log);
        fail(EXIT_BUILD, "kernel build failed: program \"%s\" (%s, options \"%s\") on \"%s\": "
             "%s; the compiler log is above", pg->name, path, pg->options, dev, cl_error_name(e));
    }
    if (record) {
        size_t bin = 0;
        CL.clGetProgramInfo(rc->programs[i], CL_PROGRAM_BINARY_SIZES, sizeof bin, &bin, NULL);
        jw_obj_begin(w);
        jw_key(w, "program"); jw_str(w, pg->name);
        jw_key(w, "source"); jw_str(w, pg->source);
        jw_key(w, "options"); jw_str(w, pg->options);
        jw_key(w, "build_ms"); jw_num(w, ms);
        jw_key(w, "binary_size_bytes"); jw_int(w, (long long)bin);
        jw_key(w, "log"); jw_str(w, log);
        jw_obj_end(w);
    }
    free(log);
    free(src);
    free(path);
}

static void build_programs(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    rc->programs = xcalloc((size_t)p->nprograms, sizeof *rc->programs);
    jw_init(&rc->build_json);
    jw_arr_begin(&rc->build_json);
    for (int i = 0; i < p->nprograms; i++) {
        if (!strcmp(p->programs[i].source, "clblast")) use_clblast(rc, &p->programs[i]);
        else build_program(rc, i, 1);
    }
    jw_arr_end(&rc->build_json);
}

/* The image2d_t view of a tensor some kernel argument reads as {"t", "image_width4"}. A device
 * without image support exits with EXIT_NO_LIBRARY, like a missing CLBlast: callers skip. */
static void make_image(run_ctx *rc, pt_tensor *t)
{
    const char *why = image_unsupported(rc->device, t->numel, t->image_width4);
    if (why) {
        char *dev = cl_device_str(rc->device, CL_DEVICE_NAME);
        fail(EXIT_NO_LIBRARY, "tensor \"%s\" is read as an image (kernel version image) but on "
             "\"%s\" %s; drop that kernel version for this device", t->name, dev, why);
    }
    cl_image_view *v = xcalloc(1, sizeof *v);
    cl_int e = image_view_make(rc->context, rc->device, t->mem, t->numel, t->image_width4, v);
    char ctx[256];
    snprintf(ctx, sizeof ctx, "a %zux%zu RGBA float image of tensor \"%s\"", v->width, v->height,
             t->name);
    if (e != CL_SUCCESS) cl_fail("clCreateImage", e, ctx);
    if (v->copied) rc->device_bytes += (long long)(v->width * v->height * 16);
    t->image = v;
}

/* One device buffer per shared buffer (plan "buffers") that some tensor of it needs,
 * host-allocated where any of them is mapped; initialized from its (zero) host allocation.
 * Its tensors point at it (offset 0). */
static void make_shared_buffers(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    for (int b = 0; b < p->nbuffers; b++) {
        pt_buffer *sb = &p->buffers[b];
        int need = 0, map = 0;
        for (int i = 0; i < p->ntensors; i++)
            if (p->tensors[i].buffer == b) {
                need |= p->tensors[i].needs_buffer;
                map |= p->tensors[i].needs_map;
            }
        if (!need) continue;
        cl_int e;
        cl_mem_flags flags = CL_MEM_READ_WRITE | (map ? CL_MEM_ALLOC_HOST_PTR : 0);
        cl_mem m = CL.clCreateBuffer(rc->context, flags, sb->size_bytes, NULL, &e);
        char ctx[256];
        snprintf(ctx, sizeof ctx, "allocating %zu bytes for shared buffer \"%s\"", sb->size_bytes,
                 sb->name);
        if (e == CL_INVALID_BUFFER_SIZE || e == CL_OUT_OF_RESOURCES ||
            e == CL_OUT_OF_HOST_MEMORY || e == CL_MEM_OBJECT_ALLOCATION_FAILURE)
            fail(EXIT_OUT_OF_MEMORY, "out of device memory: clCreateBuffer returned %s (%d) %s "
                 "after %lld bytes of buffers", cl_error_name(e), (int)e, ctx, rc->device_bytes);
        if (e != CL_SUCCESS) cl_fail("clCreateBuffer", e, ctx);
        CL_CHECK(CL.clEnqueueWriteBuffer(rc->queue, m, CL_TRUE, 0, sb->size_bytes, sb->host, 0,
                                         NULL, NULL), ctx);
        sb->mem = m;
        rc->device_bytes += (long long)sb->size_bytes;
        for (int i = 0; i < p->ntensors; i++)
            if (p->tensors[i].buffer == b) p->tensors[i].mem = m;
    }
}

static void make_buffers(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    make_shared_buffers(rc);
    for (int i = 0; i < p->ntensors; i++) {
        pt_tensor *t = &p->tensors[i];
        if (!t->needs_buffer || t->buffer >= 0) continue;
        cl_int e;
        cl_mem_flags flags = CL_MEM_READ_WRITE | (t->needs_map ? CL_MEM_ALLOC_HOST_PTR : 0);
        /* an image view covers whole rows: pad the buffer to them (zeros, never written) */
        size_t alloc = t->image_width4 ? image_alloc_bytes(t->numel, t->image_width4) : t->size_bytes;
        cl_mem m = CL.clCreateBuffer(rc->context, flags, alloc, NULL, &e);
        char ctx[256];
        snprintf(ctx, sizeof ctx, "allocating %zu bytes for tensor \"%s\"", alloc, t->name);
        if (e == CL_INVALID_BUFFER_SIZE || e == CL_OUT_OF_RESOURCES ||
            e == CL_OUT_OF_HOST_MEMORY || e == CL_MEM_OBJECT_ALLOCATION_FAILURE)
            fail(EXIT_OUT_OF_MEMORY, "out of device memory: clCreateBuffer returned %s (%d) "
                 "allocating %zu bytes for tensor \"%s\" after %lld bytes of buffers "
                 "(device: %llu bytes global memory, %llu bytes largest allocation)",
                 cl_error_name(e), (int)e, alloc, t->name, rc->device_bytes,
                 (unsigned long long)cl_device_ulong(rc->device, CL_DEVICE_GLOBAL_MEM_SIZE),
                 (unsigned long long)cl_device_ulong(rc->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE));
        if (e != CL_SUCCESS) cl_fail("clCreateBuffer", e, ctx);
        CL_CHECK(CL.clEnqueueWriteBuffer(rc->queue, m, CL_TRUE, 0, t->size_bytes, t->host, 0, NULL,
                                         NULL), ctx);
        if (alloc > t->size_bytes) {
            void *zeros = xcalloc(alloc - t->size_bytes, 1);
            CL_CHECK(CL.clEnqueueWriteBuffer(rc->queue, m, CL_TRUE, t->size_bytes,
                                             alloc - t->size_bytes, zeros, 0, NULL, NULL), ctx);
            free(zeros);
        }
        t->mem = m;
        rc->device_bytes += (long long)alloc;
        if (t->image_width4) make_image(rc, t);
    }
}

/* The kernel of step k from the built programs; failing that, from the programs skipped as
 * naming none of the plan's kernels (built now, unrecorded: a kernel defined without its name). */
static cl_kernel find_kernel(run_ctx *rc, const pt_step *s, int k)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < rc->plan->nprograms; i++) {
            if (!rc->programs[i]) {
                if (!pass || !strcmp(rc->plan->programs[i].source, "clblast")) continue;
                build_program(rc, i, 0);
            }
            cl_int e;
            cl_kernel kern = CL.clCreateKernel(rc->programs[i], s->name, &e);
            if (e == CL_SUCCESS) return kern;
        }
    fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d]: kernel \"%s\" is defined by none of the plan's "
         "%d programs; add the .cl file that defines it", rc->plan->path, k, s->name,
         rc->plan->nprograms);
}

static void check_local_size(run_ctx *rc, const pt_step *s, cl_kernel kern, int k)
{
    if (!s->has_local) return;
    size_t kmax = 0, items[3] = {0, 0, 0}, total = 1;
    CL_CHECK(CL.clGetKernelWorkGroupInfo(kern, rc->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kmax,
                                         &kmax, NULL), s->name);
    CL.clGetDeviceInfo(rc->device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL);
    for (int d = 0; d < s->work_dim; d++) {
        total *= s->local[d];
        if (items[d] && s->local[d] > items[d])
            fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): local[%d]=%zu exceeds the device's "
                 "max work-item size %zu in that dimension; choose a smaller local size",
                 rc->plan->path, k, s->name, d, s->local[d], items[d]);
    }
    if (total > kmax)
        fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): local size of %zu work-items exceeds the "
             "kernel's max work-group size %zu on this device; choose a smaller local size",
             rc->plan->path, k, s->name, total, kmax);
}

static void make_kernels(run_ctx *rc)
{
    pt_plan *p = rc->plan;
    for (int k = 0; k < p->nsteps; k++) {
        pt_step *s = &p->steps[k];
        if (s->op != OP_KERNEL) continue;
        if (rc->use_clblast && clblast_handles(s->name)) {
            static const char kinds[] = "iiifttft";   /* M N K alpha A B beta C */
            for (int a = 0; a < 8; a++)
                if (s->nargs != 8 || s->args[a].kind != kinds[a])
                    fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): arguments must be M, N, K, "
                         "alpha, A, B, beta, C", p->path, k, s->name);
            s->external = 1;
            continue;
        }
        cl_kernel kern = find_kernel(rc, s, k);
        for (int a = 0; a < s->nargs; a++) {
            const rt_arg *arg = &s->args[a];
            cl_int e;
            cl_int iv = arg->i;
            float fv = arg->f;
            cl_mem mv = s->arg_tensor[a] >= 0 ? p->tensors[s->arg_tensor[a]].mem : NULL;
            if (s->arg_image[a]) mv = ((cl_image_view *)p->tensors[s->arg_tensor[a]].image)->image;
            if (arg->kind == 'i') e = CL.clSetKernelArg(kern, (cl_uint)a, sizeof iv, &iv);
            else if (arg->kind == 'f') e = CL.clSetKernelArg(kern, (cl_uint)a, sizeof fv, &fv);
            else e = CL.clSetKernelArg(kern, (cl_uint)a, sizeof mv, &mv);
            if (e != CL_SUCCESS)
                fail(EXIT_BAD_INPUT, "bad plan %s: steps[%d] (%s): argument %d ('%c') rejected by "
                     "clSetKernelArg with %s; check the argument list against src/kernels/README.md",
                     p->path, k, s->name, a, arg->kind, cl_error_name(e));
        }
        check_local_size(rc, s, kern, k);
        s->kernel = kern;
    }
}

void cl_setup(run_ctx *rc)
{
    cl_select(rc->cl_lib, &rc->sel, &rc->platform, &rc->device);
    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM_PROP, (cl_context_properties)rc->platform, 0};
    rc->context = CL.clCreateContext(props, 1, &rc->device, NULL, NULL, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateContext", e, "setup");
    rc->queue = CL.clCreateCommandQueue(rc->context, rc->device,
                                        rc->profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &e);
    if (e != CL_SUCCESS) cl_fail("clCreateCommandQueue", e, "setup");
    if (rc->plan->nqueues > 1) {
        rc->queue1 = CL.clCreateCommandQueue(rc->context, rc->device, CL_QUEUE_PROFILING_ENABLE, &e);
        if (e != CL_SUCCESS) cl_fail("clCreateCommandQueue", e, "setup of the transfer queue (1)");
    }
    rc->step_events = xcalloc((size_t)rc->plan->nsteps + 1, sizeof *rc->step_events);
    build_programs(rc);
    make_buffers(rc);
    make_kernels(rc);
    CL_CHECK(CL.clFinish(rc->queue), "setup");
}

/* The events step s waits for (NULL entries, such as CLBlast calls, are complete already). */
static cl_uint wait_list(run_ctx *rc, const pt_step *s, cl_event *out)
{
    cl_uint n = 0;
    for (int i = 0; i < s->nwait; i++)
        if (rc->step_events[s->wait[i]]) out[n++] = rc->step_events[s->wait[i]];
    return n;
}

/* Where a non-blocking read into t's host copy is recorded: per shared buffer (another
 * tensor's read may be filling the same host memory), else per tensor. */
static void **pending_slot(pt_plan *p, pt_tensor *t)
{
    return t->buffer >= 0 ? &p->buffers[t->buffer].pending_d2h : &t->pending_d2h;
}

/* Enqueues step k; returns its event (NULL for host-only steps). A step on queue 1 is
 * non-blocking: the host copy it reads or writes is touched again only by later commands
 * of the same in-order queue, by a load (after that queue is drained) or after the
 * iteration's clFinish. */
static cl_event enqueue_step(run_ctx *rc, pt_step *s, int k, int iteration)
{
    pt_plan *p = rc->plan;
    cl_event ev = NULL;
    char ctx[160];
    snprintf(ctx, sizeof ctx, "steps[%d] (%s) of iteration %d", k,
             s->op == OP_KERNEL ? s->name : op_name(s->op), iteration);
    pt_tensor *t = s->tensor >= 0 ? &p->tensors[s->tensor] : NULL;
    cl_int e = CL_SUCCESS;
    cl_command_queue q = s->queue ? rc->queue1 : rc->queue;
    cl_bool blocking = s->queue ? CL_FALSE : CL_TRUE;
    /* a one-queue plan's uploads do not block: the in-order queue runs them before every
     * later command, and the host rewrites a host copy only in OP_LOAD, which waits for them
     * (below); with a transfer queue they still block, as the pipelined placement's
     * cross-queue ordering was checked */
    if (s->op == OP_H2D && !rc->queue1) blocking = CL_FALSE;
    cl_event waits[MAX_KERNEL_ARGS * 4 + 8];
    cl_event *wl = s->nwait ? (s->nwait <= (int)(sizeof waits / sizeof *waits) ? waits
                                : xcalloc((size_t)s->nwait, sizeof *wl)) : NULL;
    cl_uint nw = s->nwait ? wait_list(rc, s, wl) : 0;
    /* an event per command costs host time (NVIDIA: ~8 us per launch, bench-bandwidth's
     * replay figures); without profiling no command returns one */
    cl_event *evp = rc->profiling ? &ev : NULL;
    switch (s->op) {
    case OP_KERNEL:
        if (s->external) {   /* CLBlast may enqueue several kernels: time the whole call */
            if (nw) CL_CHECK(CL.clWaitForEvents(nw, wl), ctx);   /* CLBlast takes no wait list */
            const rt_arg *a = s->args;
            int st = clblast_gemm(s->name, a[0].i, a[1].i, a[2].i, a[3].f,
                                  p->tensors[s->arg_tensor[4]].mem, p->tensors[s->arg_tensor[5]].mem,
                                  a[6].f, p->tensors[s->arg_tensor[7]].mem, q);
            if (st != 0) fail(EXIT_CL_RUNTIME, "CLBlast error: CLBlastSgemm returned status %d during %s", st, ctx);
            CL_CHECK(CL.clFinish(q), ctx);
            break;
        }
        CL_CHECK(CL.clEnqueueNDRangeKernel(q, s->kernel, (cl_uint)s->work_dim, NULL,
                                           s->global, s->has_local ? s->local : NULL, nw,
                                           nw ? wl : NULL, evp),
                 ctx);
        break;
    case OP_H2D:
        /* NVIDIA's driver may take a non-blocking write's host data when the write is enqueued
         * (a staging copy of pageable memory), not when it runs: a read still filling that host
         * copy must be complete first, whatever the queue order says. */
        if (*pending_slot(p, t)) {
            cl_event rd = (cl_event)*pending_slot(p, t);
            CL_CHECK(CL.clWaitForEvents(1, &rd), ctx);
            *pending_slot(p, t) = NULL;
        }
        CL_CHECK(CL.clEnqueueWriteBuffer(q, t->mem, blocking, 0, t->size_bytes, t->host, nw,
                                         nw ? wl : NULL, evp), ctx);
        if (!s->queue) rc->q0_writes_pending = 1;
        break;
    case OP_D2H:
        CL_CHECK(CL.clEnqueueReadBuffer(q, t->mem, blocking, 0, t->size_bytes, t->host, nw,
                                        nw ? wl : NULL, evp), ctx);
        if (!blocking) *pending_slot(p, t) = ev;   /* valid until read_profile releases it */
        break;
    case OP_MAP:
        t->mapped = CL.clEnqueueMapBuffer(q, t->mem, CL_TRUE,
                                          s->map_write ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ,
                                          0, t->size_bytes, 0, NULL, evp, &e);
        if (e != CL_SUCCESS) cl_fail("clEnqueueMapBuffer", e, ctx);
        break;
    case OP_UNMAP:
        CL_CHECK(CL.clEnqueueUnmapMemObject(q, t->mem, t->mapped, 0, NULL, evp), ctx);
        t->mapped = NULL;
        break;
    case OP_LOAD:
        if (rc->queue1) CL_CHECK(CL.clFinish(rc->queue1), ctx);   /* no copy still reads the host copy */
        if (rc->q0_writes_pending) CL_CHECK(CL.clFinish(rc->queue), ctx);   /* nor an upload */
        rc->q0_writes_pending = 0;
        plan_load_batch(t, iteration);
        break;
    }
    if (wl && wl != waits) free(wl);
    /* A command waiting for an event of another queue needs that queue flushed (OpenCL 1.2,
     * 5.13); flushing both also lets queue 1's copies start while the host enqueues. */
    if (rc->queue1 && s->op != OP_LOAD) {
        CL_CHECK(CL.clFlush(rc->queue), ctx);
        CL_CHECK(CL.clFlush(rc->queue1), ctx);
    }
    return ev;
}

/* Before a kernel reading copied image views: one clEnqueueCopyBufferToImage per view, each
 * its own d2d row (op "image_copy", named after the tensor), so the copy's time shows.
 * Returns the next seq. */
static int refresh_images(run_ctx *rc, pt_step *s, int iteration, int warmup, int seq, int k)
{
    for (int a = 0; a < s->nargs; a++) {
        if (!s->arg_image[a]) continue;
        pt_tensor *t = &rc->plan->tensors[s->arg_tensor[a]];
        const cl_image_view *v = t->image;
        if (!v->copied) continue;
        trace_row *r = trace_step(&rc->tr, rc->plan, s, iteration, warmup, seq++, k);
        int idx = rc->tr.n - 1;
        r->op = "image_copy";
        r->kind = "d2d";
        r->name = t->name;
        r->flops = 0;
        r->bytes = (long long)(v->width * v->height * 16);
        r->host_begin_ns = monotonic_ns();
        cl_event ev;
        char ctx[160];
        snprintf(ctx, sizeof ctx, "the image copy of tensor \"%s\" for steps[%d] (%s), iteration %d",
                 t->name, k, s->name, iteration);
        cl_event waits[MAX_KERNEL_ARGS * 4 + 8];
        if (s->nwait && s->nwait <= (int)(sizeof waits / sizeof *waits)) {
            cl_uint nw = wait_list(rc, s, waits);   /* the copy reads what the waits wrote */
            if (nw) CL_CHECK(CL.clWaitForEvents(nw, waits), ctx);
        } else if (s->nwait) {   /* too many to list: wait for every queue */
            CL_CHECK(CL.clFinish(rc->queue), ctx);
            if (rc->queue1) CL_CHECK(CL.clFinish(rc->queue1), ctx);
        }
        CL_CHECK(image_view_refresh(rc->queue, t->mem, v, &ev), ctx);
        r = &rc->tr.rows[idx];
        r->host_end_ns = monotonic_ns();
        r->event = ev;
    }
    return seq;
}

static void read_profile(trace_row *r)
{
    cl_event ev = r->event;
    cl_ulong v[4];
    static const cl_profiling_info what[4] = {CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                              CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END};
    for (int i = 0; i < 4; i++)
        CL_CHECK(CL.clGetEventProfilingInfo(ev, what[i], sizeof v[i], &v[i], NULL), r->name);
    r->queued_ns = (int64_t)v[0];
    r->submit_ns = (int64_t)v[1];
    r->start_ns = (int64_t)v[2];
    r->end_ns = (int64_t)v[3];
    CL.clReleaseEvent(ev);
    r->event = NULL;
}

uint64_t cl_iteration(run_ctx *rc, int iteration, int warmup)
{
    pt_plan *p = rc->plan;
    int first = rc->tr.n, seq = 0;
    memset(rc->step_events, 0, (size_t)p->nsteps * sizeof *rc->step_events);
    for (int i = 0; i < p->ntensors; i++) p->tensors[i].pending_d2h = NULL;
    for (int b = 0; b < p->nbuffers; b++) p->buffers[b].pending_d2h = NULL;
    for (int k = 0; k < p->nsteps; k++) {
        pt_step *s = &p->steps[k];
        if (s->has_image) seq = refresh_images(rc, s, iteration, warmup, seq, k);
        trace_row *r = trace_step(&rc->tr, rc->plan, s, iteration, warmup, seq++, k);
        int idx = rc->tr.n - 1;   /* rows may move when the trace grows */
        if (s->external) {   /* untimed: its row spans the call, not what it waits for */
            CL_CHECK(CL.clFinish(rc->queue), "before a CLBlast call");
            if (rc->queue1) CL_CHECK(CL.clFinish(rc->queue1), "before a CLBlast call");
        }
        r->host_begin_ns = monotonic_ns();
        cl_event ev = enqueue_step(rc, s, k, iteration);
        r = &rc->tr.rows[idx];
        r->host_end_ns = monotonic_ns();
        r->event = ev;
        rc->step_events[k] = ev;   /* released by read_profile, after the clFinish below */
        if (s->op == OP_MAP) trace_map_copy(&rc->tr, rc->plan, s, iteration, warmup, seq++, k);
    }
    CL_CHECK(CL.clFinish(rc->queue), "the end of an iteration");
    rc->q0_writes_pending = 0;
    if (rc->queue1) CL_CHECK(CL.clFinish(rc->queue1), "the end of an iteration (transfer queue 1)");
    uint64_t end = monotonic_ns();
    for (int i = first; i < rc->tr.n; i++) {
        trace_row *r = &rc->tr.rows[i];
        if (!r->event) continue;
        if (rc->profiling) read_profile(r);
        else { CL.clReleaseEvent(r->event); r->event = NULL; }   /* an image copy's */
    }
    return end;
}

void cl_read_home(run_ctx *rc, pt_tensor *t, void *dst)
{
    if (t->home_device && t->mem) {
        CL_CHECK(CL.clEnqueueReadBuffer(rc->queue, t->mem, CL_TRUE, 0, t->size_bytes, dst, 0, NULL,
                                        NULL), t->name);
    } else {
        memcpy(dst, t->host, t->size_bytes);
    }
}
