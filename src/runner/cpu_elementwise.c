/* CPU backend: the kernels of src/kernels/baseline/elementwise.cl (bias_add, bias_grad,
 * relu_fwd, relu_bwd, sgd_update, fill, copy) and sgd_update's step, which the fused kernels'
 * updates share (cpu_sgd_update, cpu_sgd_step). */
#include "cpu_kernel_ctx.h"

#include <stdint.h>
#include <string.h>

#include <omp.h>

CPU_KERNEL(bias_add, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t C = I(1), HW = I(2), n = (int64_t)I(0) * C * HW;
    CHECK(kneed_numel(k, 3, n, "B*C*HW"));
    CHECK(kneed_numel(k, 4, C, "C"));
    float *Y = PF(3);
    const float *bias = PF(4);
    const int64_t B = I(0);
    if (HW == 1) {   /* a linear layer: each image's row of C outputs plus the bias row */
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
        for (int64_t b = 0; b < B; ++b) {
            float *restrict y = Y + b * C;
            for (int64_t c = 0; c < C; ++c) y[c] += bias[c];
        }
        return 0;
    }
#pragma omp parallel for collapse(2) if (n > PAR_MIN) schedule(static)
    for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) {
            const float bc = bias[c];
            float *restrict y = Y + (b * C + c) * HW;
            for (int64_t j = 0; j < HW; ++j) y[j] += bc;
        }
    return 0;
}

/* lane[j % ROW_SUM_LANES] += x[j] for j < n. bias_grad sums each channel in these interleaved
 * partial sums (images in order) and adds the lanes in lane order at the end: a fixed order
 * the compiler vectorizes, where one running sum would wait on the add's latency at every
 * element. */
#define ROW_SUM_LANES 16
static void lanes_add_row(float *restrict lane, const float *restrict x, int64_t n)
{
    int64_t j = 0;
    for (; j + ROW_SUM_LANES <= n; j += ROW_SUM_LANES)
        for (int l = 0; l < ROW_SUM_LANES; ++l) lane[l] += x[j + l];
    for (int l = 0; l < n - j; ++l) lane[l] += x[j + l];
}

CPU_KERNEL(bias_grad, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t B = I(0), C = I(1), HW = I(2);
    CHECK(kneed_numel(k, 3, B * C * HW, "B*C*HW"));
    CHECK(kneed_numel(k, 4, C, "C"));
    const float *dY = PF(3);
    float *db = PF(4);
    if (HW == 1) {
        /* A linear layer's bias: db[c] = ((0 + dY[0,c]) + dY[1,c]) + ..., image by image as
         * below, but summed a row of dY at a time (a vector of channels per add) instead of
         * one channel at a time down a column; threads take channel ranges. */
#pragma omp parallel if (B * C > PAR_MIN)
        {
            const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            const int64_t c0 = C * t / nt, c1 = C * (t + 1) / nt;
            for (int64_t c = c0; c < c1; ++c) db[c] = 0.0f;
            for (int64_t b = 0; b < B; ++b) {
                const float *restrict y = dY + b * C;
                for (int64_t c = c0; c < c1; ++c) db[c] += y[c];
            }
        }
        return 0;
    }
#pragma omp parallel for if (B * C * HW > PAR_MIN) schedule(static)
    for (int64_t c = 0; c < C; ++c) {
        float acc = 0.0f;
        if (HW < ROW_SUM_LANES) {   /* a short plane (HW < ROW_SUM_LANES): no lanes to fill */
            for (int64_t b = 0; b < B; ++b)
                for (int64_t j = 0; j < HW; ++j) acc += dY[(b * C + c) * HW + j];
        } else {
            float lane[ROW_SUM_LANES] = {0.0f};
            for (int64_t b = 0; b < B; ++b) lanes_add_row(lane, dY + (b * C + c) * HW, HW);
            for (int l = 0; l < ROW_SUM_LANES; ++l) acc += lane[l];
        }
        db[c] = acc;
    }
    return 0;
}

CPU_KERNEL(relu_fwd, itt)
{
    int64_t n;
    CHECK(kneed_elements(k, 1, 2, &n));
    const float *X = PF(1);
    float *Y = PF(2);  /* may alias X */
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) Y[i] = X[i] > 0.0f ? X[i] : 0.0f;
    return 0;
}

CPU_KERNEL(relu_bwd, ittt)
{
    int64_t n;
    CHECK(kneed_elements(k, 1, 3, &n));
    const float *Y = PF(1), *dY = PF(2);
    float *dX = PF(3);  /* may alias dY */
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    /* dY is read whatever the mask, so the select needs no branch and vectorizes. */
    for (int64_t i = 0; i < n; ++i) {
        const float g = dY[i];
        dX[i] = Y[i] > 0.0f ? g : 0.0f;
    }
    return 0;
}

/* sgd_update's step on elements [i0, i1): g = dW + wd * W, V = momentum * V + g,
 * W -= lr * V, separate multiplies and adds (-std=c11: no contraction into FMAs), so every
 * x86 clone gives the same bits; they differ only in vector width (the runner is built
 * without -march, so the plain one is 4 lanes of SSE2). */
static inline CPU_ISA_BODY void sgd_step_body(int64_t i0, int64_t i1, float lr, float momentum,
                                              float wd, float *restrict W,
                                              const float *restrict dW, float *restrict V)
{
    for (int64_t i = i0; i < i1; ++i) {
        const float g = dW[i] + wd * W[i];
        const float v = momentum * V[i] + g;
        V[i] = v;
        W[i] -= lr * v;
    }
}
CPU_ISA_CLONES(sgd_step, (int64_t i0, int64_t i1, float lr, float momentum, float wd,
                          float *restrict W, const float *restrict dW, float *restrict V),
               (i0, i1, lr, momentum, wd, W, dW, V))

void cpu_sgd_step(int64_t i0, int64_t i1, float lr, float momentum, float wd, float *W,
                  const float *dW, float *V)
{
    CPU_ISA_PICK(sgd_step)(i0, i1, lr, momentum, wd, W, dW, V);
}

void cpu_sgd_update(int64_t n, float lr, float momentum, float wd, float *W, const float *dW,
                    float *V)
{
    void (*step)(int64_t, int64_t, float, float, float, float *restrict, const float *restrict,
                 float *restrict) = CPU_ISA_PICK(sgd_step);
#pragma omp parallel if (n > PAR_MIN)
    {   /* element ranges, one per thread (each element's step is independent) */
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        step(n * t / nt, n * (t + 1) / nt, lr, momentum, wd, W, dW, V);
    }
}

CPU_KERNEL(sgd_update, ifffttt)
{
    int64_t n;
    CHECK(kneed_elements(k, 4, 6, &n));
    const float lr = F(1), momentum = F(2), wd = F(3);
    cpu_sgd_update(n, lr, momentum, wd, PF(4), PF(5), PF(6));
    return 0;
}

CPU_KERNEL(fill, ift)
{
    int64_t n;
    CHECK(kneed_elements(k, 2, 2, &n));
    const float value = F(1);
    float *X = PF(2);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) X[i] = value;
    return 0;
}

CPU_KERNEL(copy, itt)
{
    int64_t n;
    CHECK(kneed_elements(k, 1, 2, &n));
    memmove(PF(2), PF(1), (size_t)n * sizeof(float));
    return 0;
}
