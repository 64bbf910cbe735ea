/* CPU backend: the GEMM engine's paths for particular shapes (cpu_gemm_shapes, called first
 * by cpu_gemm of cpu_gemm.c): a long-K gemm_nt with a small C as dot products, a gemm_nt
 * with a short A as register-blocked dot products, a short-K gemm_tn with B read in place
 * (and cpu_gemm_tn_sgd, its SGD step fused). Each sums every element of C in an order fixed
 * by the shape, whatever the thread count. */
#include "cpu_gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

/* ---- long-K NT GEMM as dot products ---------------------------------------------------- */
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

int cpu_gemm_shapes(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                    const float *B, float beta, float *C)
{
    if (gemm_dot_fits(trans_a, trans_b, M, N, K) && (int64_t)M * N * K > PAR_MIN) {
        gemm_dot(M, N, K, alpha, A, B, beta, C);
        return 1;
    }
    const gemm_ntd_kernel ntd = gemm_ntd_pick();
    if (gemm_ntd_fits(&ntd, trans_a, trans_b, M, K)) {
        gemm_ntd(&ntd, M, N, K, alpha, A, B, beta, C);
        return 1;
    }
    const gemm_tns_kernel tns = gemm_tns_pick();
    if (gemm_tns_fits(&tns, trans_a, trans_b, K)) {
        gemm_tns(&tns, M, N, K, alpha, A, B, beta, C, NULL);
        return 1;
    }
    return 0;
}

/* Rows [i, i+nr) x columns [j, j+nc) of sgd's W and V (row length N) take sgd_update's step
 * with the gradient tile t (row stride ldt). */
static void sgd_tile(const tns_sgd *sgd, const float *t, int ldt, int N, int i, int j, int nr,
                     int nc)
{
    for (int r = 0; r < nr; ++r) {
        const int64_t e = (int64_t)(i + r) * N + j;
        cpu_sgd_step(0, nc, sgd->lr, sgd->momentum, sgd->wd, sgd->W + e, t + (int64_t)r * ldt,
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
