/* CPU backend: every kernel of the ABI (src/kernels/README.md) in C11 + OpenMP.
 *
 * Each kernel first checks its arguments (count, kinds, dimensions, tensor sizes against
 * numel) and reports the first bad one as "kernel: argument i (name) ..."; then it runs,
 * parallelized with OpenMP over the caller's thread count (omp_set_num_threads). Small
 * problems run on one thread: a parallel region costs microseconds. */
#define _GNU_SOURCE   /* sysconf(_SC_LEVEL3_CACHE_SIZE) */
#include "cpu_kernels.h"
#include "cpu_kernel_ctx.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

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

/* ---- GEMM engine --------------------------------------------------------------------- */
/* C = alpha * op(A) @ op(B) + beta * C, blocked as in Goto & van de Geijn, "Anatomy of
 * high-performance matrix multiplication" (ACM TOMS 34(3), 2008): B is packed into a KC x NC
 * panel of NR-wide slivers (L3), A into an MC x KC block of MR-high slivers (L2), and an
 * MR x NR micro-kernel keeps its accumulators in registers while streaming one sliver of each
 * (L1). Packing absorbs the transposes and zero-pads the edges, so one micro-kernel serves
 * NN, NT and TN and any M, N, K.
 *
 * The micro-kernel is plain C with constant trip counts, so gcc -O3 vectorizes its NR loop and
 * unrolls its MR loop; no intrinsics. On x86 it is compiled three times (AVX-512, AVX2+FMA,
 * baseline) with target attributes and picked at run time, so a runner built without
 * -march=native still uses the host's vector units. Checked with -fopt-info-vec (gcc 12, plain
 * -O3 -std=c11): "loop vectorized using 64 byte vectors" in gemm_micro_avx512, 32 byte in
 * gemm_micro_avx2, 16 byte in gemm_micro_generic. The multiply-add is fmaf() where the target
 * has FMA: -std=c11 turns off gcc's contraction of a*b+c (-ffp-contract=off), which cost 1.5x.
 * Tile shapes, measured at 512^3 on one core of this project's KVM Xeon (lscpu family 6,
 * model 167, AVX-512), gcc 12: AVX-512 8x32 157 GFLOPS; AVX2+FMA 4x24 104 (6x16 and 8x16 were
 * 20x slower: gcc spilled the accumulators); 128-bit SSE2 4x8 31; NEON 4x8 compiles and
 * vectorizes (aarch64-linux-gnu-gcc 12) but is unmeasured. */
#ifndef GEMM_KC
#define GEMM_KC 256
#endif
#ifndef GEMM_MC
#define GEMM_MC 192
#endif
#ifndef GEMM_NC
#define GEMM_NC 2048
#endif

typedef void (*gemm_micro_fn)(int kc, const float *restrict Ap, const float *restrict Bp,
                              int64_t ldb, float *restrict C, int64_t ldc, int mr, int nr,
                              float alpha, float beta);

typedef struct {
    int mr, nr;          /* register tile: the micro-kernel computes mr x nr of C */
    gemm_micro_fn micro;
} gemm_kernel;

/* Body of a micro-kernel: acc[MR][NR] = sum over p of Ap[p][0:MR] (outer) Bp[p*ldb][0:NR],
 * then C[0:mr, 0:nr] = alpha * acc + beta * C (C not read when beta == 0). MADD(a, b, c) is
 * a*b + c. Bp is a packed sliver (ldb = NR) or, for a small M, NR columns of op(B) read in
 * place (ldb = its row stride; see gemm_block). */
#define GEMM_MICRO_BODY(MR, NR, MADD)                                                    \
    float acc[MR][NR] = {{0.0f}};                                                        \
    for (int p = 0; p < kc; ++p) {                                                       \
        const float *restrict a = Ap + (int64_t)p * (MR);                                \
        const float *restrict b = Bp + (int64_t)p * ldb;                                 \
        for (int i = 0; i < (MR); ++i)                                                   \
            for (int j = 0; j < (NR); ++j) acc[i][j] = MADD(a[i], b[j], acc[i][j]);      \
    }                                                                                    \
    if (mr == (MR) && nr == (NR) && beta == 0.0f) {                                      \
        /* a whole tile: constant trip counts, plain vector stores (small K: the stores  \
         * are most of the work) */                                                      \
        for (int i = 0; i < (MR); ++i)                                                   \
            for (int j = 0; j < (NR); ++j) C[i * ldc + j] = alpha * acc[i][j];           \
        return;                                                                          \
    }                                                                                    \
    for (int i = 0; i < mr; ++i) {                                                       \
        float *restrict c = C + i * ldc;                                                 \
        if (beta == 0.0f)                                                                \
            for (int j = 0; j < nr; ++j) c[j] = alpha * acc[i][j];                       \
        else                                                                             \
            for (int j = 0; j < nr; ++j) c[j] = alpha * acc[i][j] + beta * c[j];         \
    }

#define MADD_FMA(a, b, c) fmaf((a), (b), (c))
#define MADD_PLAIN(a, b, c) ((a) * (b) + (c))
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define MADD_NATIVE MADD_FMA
#else
#define MADD_NATIVE MADD_PLAIN
#endif

