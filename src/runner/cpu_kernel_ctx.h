/* Internal to the CPU backend (the cpu_*.c files, one per kernel file of src/kernels: see
 * src/runner/README.md): a kernel call's context, the argument checks that report "kernel:
 * argument i (name) ...", and CPU_KERNEL, which defines a kernel of the generated table
 * kernel_abi.h. */
#ifndef PHONETRAIN_CPU_KERNEL_CTX_H
#define PHONETRAIN_CPU_KERNEL_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels.h"
#include "kernel_abi.h"

/* Below this many elements (or MACs for GEMM) a kernel runs on one thread. */
#define PAR_MIN 16384

typedef struct {
    const char *kernel;
    const char *names;  /* space-separated argument names, in ABI order */
    const rt_arg *a;
    char *err;
    int errlen;
} kctx;

/* Every kernel's C function, int k_<name>(const kctx *k), declared from the table: the
 * dispatch table of cpu_kernels.c lists them all, so a kernel of the ABI without one fails to
 * link ("undefined reference to `k_<name>'"). */
#define CPU_KERNEL_DECL(name, kinds, names) int k_##name(const kctx *k);
KERNEL_ABI(CPU_KERNEL_DECL)

/* Defines kernel `name`'s function, whose arguments have the kinds spelled by the token
 * `kinds` (one i/f/t per argument, as kernel_abi.h): CPU_KERNEL(relu_fwd, itt) { ... }. A
 * name not in the ABI, another argument count or other kinds fail to compile, naming the
 * kernel; regenerate kernel_abi.h (python -m phonetrain.kernels.abi_gen) after a change of
 * the table, then change the C function to match. */
#define CPU_KERNEL(name, kinds)                                                              \
    _Static_assert(KABI_NARGS_##name == sizeof #kinds - 1,                                   \
                   "kernel " #name ": the C function takes " #kinds                          \
                   ", another argument count than kernel_abi.h");                            \
    _Static_assert(KABI_SIG_##name##_##kinds == sizeof #kinds - 1,                           \
                   "kernel " #name ": argument kinds " #kinds " differ from kernel_abi.h");   \
    int k_##name(const kctx *k)

/* Writes "kernel: argument idx (name) <message>" into the error buffer; returns -1. */
int kfail(const kctx *k, int idx, const char *fmt, ...);
/* An int argument that must be >= lo (a dimension >= 1, a pad >= 0). */
int kneed_min(const kctx *k, int idx, int lo);
/* A tensor argument that must hold at least `need` elements (`expr` says why). */
int kneed_numel(const kctx *k, int idx, int64_t need, const char *expr);
/* An element-wise kernel's count n, int argument 0 (>= 1), which tensor arguments first..last
 * must each hold; *n gets it. 0, or -1 after the refusal. */
int kneed_elements(const kctx *k, int first, int last, int64_t *n);

/* Tensor argument idx holds B int32 labels that must each be in [0, C) (softmax_xent and the
 * fused softmax_xent_bwd); 0, or -1 after the refusal naming the first label outside. */
int kneed_labels(const kctx *k, int idx, int B, int C);

/* One row of softmax_xent (max-subtracted softmax of x[0..C), its cross-entropy against label
 * returned, dx = (p - onehot(label)) * inv_b written): shared by softmax_xent and the fused
 * softmax_xent_bwd so both compute a row identically. */
float softmax_xent_row(const float *x, int C, int label, float inv_b, float *dx);

/* C[M,N] = alpha * op(A) @ op(B) + beta * C (op: transpose where trans_* is 1), row-major
 * float32, C not read when beta == 0; every element summed in an order that depends on the
 * shape only, never the thread count (cpu_gemm.c, "GEMM engine"). */
void cpu_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              const float *B, float beta, float *C);
/* A per-thread scratch array of at least n floats in slot `which`, kept between calls
 * (_Thread_local: each OpenMP thread has its own); aborts when memory runs out. Slots 0 and 1
 * are the GEMM engine's; a caller of cpu_gemm holds its operands in the others. */
enum { SCRATCH_COLUMNS = 2, SCRATCH_GRADIENT = 3, SCRATCH_CHANNEL_MAJOR = 4, SCRATCH_SLOTS = 5 };
float *cpu_scratch(int which, size_t n);
/* sgd_update on n elements (g = dW + wd * W, V = momentum * V + g, W -= lr * V), the
 * element ranges on the threads; the widest x86 clone, the same bits at every width
 * (cpu_elementwise.c). */
void cpu_sgd_update(int64_t n, float lr, float momentum, float wd, float *W, const float *dW,
                    float *V);
/* The same step on elements [i0, i1), on the calling thread. */
void cpu_sgd_step(int64_t i0, int64_t i1, float lr, float momentum, float wd, float *W,
                  const float *dW, float *V);
/* The gradient g = A^T @ B (A [K, M], B [K, N]) of W [M, N] applied at once by sgd_update's
 * rule: g += wd * W, V = momentum * V + g, W -= lr * V (V [M, N]); with a short K each tile's
 * step follows its sums while they are in cache, else g goes through a scratch array. */
void cpu_gemm_tn_sgd(int M, int N, int K, const float *A, const float *B, float lr,
                     float momentum, float wd, float *W, float *V);

/* cpu_kernel_run for a kernel called from another whose checks already cover these
 * arguments (im2col inside a fused convolution, say): a refusal is a bug, so it prints the
 * message and aborts. */
