/* CPU backend: the mobile CNN operators of the kernel ABI (src/kernels/README.md, section
 * "Mobile CNN operators") in C11 + OpenMP: depthwise 3x3 convolution, batch normalization in
 * training mode, ReLU6, element-wise add, global average pooling.
 *
 * Same contract as cpu_kernels.c (the shared checks of cpu_kernel_ctx.h; found through its
 * kernel table): each kernel checks its arguments first and reports the first bad one as
 * "kernel: argument i (name) ..."; reductions are per-output gathers in a fixed order (no
 * atomics), so results do not depend on the thread count. */
#include "cpu_kernel_ctx.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- depthwise 3x3 convolution -------------------------------------------------------- */

/* The 8 int arguments B C H W stride pad OH OW, OH = (H + 2*pad - 3)/stride + 1 (floor), and
 * the three tensors: image-sized (B*C*H*W), output-sized (B*C*OH*OW), weights (C*9). */
static int dw_dims(const kctx *k, int x_arg, int y_arg, int w_arg)
{
    for (int i = 0; i < 5; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W stride */
    CHECK(kneed_min(k, 5, 0));                               /* pad */
    const int oh = (I(2) + 2 * I(5) - 3) / I(4) + 1, ow = (I(3) + 2 * I(5) - 3) / I(4) + 1;
    if (I(2) + 2 * I(5) < 3 || I(6) != oh)
        return kfail(k, 6, "is %d; (H + 2*pad - 3)/stride + 1 = %d with H + 2*pad >= 3", I(6), oh);
    if (I(3) + 2 * I(5) < 3 || I(7) != ow)
        return kfail(k, 7, "is %d; (W + 2*pad - 3)/stride + 1 = %d with W + 2*pad >= 3", I(7), ow);
    const int64_t bc = (int64_t)I(0) * I(1);
    CHECK(kneed_numel(k, x_arg, bc * I(2) * I(3), "B*C*H*W"));
    CHECK(kneed_numel(k, y_arg, bc * I(6) * I(7), "B*C*OH*OW"));
    CHECK(kneed_numel(k, w_arg, (int64_t)I(1) * 9, "C*9"));
    return 0;
}

static int k_dwconv3x3_fwd(const kctx *k)
{
    CHECK(dw_dims(k, 8, 10, 9));
    const int C = I(1), H = I(2), W = I(3), s = I(4), pad = I(5), OH = I(6), OW = I(7);
    const int64_t n = (int64_t)I(0) * C * OH * OW;
    const float *X = PF(8), *Wt = PF(9);
    float *Y = PF(10);
#pragma omp parallel for if (n * 9 > PAR_MIN) schedule(static)
    for (int64_t o = 0; o < n; ++o) {
        const int ow = (int)(o % OW), oh = (int)(o / OW % OH);
        const int64_t bc = o / ((int64_t)OH * OW);
        const float *x = X + bc * H * W, *w = Wt + (bc % C) * 9;
        float acc = 0.0f;
        for (int kh = 0; kh < 3; ++kh) {
            const int h = oh * s - pad + kh;
            for (int kw = 0; kw < 3; ++kw) {
                const int wi = ow * s - pad + kw;
                const float v = (h >= 0 && h < H && wi >= 0 && wi < W) ? x[h * W + wi] : 0.0f;
                acc += w[kh * 3 + kw] * v;
            }
        }
        Y[o] = acc;
    }
    return 0;
}

static int k_dwconv3x3_bwd_data(const kctx *k)
{
    CHECK(dw_dims(k, 10, 8, 9));
    const int C = I(1), H = I(2), W = I(3), s = I(4), pad = I(5), OH = I(6), OW = I(7);
    const int64_t BC = (int64_t)I(0) * C;
    const float *dY = PF(8), *Wt = PF(9);
    float *dX = PF(10);
    /* Per (b, c) image: zero it, then add each tap's contributions, taps in (kh, kw) order.
     * Every input pixel thus sums its terms in the order of the OpenCL kernel's gather (which
     * loops over the same taps), without the gather's divisions by the stride. Threads own
     * whole images: no races, a fixed order. */
#pragma omp parallel for if (BC * OH * OW * 9 > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {
        float *dx = dX + bc * H * W;
        const float *dy = dY + bc * OH * OW, *wt = Wt + (bc % C) * 9;
        memset(dx, 0, (size_t)H * W * sizeof(float));
        for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) {
                const float wv = wt[kh * 3 + kw];
                for (int oh = 0; oh < OH; ++oh) {
                    const int h = oh * s - pad + kh;
                    if (h < 0 || h >= H) continue;
                    for (int ow = 0; ow < OW; ++ow) {
                        const int w = ow * s - pad + kw;
                        if (w >= 0 && w < W) dx[h * W + w] += wv * dy[oh * OW + ow];
                    }
                }
            }
    }
    return 0;
}