static void gemm_micro_generic(int kc, const float *restrict Ap, const float *restrict Bp,
                               int64_t ldb, float *restrict C, int64_t ldc, int mr, int nr,
                               float alpha, float beta)
{
    GEMM_MICRO_BODY(4, 8, MADD_NATIVE)
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_X86_DISPATCH 1
/* gcc prefers 256-bit vectors even with AVX-512 enabled; ask for 512-bit ones (1.3x). */
#if defined(__clang__)
#define GEMM_AVX512_TARGET "avx512f,avx512vl,avx2,fma"
#else
#define GEMM_AVX512_TARGET "avx512f,avx512vl,avx2,fma,prefer-vector-width=512"
#endif
__attribute__((target(GEMM_AVX512_TARGET)))
static void gemm_micro_avx512(int kc, const float *restrict Ap, const float *restrict Bp,
                              int64_t ldb, float *restrict C, int64_t ldc, int mr, int nr,
                              float alpha, float beta)
{
    GEMM_MICRO_BODY(8, 32, MADD_FMA)
}

__attribute__((target("avx2,fma")))
static void gemm_micro_avx2(int kc, const float *restrict Ap, const float *restrict Bp,
                            int64_t ldb, float *restrict C, int64_t ldc, int mr, int nr,
                            float alpha, float beta)
{
    GEMM_MICRO_BODY(4, 24, MADD_FMA)
}
#endif

/* Widest x86 micro-kernel allowed: 2 AVX-512, 1 AVX2, 0 generic (tests build each). */
#ifndef GEMM_X86_MAX
#define GEMM_X86_MAX 2
#endif

/* The widest micro-kernel this CPU runs. */
static gemm_kernel gemm_pick(void)
{
#ifdef GEMM_X86_DISPATCH
    if (GEMM_X86_MAX >= 2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl"))
        return (gemm_kernel){8, 32, gemm_micro_avx512};
    if (GEMM_X86_MAX >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return (gemm_kernel){4, 24, gemm_micro_avx2};
#endif
    return (gemm_kernel){4, 8, gemm_micro_generic};
}

/* Packs rows [i0, i0+mc) x cols [p0, p0+kc) of op(A) (element (i,p) at A[i*rs + p*cs]) into
 * slivers of MR rows: Ap[s][p][i], zero rows past mc. */
static void pack_a(const float *A, int64_t rs, int64_t cs, int i0, int mc, int p0, int kc,
                   int MR, float *restrict Ap)
{
    const int ns = (mc + MR - 1) / MR;
    for (int s = 0; s < ns; ++s) {
        float *restrict dst = Ap + (int64_t)s * kc * MR;
        const int rows = mc - s * MR < MR ? mc - s * MR : MR;
        if (cs == 1) {      /* rows of A are contiguous in p: gather MR streams */
            for (int i = 0; i < MR; ++i) {
                const float *src = A + (int64_t)(i0 + s * MR + i) * rs + p0;
                if (i < rows)
                    for (int p = 0; p < kc; ++p) dst[p * MR + i] = src[p];
                else
                    for (int p = 0; p < kc; ++p) dst[p * MR + i] = 0.0f;
            }
        } else {            /* op(A) = A^T: each p is a contiguous run of MR rows */
            for (int p = 0; p < kc; ++p) {
                const float *src = A + (int64_t)(i0 + s * MR) * rs + (int64_t)(p0 + p) * cs;
                float *restrict d = dst + (int64_t)p * MR;
                for (int i = 0; i < rows; ++i) d[i] = src[i * rs];
                for (int i = rows; i < MR; ++i) d[i] = 0.0f;
            }
        }
    }
}

/* Packs rows [p0, p0+kc) x cols [j0, j0+nc) of op(B) (element (p,j) at B[p*rs + j*cs]) into
 * slivers of NR columns: Bp[s][p][j], zero columns past nc. */
static void pack_b(const float *B, int64_t rs, int64_t cs, int p0, int kc, int j0, int nc,
                   int NR, float *restrict Bp)
{
    const int ns = (nc + NR - 1) / NR;
    if (cs == 1) {
        /* Row by row: each row of the panel is read as one run (nc floats), which the
         * hardware prefetcher follows from DRAM; sliver by sliver would read NR floats from
         * each of kc rows in turn, kc streams it does not follow. */
        for (int p = 0; p < kc; ++p) {
            const float *src = B + (int64_t)(p0 + p) * rs + j0;
            for (int s = 0; s < ns; ++s) {
                const int cols = nc - s * NR < NR ? nc - s * NR : NR;
                float *restrict d = Bp + ((int64_t)s * kc + p) * NR;
                memcpy(d, src + (int64_t)s * NR, (size_t)cols * sizeof(float));
                for (int j = cols; j < NR; ++j) d[j] = 0.0f;
            }
        }
        return;
    }
    for (int s = 0; s < ns; ++s) {
        float *restrict dst = Bp + (int64_t)s * kc * NR;
        const int cols = nc - s * NR < NR ? nc - s * NR : NR;
        /* op(B) = B^T: gather; contiguous writes beat contiguous reads */
        for (int p = 0; p < kc; ++p) {
            const float *src = B + (int64_t)(p0 + p) * rs + (int64_t)(j0 + s * NR) * cs;
            float *restrict d = dst + (int64_t)p * NR;
            for (int j = 0; j < cols; ++j) d[j] = src[j * cs];
            for (int j = cols; j < NR; ++j) d[j] = 0.0f;
        }
    }
}

/* cpu_kernel_ctx.h: slots 0 and 1 are the GEMM engine's (packing, edges, edge tiles). */
float *cpu_scratch(int which, size_t n)
{
    static _Thread_local float *buf[SCRATCH_SLOTS];
    static _Thread_local size_t len[SCRATCH_SLOTS];
    if (len[which] < n) {
        free(buf[which]);
        buf[which] = malloc(n * sizeof(float));
        if (!buf[which]) {
            fprintf(stderr, "cpu backend: out of memory for %zu floats of scratch\n", n);
            abort();
        }
        len[which] = n;
    }
    return buf[which];
}

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

/* At most this many rows of C, B is not packed when its rows are contiguous (NN, TN): each
 * of its elements is then used by only a few MR-row slivers of A, so a packed copy would cost
 * a full extra pass over B (the im2col matrix of a narrow convolution) for little reuse. The
 * micro-kernel reads NR columns of B in place, row after row; the sliver stays in L1 while
 * the few slivers of A pass over it. Only for a B likely still in cache (the kernel before
 * wrote it): at most GEMM_B_DIRECT_MAX_BYTES or an eighth of the last-level cache, whichever
 * is larger. From DRAM, reading NR floats of each of kc rows per call (kc streams) was slower
 * than packing (8 x 25088 x 72 with the caches flushed: 1.4 ms in place, 1.0 packed; in cache
 * 0.34 in place, 0.49 packed); from the 300 MiB L3 of the H200 host's Xeon, 0.76 ms in place,
 * 1.10 packed. */
#ifndef GEMM_B_DIRECT_MAX_M
#define GEMM_B_DIRECT_MAX_M 32
#endif
#ifndef GEMM_B_DIRECT_MAX_BYTES
#define GEMM_B_DIRECT_MAX_BYTES (4 << 20)
#endif

/* The largest B read in place (see GEMM_B_DIRECT_MAX_M), from the L3 size the C library
 * reports (sysconf; 0 where unknown). Set by cpu_gemm's first call. */
static int64_t gemm_b_direct_max_bytes = -1;

static void gemm_b_direct_init(void)
{
    /* critical: the fused convolutions call cpu_gemm from several threads at once */
#pragma omp critical(gemm_b_direct_init)
    if (gemm_b_direct_max_bytes < 0) {
        long l3 = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
        l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
        gemm_b_direct_max_bytes =
            l3 / 8 > GEMM_B_DIRECT_MAX_BYTES ? l3 / 8 : GEMM_B_DIRECT_MAX_BYTES;
    }
}

/* The B panels up to this many floats (256 KiB, in L2) are swept by rows of C (see
 * gemm_block). */
#ifndef GEMM_ROWS_OUTER_MAX_FLOATS
#define GEMM_ROWS_OUTER_MAX_FLOATS 65536
#endif

/* The micro-kernel call for register tile (ir, jr) of the current block: B read in place
 * for a whole sliver when b_direct, else from the packed panel Bp. */
static inline void gemm_tile(const gemm_kernel *gk, int kc, const float *Ap, const float *B,
                             int64_t brs, const float *Bp, int b_direct, int ic, int mc,
                             int jc, int nc, int pk, int ir, int jr, float alpha, float beta,
                             float *C, int64_t ldc)
{
    const int MR = gk->mr, NR = gk->nr;
    const int mr = mc - ir * MR < MR ? mc - ir * MR : MR;
    const int nr = nc - jr * NR < NR ? nc - jr * NR : NR;
    const int in_place = b_direct && nr == NR;
    const float *bs = in_place ? B + (int64_t)pk * brs + jc + jr * NR : Bp + (int64_t)jr * NR * kc;
    gk->micro(kc, Ap + (int64_t)ir * MR * kc, bs, in_place ? brs : NR,
              C + (int64_t)(ic + ir * MR) * ldc + jc + jr * NR, ldc, mr, nr, alpha, beta);
}

/* One task: C[i0:i0+m, j0:j0+n] = alpha * op(A)[i0.., k0:k0+kl] @ op(B)[k0:k0+kl, j0..]
 * + beta * C, on the calling thread, as the Goto loop nest: GEMM_NC column panels, KC-long
 * K blocks (later blocks accumulate), the B panel packed once per block and reused by every
 * GEMM_MC row block of A (or read in place, GEMM_B_DIRECT_MAX_M). The summation order of a
 * C element does not depend on packing: the same products in the same p order. */
static void gemm_block(const gemm_kernel *gk, const float *A, int64_t ars, int64_t acs,
                       const float *B, int64_t brs, int64_t bcs, int i0, int m, int j0, int n,
                       int k0, int kl, float alpha, float beta, float *C, int64_t ldc)
{
    const int MR = gk->mr, NR = gk->nr;
    const int kc_max = kl < GEMM_KC ? kl : GEMM_KC;
    const int mc_max = m < GEMM_MC ? m : GEMM_MC, nc_max = n < GEMM_NC ? n : GEMM_NC;
    float *Ap = cpu_scratch(0, (size_t)((mc_max + MR - 1) / MR) * MR * kc_max);
    float *Bp = cpu_scratch(1, (size_t)((nc_max + NR - 1) / NR) * NR * kc_max);
    const int b_direct = bcs == 1 && m <= GEMM_B_DIRECT_MAX_M &&
                         kl * brs * (int64_t)sizeof(float) <= gemm_b_direct_max_bytes;
    /* A short K (a few channels) leaves the B panel small enough for L2: then sweep each
     * MR-row sliver of C across the panel, so C is written as MR sequential row streams (not
     * MR * (rows of the block) interleaved ones), which the store path and the prefetcher
     * follow when C is not in cache. */
    const int rows_outer = kc_max * (int64_t)nc_max <= GEMM_ROWS_OUTER_MAX_FLOATS;
    for (int jc = j0; jc < j0 + n; jc += GEMM_NC) {
        const int nc = j0 + n - jc < GEMM_NC ? j0 + n - jc : GEMM_NC;
        const int nj = (nc + NR - 1) / NR;
        for (int pc = 0; pc < kl; pc += GEMM_KC) {
            const int kc = kl - pc < GEMM_KC ? kl - pc : GEMM_KC;
            const float beta_k = pc == 0 ? beta : 1.0f;
            if (!b_direct)
                pack_b(B, brs, bcs, k0 + pc, kc, jc, nc, NR, Bp);
            else if (nc % NR)   /* the ragged last sliver still needs its zero padding */
                pack_b(B, brs, bcs, k0 + pc, kc, jc + (nj - 1) * NR, nc % NR, NR,
                       Bp + (int64_t)(nj - 1) * NR * kc);
            for (int ic = i0; ic < i0 + m; ic += GEMM_MC) {
                const int mc = i0 + m - ic < GEMM_MC ? i0 + m - ic : GEMM_MC;
                const int ni = (mc + MR - 1) / MR;
                pack_a(A, ars, acs, ic, mc, k0 + pc, kc, MR, Ap);
                if (rows_outer) {
                    for (int ir = 0; ir < ni; ++ir)
                        for (int jr = 0; jr < nj; ++jr)
                            gemm_tile(gk, kc, Ap, B, brs, Bp, b_direct, ic, mc, jc, nc, k0 + pc,
                                      ir, jr, alpha, beta_k, C, ldc);
                } else {
                    for (int jr = 0; jr < nj; ++jr)
                        for (int ir = 0; ir < ni; ++ir)
                            gemm_tile(gk, kc, Ap, B, brs, Bp, b_direct, ic, mc, jc, nc, k0 + pc,
                                      ir, jr, alpha, beta_k, C, ldc);
                }
            }
        }
    }
}

/* C[i0:i1, j0:j1] (leading dimension ldc) = sum over k in [k0, k0+kl) of A[i,k] * B[j,k]
 * (A [M,K] and B [N,K] row-major, both rows contiguous in k): dot products of a register block
 * of 4 rows of A by RJ rows of B per pass, so each load of B feeds four multiply-adds and each
 * load of A RJ. Each dot product keeps 16 lane sums (a constant-trip inner loop gcc
 * vectorizes, as in GEMM_MICRO_BODY), then adds the lanes in index order and the tail: a
 * fixed order that does not depend on RJ or on the block an element falls in, so every clone
 * sums alike. (A software prefetch of the next block's rows of B was slower on both hosts
 * measured, in cache and from DRAM.) Compiled per x86 target like the micro-kernels (the
 * runner is built without -march). */
#define GEMM_DOT_LANES 16

/* The RJ = 1 and RJ = 4 bodies share their setup and their lane and tail sums; only the
 * multiply-add loop differs (named accumulators, so gcc keeps them in registers). */
#define GEMM_DOT_ROWS_SETUP                                                                  \
    const int nr = i1 - i < 4 ? i1 - i : 4;   /* rows past nr repeat row i, unused */        \
    const float *restrict a0 = A + (int64_t)i * K + k0;                                      \
    const float *restrict a1 = nr > 1 ? a0 + K : a0;                                         \
    const float *restrict a2 = nr > 2 ? a0 + 2 * K : a0;                                     \
    const float *restrict a3 = nr > 3 ? a0 + 3 * K : a0;                                     \
    const float *restrict ar[4] = {a0, a1, a2, a3};

#define GEMM_DOT_COLS_SETUP(RJ)                                                              \
    const int nc = j1 - j < (RJ) ? j1 - j : (RJ);   /* likewise for rows of B */             \
    const float *restrict b0 = B + (int64_t)j * K + k0;                                      \
    const float *restrict b1 = nc > 1 ? b0 + K : b0;                                         \
    const float *restrict b2 = nc > 2 ? b0 + 2 * K : b0;                                     \
    const float *restrict b3 = nc > 3 ? b0 + 3 * K : b0;                                     \
    const float *restrict br[4] = {b0, b1, b2, b3};                                          \
    (void)b1; (void)b2; (void)b3;

#define GEMM_DOT_STORE(MADD, RJ, cacc)                                                       \
    for (int r = 0; r < nr; ++r)                                                             \
        for (int q = 0; q < nc; ++q) {                                                       \
            float s = 0.0f;                                                                  \
            for (int l = 0; l < GEMM_DOT_LANES; ++l) s += cacc[r * (RJ) + q][l];             \
            for (int t = p; t < kl; ++t) s = MADD(ar[r][t], br[q][t], s);                    \
            C[(int64_t)(i + r) * ldc + j + q] = s;                                           \
        }

#define GEMM_DOT_BODY_4X1(MADD)                                                              \
    for (int i = i0; i < i1; i += 4) {                                                       \
        GEMM_DOT_ROWS_SETUP                                                                  \
        for (int j = j0; j < j1; ++j) {                                                      \
            GEMM_DOT_COLS_SETUP(1)                                                           \
            float c0[GEMM_DOT_LANES] = {0.0f}, c1[GEMM_DOT_LANES] = {0.0f};                  \
            float c2[GEMM_DOT_LANES] = {0.0f}, c3[GEMM_DOT_LANES] = {0.0f};                  \
            int p = 0;                                                                       \
            for (; p + GEMM_DOT_LANES <= kl; p += GEMM_DOT_LANES)                            \
                for (int l = 0; l < GEMM_DOT_LANES; ++l) {                                   \
                    const float bv = b0[p + l];                                              \
                    c0[l] = MADD(a0[p + l], bv, c0[l]);                                      \
                    c1[l] = MADD(a1[p + l], bv, c1[l]);                                      \
                    c2[l] = MADD(a2[p + l], bv, c2[l]);                                      \
                    c3[l] = MADD(a3[p + l], bv, c3[l]);                                      \
                }                                                                            \
            float *cacc[4] = {c0, c1, c2, c3};                                               \
            GEMM_DOT_STORE(MADD, 1, cacc)                                                    \
        }                                                                                    \
    }

/* One row of B against the four rows of A: the accumulators c0q..c3q of column q. */
#define GEMM_DOT_MADD_COL(MADD, q)                                                           \
    {                                                                                        \
        const float bv = b##q[p + l];                                                        \
        c0##q[l] = MADD(a0[p + l], bv, c0##q[l]);                                            \
        c1##q[l] = MADD(a1[p + l], bv, c1##q[l]);                                            \
        c2##q[l] = MADD(a2[p + l], bv, c2##q[l]);                                            \
        c3##q[l] = MADD(a3[p + l], bv, c3##q[l]);                                            \
    }

#define GEMM_DOT_BODY_4X4(MADD)                                                              \
    for (int i = i0; i < i1; i += 4) {                                                       \
        GEMM_DOT_ROWS_SETUP                                                                  \
        for (int j = j0; j < j1; j += 4) {                                                   \
            GEMM_DOT_COLS_SETUP(4)                                                           \
            float c00[GEMM_DOT_LANES] = {0.0f}, c10[GEMM_DOT_LANES] = {0.0f};                \
            float c20[GEMM_DOT_LANES] = {0.0f}, c30[GEMM_DOT_LANES] = {0.0f};                \
            float c01[GEMM_DOT_LANES] = {0.0f}, c11[GEMM_DOT_LANES] = {0.0f};                \
            float c21[GEMM_DOT_LANES] = {0.0f}, c31[GEMM_DOT_LANES] = {0.0f};                \
            float c02[GEMM_DOT_LANES] = {0.0f}, c12[GEMM_DOT_LANES] = {0.0f};                \
            float c22[GEMM_DOT_LANES] = {0.0f}, c32[GEMM_DOT_LANES] = {0.0f};                \
            float c03[GEMM_DOT_LANES] = {0.0f}, c13[GEMM_DOT_LANES] = {0.0f};                \
            float c23[GEMM_DOT_LANES] = {0.0f}, c33[GEMM_DOT_LANES] = {0.0f};                \
            int p = 0;                                                                       \
            for (; p + GEMM_DOT_LANES <= kl; p += GEMM_DOT_LANES)                            \
                for (int l = 0; l < GEMM_DOT_LANES; ++l) {                                   \
                    GEMM_DOT_MADD_COL(MADD, 0)                                               \
                    GEMM_DOT_MADD_COL(MADD, 1)                                               \
                    GEMM_DOT_MADD_COL(MADD, 2)                                               \
                    GEMM_DOT_MADD_COL(MADD, 3)                                               \
                }                                                                            \
            float *cacc[16] = {c00, c01, c02, c03, c10, c11, c12, c13,                       \
                               c20, c21, c22, c23, c30, c31, c32, c33};                      \
            GEMM_DOT_STORE(MADD, 4, cacc)                                                    \
        }                                                                                    \
    }

typedef void (*gemm_dot_fn)(const float *A, const float *B, int64_t K, int i0, int i1, int j0,
                            int j1, int64_t k0, int kl, float *C, int64_t ldc);

/* Register blocks: 4 x 1 on the baseline's 16 xmm registers (the 4 accumulators fill them)
 * and with AVX2 (8 of 16 ymm; 4 x 2 would need all 16), 4 x 4 with AVX-512 (16 of 32 zmm). */
static void gemm_dot_generic(const float *A, const float *B, int64_t K, int i0, int i1, int j0,
                             int j1, int64_t k0, int kl, float *C, int64_t ldc)
{
    GEMM_DOT_BODY_4X1(MADD_NATIVE)
}

#ifdef GEMM_X86_DISPATCH
__attribute__((target(GEMM_AVX512_TARGET)))
static void gemm_dot_avx512(const float *A, const float *B, int64_t K, int i0, int i1, int j0,
                            int j1, int64_t k0, int kl, float *C, int64_t ldc)
{
    GEMM_DOT_BODY_4X4(MADD_FMA)
}

__attribute__((target("avx2,fma")))
static void gemm_dot_avx2(const float *A, const float *B, int64_t K, int i0, int i1, int j0,
                          int j1, int64_t k0, int kl, float *C, int64_t ldc)
{
    GEMM_DOT_BODY_4X1(MADD_FMA)
}
#endif

static gemm_dot_fn gemm_dot_pick(void)
{
#ifdef GEMM_X86_DISPATCH
    if (GEMM_X86_MAX >= 2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl"))
        return gemm_dot_avx512;
    if (GEMM_X86_MAX >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return gemm_dot_avx2;
#endif
    return gemm_dot_generic;
}

/* gemm_nt as dot products (gemm_dot_block) when C is small and K long (a conv's weight
 * gradient, C [OC, C*KH*KW], K = B*OH*OW): packing would copy far more than C holds. K is cut
 * into GEMM_KSPLIT chunks, computed in parallel with the rows of C, and summed in chunk
 * order: the split depends on the shape only, so results do not change with the thread
 * count. */
#ifndef GEMM_DOT_MIN_K
#define GEMM_DOT_MIN_K 2048
#endif
static int gemm_dot_fits(int trans_a, int trans_b, int M, int N, int K)
{
    return !trans_a && trans_b && K >= GEMM_DOT_MIN_K && (int64_t)M * N <= GEMM_KSPLIT_MAX_MN;
}

static void gemm_dot(int M, int N, int K, float alpha, const float *A, const float *B,
                     float beta, float *C)
{
    const int nk = (K + GEMM_KSPLIT - 1) / GEMM_KSPLIT;
    const int rb = 4, nrb = (M + rb - 1) / rb;      /* tasks: (4 rows of C) x (K chunk) */
    const int64_t mn = (int64_t)M * N;
    const gemm_dot_fn dot = gemm_dot_pick();
    float *part = malloc((size_t)nk * mn * sizeof(float));
    if (!part) {
        fprintf(stderr, "cpu_gemm: out of memory for %d partial products\n", nk);
        abort();
    }
#pragma omp parallel
    {
#pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < nrb * nk; ++t) {
            const int kb = t / nrb, i0 = (t % nrb) * rb;
            const int i1 = i0 + rb < M ? i0 + rb : M;
            const int64_t k0 = (int64_t)kb * GEMM_KSPLIT;
            const int kl = K - k0 < GEMM_KSPLIT ? (int)(K - k0) : GEMM_KSPLIT;
            dot(A, B, K, i0, i1, 0, N, k0, kl, part + kb * mn, N);
        }
#pragma omp for schedule(static)
        for (int64_t e = 0; e < mn; ++e) {
            float s = part[e];
            for (int kb = 1; kb < nk; ++kb) s += part[(int64_t)kb * mn + e];
            C[e] = beta == 0.0f ? alpha * s : alpha * s + beta * C[e];
        }
    }
    free(part);
}

/* ---- NT GEMM as register-blocked dot products ---------------------------------------- */
/* gemm_nt with a small op(A) and a K of a few hundred (a linear layer's forward pass:
 * C[B, O] = X[B, I] @ W[O, I]^T): both operands already have K contiguous, so the blocked
 * engine's packing of B^T (a strided gather of all of W, every step, since W changes every
 * step) costs about as much as the products. Here a tile of R x NC elements of C keeps one
 * L-lane vector of partial sums per element in registers while it walks K along R rows of A
 * and NC rows of B (each vector load of A feeds NC multiply-adds, each load of B R of them);
 * the K % L tail is one more step from zero-padded copies (element k = p + q in lane q);
 * then each element's lanes are summed by halves (lane l += lane l + L/2, then + L/4, ...,
 * + 1; L <= 16). A fixed order: each element is computed whole by one tile, whatever the
 * thread count. A column block of B (NC rows) stays in L1 while every row block of A passes
 * over it; A (at most GEMM_NTD_MAX_A floats) stays in L2. The last, partial row block of A
 * and column block of B are copied into zero-padded R x K and NC x K blocks first, so every
 * tile runs the same constant-trip loops (the padding's results are computed, not stored).
 * Plain C like the micro-kernels. */
typedef void (*gemm_ntd_tile_fn)(int K, const float *restrict a, const float *restrict b,
                                 float *restrict C, int64_t ldc, int nr, int nc, float alpha,
                                 float beta);

/* lane l += lane l + W of every sum of the tile, for W < L: one loop nest of constant trip
 * counts per W (gcc does not unroll a loop over W, and the folds then run through memory). */
#define GEMM_NTD_FOLD(R, NC, L, W)                                                           \
    if ((W) < (L))                                                                           \
        for (int r = 0; r < (R); ++r)                                                        \
            for (int c = 0; c < (NC); ++c)                                                   \
                for (int l = 0; l < ((W) < (L) ? (W) : 0); ++l)                              \
                    acc[r][c][l] += acc[r][c][l + (W)];
/* One tile: C[0:nr, 0:nc] (leading dimension ldc) = alpha * (R rows a) @ (NC rows b)^T
 * + beta * C, rows of a and b K apart; C is not read when beta == 0. */
#define GEMM_NTD_TILE_BODY(R, NC, L, MADD)                                                   \
    float acc[R][NC][L] = {{{0.0f}}};                                                        \
    int p = 0;                                                                               \
    for (; p + (L) <= K; p += (L))                                                           \
        for (int r = 0; r < (R); ++r)                                                        \
            for (int c = 0; c < (NC); ++c)                                                   \
                for (int l = 0; l < (L); ++l)                                                \
                    acc[r][c][l] = MADD(a[(int64_t)r * K + p + l], b[(int64_t)c * K + p + l], \
                                        acc[r][c][l]);                                       \
    if (p < K) { /* the K % L tail: one more step from zero-padded copies, lane q = k p+q */ \
        float at[R][L] = {{0.0f}}, bt[NC][L] = {{0.0f}};                                     \
        for (int r = 0; r < (R); ++r)                                                        \
            for (int q = 0; q < K - p; ++q) at[r][q] = a[(int64_t)r * K + p + q];            \
        for (int c = 0; c < (NC); ++c)                                                       \
            for (int q = 0; q < K - p; ++q) bt[c][q] = b[(int64_t)c * K + p + q];            \
        for (int r = 0; r < (R); ++r)                                                        \
            for (int c = 0; c < (NC); ++c)                                                   \
                for (int l = 0; l < (L); ++l)                                                \
                    acc[r][c][l] = MADD(at[r][l], bt[c][l], acc[r][c][l]);                   \
    }                                                                                        \
    GEMM_NTD_FOLD(R, NC, L, 8) GEMM_NTD_FOLD(R, NC, L, 4)                                   \
    GEMM_NTD_FOLD(R, NC, L, 2) GEMM_NTD_FOLD(R, NC, L, 1)                                   \
    for (int r = 0; r < nr; ++r)                                                             \
        for (int c = 0; c < nc; ++c) {                                                       \
            const float t = acc[r][c][0];                                                    \
            float *restrict y = C + r * ldc + c;                                             \
            *y = beta == 0.0f ? alpha * t : alpha * t + beta * *y;                           \
        }

/* The AVX-512 tile: 4 x 6 sums of 16 lanes (24 of the 32 zmm registers, plus 4 rows of A
 * and one of B; gcc 12 keeps them all in registers through the K loop). */
#ifndef GEMM_NTD_R
#define GEMM_NTD_R 4
#endif
#ifndef GEMM_NTD_C
#define GEMM_NTD_C 6
#endif
#ifdef GEMM_X86_DISPATCH
__attribute__((target(GEMM_AVX512_TARGET)))
static void gemm_ntd_tile_avx512(int K, const float *restrict a, const float *restrict b,
                                 float *restrict C, int64_t ldc, int nr, int nc, float alpha,
                                 float beta)
{
    GEMM_NTD_TILE_BODY(GEMM_NTD_R, GEMM_NTD_C, 16, MADD_FMA)
}
#endif

typedef struct {
    int r, nc;   /* tile: r rows of A by nc rows of B */
    gemm_ntd_tile_fn tile;   /* NULL: no tile for this CPU, the blocked engine runs */
} gemm_ntd_kernel;

/* The AVX-512 tile where the CPU has it. AVX2 (3 x 4 of 8 lanes, 2 x 4, 3 x 3, 2 x 5) and
 * baseline tiles were slower than the blocked engine at 32 x 256 x 784 on this project's
 * AMD EPYC (Zen 4) host, so those clones keep the engine. */
static gemm_ntd_kernel gemm_ntd_pick(void)
{
#ifdef GEMM_X86_DISPATCH
    if (GEMM_X86_MAX >= 2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl"))
        return (gemm_ntd_kernel){GEMM_NTD_R, GEMM_NTD_C, gemm_ntd_tile_avx512};
#endif
    return (gemm_ntd_kernel){1, 1, NULL};
}

/* gemm_nt takes this path for K in [GEMM_NTD_MIN_K, GEMM_DOT_MIN_K) (a longer K is
 * gemm_dot's, split in chunks) and an A of at most GEMM_NTD_MAX_A floats (L2). */
#ifndef GEMM_NTD_MIN_K
#define GEMM_NTD_MIN_K 128
#endif
#ifndef GEMM_NTD_MAX_A
#define GEMM_NTD_MAX_A 65536
#endif
static int gemm_ntd_fits(const gemm_ntd_kernel *nk, int trans_a, int trans_b, int M, int K)
{
    return nk->tile && !trans_a && trans_b && K >= GEMM_NTD_MIN_K && K < GEMM_DOT_MIN_K &&
           (int64_t)M * K <= GEMM_NTD_MAX_A;
}

/* rows [r0, r0+n) of X [., K] into dst [R, K], rows past n zero. */
static void copy_rows_padded(const float *X, int K, int r0, int n, int R, float *dst)
{
    memcpy(dst, X + (int64_t)r0 * K, (size_t)n * K * sizeof(float));
    memset(dst + (int64_t)n * K, 0, (size_t)(R - n) * K * sizeof(float));
}

/* C = alpha * A @ B^T + beta * C by tiles: tasks of whole column blocks, about 2 per thread;
 * within a task each column block meets every row block. */
static void gemm_ntd(const gemm_ntd_kernel *nk, int M, int N, int K, float alpha,
                     const float *A, const float *B, float beta, float *C)
{
    const int R = nk->r, NC = nk->nc;
    const int mfull = M / R * R, nfull = N / NC * NC;
    /* the zero-padded edge blocks, read by every task */
    float *edge = cpu_scratch(0, (size_t)(R + NC) * K);
    float *a_edge = edge, *b_edge = edge + (int64_t)R * K;
    if (mfull < M) copy_rows_padded(A, K, mfull, M - mfull, R, a_edge);
    if (nfull < N) copy_rows_padded(B, K, nfull, N - nfull, NC, b_edge);
    const int par = (int64_t)M * N * K > PAR_MIN;
    const int threads = par ? omp_get_max_threads() : 1;
    const int nblocks = (N + NC - 1) / NC;
    int tasks = threads > 1 ? 2 * threads : 1;
    if (tasks > nblocks) tasks = nblocks;
    const int per = (nblocks + tasks - 1) / tasks;
#pragma omp parallel for if (tasks > 1) schedule(dynamic, 1)
    for (int t = 0; t < tasks; ++t) {
        const int jb1 = (t + 1) * per < nblocks ? (t + 1) * per : nblocks;
        for (int jb = t * per; jb < jb1; ++jb) {
            const int j = jb * NC, nc = N - j < NC ? N - j : NC;
            const float *b = j < nfull ? B + (int64_t)j * K : b_edge;
            for (int i = 0; i < M; i += R) {
                const float *a = i < mfull ? A + (int64_t)i * K : a_edge;
                nk->tile(K, a, b, C + (int64_t)i * N + j, N, M - i < R ? M - i : R, nc, alpha,
                        beta);
            }
        }
    }
}

/* ---- TN GEMM with a short K, B read in place ------------------------------------------- */
/* gemm_tn with K <= GEMM_TNS_MAX_K (a linear layer's weight gradient, dW[O, I] =
 * dY[B, O]^T @ X[B, I] with K = the batch; a convolution's column gradient, K = its output
 * channels): every element of C is a short sum, so the blocked engine's packing of B (a copy
 * of all of it, per call) and of A (a transpose) is a large part of the work. Here both stay
 * where they are: for k = 0, 1, ..., K-1 a tile of R x NC elements of C adds A[k, i:i+R]
 * (R contiguous floats, each broadcast) times B[k, j:j+NC] (NC contiguous floats, NC/16
 * vector loads) into register accumulators, then stores alpha * acc (+ beta * C; C is not
 * read when beta == 0). That is the engine's micro-kernel order (one K block: K <= GEMM_KC):
 * a zero sum, then one multiply-add per k in k order, so results are the engine's bit for
 * bit, at any thread count (each element is computed whole by one tile). Tiles are
 * GEMM_TNS_R rows by 16, 32, ..., GEMM_TNS_V * 16 columns: C's columns are cut into blocks of
 * equal whole vectors (the last one narrower where they do not divide). A tile past the last
 * row of C or past its last column in a partial vector reads zero-padded copies of its
 * columns of A and B and writes a scratch tile, nr x nc of which are copied to C, so every
 * tile runs the same constant-trip loops (gcc keeps the accumulators in registers through the
 * K loop). Plain C like the micro-kernels. */
typedef void (*gemm_tns_tile_fn)(int K, const float *restrict a, int64_t lda,
                                 const float *restrict b, int64_t ldb, float *restrict C,
                                 int64_t ldc, float alpha, float beta);

/* A whole tile whose sums are the gradient of W[0:R, 0:NC] (V alike, leading dimension ldw),
 * applied at once by sgd_update's rule (cpu_gemm_tn_sgd). */
typedef void (*gemm_tns_sgd_fn)(int K, const float *restrict a, int64_t lda,
                                const float *restrict b, int64_t ldb, float *restrict W,
                                float *restrict V, int64_t ldw, float lr, float momentum,
                                float wd);

/* One whole tile: C[0:R, 0:NC] (leading dimension ldc) = alpha * acc + beta * C; BETA0 (a
 * constant): beta is 0 and C is not read. k = 0 starts from a zero sum as a multiply-add
 * (K >= 1), so acc needs no zeroing pass through memory. */
#define GEMM_TNS_SUMS(R, NC, MADD)                                                            \
    float acc[R][NC];                                                                        \
    for (int r = 0; r < (R); ++r)                                                            \
        for (int c = 0; c < (NC); ++c) acc[r][c] = MADD(a[r], b[c], 0.0f);                   \
    for (int p = 1; p < K; ++p) {                                                            \
        const float *restrict ak = a + (int64_t)p * lda;                                     \
        const float *restrict bk = b + (int64_t)p * ldb;                                     \
        for (int r = 0; r < (R); ++r)                                                        \
            for (int c = 0; c < (NC); ++c) acc[r][c] = MADD(ak[r], bk[c], acc[r][c]);        \
    }
#define GEMM_TNS_TILE_BODY(R, NC, MADD, BETA0)                                               \
    GEMM_TNS_SUMS(R, NC, MADD)                                                               \
    for (int r = 0; r < (R); ++r)                                                            \
        for (int c = 0; c < (NC); ++c)                                                       \
            C[r * ldc + c] = (BETA0) ? alpha * acc[r][c]                                     \
                                     : alpha * acc[r][c] + beta * C[r * ldc + c];

/* The SGD tile: sgd_update's step (sgd_step_body's operations in its order) on W and V from
 * the sums still in registers, so the gradient is never stored. */
#define GEMM_TNS_SGD_BODY(R, NC, MADD)                                                       \
    GEMM_TNS_SUMS(R, NC, MADD)                                                               \
    for (int r = 0; r < (R); ++r)                                                            \
        for (int c = 0; c < (NC); ++c) {                                                     \
            const int64_t e = r * ldw + c;                                                   \
            const float g = acc[r][c] + wd * W[e];                                           \
            const float v = momentum * V[e] + g;                                             \
            V[e] = v;                                                                        \
            W[e] -= lr * v;                                                                  \
        }

/* AVX-512: 4 rows by up to 5 vectors of 16 (20 accumulators). At 256 x 784 x 32 on this
 * project's AMD EPYC (Zen 4) host, one thread: 4 x 80 0.136 ms, 4 x 64 0.142, 8 x 48 0.141,
 * 6 x 64 and 4 x 96 0.147 or more (4 x 112 and 3 x 128 were slower still), the blocked
 * engine 0.148. */
#define GEMM_TNS_R 4
#define GEMM_TNS_V 5
#ifdef GEMM_X86_DISPATCH
#define GEMM_TNS_TILES_AVX512(NV)                                                            \
    __attribute__((target(GEMM_AVX512_TARGET))) static void gemm_tns_tile##NV##_avx512(      \
        int K, const float *restrict a, int64_t lda, const float *restrict b, int64_t ldb,   \
        float *restrict C, int64_t ldc, float alpha, float beta)                             \
    {                                                                                        \
        GEMM_TNS_TILE_BODY(GEMM_TNS_R, 16 * (NV), MADD_FMA, 0)                               \
    }                                                                                        \
    __attribute__((target(GEMM_AVX512_TARGET))) static void gemm_tns_tile##NV##_beta0_avx512( \
        int K, const float *restrict a, int64_t lda, const float *restrict b, int64_t ldb,   \
        float *restrict C, int64_t ldc, float alpha, float beta)                             \
    {                                                                                        \
        (void)beta;                                                                          \
        GEMM_TNS_TILE_BODY(GEMM_TNS_R, 16 * (NV), MADD_FMA, 1)                               \
    }                                                                                        \
    __attribute__((target(GEMM_AVX512_TARGET))) static void gemm_tns_sgd##NV##_avx512(       \
        int K, const float *restrict a, int64_t lda, const float *restrict b, int64_t ldb,   \
        float *restrict W, float *restrict V, int64_t ldw, float lr, float momentum,         \
        float wd)                                                                            \
    {                                                                                        \
        GEMM_TNS_SGD_BODY(GEMM_TNS_R, 16 * (NV), MADD_FMA)                                   \
    }
GEMM_TNS_TILES_AVX512(1)
GEMM_TNS_TILES_AVX512(2)
GEMM_TNS_TILES_AVX512(3)
GEMM_TNS_TILES_AVX512(4)
GEMM_TNS_TILES_AVX512(5)
#endif

typedef struct {
    int r, lanes, v;   /* tiles: r rows by lanes * (1 .. v) columns */
    /* tile[w-1][beta == 0]: the tile of w vectors; NULL: none for this CPU, the blocked
     * engine runs */
    gemm_tns_tile_fn tile[GEMM_TNS_V][2];
    gemm_tns_sgd_fn sgd[GEMM_TNS_V];   /* the SGD tile of w vectors */
} gemm_tns_kernel;

/* The AVX-512 tiles where the CPU has them; the AVX2 and baseline clones keep the blocked
 * engine (unmeasured here: this path was tuned on AVX-512 only), and cpu_gemm_tn_sgd its
 * gradient in a scratch array. */
static gemm_tns_kernel gemm_tns_pick(void)
{
#ifdef GEMM_X86_DISPATCH
    if (GEMM_X86_MAX >= 2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl"))
        return (gemm_tns_kernel){GEMM_TNS_R, 16, GEMM_TNS_V,
                                 {{gemm_tns_tile1_avx512, gemm_tns_tile1_beta0_avx512},
                                  {gemm_tns_tile2_avx512, gemm_tns_tile2_beta0_avx512},
                                  {gemm_tns_tile3_avx512, gemm_tns_tile3_beta0_avx512},
                                  {gemm_tns_tile4_avx512, gemm_tns_tile4_beta0_avx512},
                                  {gemm_tns_tile5_avx512, gemm_tns_tile5_beta0_avx512}},
                                 {gemm_tns_sgd1_avx512, gemm_tns_sgd2_avx512, gemm_tns_sgd3_avx512,
                                  gemm_tns_sgd4_avx512, gemm_tns_sgd5_avx512}};
#endif
    return (gemm_tns_kernel){1, 1, 1, {{NULL, NULL}}, {NULL}};
}

#ifndef GEMM_TNS_MAX_K
#define GEMM_TNS_MAX_K 64
#endif
static int gemm_tns_fits(const gemm_tns_kernel *tk, int trans_a, int trans_b, int K)
{
    return tk->tile[0][0] && trans_a && !trans_b && K <= GEMM_TNS_MAX_K && K <= GEMM_KC;
}

/* columns [c0, c0+n) of the K rows of X (row stride ld) into dst [K, W], columns past n
 * zero. */
static void copy_cols_padded(const float *X, int64_t ld, int K, int c0, int n, int W,
                             float *restrict dst)
{
    for (int p = 0; p < K; ++p) {
        memcpy(dst + (int64_t)p * W, X + (int64_t)p * ld + c0, (size_t)n * sizeof(float));
        memset(dst + (int64_t)p * W + n, 0, (size_t)(W - n) * sizeof(float));
    }
}

/* An SGD step fused into gemm_tns (cpu_gemm_tn_sgd): each tile's sums are the gradient g of
 * W[i:i+nr, j:j+nc] (W, V: [M, N]), applied by sgd_update's rule as soon as they are in. */
typedef struct {
    float lr, momentum, wd;
    float *W, *V;
} tns_sgd;

static void sgd_tile(const tns_sgd *sgd, const float *t, int ldt, int N, int i, int j, int nr,
                     int nc);

/* The tile at C[i, j] (nr <= R rows, nc columns, of w vectors): in place when whole, else
 * from the padded copies a_edge (K x R, the last rows' columns of A) and b_pad (K x w*lanes,
 * the last columns of B) into a scratch tile (holding C's values first when beta != 0), of
 * which nr x nc are copied to C. With sgd (alpha 1, beta 0, C unused) a whole tile is the
 * SGD tile's, an edge tile goes through the scratch tile into sgd_tile. */
static void gemm_tns_tile_at(const gemm_tns_kernel *tk, int NC, int M, int N, int K,
                             float alpha, const float *A, const float *B, float beta, float *C,
                             int i, int j, const float *a_edge, const float *b_pad,
                             const tns_sgd *sgd)
{
    const int R = tk->r, L = tk->lanes;
    const int nr = M - i < R ? M - i : R;
    const int nc = N - j < NC ? N - j : NC;
    const int w = (nc + L - 1) / L;
    const gemm_tns_tile_fn tile = tk->tile[w - 1][sgd || beta == 0.0f];
    float *Cij = sgd ? NULL : C + (int64_t)i * N + j;
    if (sgd && nr == R && nc == w * L) {
        const int64_t e = (int64_t)i * N + j;
        tk->sgd[w - 1](K, A + i, M, B + j, N, sgd->W + e, sgd->V + e, N, sgd->lr,
                       sgd->momentum, sgd->wd);
        return;
    }
    if (!sgd && nr == R && nc == w * L) {
        tile(K, A + i, M, B + j, N, Cij, N, alpha, beta);
        return;
    }
    float *t = cpu_scratch(1, (size_t)R * w * L);
    if (!sgd && beta != 0.0f)
        for (int r = 0; r < nr; ++r)
            memcpy(t + (int64_t)r * w * L, Cij + (int64_t)r * N, (size_t)nc * sizeof(float));
    tile(K, nr == R ? A + i : a_edge, nr == R ? M : R, nc == w * L ? B + j : b_pad,
         nc == w * L ? N : w * L, t, w * L, alpha, beta);
    if (sgd) {
        sgd_tile(sgd, t, w * L, N, i, j, nr, nc);
        return;
    }
    for (int r = 0; r < nr; ++r)
        memcpy(Cij + (int64_t)r * N, t + (int64_t)r * w * L, (size_t)nc * sizeof(float));
}

/* C = alpha * A^T @ B + beta * C by tiles. Tasks are ranges of row blocks (about 2 per
 * thread; of column blocks when there are too few row blocks). A task takes its columns in
 * panels of about GEMM_ROWS_OUTER_MAX_FLOATS / K (K x the panel of B stays in L2) and sweeps
 * each row block across a panel, so C is written as R sequential row streams. */
static void gemm_tns(const gemm_tns_kernel *tk, int M, int N, int K, float alpha,
                     const float *A, const float *B, float beta, float *C, const tns_sgd *sgd)
{
    /* column blocks of equal whole vectors, at most v each (N = 256: 4 x 64, not
     * 3 x 80 + 16) */
    const int R = tk->r, nv = (N + tk->lanes - 1) / tk->lanes;   /* vectors across C */
    const int nb = (nv + tk->v - 1) / tk->v;                      /* column blocks */
    const int NC = (nv + nb - 1) / nb * tk->lanes;
    const int mfull = M / R * R, nfull = N / NC * NC;
    /* the zero-padded edges, read by every task: the last rows' columns of A (K x R) and
     * the last, partial block's columns of B (K x NC) */
    float *edge = cpu_scratch(0, (size_t)K * (R + NC));
    float *a_edge = edge, *b_pad = edge + (int64_t)K * R;
    if (mfull < M) copy_cols_padded(A, M, K, mfull, M - mfull, R, a_edge);
    if (nfull < N) {
        const int w = (N - nfull + tk->lanes - 1) / tk->lanes * tk->lanes;
        copy_cols_padded(B, N, K, nfull, N - nfull, w, b_pad);
    }
    const int par = (int64_t)M * N * K > PAR_MIN;
    const int threads = par ? omp_get_max_threads() : 1;
    const int mblocks = (M + R - 1) / R, nblocks = (N + NC - 1) / NC;
    const int goal = threads > 1 ? 2 * threads : 1;
    const int split_rows = mblocks >= goal || mblocks >= nblocks;
    const int blocks = split_rows ? mblocks : nblocks;
    const int tasks = goal < blocks ? goal : blocks;
    const int per = (blocks + tasks - 1) / tasks;
    int panel = GEMM_ROWS_OUTER_MAX_FLOATS / K / NC;   /* column blocks per panel */
    if (panel < 1) panel = 1;
#pragma omp parallel for if (tasks > 1) schedule(dynamic, 1)
    for (int t = 0; t < tasks; ++t) {
        const int b0 = t * per, b1 = (t + 1) * per < blocks ? (t + 1) * per : blocks;
        const int ib0 = split_rows ? b0 : 0, ib1 = split_rows ? b1 : mblocks;
        const int jb0 = split_rows ? 0 : b0, jb1 = split_rows ? nblocks : b1;
        for (int pb = jb0; pb < jb1; pb += panel) {
            const int pb1 = pb + panel < jb1 ? pb + panel : jb1;
            for (int ib = ib0; ib < ib1; ++ib)
                for (int jb = pb; jb < pb1; ++jb)
                    gemm_tns_tile_at(tk, NC, M, N, K, alpha, A, B, beta, C, ib * R, jb * NC,
                                     a_edge, b_pad, sgd);
        }
    }
}

/* C[M,N] = alpha * op(A) @ op(B) + beta * C with op = transpose when trans_* is set; all
 * row-major and dense (A is [M,K] or [K,M], B is [K,N] or [N,K]). beta == 0: C is not read.
 * The work is cut into tasks of (a row range) x (a column range) x (a K chunk, see
 * GEMM_KSPLIT), about 2 per thread; each task packs its own operands into per-thread buffers,
 * so threads never wait on each other inside a GEMM. Every C element
 * is summed in the same order whatever the thread count. One thread below PAR_MIN
 * multiply-adds. */
void cpu_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              const float *B, float beta, float *C)
{
    if (gemm_dot_fits(trans_a, trans_b, M, N, K) && (int64_t)M * N * K > PAR_MIN) {
        gemm_dot(M, N, K, alpha, A, B, beta, C);
        return;
    }
    const gemm_ntd_kernel ntd = gemm_ntd_pick();
    if (gemm_ntd_fits(&ntd, trans_a, trans_b, M, K)) {
        gemm_ntd(&ntd, M, N, K, alpha, A, B, beta, C);
        return;
    }
    const gemm_tns_kernel tns = gemm_tns_pick();
    if (gemm_tns_fits(&tns, trans_a, trans_b, K)) {
        gemm_tns(&tns, M, N, K, alpha, A, B, beta, C, NULL);
        return;
    }
    const gemm_kernel gk = gemm_pick();   /* a few loads of cpu feature bits */
    gemm_b_direct_init();
    const int MR = gk.mr, NR = gk.nr;
    const int64_t ars = trans_a ? 1 : K, acs = trans_a ? M : 1;
    const int64_t brs = trans_b ? 1 : N, bcs = trans_b ? K : 1;
    const int64_t work = (int64_t)M * N * K;
    const int par = work > PAR_MIN;
    const int threads = par ? omp_get_max_threads() : 1;
    const int nk = (K > GEMM_KSPLIT && (int64_t)M * N <= GEMM_KSPLIT_MAX_MN)
                       ? (K + GEMM_KSPLIT - 1) / GEMM_KSPLIT : 1;
    /* A grid of nmb x nnb tasks per K chunk, about 2 per thread: each task packs its rows of
     * A once per column panel and its columns of B once, so the grid minimizing the packed
     * total (nnb * M + nmb * N, in units of K) is chosen; ranges are whole MR / NR tiles. */
    const int goal = threads > 1 ? (2 * threads + nk - 1) / nk : 1;
    const int max_mb = (M + MR - 1) / MR, max_nb = (N + NR - 1) / NR;
    int nmb = 1, nnb = 1;
    int64_t best = -1;
    for (int a = 1; a <= goal && a <= max_mb; ++a) {
        int c = (goal + a - 1) / a;
        if (c > max_nb) c = max_nb;
        const int64_t cost = (int64_t)c * M + (int64_t)a * N;
        if (best < 0 || cost < best) {
            best = cost;
            nmb = a;
            nnb = c;
        }
    }
    const int mb = ((M + nmb - 1) / nmb + MR - 1) / MR * MR;
    const int nb = ((N + nnb - 1) / nnb + NR - 1) / NR * NR;
    nmb = (M + mb - 1) / mb;
    nnb = (N + nb - 1) / nb;
    const int tasks = nmb * nnb * nk;
    float *part = NULL;   /* nk partial products [nk][M][N] when K is split */
    if (nk > 1) {
        part = malloc((size_t)nk * M * N * sizeof(float));
        if (!part) {
            fprintf(stderr, "cpu_gemm: out of memory for %d partial products\n", nk);
            abort();
        }
    }
#pragma omp parallel for if (par && tasks > 1) schedule(dynamic, 1)
    for (int t = 0; t < tasks; ++t) {
        const int kb = t / (nmb * nnb), r = t % (nmb * nnb);
        const int ic = (r / nnb) * mb, jc = (r % nnb) * nb;
        const int mc = M - ic < mb ? M - ic : mb, nc = N - jc < nb ? N - jc : nb;
        const int k0 = kb * GEMM_KSPLIT;
        const int kl = nk > 1 ? (K - k0 < GEMM_KSPLIT ? K - k0 : GEMM_KSPLIT) : K;
        if (nk > 1)
            gemm_block(&gk, A, ars, acs, B, brs, bcs, ic, mc, jc, nc, k0, kl, 1.0f, 0.0f,
                       part + (int64_t)kb * M * N, N);
        else
            gemm_block(&gk, A, ars, acs, B, brs, bcs, ic, mc, jc, nc, 0, K, alpha, beta, C, N);
    }
    if (nk > 1) {   /* C = alpha * (sum of the chunks, in chunk order) + beta * C */
        const int64_t mn = (int64_t)M * N;
#pragma omp parallel for if (mn * nk > PAR_MIN) schedule(static)
        for (int64_t e = 0; e < mn; ++e) {
            float s = part[e];
            for (int kb = 1; kb < nk; ++kb) s += part[(int64_t)kb * mn + e];
            C[e] = beta == 0.0f ? alpha * s : alpha * s + beta * C[e];
        }
        free(part);
    }
}

/* ---- GEMM ---------------------------------------------------------------------------- */

static int gemm_common(const kctx *k, int trans_a, int trans_b)
{
    CHECK(kneed_min(k, 0, 1));
    CHECK(kneed_min(k, 1, 1));
    CHECK(kneed_min(k, 2, 1));
    const int64_t M = I(0), N = I(1), K = I(2);
    CHECK(kneed_numel(k, 4, M * K, trans_a ? "K*M" : "M*K"));
    CHECK(kneed_numel(k, 5, K * N, trans_b ? "N*K" : "K*N"));
    CHECK(kneed_numel(k, 7, M * N, "M*N"));
    cpu_gemm(trans_a, trans_b, I(0), I(1), I(2), F(3), PF(4), PF(5), F(6), PF(7));
    return 0;
}

CPU_KERNEL(gemm_nn, iiifttft) { return gemm_common(k, 0, 0); }
CPU_KERNEL(gemm_nt, iiifttft) { return gemm_common(k, 0, 1); }
CPU_KERNEL(gemm_tn, iiifttft) { return gemm_common(k, 1, 0); }

/* ---- element-wise -------------------------------------------------------------------- */

CPU_KERNEL(bias_add, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t C = I(1), HW = I(2), n = (int64_t)I(0) * C * HW;
    CHECK(kneed_numel(k, 3, n, "B*C*HW"));
    CHECK(kneed_numel(k, 4, C, "C"));
    float *Y = PF(3);
    const float *bias = PF(4);
    const int64_t B = I(0);
    if (HW == 1) {   /* a linear layer: each image's row of C outputs plus the bias row */
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
        for (int64_t b = 0; b < B; ++b) {
            float *restrict y = Y + b * C;
            for (int64_t c = 0; c < C; ++c) y[c] += bias[c];
        }
        return 0;
    }
#pragma omp parallel for collapse(2) if (n > PAR_MIN) schedule(static)
    for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) {
            const float bc = bias[c];
            float *restrict y = Y + (b * C + c) * HW;
            for (int64_t j = 0; j < HW; ++j) y[j] += bc;
        }
    return 0;
}

/* lane[j % ROW_SUM_LANES] += x[j] for j < n. bias_grad sums each channel in these interleaved
 * partial sums (images in order) and adds the lanes in lane order at the end: a fixed order
 * the compiler vectorizes, where one running sum would wait on the add's latency at every
 * element. */
#define ROW_SUM_LANES 16
static void lanes_add_row(float *restrict lane, const float *restrict x, int64_t n)
{
    int64_t j = 0;
    for (; j + ROW_SUM_LANES <= n; j += ROW_SUM_LANES)
        for (int l = 0; l < ROW_SUM_LANES; ++l) lane[l] += x[j + l];
    for (int l = 0; l < n - j; ++l) lane[l] += x[j + l];
}

CPU_KERNEL(bias_grad, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t B = I(0), C = I(1), HW = I(2);
    CHECK(kneed_numel(k, 3, B * C * HW, "B*C*HW"));
    CHECK(kneed_numel(k, 4, C, "C"));
    const float *dY = PF(3);
    float *db = PF(4);
    if (HW == 1) {
        /* A linear layer's bias: db[c] = ((0 + dY[0,c]) + dY[1,c]) + ..., image by image as
         * below, but summed a row of dY at a time (a vector of channels per add) instead of
         * one channel at a time down a column; threads take channel ranges. */
#pragma omp parallel if (B * C > PAR_MIN)
        {
            const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            const int64_t c0 = C * t / nt, c1 = C * (t + 1) / nt;
            for (int64_t c = c0; c < c1; ++c) db[c] = 0.0f;
            for (int64_t b = 0; b < B; ++b) {
                const float *restrict y = dY + b * C;
                for (int64_t c = c0; c < c1; ++c) db[c] += y[c];
            }
        }
        return 0;
    }
#pragma omp parallel for if (B * C * HW > PAR_MIN) schedule(static)
    for (int64_t c = 0; c < C; ++c) {
        float acc = 0.0f;
        if (HW < ROW_SUM_LANES) {   /* a short plane (HW < ROW_SUM_LANES): no lanes to fill */
            for (int64_t b = 0; b < B; ++b)
                for (int64_t j = 0; j < HW; ++j) acc += dY[(b * C + c) * HW + j];
        } else {
            float lane[ROW_SUM_LANES] = {0.0f};
            for (int64_t b = 0; b < B; ++b) lanes_add_row(lane, dY + (b * C + c) * HW, HW);
            for (int l = 0; l < ROW_SUM_LANES; ++l) acc += lane[l];
        }
        db[c] = acc;
    }
    return 0;
}

CPU_KERNEL(relu_fwd, itt)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    CHECK(kneed_numel(k, 1, n, "n"));
    CHECK(kneed_numel(k, 2, n, "n"));
    const float *X = PF(1);
    float *Y = PF(2);  /* may alias X */
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
    return 0;
}

