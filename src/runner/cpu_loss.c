/* CPU backend: the kernels of src/kernels/baseline/loss.cl (softmax_xent, mean) and what the
 * fused softmax_xent_bwd shares with softmax_xent: the label check (kneed_labels) and a row
 * (softmax_xent_row). */
#include "cpu_kernel_ctx.h"

#include <math.h>
#include <stdint.h>

CPU_KERNEL(softmax_xent, iitttt)
{
    CHECK(kneed_min(k, 0, 1));
    CHECK(kneed_min(k, 1, 1));
    const int B = I(0), C = I(1);
    CHECK(kneed_numel(k, 2, (int64_t)B * C, "B*C"));
    CHECK(kneed_numel(k, 3, B, "B"));
    CHECK(kneed_numel(k, 4, (int64_t)B * C, "B*C"));
    CHECK(kneed_numel(k, 5, B, "B"));
    CHECK(kneed_labels(k, 3, B, C));
    const int *labels = PI(3);
    const float *logits = PF(2);
    float *dlogits = PF(4), *row_loss = PF(5);
    const float inv_b = 1.0f / (float)B;
#pragma omp parallel for if ((int64_t)B * C > PAR_MIN) schedule(static)
    for (int b = 0; b < B; ++b)
        row_loss[b] = softmax_xent_row(logits + (int64_t)b * C, C, labels[b], inv_b,
                                       dlogits + (int64_t)b * C);
    return 0;
}

int kneed_labels(const kctx *k, int idx, int B, int C)
{
    const int *labels = PI(idx);
    for (int b = 0; b < B; ++b)
        if (labels[b] < 0 || labels[b] >= C)
            return kfail(k, idx, "holds label %d at row %d; labels must be in [0, C) = [0, %d)",
                         labels[b], b, C);
    return 0;
}

float softmax_xent_row(const float *x, int C, int label, float inv_b, float *dx)
{
    float mx = x[0], sum = 0.0f;
    for (int c = 1; c < C; ++c) mx = x[c] > mx ? x[c] : mx;
    for (int c = 0; c < C; ++c) sum += expf(x[c] - mx);
    const float inv_sum = 1.0f / sum;
    for (int c = 0; c < C; ++c)
        dx[c] = (expf(x[c] - mx) * inv_sum - (c == label ? 1.0f : 0.0f)) * inv_b;
    return logf(sum) - (x[label] - mx);
}

CPU_KERNEL(mean, itt)
{
    CHECK(kneed_min(k, 0, 1));
    CHECK(kneed_numel(k, 1, I(0), "n"));
    CHECK(kneed_numel(k, 2, 1, "1"));
    const float *X = PF(1);
    float acc = 0.0f;  /* serial, in index order: the same sum as the OpenCL kernel */
    for (int i = 0; i < I(0); ++i) acc += X[i];
    PF(2)[0] = acc / (float)I(0);
    return 0;
}
