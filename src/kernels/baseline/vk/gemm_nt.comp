#version 450
// C[M,N] = alpha * A[M,K] @ B[N,K]^T + beta * C (kernel ABI: src/kernels/README.md); one invocation per
// element of C, a K-long dot product from global memory. global [N, M].
#include "vk_abi.glsl"

void main()
{
    const int n = int(gl_GlobalInvocationID.x), m = int(gl_GlobalInvocationID.y);
    if (n >= N || m >= M) return;
    float acc = 0.0;
    for (int k = 0; k < K; ++k)
        acc += A[m * K + k] * B[n * K + k];
    const int idx = m * N + n;
    C[idx] = beta == 0.0 ? alpha * acc : alpha * acc + beta * C[idx];
}