CPU_KERNEL(relu_bwd, ittt)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    for (int i = 1; i <= 3; ++i) CHECK(kneed_numel(k, i, n, "n"));
    const float *Y = PF(1), *dY = PF(2);
    float *dX = PF(3);  /* may alias dY */
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    /* dY is read whatever the mask, so the select needs no branch and vectorizes. */
    for (int64_t i = 0; i < n; ++i) {
        const float g = dY[i];
        dX[i] = Y[i] > 0.0f ? g : 0.0f;
    }
    return 0;
}

/* sgd_update's step on elements [i0, i1): g = dW + wd * W, V = momentum * V + g,
 * W -= lr * V, separate multiplies and adds (-std=c11: no contraction into FMAs), so every
 * x86 clone gives the same bits; they differ only in vector width (the runner is built
 * without -march, so the plain one is 4 lanes of SSE2). */
static inline CPU_ISA_BODY void sgd_step_body(int64_t i0, int64_t i1, float lr, float momentum,
                                              float wd, float *restrict W,
                                              const float *restrict dW, float *restrict V)
{
    for (int64_t i = i0; i < i1; ++i) {
        const float g = dW[i] + wd * W[i];
        const float v = momentum * V[i] + g;
        V[i] = v;
        W[i] -= lr * v;
    }
}
CPU_ISA_CLONES(sgd_step, (int64_t i0, int64_t i1, float lr, float momentum, float wd,
                          float *restrict W, const float *restrict dW, float *restrict V),
               (i0, i1, lr, momentum, wd, W, dW, V))

