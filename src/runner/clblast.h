/* GEMM routed to CLBlast's CLBlastSgemm (github.com/CNugteren/CLBlast, include/clblast_c.h),
 * loaded with dlopen so the runner has no build-time dependency on it. Used by the `clblast`
 * kernel version: a plan program with "source": "clblast" marks gemm_nn/nt/tn as external. */
#ifndef PHONETRAIN_CLBLAST_H
#define PHONETRAIN_CLBLAST_H

#include <stddef.h>

#include "cl_api.h"

/* Loads libclblast (explicit path if non-NULL, else libclblast.so.1, libclblast.so). Returns 0,
 * or -1 with "libclblast not found (tried ...)" in err. Idempotent. The environment variable
 * PHONETRAIN_CLBLAST=PATH, when set, replaces that search with PATH alone. */
int clblast_load(const char *explicit_path, char *err, size_t errlen);

/* 1 for the kernel names CLBlast replaces (gemm_nn, gemm_nt, gemm_tn). */
int clblast_handles(const char *kernel_name);

/* Enqueues C = alpha * op(A) @ op(B) + beta * C (row-major, kernel ABI semantics) on queue q.
 * CLBlast may enqueue several kernels; callers time the whole call (clFinish + host clock),
 * never the one event it could return. Returns CLBlast's status code (0 = success). */
int clblast_gemm(const char *kernel_name, int M, int N, int K, float alpha, cl_mem A, cl_mem B,
                 float beta, cl_mem C, cl_command_queue q);

#endif
