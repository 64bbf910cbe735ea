/* CPU backend: the GEMM engine and the kernels of src/kernels/baseline/gemm.cl (gemm_nn,
 * gemm_nt, gemm_tn). cpu_gemm is the one matrix product of the backend: the GEMM kernels,
 * the convolutions of cpu_conv.c and the fused kernels all call it. Its paths for particular
 * shapes are in cpu_gemm_shapes.c. */
#define _GNU_SOURCE   /* sysconf(_SC_LEVEL3_CACHE_SIZE) */
#include "cpu_gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

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

static void gemm_micro_generic(int kc, const float *restrict Ap, const float *restrict Bp,
                               int64_t ldb, float *restrict C, int64_t ldc, int mr, int nr,
                               float alpha, float beta)
{
    GEMM_MICRO_BODY(4, 8, MADD_NATIVE)
}

#ifdef GEMM_X86_DISPATCH
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
    if (cpu_gemm_shapes(trans_a, trans_b, M, N, K, alpha, A, B, beta, C))
        return;
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
