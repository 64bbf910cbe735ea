#version 450
// C[M,N] = alpha * A[M,K] @ B[N,K]^T + beta * C, tiled in shared memory: the body and its tuning
// parameters are gemm_tiled.glsl's.
#define TA 0
#define TB 1
#include "gemm_tiled.glsl"
