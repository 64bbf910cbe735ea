/* Baseline GEMM (kernel ABI: src/kernels/README.md). One work-item per element of C,
 * global memory only, no tiling: the unoptimized reference point.
 * NDRange [N, M] (global[0] walks the columns of C so neighbouring work-items read
 * neighbouring B elements and write neighbouring C elements). Any M, N, K >= 1; work-items
 * past the edge of a rounded-up global size return early. beta == 0 means C is not read
 * (BLAS convention: stale NaN/Inf in C do not propagate). */

#define GEMM_STORE(C, idx, alpha, acc, beta) \
    (C)[idx] = ((beta) == 0.0f) ? (alpha) * (acc) : (alpha) * (acc) + (beta) * (C)[idx]

/* C[M,N] = alpha * A[M,K] @ B[K,N] + beta * C */
__kernel void gemm_nn(const int M, const int N, const int K, const float alpha,
                      __global const float *A, __global const float *B, const float beta,
                      __global float *C)
{
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    if (n >= N || m >= M) return;
    const __global float *a = A + (size_t)m * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += a[k] * B[(size_t)k * N + n];
    GEMM_STORE(C, (size_t)m * N + n, alpha, acc, beta);
}

/* C[M,N] = alpha * A[M,K] @ B[N,K]^T + beta * C */
__kernel void gemm_nt(const int M, const int N, const int K, const float alpha,
                      __global const float *A, __global const float *B, const float beta,
                      __global float *C)
{
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    if (n >= N || m >= M) return;
    const __global float *a = A + (size_t)m * K;
    const __global float *b = B + (size_t)n * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += a[k] * b[k];
    GEMM_STORE(C, (size_t)m * N + n, alpha, acc, beta);
}

/* C[M,N] = alpha * A[K,M]^T @ B[K,N] + beta * C */
__kernel void gemm_tn(const int M, const int N, const int K, const float alpha,
                      __global const float *A, __global const float *B, const float beta,
                      __global float *C)
{
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    if (n >= N || m >= M) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[(size_t)k * M + m] * B[(size_t)k * N + n];
    GEMM_STORE(C, (size_t)m * N + n, alpha, acc, beta);
}
