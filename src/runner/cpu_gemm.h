/* Internal to the GEMM engine's two files: cpu_gemm.c (the blocked engine, cpu_gemm) and
 * cpu_gemm_shapes.c (its paths for particular shapes). The blocking and split constants,
 * the multiply-add spellings and the x86 clone selection they share. */
#ifndef PHONETRAIN_CPU_GEMM_H
#define PHONETRAIN_CPU_GEMM_H

#include <math.h>
#include <stdint.h>

#include "cpu_kernel_ctx.h"

/* The blocking of the engine (cpu_gemm.c, "GEMM engine"): KC-long K blocks, MC-row blocks of
 * A, NC-column panels of B. */
#ifndef GEMM_KC
#define GEMM_KC 256
#endif
#ifndef GEMM_MC
#define GEMM_MC 192
#endif
#ifndef GEMM_NC
#define GEMM_NC 2048
#endif

#define MADD_FMA(a, b, c) fmaf((a), (b), (c))
#define MADD_PLAIN(a, b, c) ((a) * (b) + (c))
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define MADD_NATIVE MADD_FMA
#else
#define MADD_NATIVE MADD_PLAIN
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_X86_DISPATCH 1
/* gcc prefers 256-bit vectors even with AVX-512 enabled; ask for 512-bit ones (1.3x). */
#if defined(__clang__)
#define GEMM_AVX512_TARGET "avx512f,avx512vl,avx2,fma"
#else
#define GEMM_AVX512_TARGET "avx512f,avx512vl,avx2,fma,prefer-vector-width=512"
#endif
#endif

/* Widest x86 micro-kernel allowed: 2 AVX-512, 1 AVX2, 0 generic (tests build each). */
#ifndef GEMM_X86_MAX
#define GEMM_X86_MAX 2
#endif

/* Past this many K per C element (and for small C) the K range is cut into GEMM_KSPLIT-long
 * chunks computed in parallel and summed in chunk order: the weight gradients of a conv
 * (C = dY^T-ish [OC, C*KH*KW], K = B*OH*OW) would otherwise run on one thread. The split
 * depends on the shape only, never the thread count, so results do not change with it. */
#ifndef GEMM_KSPLIT
#define GEMM_KSPLIT 1024
#endif
#ifndef GEMM_KSPLIT_MAX_MN
#define GEMM_KSPLIT_MAX_MN 65536
#endif

/* The B panels up to this many floats (256 KiB, in L2) are swept by rows of C (see
 * gemm_block). */
#ifndef GEMM_ROWS_OUTER_MAX_FLOATS
#define GEMM_ROWS_OUTER_MAX_FLOATS 65536
#endif

/* The engine's paths for particular shapes (cpu_gemm_shapes.c): C = alpha * op(A) @ op(B)
 * + beta * C as cpu_gemm when the shape is one a path takes (a long-K gemm_nt with a small
 * C, a gemm_nt with a short A, a short-K gemm_tn; on the CPUs each path was tuned for),
 * returning 1; else 0 with C untouched. */
int cpu_gemm_shapes(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                    const float *B, float beta, float *C);

#endif
