/* CPU backend: every kernel of the ABI (src/kernels/README.md) in C11 + OpenMP, one C file
 * per kernel file (src/kernels/baseline/<stem>.cl, fused/<stem>.cl -> cpu_<stem>.c; the GEMM
 * engine in cpu_gemm.c and cpu_gemm_shapes.c). This file is the entry: the dispatch table,
 * generated from the ABI table (kernel_abi.h), and the argument checks every kernel shares.
 *
 * Each kernel first checks its arguments (count, kinds, dimensions, tensor sizes against
 * numel) and reports the first bad one as "kernel: argument i (name) ..."; then it runs,
 * parallelized with OpenMP over the caller's thread count (omp_set_num_threads). Small
 * problems run on one thread: a parallel region costs microseconds. */
#include "cpu_kernels.h"
#include "cpu_kernel_ctx.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies the idx-th space-separated word of names into out. */
static void arg_name(const char *names, int idx, char *out, size_t outlen)
{
    const char *p = names;
    for (int i = 0; i < idx && p; ++i) {
        p = strchr(p, ' ');
        if (p) ++p;
    }
    size_t n = p ? strcspn(p, " ") : 0;
    if (n >= outlen) n = outlen - 1;
    memcpy(out, p ? p : "", n);
    out[n] = '\0';
}

/* Writes "kernel: argument idx (name) <message>" into the error buffer; returns -1. */
int kfail(const kctx *k, int idx, const char *fmt, ...)
{
    char name[32], msg[256];
    va_list ap;
    arg_name(k->names, idx, name, sizeof name);
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (k->err && k->errlen > 0)
        snprintf(k->err, (size_t)k->errlen, "%s: argument %d (%s) %s", k->kernel, idx, name, msg);
    return -1;
}

/* An int argument that must be >= lo (a dimension >= 1, a pad >= 0). */
int kneed_min(const kctx *k, int idx, int lo)
{
    if (k->a[idx].i < lo)
        return kfail(k, idx, "is %d; it must be >= %d", k->a[idx].i, lo);
    return 0;
}

/* A tensor argument that must hold at least `need` elements (`expr` says why). */
int kneed_numel(const kctx *k, int idx, int64_t need, const char *expr)
{
    if (!k->a[idx].p)
        return kfail(k, idx, "is a NULL buffer");
    if ((int64_t)k->a[idx].numel < need)
        return kfail(k, idx, "has %ld elements but %s = %lld are needed", k->a[idx].numel, expr,
                    (long long)need);
    return 0;
}

/* An element-wise kernel's count n, int argument 0 (>= 1), which tensor arguments first..last
 * must each hold; *n gets it. */
int kneed_elements(const kctx *k, int first, int last, int64_t *n)
{
    CHECK(kneed_min(k, 0, 1));
    *n = k->a[0].i;
    for (int i = first; i <= last; ++i) CHECK(kneed_numel(k, i, *n, "n"));
    return 0;
}

/* ---- dispatch ------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    const char *kinds;  /* one of i/f/t per argument */
    const char *names;  /* argument names for messages */
    int (*fn)(const kctx *);
} kernel_spec;

/* Every kernel of the ABI, generated (kernel_abi.h): name, kinds and argument names come from
 * the one table, the function is the kernel's CPU_KERNEL. */
#define KERNEL_ROW(name, kinds, names) {#name, kinds, names, k_##name},
static const kernel_spec KERNELS[] = {KERNEL_ABI(KERNEL_ROW)};

static const kernel_spec *find_kernel(const char *name)
{
    for (size_t i = 0; i < sizeof KERNELS / sizeof KERNELS[0]; ++i)
        if (strcmp(KERNELS[i].name, name) == 0) return &KERNELS[i];
    return NULL;
}

int cpu_kernel_known(const char *name) { return name && find_kernel(name) != NULL; }

int cpu_kernel_run(const char *name, const rt_arg *args, int nargs, char *err, int errlen)
{
    const kernel_spec *s = name ? find_kernel(name) : NULL;
    if (!s) {
        if (err && errlen > 0)
            snprintf(err, (size_t)errlen, "unknown kernel '%s' (not in the kernel ABI, "
                     "src/kernels/README.md)", name ? name : "(null)");
        return -2;
    }
    const kctx k = {s->name, s->names, args, err, errlen};
    const int want = (int)strlen(s->kinds);
    if (nargs != want) {
        if (err && errlen > 0)
            snprintf(err, (size_t)errlen, "%s: %d arguments given, %d expected (%s)", s->name,
                     nargs, want, s->names);
        return -1;
    }
    for (int i = 0; i < want; ++i)
        if (args[i].kind != s->kinds[i])
            return kfail(&k, i, "has kind '%c'; expected '%c' (i = int, f = float, t = tensor)",
                        args[i].kind ? args[i].kind : '?', s->kinds[i]);
    return s->fn(&k);
}

void cpu_kernel_run_checked(const char *name, const rt_arg *args, int nargs)
{
    char err[256];
    if (cpu_kernel_run(name, args, nargs, err, sizeof err) != 0) {
        fprintf(stderr, "cpu backend: %s\n", err);
        abort();
    }
}
