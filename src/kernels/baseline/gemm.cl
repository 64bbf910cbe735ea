/* Baseline GEMM (kernel ABI: src/kernels/README.md). One work-item per element of C,
 * global memory only, no tiling: the unoptimized reference point.
 * NDRange [N, M] (global[0] walks the columns of C so neighbouring work-items read
 * neighbouring B elements and write neighbouring C elements). Any M, N, K >= 1; work-items
 * past the edge of a rounded-up global size return early. beta == 0 means C is not read
 * (BLAS convention: stale NaN/Inf in C do not propagate). */

#define GEMM_STORE(C, idx, alpha, acc, beta) \
    (C)[idx] = ((beta) == 0.0f) ? (alpha) * (acc) : (alpha) * (acc) + (beta) * (C)[idx]

/* C[M,N] = alpha * op(A) @ op(B) + beta * C, op(A)(m, k) = A[m*K + k] (A [M,K]) or with ta
 * A[k*M + m] (A [K,M], transposed); op(B)(k, n) = B[k*N + n] (B [K,N]) or with tb B[n*K + k]
 * (B [N,K]). ta and tb are literals, so each kernel reads its operands directly. */
#define GEMM_KERNEL(name, ta, tb)                                                          \
    __kernel void name(const int M, const int N, const int K, const float alpha,          \
                       __global const float *A, __global const float *B, const float beta, \
                       __global float *C)                                                 \
    {                                                                                     \
        const int n = get_global_id(0);                                                   \
        const int m = get_global_id(1);                                                   \
        if (n >= N || m >= M) return;                                                     \
        float acc = 0.0f;                                                                 \
        for (int k = 0; k < K; ++k)                                                       \
            acc += (ta ? A[(size_t)k * M + m] : (A + (size_t)m * K)[k]) *                 \
                   (tb ? (B + (size_t)n * K)[k] : B[(size_t)k * N + n]);                  \
        GEMM_STORE(C, (size_t)m * N + n, alpha, acc, beta);                               \
    }

GEMM_KERNEL(gemm_nn, 0, 0) /* A[M,K] @ B[K,N] */
GEMM_KERNEL(gemm_nt, 0, 1) /* A[M,K] @ B[N,K]^T */
GEMM_KERNEL(gemm_tn, 1, 0) /* A[K,M]^T @ B[K,N] */
