#version 450
// C[M,N] = alpha * A[K,M]^T @ B[K,N] + beta * C, tiled in shared memory: the body and its tuning
// parameters are gemm_tiled.glsl's.
#define TA 1
#define TB 0
#include "gemm_tiled.glsl"