void cpu_kernel_run_checked(const char *name, const rt_arg *args, int nargs);

/* Sums in CPU_LANES interleaved partial sums (cpu_mobile.c): value j of a run goes to lane
 * j % CPU_LANES, runs in order, then the lanes are added in lane order (cpu_lanes_total). An
 * order fixed by the shape that the compiler vectorizes, where one running sum would wait on
 * the add's latency at every element. lane[CPU_LANES] starts at 0. */
#define CPU_LANES 16
float cpu_lanes_total(const float *lane);
/* lane[j % CPU_LANES] += x[j], 0 <= j < n. */
void cpu_lanes_add(float *restrict lane, const float *restrict x, int n);
/* lane[j % CPU_LANES] += (x[j] - mu)^2, 0 <= j < n. */
void cpu_lanes_add_sq_dev(float *restrict lane, const float *restrict x, int n, float mu);

/* Convolutions on the GEMM engine (cpu_conv.c): geometry B C H W OC KH KW stride pad OH OW,
 * checked by the caller (OH = (H + 2*pad - KH)/stride + 1, likewise OW). Tensors float32,
 * NCHW: X [B, C, H, W], weight [OC, C*KH*KW], Y and dY [B, OC, OH*OW]. All three use every
 * thread's SCRATCH_COLUMNS and SCRATCH_CHANNEL_MAJOR: a caller holds its arrays elsewhere. */
typedef struct {
    int B, C, H, W, OC, KH, KW, s, pad, OH, OW;
} conv_geom;
/* One output row of a chunk: dst[0..P) from src[0..P) of channel oc (src == dst in place). */
typedef void (*conv_row_epilogue)(const void *ctx, int oc, const float *src, float *dst,
                                  int64_t P);
/* dX's elements [e0, e1) are final (whole images of one chunk). */
typedef void (*conv_span_epilogue)(const void *ctx, int64_t e0, int64_t e1);
/* Y = conv(X, weight), no bias; `epi` (NULL: a copy) writes each row while it is in cache. */
void cpu_conv_fwd(const conv_geom *g, const float *X, const float *Wt, float *Y,
                  conv_row_epilogue epi, const void *ctx);
/* dX = col2im(weight^T @ dY), then `epi` (may be NULL) on each chunk's images. */
void cpu_conv_bwd_data(const conv_geom *g, const float *dY, const float *Wt, float *dX,
                       conv_span_epilogue epi, const void *ctx);
/* G [OC, C*KH*KW] = the weight gradient, sum over images of dY @ columns^T (chunks of
 * images in order; on all threads). G lives outside those slots (SCRATCH_GRADIENT, say). */
void cpu_conv_wgrad(const conv_geom *g, const float *X, const float *dY, float *G);

/* Vector width for loop-heavy helpers. The runner is built without -march, so plain code gets
 * the baseline ISA (SSE2 on x86-64); like the GEMM micro-kernels (cpu_gemm.c), a helper is
 * written once as `static inline CPU_ISA_BODY void name_body(...)` and CPU_ISA_CLONES
 * instantiates it per x86 target (the compiler inlines the body into each, vectorizing it for
 * that target); CPU_ISA_PICK(name) is the widest clone this CPU runs. The clones compute the
 * same operations in the same order (-std=c11 keeps a*b + c unfused), so results do not
 * depend on the clone. CPU_X86_MAX caps the level (2 AVX-512, 1 AVX2, 0 baseline) for tests. */
#define CPU_ISA_BODY __attribute__((always_inline))
/* Keeps gcc from turning a copy or zeroing loop into a memcpy/memset call: for rows of a few
 * dozen floats the call costs more than the copy (im2col and the depthwise kernels copy
 * millions of such rows per step). */
#if defined(__GNUC__) && !defined(__clang__)
#define CPU_NO_LIBCALL_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define CPU_NO_LIBCALL_LOOPS
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#ifndef CPU_X86_MAX
#define CPU_X86_MAX 2
#endif
#if defined(__clang__)
#define CPU_ISA_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
#else
#define CPU_ISA_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma,prefer-vector-width=512")))
#endif
#define CPU_ISA_AVX2 __attribute__((target("avx2,fma")))
static inline int cpu_isa_level(void)
{
    if (CPU_X86_MAX >= 2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl"))
        return 2;
    if (CPU_X86_MAX >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
    return 0;
}
#define CPU_ISA_CLONES(name, params, args)                                                  \
    CPU_NO_LIBCALL_LOOPS static void name##_generic params { name##_body args; }            \
    CPU_NO_LIBCALL_LOOPS CPU_ISA_AVX2 static void name##_avx2 params { name##_body args; }  \
    CPU_NO_LIBCALL_LOOPS CPU_ISA_AVX512 static void name##_avx512 params { name##_body args; }
#define CPU_ISA_PICK(name)                                                 \
    (cpu_isa_level() >= 2 ? name##_avx512 : cpu_isa_level() >= 1 ? name##_avx2 : name##_generic)
#else
#define CPU_ISA_CLONES(name, params, args) \
    CPU_NO_LIBCALL_LOOPS static void name##_generic params { name##_body args; }
#define CPU_ISA_PICK(name) name##_generic
#endif

#define CHECK(x)                  \
    do {                          \
        if ((x) != 0) return -1;  \
    } while (0)
#define I(n) (k->a[n].i)
#define F(n) (k->a[n].f)
#define PF(n) ((float *)k->a[n].p)
#define PI(n) ((int *)k->a[n].p)

#endif