static int k_dwconv3x3_bwd_weight(const kctx *k)
{
    CHECK(dw_dims(k, 8, 9, 10));
    const int B = I(0), C = I(1), H = I(2), W = I(3), s = I(4), pad = I(5), OH = I(6), OW = I(7);
    const float *X = PF(8), *dY = PF(9);
    float *dW = PF(10);
    /* One sum per (c, kh, kw): each image's sum over oh, ow, then the B partial sums. */
#pragma omp parallel for if ((int64_t)B * C * OH * OW * 9 > PAR_MIN) schedule(static)
    for (int64_t t = 0; t < (int64_t)C * 9; ++t) {
        const int c = (int)(t / 9), kh = (int)(t % 9) / 3, kw = (int)(t % 3);
        float acc = 0.0f;
        for (int b = 0; b < B; ++b) {
            const float *x = X + ((int64_t)b * C + c) * H * W;
            const float *dy = dY + ((int64_t)b * C + c) * OH * OW;
            float part = 0.0f;   /* blocked: one image's sum, then the batch's */
            for (int oh = 0; oh < OH; ++oh) {
                const int h = oh * s - pad + kh;
                for (int ow = 0; ow < OW; ++ow) {
                    const int w = ow * s - pad + kw;
                    const float v = (h >= 0 && h < H && w >= 0 && w < W) ? x[h * W + w] : 0.0f;
                    part += v * dy[oh * OW + ow];
                }
            }
            acc += part;
        }
        dW[t] = acc;
    }
    return 0;
}

/* ---- batch normalization (training mode) ---------------------------------------------- */

/* B C HW >= 1 and the tensors at `big` hold B*C*HW, those at `small` C elements. */
static int bn_dims(const kctx *k, const int *big, int nbig, const int *small, int nsmall)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t n = (int64_t)I(0) * I(1) * I(2);
    for (int i = 0; i < nbig; ++i) CHECK(kneed_numel(k, big[i], n, "B*C*HW"));
    for (int i = 0; i < nsmall; ++i) CHECK(kneed_numel(k, small[i], I(1), "C"));
    return 0;
}

