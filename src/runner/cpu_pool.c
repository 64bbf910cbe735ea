/* CPU backend: the kernels of src/kernels/baseline/pool.cl (maxpool_fwd, maxpool_bwd). */
#include "cpu_kernel_ctx.h"

#include <stdint.h>
#include <string.h>

/* Checks the 8 int arguments of maxpool_fwd/bwd: OH = (H - K)/stride + 1 (no padding). */
static int pool_dims(const kctx *k, int x_arg, int y_arg, int argmax_arg)
{
    for (int i = 0; i < 6; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W K stride */
    if (I(2) < I(4) || I(6) != (I(2) - I(4)) / I(5) + 1)
        return kfail(k, 6, "is %d; (H - K)/stride + 1 = %d with H >= K", I(6),
                    (I(2) - I(4)) / I(5) + 1);
    if (I(3) < I(4) || I(7) != (I(3) - I(4)) / I(5) + 1)
        return kfail(k, 7, "is %d; (W - K)/stride + 1 = %d with W >= K", I(7),
                    (I(3) - I(4)) / I(5) + 1);
    const int64_t bc = (int64_t)I(0) * I(1);
    CHECK(kneed_numel(k, x_arg, bc * I(2) * I(3), "B*C*H*W"));
    CHECK(kneed_numel(k, y_arg, bc * I(6) * I(7), "B*C*OH*OW"));
    CHECK(kneed_numel(k, argmax_arg, bc * I(6) * I(7), "B*C*OH*OW"));
    return 0;
}

CPU_KERNEL(maxpool_fwd, iiiiiiiittt)
{
    CHECK(pool_dims(k, 8, 9, 10));
    const int H = I(2), W = I(3), K = I(4), stride = I(5), OH = I(6), OW = I(7);
    const int64_t BC = (int64_t)I(0) * I(1);
    const float *X = PF(8);
    float *Y = PF(9);
    int *argmax = PI(10);
#pragma omp parallel for if (BC * H * W > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {
        const float *x = X + bc * H * W;
        if (K == 2 && stride == 2) {   /* LeNet's pooling: the same scan, unrolled */
            for (int oh = 0; oh < OH; ++oh) {
                const float *r0 = x + 2 * oh * W, *r1 = r0 + W;
                float *y = Y + (bc * OH + oh) * OW;
                int *am = argmax + (bc * OH + oh) * OW;
                for (int ow = 0; ow < OW; ++ow) {
                    const int w = 2 * ow;
                    int best = 2 * oh * W + w;
                    float m = r0[w];
                    if (r0[w + 1] > m) { m = r0[w + 1]; best = 2 * oh * W + w + 1; }
                    if (r1[w] > m) { m = r1[w]; best = (2 * oh + 1) * W + w; }
                    if (r1[w + 1] > m) { m = r1[w + 1]; best = (2 * oh + 1) * W + w + 1; }
                    y[ow] = m;
                    am[ow] = best;
                }
            }
            continue;
        }
        for (int oh = 0; oh < OH; ++oh)
            for (int ow = 0; ow < OW; ++ow) {
                int best = oh * stride * W + ow * stride;
                float m = x[best];
                for (int h = oh * stride; h < oh * stride + K; ++h)
                    for (int w = ow * stride; w < ow * stride + K; ++w)
                        if (x[h * W + w] > m) {
                            m = x[h * W + w];
                            best = h * W + w;
                        }
                const int64_t o = (bc * OH + oh) * OW + ow;
                Y[o] = m;
                argmax[o] = best;
            }
    }
    return 0;
}

CPU_KERNEL(maxpool_bwd, iiiiiiiittt)
{
    CHECK(pool_dims(k, 10, 8, 9));  /* dX has the input's size; dY and argmax the output's */
    const int H = I(2), W = I(3), OH = I(6), OW = I(7);
    const int64_t BC = (int64_t)I(0) * I(1);
    const float *dY = PF(8);
    const int *argmax = PI(9);
    float *dX = PF(10);
#pragma omp parallel for if (BC * H * W > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {
        float *dx = dX + bc * H * W;
        const float *dy = dY + bc * OH * OW;
        const int *am = argmax + bc * OH * OW;
        memset(dx, 0, (size_t)H * W * sizeof(float));
        /* Scatter per image in window order; an argmax outside the image is skipped. */
        for (int o = 0; o < OH * OW; ++o)
            if (am[o] >= 0 && am[o] < H * W) dx[am[o]] += dy[o];
    }
    return 0;
}
