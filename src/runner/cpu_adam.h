/* Internal to the CPU backend: the optimizer kernels of cpu_adam.c (Adam, AdamW), searched by
 * cpu_kernels.c after its own table. */
#ifndef PHONETRAIN_CPU_ADAM_H
#define PHONETRAIN_CPU_ADAM_H

#include "cpu_kernel_ctx.h"

extern const kernel_spec CPU_ADAM_KERNELS[];
extern const int CPU_ADAM_NKERNELS;

#endif
