/* CPU backend of the runner: a C implementation of every kernel name in the kernel ABI
 * (src/kernels/README.md), with the same argument order and semantics as the OpenCL kernels.
 * Parallelized with OpenMP; the caller sets the thread count (omp_set_num_threads). */
#ifndef PHONETRAIN_CPU_KERNELS_H
#define PHONETRAIN_CPU_KERNELS_H

/* One kernel argument, as the plan gives it: {"i": int}, {"f": float} or {"t": tensor}. */
typedef struct {
    char kind;   /* 'i', 'f' or 't' */
    int i;       /* kind 'i' */
    float f;     /* kind 'f' */
    void *p;     /* kind 't': the tensor's host array (float* or int*) */
    long numel;  /* kind 't': elements in that array, for bounds checks */
} rt_arg;

/* Runs kernel `name` on the host. Returns 0 on success; on a bad argument count, kind or a
 * size that overruns a tensor, writes one line naming the kernel and argument into
 * err (errlen bytes) and returns -1. An unknown name returns -2. */
int cpu_kernel_run(const char *name, const rt_arg *args, int nargs, char *err, int errlen);

/* 1 if `name` is a kernel of the ABI, else 0 (lets the runner reject a plan before running). */
int cpu_kernel_known(const char *name);

#endif
