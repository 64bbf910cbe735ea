/* tiled: GEMM with local-memory tiling and a 2-D register block per work-item.
 *
 * A work-group computes a TSM x TSN tile of C. Per step of TSK along K it stages a TSM x TSK
 * tile of op(A) and a TSK x TSN tile of op(B) in local memory (zero outside the matrices), then
 * each work-item accumulates WPTM x WPTN outputs spaced RTSM / RTSN apart (strided ownership:
 * neighbouring work-items touch neighbouring addresses, which coalesces on GPUs and vectorizes
 * across work-items on PoCL). Technique after Nugteren's "Tutorial: OpenCL SGEMM tuning for
 * Kepler" (kernels 2-6, cnugteren.github.io/tutorial) and CLBlast's xgemm.
 *
 * Launch geometry (rule "tiled" of phonetrain.kernels.launch): local = [TSN/WPTN, TSM/WPTM],
 * global = [ceil(N/TSN) * TSN/WPTN, ceil(M/TSM) * TSM/WPTM]. Kernel ABI: src/kernels/README.md.
 * Tuning parameters (-D, defaults below = version.yaml's defines): TSM, TSN (tile of C), TSK
 * (K depth of a staged slice), WPTM, WPTN (outputs per work-item, dividing TSM, TSN), PAD
 * (extra words per local-memory row: with PAD = 0 and TSM a multiple of the bank count, the
 * transposing stores of op(A) hit one bank; 1 spreads them), VW (1, 2 or 4: a work-item owns
 * vectors of VW neighbouring outputs, the vectors TSM/WPTM resp. TSN/WPTN work-items apart, and
 * reads them from local memory as floatVW: VW times fewer local loads per multiply-add, the
 * limit of the scalar form on GPUs whose shared memory issues one load per cycle).
 * Work-groups whose tile and K slice lie wholly inside the matrices take an unchecked load path
 * (the test is uniform per work-group, so it does not diverge); edge tiles keep the checks.
 */
#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 8
#endif
#ifndef WPTM
#define WPTM 8
#endif
#ifndef WPTN
#define WPTN 4
#endif
#ifndef PAD
#define PAD 1
#endif
#ifndef VW
#define VW 1
#endif
#if VW == 1
#define floatv float
#elif VW == 2
#define floatv float2
#elif VW == 4
#define floatv float4
#else
#error "VW must be 1, 2 or 4"
#endif
#define RTSM (TSM / WPTM) /* local size along M (dimension 1) */
#define RTSN (TSN / WPTN) /* local size along N (dimension 0) */
#define NTHREADS (RTSM * RTSN)

#if (TSM % WPTM) || (TSN % WPTN)
#error "TSM must be a multiple of WPTM and TSN a multiple of WPTN"
#endif
#if (WPTM % VW) || (WPTN % VW) || ((TSM + PAD) % VW) || ((TSN + PAD) % VW)
#error "VW must divide WPTM, WPTN, TSM + PAD and TSN + PAD (aligned vector rows)"
#endif
/* Tile offset of a work-item's i-th output along one side: vectors of VW neighbours, the
 * vectors RT work-items apart (VW = 1: single elements RT apart, the strided ownership). */
#define OWNED(i, t, RT) ((((i) / VW) * (RT) + (t)) * VW + (i) % VW)

/* op(A)(m, k) and op(B)(k, n), zero outside the matrices. */
#define LOAD_A(m, k) (((m) < M && (k) < K) ? (ta ? A[(k) * M + (m)] : A[(m) * K + (k)]) : 0.0f)
#define LOAD_B(k, n) (((k) < K && (n) < N) ? (tb ? B[(n) * K + (k)] : B[(k) * N + (n)]) : 0.0f)
/* The same without the bounds test, for slices wholly inside the matrices. */
#define FAST_A(m, k) (ta ? A[(k) * M + (m)] : A[(m) * K + (k)])
#define FAST_B(k, n) (tb ? B[(n) * K + (k)] : B[(k) * N + (n)])