static int k_batchnorm_stats(const kctx *k)
{
    static const int big[] = {5}, small[] = {6, 7, 8, 9};
    CHECK(bn_dims(k, big, 1, small, 4));
    if (!(F(3) > 0.0f)) return kfail(k, 3, "is %g; eps must be > 0", (double)F(3));
    const int B = I(0), C = I(1), HW = I(2);
    const float eps = F(3), m = F(4);
    const float *X = PF(5);
    float *mean = PF(6), *invstd = PF(7), *rmean = PF(8), *rvar = PF(9);
    const float cnt = (float)((int64_t)B * HW);
#pragma omp parallel for if ((int64_t)B * C * HW > PAR_MIN) schedule(static)
    for (int c = 0; c < C; ++c) {
        /* Shifted sum (Chan, Golub & LeVeque, "Algorithms for computing the sample
         * variance", Am. Stat. 37(3), 1983): values equal to the channel's first one add
         * exactly 0, so a near-constant channel (an image background) gets an accurate mean,
         * which 1/sqrt(var + eps) would otherwise amplify the rounding of. */
        const float shift = X[(int64_t)c * HW];
        float sum = 0.0f;
        for (int b = 0; b < B; ++b) {   /* blocked: each image's sum, then the batch's */
            const float *x = X + ((int64_t)b * C + c) * HW;
            float part = 0.0f;
            for (int j = 0; j < HW; ++j) part += x[j] - shift;
            sum += part;
        }
        const float mu = shift + sum / cnt;
        float sq = 0.0f;  /* second pass: sum of squared deviations (no cancellation) */
        for (int b = 0; b < B; ++b) {
            const float *x = X + ((int64_t)b * C + c) * HW;
            float part = 0.0f;
            for (int j = 0; j < HW; ++j) {
                const float dv = x[j] - mu;
                part += dv * dv;
            }
            sq += part;
        }
        const float var = sq / cnt;
        const float unbiased = cnt > 1.0f ? var * cnt / (cnt - 1.0f) : var;
        mean[c] = mu;
        invstd[c] = 1.0f / sqrtf(var + eps);
        rmean[c] = (1.0f - m) * rmean[c] + m * mu;
        rvar[c] = (1.0f - m) * rvar[c] + m * unbiased;
    }
    return 0;
}

static int k_batchnorm_apply(const kctx *k)
{
    static const int big[] = {3, 8}, small[] = {4, 5, 6, 7};
    CHECK(bn_dims(k, big, 2, small, 4));
    const int C = I(1), HW = I(2);
    const int64_t n = (int64_t)I(0) * C * HW;
    const float *X = PF(3), *mean = PF(4), *invstd = PF(5), *gamma = PF(6), *beta = PF(7);
    float *Y = PF(8);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const int c = (int)(i / HW % C);
        Y[i] = ((X[i] - mean[c]) * invstd[c]) * gamma[c] + beta[c];
    }
    return 0;
}

static int k_batchnorm_bwd_reduce(const kctx *k)
{
    static const int big[] = {3, 4}, small[] = {5, 6, 7, 8};
    CHECK(bn_dims(k, big, 2, small, 4));
    const int B = I(0), C = I(1), HW = I(2);
    const float *X = PF(3), *dY = PF(4), *mean = PF(5), *invstd = PF(6);
    float *dgamma = PF(7), *dbeta = PF(8);
#pragma omp parallel for if ((int64_t)B * C * HW > PAR_MIN) schedule(static)
    for (int c = 0; c < C; ++c) {
        float sg = 0.0f, sb = 0.0f;
        for (int b = 0; b < B; ++b) {   /* blocked: each image's sums, then the batch's */
            const int64_t off = ((int64_t)b * C + c) * HW;
            float pg = 0.0f, pb = 0.0f;
            for (int j = 0; j < HW; ++j) {
                const float xhat = (X[off + j] - mean[c]) * invstd[c];
                pb += dY[off + j];
                pg += dY[off + j] * xhat;
            }
            sg += pg;
            sb += pb;
        }
        dgamma[c] = sg;
        dbeta[c] = sb;
    }
    return 0;
}

static int k_batchnorm_bwd_data(const kctx *k)
{
    static const int big[] = {3, 4, 10}, small[] = {5, 6, 7, 8, 9};
    CHECK(bn_dims(k, big, 3, small, 5));
    const int C = I(1), HW = I(2);
    const int64_t n = (int64_t)I(0) * C * HW;
    const float *X = PF(3), *dY = PF(4), *mean = PF(5), *invstd = PF(6), *gamma = PF(7),
                *dgamma = PF(8), *dbeta = PF(9);
    float *dX = PF(10);
    const float cnt = (float)((int64_t)I(0) * HW);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const int c = (int)(i / HW % C);
        const float xhat = (X[i] - mean[c]) * invstd[c];
        const float scale = gamma[c] * invstd[c] / cnt;
        dX[i] = scale * ((cnt * dY[i] - dbeta[c]) - xhat * dgamma[c]);
    }
    return 0;
}

/* ---- element-wise and pooling --------------------------------------------------------- */

