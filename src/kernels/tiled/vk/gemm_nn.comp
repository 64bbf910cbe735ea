#version 450
// C[M,N] = alpha * A[M,K] @ B[K,N] + beta * C, tiled in shared memory: the body and its tuning
// parameters are gemm_tiled.glsl's.
#define TA 0
#define TB 0
#include "gemm_tiled.glsl"