/* Rows [i, i+nr) x columns [j, j+nc) of sgd's W and V (row length N) take sgd_update's step
 * with the gradient tile t (row stride ldt). */
static void sgd_tile(const tns_sgd *sgd, const float *t, int ldt, int N, int i, int j, int nr,
                     int nc)
{
    void (*step)(int64_t, int64_t, float, float, float, float *restrict, const float *restrict,
                 float *restrict) = CPU_ISA_PICK(sgd_step);
    for (int r = 0; r < nr; ++r) {
        const int64_t e = (int64_t)(i + r) * N + j;
        step(0, nc, sgd->lr, sgd->momentum, sgd->wd, sgd->W + e, t + (int64_t)r * ldt,
             sgd->V + e);
    }
}

void cpu_gemm_tn_sgd(int M, int N, int K, const float *A, const float *B, float lr,
                     float momentum, float wd, float *W, float *V)
{
    const tns_sgd sgd = {lr, momentum, wd, W, V};
    const gemm_tns_kernel tns = gemm_tns_pick();
    if (gemm_tns_fits(&tns, 1, 0, K)) {
        gemm_tns(&tns, M, N, K, 1.0f, A, B, 0.0f, NULL, &sgd);
        return;
    }
    /* no short-K tiles for this K or CPU: the gradient into scratch, then one step */
    float *g = cpu_scratch(SCRATCH_GRADIENT, (size_t)M * N);
    cpu_gemm(1, 0, M, N, K, 1.0f, A, B, 0.0f, g);
    cpu_sgd_update((int64_t)M * N, lr, momentum, wd, W, g, V);
}

