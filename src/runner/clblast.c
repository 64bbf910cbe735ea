/* dlopen'd CLBlastSgemm; see clblast.h. Enum values from CLBlast's include/clblast_c.h. */
#include "clblast.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CLBLAST_ROW_MAJOR = 101, CLBLAST_TRANS_NO = 111, CLBLAST_TRANS_YES = 112 };

typedef int (*sgemm_fn)(int layout, int a_transpose, int b_transpose, size_t m, size_t n,
                        size_t k, float alpha, cl_mem a, size_t a_offset, size_t a_ld,
                        cl_mem b, size_t b_offset, size_t b_ld, float beta, cl_mem c,
                        size_t c_offset, size_t c_ld, cl_command_queue *queue, cl_event *event);

static sgemm_fn g_sgemm;

int clblast_load(const char *explicit_path, char *err, size_t errlen)
{
    /* PHONETRAIN_CLBLAST=PATH: try only PATH (no default names), e.g. /nonexistent to
     * reproduce a device without CLBlast (tests/stages/test_skipped_runs.py). */
    const char *only = getenv("PHONETRAIN_CLBLAST");
    const char *names[] = {only && *only ? only : explicit_path,
                           only && *only ? NULL : "libclblast.so.1",
                           only && *only ? NULL : "libclblast.so"};
    char tried[512] = "";
    if (g_sgemm)
        return 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (!names[i])
            continue;
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h && (g_sgemm = (sgemm_fn)dlsym(h, "CLBlastSgemm")))
            return 0;
        size_t n = strlen(tried);
        snprintf(tried + n, sizeof tried - n, "%s%s", n ? ", " : "", names[i]);
    }
    snprintf(err, errlen, "libclblast not found (tried %s); install CLBlast (Debian: "
             "apt install libclblast1) or set the device's clblast library path", tried);
    return -1;
}

int clblast_handles(const char *kernel_name)
{
    return !strcmp(kernel_name, "gemm_nn") || !strcmp(kernel_name, "gemm_nt") ||
           !strcmp(kernel_name, "gemm_tn");
}

int clblast_gemm(const char *kernel_name, int M, int N, int K, float alpha, cl_mem A, cl_mem B,
                 float beta, cl_mem C, cl_command_queue q)
{
    const int ta = !strcmp(kernel_name, "gemm_tn"), tb = !strcmp(kernel_name, "gemm_nt");
    return g_sgemm(CLBLAST_ROW_MAJOR, ta ? CLBLAST_TRANS_YES : CLBLAST_TRANS_NO,
                   tb ? CLBLAST_TRANS_YES : CLBLAST_TRANS_NO, (size_t)M, (size_t)N, (size_t)K,
                   alpha, A, 0, (size_t)(ta ? M : K), B, 0, (size_t)(tb ? K : N), beta, C, 0,
                   (size_t)N, &q, NULL);
}