static int k_relu6_fwd(const kctx *k)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    CHECK(kneed_numel(k, 1, n, "n"));
    CHECK(kneed_numel(k, 2, n, "n"));
    const float *X = PF(1);
    float *Y = PF(2);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = X[i] > 0.0f ? X[i] : 0.0f;
        Y[i] = v < 6.0f ? v : 6.0f;
    }
    return 0;
}

static int k_relu6_bwd(const kctx *k)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    for (int i = 1; i <= 3; ++i) CHECK(kneed_numel(k, i, n, "n"));
    const float *Y = PF(1), *dY = PF(2);
    float *dX = PF(3);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) dX[i] = (Y[i] > 0.0f && Y[i] < 6.0f) ? dY[i] : 0.0f;
    return 0;
}

static int k_add(const kctx *k)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    for (int i = 1; i <= 3; ++i) CHECK(kneed_numel(k, i, n, "n"));
    const float *A = PF(1), *B = PF(2);
    float *Y = PF(3);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) Y[i] = A[i] + B[i];
    return 0;
}

static int k_gap_fwd(const kctx *k)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t BC = (int64_t)I(0) * I(1), HW = I(2);
    CHECK(kneed_numel(k, 3, BC * HW, "B*C*HW"));
    CHECK(kneed_numel(k, 4, BC, "B*C"));
    const float *X = PF(3);
    float *Y = PF(4);
#pragma omp parallel for if (BC * HW > PAR_MIN) schedule(static)
    for (int64_t r = 0; r < BC; ++r) {
        float acc = 0.0f;
        for (int64_t j = 0; j < HW; ++j) acc += X[r * HW + j];
        Y[r] = acc / (float)HW;
    }
    return 0;
}

static int k_gap_bwd(const kctx *k)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t BC = (int64_t)I(0) * I(1), HW = I(2);
    CHECK(kneed_numel(k, 3, BC, "B*C"));
    CHECK(kneed_numel(k, 4, BC * HW, "B*C*HW"));
    const float *dY = PF(3);
    float *dX = PF(4);
#pragma omp parallel for if (BC * HW > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < BC * HW; ++i) dX[i] = dY[i / HW] / (float)HW;
    return 0;
}

/* ---- dispatch ------------------------------------------------------------------------- */


const kernel_spec CPU_MOBILE_KERNELS[] = {
    {"dwconv3x3_fwd", "iiiiiiiittt", "B C H W stride pad OH OW X Wt Y", k_dwconv3x3_fwd},
    {"dwconv3x3_bwd_data", "iiiiiiiittt", "B C H W stride pad OH OW dY Wt dX",
     k_dwconv3x3_bwd_data},
    {"dwconv3x3_bwd_weight", "iiiiiiiittt", "B C H W stride pad OH OW X dY dWt",
     k_dwconv3x3_bwd_weight},
    {"batchnorm_stats", "iiiffttttt", "B C HW eps momentum X mean invstd running_mean running_var",
     k_batchnorm_stats},
    {"batchnorm_apply", "iiitttttt", "B C HW X mean invstd gamma beta Y", k_batchnorm_apply},
    {"batchnorm_bwd_reduce", "iiitttttt", "B C HW X dY mean invstd dgamma dbeta",
     k_batchnorm_bwd_reduce},
    {"batchnorm_bwd_data", "iiitttttttt", "B C HW X dY mean invstd gamma dgamma dbeta dX",
     k_batchnorm_bwd_data},
    {"relu6_fwd", "itt", "n X Y", k_relu6_fwd},
    {"relu6_bwd", "ittt", "n Y dY dX", k_relu6_bwd},
    {"add", "ittt", "n A B Y", k_add},
    {"gap_fwd", "iiitt", "B C HW X Y", k_gap_fwd},
    {"gap_bwd", "iiitt", "B C HW dY dX", k_gap_bwd},
};

const int CPU_MOBILE_NKERNELS = (int)(sizeof CPU_MOBILE_KERNELS / sizeof CPU_MOBILE_KERNELS[0]);
