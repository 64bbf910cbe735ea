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
 * (K depth of a staged slice), WPTM, WPTN (outputs per work-item, dividing TSM, TSN).
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
#define RTSM (TSM / WPTM) /* local size along M (dimension 1) */
#define RTSN (TSN / WPTN) /* local size along N (dimension 0) */
#define NTHREADS (RTSM * RTSN)

#if (TSM % WPTM) || (TSN % WPTN)
#error "TSM must be a multiple of WPTM and TSN a multiple of WPTN"
#endif

/* op(A)(m, k) and op(B)(k, n), zero outside the matrices. */
#define LOAD_A(m, k) (((m) < M && (k) < K) ? (ta ? A[(k) * M + (m)] : A[(m) * K + (k)]) : 0.0f)
#define LOAD_B(k, n) (((k) < K && (n) < N) ? (tb ? B[(n) * K + (k)] : B[(k) * N + (n)]) : 0.0f)

inline void gemm_tiled(const int M, const int N, const int K, const float alpha,
                       const __global float *restrict A, const __global float *restrict B,
                       const float beta, __global float *C, const int ta, const int tb,
                       __local float (*As)[TSM], __local float (*Bs)[TSN])
{
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * RTSN + tn;
    const int n0 = get_group_id(0) * TSN, m0 = get_group_id(1) * TSM;
    float acc[WPTM][WPTN];
    for (int i = 0; i < WPTM; i++)
        for (int j = 0; j < WPTN; j++)
            acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TSK) {
        /* Cooperative loads; the fastest-varying index follows the operand's memory order. */
        for (int i = tid; i < TSM * TSK; i += NTHREADS) {
            const int mm = ta ? i % TSM : i / TSK, kk = ta ? i / TSM : i % TSK;
            As[kk][mm] = LOAD_A(m0 + mm, k0 + kk);
        }
        for (int i = tid; i < TSK * TSN; i += NTHREADS) {
            const int nn = tb ? i / TSK : i % TSN, kk = tb ? i % TSK : i / TSN;
            Bs[kk][nn] = LOAD_B(k0 + kk, n0 + nn);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TSK; kk++) {
            float breg[WPTN];
            for (int j = 0; j < WPTN; j++)
                breg[j] = Bs[kk][tn + j * RTSN];
            for (int i = 0; i < WPTM; i++) {
                const float a = As[kk][tm + i * RTSM];
                for (int j = 0; j < WPTN; j++)
                    acc[i][j] = mad(a, breg[j], acc[i][j]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < WPTM; i++) {
        const int m = m0 + tm + i * RTSM;
        if (m >= M)
            break;
        for (int j = 0; j < WPTN; j++) {
            const int n = n0 + tn + j * RTSN;
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
        __local float As[TSK][TSM];                                                       \
        __local float Bs[TSK][TSN];                                                       \
        gemm_tiled(M, N, K, alpha, A, B, beta, C, ta, tb, As, Bs);                        \
    }

GEMM_KERNEL(gemm_nn, 0, 0)
GEMM_KERNEL(gemm_nt, 0, 1)
GEMM_KERNEL(gemm_tn, 1, 0)
