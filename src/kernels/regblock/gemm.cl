/* regblock: GEMM with register blocking and vector loads, no local memory, no barriers.
 *
 * Each work-item computes an RM x RN block of C held in registers.
 * - gemm_nn / gemm_tn (op(B) rows are contiguous): outer products. acc[i] is a floatRN vector
 *   along N; per k, one vloadRN of op(B)'s row k times RM scalars of op(A)'s column k.
 *   This is CLBlast's Adreno 6xx / Mali configuration (float4/float8 loads, 4x8 outputs per
 *   work-item, no local memory; Mali maps local memory to global anyway).
 * - gemm_nt (both operands contiguous along K): dot products. acc[i][j] is a floatVK vector
 *   along K, reduced once at the end.
 * Blocks that overhang the matrix edge take a scalar path with bounds checks, so any M, N, K
 * >= 1 is correct. With no barriers, PoCL keeps the accumulators in registers and the vector
 * types give SIMD within one work-item.
 *
 * Tuning parameters (-D, defaults below = version.yaml's defines): RM (rows per work-item), RN
 * (columns per work-item: 2, 4, 8 or 16), VK (K vector width of gemm_nt: 2, 4, 8 or 16).
 * Launch geometry (rule "regblock" of phonetrain.kernels.launch):
 * local = [LX, LY] from version.yaml / tuning.json, global = [ceil(ceil(N/RN)/LX)*LX,
 * ceil(ceil(M/RM)/LY)*LY]. Kernel ABI: src/kernels/README.md.
 */
#ifndef RM
#define RM 8
#endif
#ifndef RN
#define RN 16
#endif
#ifndef VK
#define VK 16
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define floatN CAT(float, RN)
#define vloadN CAT(vload, RN)
#define vstoreN CAT(vstore, RN)
#define floatK CAT(float, VK)
#define vloadK CAT(vload, VK)

/* C block store: C = alpha * acc + beta * C (beta == 0 never reads C). */
inline void store_vec(__global float *C, const int N, const int m, const int n,
                      const float alpha, const float beta, const floatN acc)
{
    __global float *c = C + m * N + n;
    vstoreN(beta == 0.0f ? alpha * acc : alpha * acc + beta * vloadN(0, c), 0, c);
}

inline void store_one(__global float *C, const int N, const int m, const int n,
                      const float alpha, const float beta, const float acc)
{
    C[m * N + n] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[m * N + n];
}

/* Scalar block with bounds checks, for blocks that overhang the edge (any transpose). */
inline void gemm_edge(const int M, const int N, const int K, const float alpha,
                      const __global float *A, const __global float *B, const float beta,
                      __global float *C, const int m0, const int n0, const int ta, const int tb)
{
    for (int i = 0; i < RM && m0 + i < M; i++)
        for (int j = 0; j < RN && n0 + j < N; j++) {
            const int m = m0 + i, n = n0 + j;
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc = mad(ta ? A[k * M + m] : A[m * K + k], tb ? B[n * K + k] : B[k * N + n], acc);
            store_one(C, N, m, n, alpha, beta, acc);
        }
}

/* Interior block of gemm_nn (ta = 0) or gemm_tn (ta = 1): outer products along K. */
inline void gemm_outer(const int M, const int N, const int K, const float alpha,
                       const __global float *A, const __global float *B, const float beta,
                       __global float *C, const int m0, const int n0, const int ta)
{
    floatN acc[RM];
    for (int i = 0; i < RM; i++)
        acc[i] = (floatN)(0.0f);
    for (int k = 0; k < K; k++) {
        const floatN b = vloadN(0, B + k * N + n0);
        for (int i = 0; i < RM; i++)
            acc[i] = mad((floatN)(ta ? A[k * M + m0 + i] : A[(m0 + i) * K + k]), b, acc[i]);
    }
    for (int i = 0; i < RM; i++)
        store_vec(C, N, m0 + i, n0, alpha, beta, acc[i]);
}

/* Interior block of gemm_nt: RM x RN dot products of VK-wide vectors along K. */
inline void gemm_dot(const int M, const int N, const int K, const float alpha,
                     const __global float *A, const __global float *B, const float beta,
                     __global float *C, const int m0, const int n0)
{
    floatK acc[RM][RN];
    for (int i = 0; i < RM; i++)
        for (int j = 0; j < RN; j++)
            acc[i][j] = (floatK)(0.0f);
    int k = 0;
    for (; k + VK <= K; k += VK) {
        floatK b[RN];
        for (int j = 0; j < RN; j++)
            b[j] = vloadK(0, B + (n0 + j) * K + k);
        for (int i = 0; i < RM; i++) {
            const floatK a = vloadK(0, A + (m0 + i) * K + k);
            for (int j = 0; j < RN; j++)
                acc[i][j] = mad(a, b[j], acc[i][j]);
        }
    }
    for (int i = 0; i < RM; i++) {
        float out[RN];
        for (int j = 0; j < RN; j++) {
            float s = 0.0f;
            for (int v = 0; v < VK; v++)
                s += ((float *)&acc[i][j])[v];
            for (int kk = k; kk < K; kk++)
                s = mad(A[(m0 + i) * K + kk], B[(n0 + j) * K + kk], s);
            out[j] = s;
        }
        store_vec(C, N, m0 + i, n0, alpha, beta, vloadN(0, out));
    }
}

#define GEMM_KERNEL(name, ta, tb)                                                          \
    __kernel void name(const int M, const int N, const int K, const float alpha,          \
                       const __global float *restrict A, const __global float *restrict B, \
                       const float beta, __global float *C)                               \
    {                                                                                     \
        const int n0 = get_global_id(0) * RN, m0 = get_global_id(1) * RM;                 \
        if (m0 >= M || n0 >= N)                                                           \
            return;                                                                       \
        if (m0 + RM > M || n0 + RN > N)                                                   \
            gemm_edge(M, N, K, alpha, A, B, beta, C, m0, n0, ta, tb);                     \
        else if (tb)                                                                      \
            gemm_dot(M, N, K, alpha, A, B, beta, C, m0, n0);                              \
        else                                                                              \
            gemm_outer(M, N, K, alpha, A, B, beta, C, m0, n0, ta);                        \
    }

GEMM_KERNEL(gemm_nn, 0, 0)
GEMM_KERNEL(gemm_nt, 0, 1)
GEMM_KERNEL(gemm_tn, 1, 0)