void cpu_sgd_update(int64_t n, float lr, float momentum, float wd, float *W, const float *dW,
                    float *V)
{
    void (*step)(int64_t, int64_t, float, float, float, float *restrict, const float *restrict,
                 float *restrict) = CPU_ISA_PICK(sgd_step);
#pragma omp parallel if (n > PAR_MIN)
    {   /* element ranges, one per thread (each element's step is independent) */
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        step(n * t / nt, n * (t + 1) / nt, lr, momentum, wd, W, dW, V);
    }
}

CPU_KERNEL(sgd_update, ifffttt)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    for (int i = 4; i <= 6; ++i) CHECK(kneed_numel(k, i, n, "n"));
    const float lr = F(1), momentum = F(2), wd = F(3);
    cpu_sgd_update(n, lr, momentum, wd, PF(4), PF(5), PF(6));
    return 0;
}

CPU_KERNEL(fill, ift)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    CHECK(kneed_numel(k, 2, n, "n"));
    const float value = F(1);
    float *X = PF(2);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) X[i] = value;
    return 0;
}

CPU_KERNEL(copy, itt)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    CHECK(kneed_numel(k, 1, n, "n"));
    CHECK(kneed_numel(k, 2, n, "n"));
    memmove(PF(2), PF(1), (size_t)n * sizeof(float));
    return 0;
}

