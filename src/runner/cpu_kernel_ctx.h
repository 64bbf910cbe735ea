/* Internal to the CPU backend (cpu_kernels.c, cpu_fused.c, cpu_mobile.c): a kernel call's context, the
 * argument checks that report "kernel: argument i (name) ...", and the kernel table entry. */
#ifndef PHONETRAIN_CPU_KERNEL_CTX_H
#define PHONETRAIN_CPU_KERNEL_CTX_H

#include <stdint.h>

#include "cpu_kernels.h"

/* Below this many elements (or MACs for GEMM) a kernel runs on one thread. */
#define PAR_MIN 16384

typedef struct {
    const char *kernel;
    const char *names;  /* space-separated argument names, in ABI order */
    const rt_arg *a;
    char *err;
    int errlen;
} kctx;

typedef struct {
    const char *name;
    const char *kinds;  /* one of i/f/t per argument */
    const char *names;  /* argument names for messages */
    int (*fn)(const kctx *);
} kernel_spec;

/* Writes "kernel: argument idx (name) <message>" into the error buffer; returns -1. */
int kfail(const kctx *k, int idx, const char *fmt, ...);
/* An int argument that must be >= lo (a dimension >= 1, a pad >= 0). */
int kneed_min(const kctx *k, int idx, int lo);
/* A tensor argument that must hold at least `need` elements (`expr` says why). */
int kneed_numel(const kctx *k, int idx, int64_t need, const char *expr);

/* One row of softmax_xent (max-subtracted softmax of x[0..C), its cross-entropy against label
 * returned, dx = (p - onehot(label)) * inv_b written): shared by softmax_xent and the fused
 * softmax_xent_bwd so both compute a row identically. */
float softmax_xent_row(const float *x, int C, int label, float inv_b, float *dx);

/* The fused kernels (cpu_fused.c) and the mobile CNN operators (cpu_mobile.c), searched after
 * cpu_kernels.c's own table. */
extern const kernel_spec CPU_FUSED_KERNELS[];
extern const int CPU_FUSED_NKERNELS;
extern const kernel_spec CPU_MOBILE_KERNELS[];
extern const int CPU_MOBILE_NKERNELS;
extern const kernel_spec CPU_FUSED_BN_KERNELS[];   /* cpu_fused_bn.c */
extern const int CPU_FUSED_BN_NKERNELS;

#define CHECK(x)                  \
    do {                          \
        if ((x) != 0) return -1;  \
    } while (0)
#define I(n) (k->a[n].i)
#define F(n) (k->a[n].f)
#define PF(n) ((float *)k->a[n].p)
#define PI(n) ((int *)k->a[n].p)

#endif