inline void gemm_tiled(const int M, const int N, const int K, const float alpha,
                       const __global float *restrict A, const __global float *restrict B,
                       const float beta, __global float *C, const int ta, const int tb,
                       __local float (*As)[TSM + PAD], __local float (*Bs)[TSN + PAD])
{
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * RTSN + tn;
    const int n0 = get_group_id(0) * TSN, m0 = get_group_id(1) * TSM;
    const bool inside = m0 + TSM <= M && n0 + TSN <= N;
    float acc[WPTM][WPTN];
    for (int i = 0; i < WPTM; i++)
        for (int j = 0; j < WPTN; j++)
            acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TSK) {
        /* Cooperative loads; the fastest-varying index follows the operand's memory order. */
        if (inside && k0 + TSK <= K) {
            for (int i = tid; i < TSM * TSK; i += NTHREADS) {
                const int mm = ta ? i % TSM : i / TSK, kk = ta ? i / TSM : i % TSK;
                As[kk][mm] = FAST_A(m0 + mm, k0 + kk);
            }
            for (int i = tid; i < TSK * TSN; i += NTHREADS) {
                const int nn = tb ? i / TSK : i % TSN, kk = tb ? i % TSK : i / TSN;
                Bs[kk][nn] = FAST_B(k0 + kk, n0 + nn);
            }
        } else {
            for (int i = tid; i < TSM * TSK; i += NTHREADS) {
                const int mm = ta ? i % TSM : i / TSK, kk = ta ? i / TSM : i % TSK;
                As[kk][mm] = LOAD_A(m0 + mm, k0 + kk);
            }
            for (int i = tid; i < TSK * TSN; i += NTHREADS) {
                const int nn = tb ? i / TSK : i % TSN, kk = tb ? i % TSK : i / TSN;
                Bs[kk][nn] = LOAD_B(k0 + kk, n0 + nn);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TSK; kk++) {
            /* VW-wide local reads: one vector load per VW outputs of the block. */
            floatv bv[WPTN / VW];
            for (int q = 0; q < WPTN / VW; q++)
                bv[q] = *(const __local floatv *)&Bs[kk][(q * RTSN + tn) * VW];
            for (int p = 0; p < WPTM / VW; p++) {
                floatv av = *(const __local floatv *)&As[kk][(p * RTSM + tm) * VW];
                for (int r = 0; r < VW; r++) {
                    const float a = ((const float *)&av)[r];
                    for (int q = 0; q < WPTN / VW; q++)
                        for (int v = 0; v < VW; v++)
                            acc[p * VW + r][q * VW + v] =
                                mad(a, ((const float *)&bv[q])[v], acc[p * VW + r][q * VW + v]);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < WPTM; i++) {
        const int m = m0 + OWNED(i, tm, RTSM);
        if (m >= M)
            break;
        for (int j = 0; j < WPTN; j++) {
            const int n = n0 + OWNED(j, tn, RTSN);
            if (n < N)
                C[m * N + n] = beta == 0.0f ? alpha * acc[i][j]
                                            : alpha * acc[i][j] + beta * C[m * N + n];
        }
    }
}

#define GEMM_KERNEL(name, ta, tb)                                                          \
    __kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))                        \
    void name(const int M, const int N, const int K, const float alpha,                   \
              const __global float *restrict A, const __global float *restrict B,         \
              const float beta, __global float *C)                                        \
    {                                                                                     \
        __local float As[TSK][TSM + PAD] __attribute__((aligned(16)));                    \
        __local float Bs[TSK][TSN + PAD] __attribute__((aligned(16)));                    \
        gemm_tiled(M, N, K, alpha, A, B, beta, C, ta, tb, As, Bs);                        \
    }

GEMM_KERNEL(gemm_nn, 0, 0)
GEMM_KERNEL(gemm_nt, 0, 1)
GEMM_KERNEL(gemm_tn, 1, 0)