/* ---- convolution helpers ------------------------------------------------------------- */

/* Checks the 12 int arguments shared by im2col and col2im, including
 * OH = (H + 2*pad - KH)/stride + 1 and OW likewise. */
static int conv_dims(const kctx *k)
{
    for (int i = 0; i < 6; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W KH KW */
    CHECK(kneed_min(k, 6, 1));                              /* stride */
    CHECK(kneed_min(k, 7, 0));                              /* pad */
    const int oh = (I(2) + 2 * I(7) - I(4)) / I(6) + 1, ow = (I(3) + 2 * I(7) - I(5)) / I(6) + 1;
    if (I(2) + 2 * I(7) < I(4) || I(8) != oh)
        return kfail(k, 8, "is %d; (H + 2*pad - KH)/stride + 1 = %d", I(8), oh);
    if (I(3) + 2 * I(7) < I(5) || I(9) != ow)
        return kfail(k, 9, "is %d; (W + 2*pad - KW)/stride + 1 = %d", I(9), ow);
    const int64_t ximg = (int64_t)I(0) * I(1) * I(2) * I(3);
    const int64_t ncol = (int64_t)I(1) * I(4) * I(5) * I(0) * I(8) * I(9);
    const int col_arg = strcmp(k->kernel, "im2col") == 0 ? 11 : 10;
    CHECK(kneed_numel(k, col_arg == 11 ? 10 : 11, ximg, "B*C*H*W"));
    CHECK(kneed_numel(k, col_arg, ncol, "C*KH*KW*B*OH*OW"));
    return 0;
}

/* Output columns [*lo, *hi) whose input column ow*stride - pad + kw lies in [0, W). */
static void valid_range(int OW, int W, int stride, int pad, int kw, int *lo, int *hi)
{
    const int first = pad - kw, last = W - 1 + pad - kw;   /* ow*stride in [first, last] */
    int l = first <= 0 ? 0 : (first + stride - 1) / stride;
    int h = last < 0 ? 0 : last / stride + 1;
    if (h > OW) h = OW;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* The geometry of one (kh, kw) tap of a convolution over one image plane: the output rows
 * [oh0, oh1) whose input row lies in the image, the output columns [lo, hi) whose input column
 * does, and the shift of a "same" convolution at stride 1 (OW == W, OH == H): there output
 * (oh, ow) reads input (oh + kh - pad, ow + kw - pad), flat index oh*W + ow + shift. */
typedef struct {
    int H, W, stride, pad, OH, OW, kh, kw;
    int oh0, oh1, lo, hi;
    int same;          /* stride 1, OW == W and OH == H */
    int64_t shift;     /* (kh - pad) * W + (kw - pad), for same */
} conv_tap;

static conv_tap conv_tap_of(int H, int W, int stride, int pad, int OH, int OW, int kh, int kw)
{
    conv_tap t = {H, W, stride, pad, OH, OW, kh, kw, 0, 0, 0, 0, 0, 0};
    valid_range(OH, H, stride, pad, kh, &t.oh0, &t.oh1);
    valid_range(OW, W, stride, pad, kw, &t.lo, &t.hi);
    t.same = stride == 1 && OW == W && OH == H;
    t.shift = (int64_t)(kh - pad) * W + (kw - pad);
    return t;
}

/* The flat range [*i0, *i1) of a same tap's output indices i = oh*OW + ow over its valid rows
 * whose shifted input index i + shift lies in the plane; the indices left out are edge
 * columns (input column outside the image). */
static void conv_tap_flat_range(const conv_tap *t, int64_t *i0, int64_t *i1)
{
    const int64_t n = (int64_t)t->H * t->W;
    *i0 = (int64_t)t->oh0 * t->OW;
    *i1 = (int64_t)t->oh1 * t->OW;
    if (*i0 < -t->shift) *i0 = -t->shift;
    if (*i1 > n - t->shift) *i1 = n - t->shift;
    if (*i1 < *i0) *i1 = *i0;
}

/* d[oh*OW + ow] = x[oh + kh - pad, ow + kw - pad] of one image plane x for a same tap, 0 where
 * that lies outside the image (one row of im2col's column matrix, one image): the valid rows
 * are one contiguous run of the shifted plane, copied at once; then the few edge columns,
 * which picked up a neighbouring row's value, and the rows outside the image are zeroed. Plain
 * loops, no memcpy/memset calls (the row-by-row copy of OW floats cost a call each). */
static inline CPU_ISA_BODY void im2col_same_body(const conv_tap *t, const float *restrict x,
                                                 float *restrict d)
{
    const int OW = t->OW, lo = t->lo, hi = t->hi;
    int64_t i0, i1;
    conv_tap_flat_range(t, &i0, &i1);
    for (int64_t i = 0; i < (int64_t)t->oh0 * OW; ++i) d[i] = 0.0f;
    for (int64_t i = (int64_t)t->oh1 * OW; i < (int64_t)t->OH * OW; ++i) d[i] = 0.0f;
    const float *restrict src = x + t->shift;
    for (int64_t i = i0; i < i1; ++i) d[i] = src[i];
    for (int oh = t->oh0; oh < t->oh1; ++oh) {
        float *restrict row = d + (int64_t)oh * OW;
        for (int ow = 0; ow < lo; ++ow) row[ow] = 0.0f;
        for (int ow = hi; ow < OW; ++ow) row[ow] = 0.0f;
    }
}

CPU_ISA_CLONES(im2col_same, (const conv_tap *t, const float *restrict x, float *restrict d),
               (t, x, d))

/* The same row of col for any other tap, row by row (memcpy of the interior at stride 1). */
static void im2col_rows(const conv_tap *t, const float *restrict x, float *restrict d)
{
    const int OW = t->OW, lo = t->lo, hi = t->hi;
    for (int oh = 0; oh < t->OH; ++oh) {
        float *restrict row = d + (int64_t)oh * OW;
        if (oh < t->oh0 || oh >= t->oh1) {
            memset(row, 0, (size_t)OW * sizeof(float));
            continue;
        }
        const int h = oh * t->stride - t->pad + t->kh;
        const float *restrict src = x + (int64_t)h * t->W - t->pad + t->kw;
        for (int ow = 0; ow < lo; ++ow) row[ow] = 0.0f;
        if (t->stride == 1)
            memcpy(row + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
        else
            for (int ow = lo; ow < hi; ++ow) row[ow] = src[ow * t->stride];
        for (int ow = hi; ow < OW; ++ow) row[ow] = 0.0f;
    }
}

CPU_KERNEL(im2col, iiiiiiiiiitt)
{
    CHECK(conv_dims(k));
    const int B = I(0), C = I(1), H = I(2), W = I(3), KH = I(4), KW = I(5), stride = I(6),
              pad = I(7), OH = I(8), OW = I(9);
    const float *X = PF(10);
    float *col = PF(11);
    const int64_t ncols = (int64_t)B * OH * OW, rows = (int64_t)C * KH * KW;
    void (*const same_copy)(const conv_tap *, const float *restrict, float *restrict) =
        CPU_ISA_PICK(im2col_same);
    /* One task per (row of col, image), images inner: each row of col is written as one
     * sequential run. */
#pragma omp parallel for if (rows * ncols > PAR_MIN) schedule(static)
    for (int64_t rb = 0; rb < rows * B; ++rb) {
        const int64_t r = rb / B;
        const int b = (int)(rb % B);
        const int kw = (int)(r % KW), kh = (int)(r / KW % KH), c = (int)(r / KW / KH);
        const conv_tap t = conv_tap_of(H, W, stride, pad, OH, OW, kh, kw);
        const float *x = X + ((int64_t)b * C + c) * H * W;
        float *d = col + r * ncols + (int64_t)b * OH * OW;
        if (t.same)
            same_copy(&t, x, d);
        else
            im2col_rows(&t, x, d);
    }
    return 0;
}

/* Most edge elements a same tap's flat col2im pass saves and restores (else row by row). */
#define COL2IM_SAVED_MAX 1024

/* Saves (restore = 0) or restores (restore = 1) the elements dst[i] of a same tap's flat run
 * [i0, i1) at its edge columns (ow < lo or ow >= hi), in row order. */
static inline void col2im_edges(const conv_tap *t, int64_t i0, int64_t i1, float *dst,
                                float *saved, int restore)
{
    int n = 0;
    for (int oh = t->oh0; oh < t->oh1; ++oh)
        for (int ow = 0; ow < t->OW; ++ow) {
            if (ow == t->lo && t->hi > ow) ow = t->hi;   /* skip the interior */
            if (ow >= t->OW) break;
            const int64_t i = (int64_t)oh * t->OW + ow;
            if (i < i0 || i >= i1) continue;
            if (restore)
                dst[i] = saved[n++];
            else
                saved[n++] = dst[i];
        }
}

/* img[oh*stride - pad + kh, ow*stride - pad + kw] += s[oh*OW + ow] over the taps inside the
 * image (one row of the column matrix's gradient, one image), row by row. Not an ISA clone:
 * for the short rows of the other shapes (10 floats, or a stride of 2), the AVX-512 clone's
 * loop set-up and strided stores cost more than they saved. */
static void col2im_rows(const conv_tap *t, const float *restrict s, float *restrict img)
{
    const int lo = t->lo, hi = t->hi;
    for (int oh = t->oh0; oh < t->oh1; ++oh) {
        const int h = oh * t->stride - t->pad + t->kh;
        float *restrict dst = img + (int64_t)h * t->W - t->pad + t->kw;
        const float *restrict row = s + (int64_t)oh * t->OW;
        if (t->stride == 1) {
#pragma omp simd
            for (int ow = lo; ow < hi; ++ow) dst[ow] += row[ow];
        } else {
            for (int ow = lo; ow < hi; ++ow) dst[(int64_t)ow * t->stride] += row[ow];
        }
    }
}

/* The same for a same tap: its valid rows are added as one flat run, img[i + shift] += s[i];
 * the run also adds the edge columns' values into the neighbouring row's elements, so those
 * elements (at most pad per row) are saved before and restored after: each element still
 * receives exactly the taps inside the image, in the caller's (kh, kw) order, so the sums
 * are bitwise those of col2im_rows. More than COL2IM_SAVED_MAX edge elements: row by row. */
static inline CPU_ISA_BODY void col2im_same_body(const conv_tap *t, const float *restrict s,
                                                 float *restrict img)
{
    if ((int64_t)(t->oh1 - t->oh0) * (t->OW - (t->hi - t->lo)) > COL2IM_SAVED_MAX) {
        col2im_rows(t, s, img);
        return;
    }
    float saved[COL2IM_SAVED_MAX];
    int64_t i0, i1;
    conv_tap_flat_range(t, &i0, &i1);
    float *restrict dst = img + t->shift;
    col2im_edges(t, i0, i1, dst, saved, 0);
    for (int64_t i = i0; i < i1; ++i) dst[i] += s[i];
    col2im_edges(t, i0, i1, dst, saved, 1);
}

CPU_ISA_CLONES(col2im_same, (const conv_tap *t, const float *restrict s, float *restrict img),
               (t, s, img))

/* Images per col2im task for a same convolution: enough tasks for about 4 per thread, else
 * all B images of a channel in one task (each row of the column gradient is then read as one
 * sequential run). */
static int col2im_images_per_task(int B, int C)
{
    const int want = 4 * omp_get_max_threads();
    if (C >= want) return B;
    const int blocks = (want + C - 1) / C;
    return blocks >= B ? 1 : (B + blocks - 1) / blocks;
}

CPU_KERNEL(col2im, iiiiiiiiiitt)
{
    CHECK(conv_dims(k));
    const int B = I(0), C = I(1), H = I(2), W = I(3), KH = I(4), KW = I(5), stride = I(6),
              pad = I(7), OH = I(8), OW = I(9);
    const float *col = PF(10);
    float *dX = PF(11);
    const int64_t ncols = (int64_t)B * OH * OW;
    const int64_t work = (int64_t)B * C * H * W * KH * KW;
    /* A task owns channel c of images [b0, b0 + nb): it zeroes them, then adds the column
     * gradient's rows (c, kh, kw) in (kh, kw) order, each over the task's images in turn.
     * Every dX element is summed in (kh, kw) order from zero, whatever the blocking or the
     * thread count, and threads own whole images (no races). A same convolution's flat adds
     * run over blocks of images, channel by channel (long sequential reads of col); other
     * shapes add row by row into one image at a time (tasks image by image, channels inner),
     * which keeps the image in L1 across its taps. */
    const int same = stride == 1 && OW == W && OH == H;
    const int nb = !same ? 1 : work > PAR_MIN ? col2im_images_per_task(B, C) : B;
    const int nblocks = (B + nb - 1) / nb;
    void (*const tap_add)(const conv_tap *, const float *restrict, float *restrict) =
        same ? CPU_ISA_PICK(col2im_same) : col2im_rows;
#pragma omp parallel for if (work > PAR_MIN) schedule(static)
    for (int64_t task = 0; task < (int64_t)C * nblocks; ++task) {
        const int c = (int)(same ? task / nblocks : task % C);
        const int b0 = (int)(same ? task % nblocks : task / C) * nb;
        const int b1 = b0 + nb < B ? b0 + nb : B;
        for (int b = b0; b < b1; ++b)
            memset(dX + ((int64_t)b * C + c) * H * W, 0, (size_t)H * W * sizeof(float));
        for (int kh = 0; kh < KH; ++kh)
            for (int kw = 0; kw < KW; ++kw) {
                const conv_tap t = conv_tap_of(H, W, stride, pad, OH, OW, kh, kw);
                const float *src = col + (((int64_t)c * KH + kh) * KW + kw) * ncols;
                for (int b = b0; b < b1; ++b)
                    tap_add(&t, src + (int64_t)b * OH * OW, dX + ((int64_t)b * C + c) * H * W);
            }
    }
    return 0;
}

/* Direct convolution: per (b, oc) output plane, zero it, then for every (c, kh, kw) in order
 * add Wt[oc,c,kh,kw] times the shifted input rows over the valid output columns; each output
 * element is summed in (c, kh, kw) order, as the OpenCL kernel sums it. */
CPU_KERNEL(conv2d_fwd, iiiiiiiiiiittt)
{
    for (int i = 0; i < 7; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W OC KH KW */
    CHECK(kneed_min(k, 7, 1));                              /* stride */
    CHECK(kneed_min(k, 8, 0));                              /* pad */
    const int B = I(0), C = I(1), H = I(2), W = I(3), OC = I(4), KH = I(5), KW = I(6),
              stride = I(7), pad = I(8), OH = I(9), OW = I(10);
    const int oh_want = (H + 2 * pad - KH) / stride + 1, ow_want = (W + 2 * pad - KW) / stride + 1;
    if (H + 2 * pad < KH || OH != oh_want)
        return kfail(k, 9, "is %d; (H + 2*pad - KH)/stride + 1 = %d", OH, oh_want);
    if (W + 2 * pad < KW || OW != ow_want)
        return kfail(k, 10, "is %d; (W + 2*pad - KW)/stride + 1 = %d", OW, ow_want);
    CHECK(kneed_numel(k, 11, (int64_t)B * C * H * W, "B*C*H*W"));
    CHECK(kneed_numel(k, 12, (int64_t)OC * C * KH * KW, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 13, (int64_t)B * OC * OH * OW, "B*OC*OH*OW"));
    const float *X = PF(11), *Wt = PF(12);
    float *Y = PF(13);
    const int64_t macs = (int64_t)B * OC * OH * OW * C * KH * KW;
#pragma omp parallel for if (macs > PAR_MIN) schedule(static)
    for (int64_t bo = 0; bo < (int64_t)B * OC; ++bo) {
        const int b = (int)(bo / OC), oc = (int)(bo % OC);
        float *restrict y = Y + bo * OH * OW;
        memset(y, 0, (size_t)OH * OW * sizeof(float));
        for (int c = 0; c < C; ++c) {
            const float *x = X + ((int64_t)b * C + c) * H * W;
            const float *wt = Wt + ((int64_t)oc * C + c) * KH * KW;
            for (int kh = 0; kh < KH; ++kh)
                for (int kw = 0; kw < KW; ++kw) {
                    const float wv = wt[kh * KW + kw];
                    int lo, hi;
                    valid_range(OW, W, stride, pad, kw, &lo, &hi);
                    for (int oh = 0; oh < OH; ++oh) {
                        const int h = oh * stride - pad + kh;
                        if (h < 0 || h >= H) continue;
                        const float *restrict src = x + (int64_t)h * W - pad + kw;
                        float *restrict d = y + (int64_t)oh * OW;
                        if (stride == 1) {
#pragma omp simd
                            for (int ow = lo; ow < hi; ++ow) d[ow] += wv * src[ow];
                        } else {
                            for (int ow = lo; ow < hi; ++ow) d[ow] += wv * src[ow * stride];
                        }
                    }
                }
        }
    }
    return 0;
}

CPU_KERNEL(swap01, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t D0 = I(0), D1 = I(1), D2 = I(2);
    CHECK(kneed_numel(k, 3, D0 * D1 * D2, "D0*D1*D2"));
    CHECK(kneed_numel(k, 4, D0 * D1 * D2, "D0*D1*D2"));
    const float *X = PF(3);
    float *Y = PF(4);
#pragma omp parallel for collapse(2) if (D0 * D1 * D2 > PAR_MIN) schedule(static)
    for (int64_t j = 0; j < D1; ++j)
        for (int64_t i = 0; i < D0; ++i)
            memcpy(Y + (j * D0 + i) * D2, X + (i * D1 + j) * D2, (size_t)D2 * sizeof(float));
    return 0;
}

/* ---- pooling ------------------------------------------------------------------------- */

/* Checks the 8 int arguments of maxpool_fwd/bwd: OH = (H - K)/stride + 1 (no padding). */
static int pool_dims(const kctx *k, int x_arg, int y_arg, int argmax_arg)
{
    for (int i = 0; i < 6; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W K stride */
    if (I(2) < I(4) || I(6) != (I(2) - I(4)) / I(5) + 1)
        return kfail(k, 6, "is %d; (H - K)/stride + 1 = %d with H >= K", I(6),
                    (I(2) - I(4)) / I(5) + 1);
    if (I(3) < I(4) || I(7) != (I(3) - I(4)) / I(5) + 1)
        return kfail(k, 7, "is %d; (W - K)/stride + 1 = %d with W >= K", I(7),
                    (I(3) - I(4)) / I(5) + 1);
    const int64_t bc = (int64_t)I(0) * I(1);
    CHECK(kneed_numel(k, x_arg, bc * I(2) * I(3), "B*C*H*W"));
    CHECK(kneed_numel(k, y_arg, bc * I(6) * I(7), "B*C*OH*OW"));
    CHECK(kneed_numel(k, argmax_arg, bc * I(6) * I(7), "B*C*OH*OW"));
    return 0;
}

CPU_KERNEL(maxpool_fwd, iiiiiiiittt)
{
    CHECK(pool_dims(k, 8, 9, 10));
    const int H = I(2), W = I(3), K = I(4), stride = I(5), OH = I(6), OW = I(7);
    const int64_t BC = (int64_t)I(0) * I(1);
    const float *X = PF(8);
    float *Y = PF(9);
    int *argmax = PI(10);
#pragma omp parallel for if (BC * H * W > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {
        const float *x = X + bc * H * W;
        if (K == 2 && stride == 2) {   /* LeNet's pooling: the same scan, unrolled */
            for (int oh = 0; oh < OH; ++oh) {
                const float *r0 = x + 2 * oh * W, *r1 = r0 + W;
                float *y = Y + (bc * OH + oh) * OW;
                int *am = argmax + (bc * OH + oh) * OW;
                for (int ow = 0; ow < OW; ++ow) {
                    const int w = 2 * ow;
                    int best = 2 * oh * W + w;
                    float m = r0[w];
                    if (r0[w + 1] > m) { m = r0[w + 1]; best = 2 * oh * W + w + 1; }
                    if (r1[w] > m) { m = r1[w]; best = (2 * oh + 1) * W + w; }
                    if (r1[w + 1] > m) { m = r1[w + 1]; best = (2 * oh + 1) * W + w + 1; }
                    y[ow] = m;
                    am[ow] = best;
                }
            }
            continue;
        }
        for (int oh = 0; oh < OH; ++oh)
            for (int ow = 0; ow < OW; ++ow) {
                int best = oh * stride * W + ow * stride;
                float m = x[best];
                for (int h = oh * stride; h < oh * stride + K; ++h)
                    for (int w = ow * stride; w < ow * stride + K; ++w)
                        if (x[h * W + w] > m) {
                            m = x[h * W + w];
                            best = h * W + w;
                        }
                const int64_t o = (bc * OH + oh) * OW + ow;
                Y[o] = m;
                argmax[o] = best;
            }
    }
    return 0;
}

CPU_KERNEL(maxpool_bwd, iiiiiiiittt)
{
    CHECK(pool_dims(k, 10, 8, 9));  /* dX has the input's size; dY and argmax the output's */
    const int H = I(2), W = I(3), OH = I(6), OW = I(7);
    const int64_t BC = (int64_t)I(0) * I(1);
    const float *dY = PF(8);
    const int *argmax = PI(9);
    float *dX = PF(10);
#pragma omp parallel for if (BC * H * W > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {
        float *dx = dX + bc * H * W;
        const float *dy = dY + bc * OH * OW;
        const int *am = argmax + bc * OH * OW;
        memset(dx, 0, (size_t)H * W * sizeof(float));
        /* Scatter per image in window order; an argmax outside the image is skipped. */
        for (int o = 0; o < OH * OW; ++o)
            if (am[o] >= 0 && am[o] < H * W) dx[am[o]] += dy[o];
    }
    return 0;
}

/* ---- loss ---------------------------------------------------------------------------- */

CPU_KERNEL(softmax_xent, iitttt)
{
    CHECK(kneed_min(k, 0, 1));
    CHECK(kneed_min(k, 1, 1));
    const int B = I(0), C = I(1);
    CHECK(kneed_numel(k, 2, (int64_t)B * C, "B*C"));
    CHECK(kneed_numel(k, 3, B, "B"));
    CHECK(kneed_numel(k, 4, (int64_t)B * C, "B*C"));
    CHECK(kneed_numel(k, 5, B, "B"));
    const int *labels = PI(3);
    for (int b = 0; b < B; ++b)
        if (labels[b] < 0 || labels[b] >= C)
            return kfail(k, 3, "holds label %d at row %d; labels must be in [0, C) = [0, %d)",
                        labels[b], b, C);
    const float *logits = PF(2);
    float *dlogits = PF(4), *row_loss = PF(5);
    const float inv_b = 1.0f / (float)B;
#pragma omp parallel for if ((int64_t)B * C > PAR_MIN) schedule(static)
    for (int b = 0; b < B; ++b)
        row_loss[b] = softmax_xent_row(logits + (int64_t)b * C, C, labels[b], inv_b,
                                       dlogits + (int64_t)b * C);
    return 0;
}

float softmax_xent_row(const float *x, int C, int label, float inv_b, float *dx)
{
    float mx = x[0], sum = 0.0f;
    for (int c = 1; c < C; ++c) mx = x[c] > mx ? x[c] : mx;
    for (int c = 0; c < C; ++c) sum += expf(x[c] - mx);
    const float inv_sum = 1.0f / sum;
    for (int c = 0; c < C; ++c)
        dx[c] = (expf(x[c] - mx) * inv_sum - (c == label ? 1.0f : 0.0f)) * inv_b;
    return logf(sum) - (x[label] - mx);
}

CPU_KERNEL(mean, itt)
{
    CHECK(kneed_min(k, 0, 1));
    CHECK(kneed_numel(k, 1, I(0), "n"));
    CHECK(kneed_numel(k, 2, 1, "1"));
    const float *X = PF(1);
    float acc = 0.0f;  /* serial, in index order: the same sum as the OpenCL kernel */
    for (int i = 0; i < I(0); ++i) acc += X[i];
    PF(2)[0] = acc / (float)I(0);
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
