/* CPU backend of the fused kernels (src/kernels/README.md, "Fused kernels"): the same
 * semantics as src/kernels/fused/fused.cl. The linear layers' and convolutions' kernels are
 * the GEMM engine's products (cpu_gemm; cpu_gemm_tn_sgd for a linear update, its SGD step
 * applied per tile; cpu_conv.c for a convolution, its columns made per image or chunk of
 * images so they stay in L2) followed by their bias, ReLU or mask. The split-K
 * pair and the pooling and loss kernels compute one output element per loop iteration. Every
 * sum runs in an order fixed by the shape (deterministic at any thread count). Argument
 * checks report the first bad argument as cpu_kernel_ctx.h's checks do. */
#include "cpu_kernel_ctx.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Int arguments 0..n-1 must be >= 1, except `pad_arg` (>= 0) and `flag_arg` (0 or 1); -1: none. */
static int check_ints(const kctx *k, int n, int pad_arg, int flag_arg)
{
    for (int i = 0; i < n; ++i) {
        if (i == flag_arg) {
            if (I(i) != 0 && I(i) != 1) return kfail(k, i, "is %d; it must be 0 or 1", I(i));
        } else {
            CHECK(kneed_min(k, i, i == pad_arg ? 0 : 1));
        }
    }
    return 0;
}

/* B C H W OC KH KW stride pad OH OW at arguments 0..10: OH and OW must follow. */
static int conv_out_dims(const kctx *k)
{
    const int oh = (I(2) + 2 * I(8) - I(5)) / I(7) + 1, ow = (I(3) + 2 * I(8) - I(6)) / I(7) + 1;
    if (I(2) + 2 * I(8) < I(5) || I(9) != oh)
        return kfail(k, 9, "is %d; (H + 2*pad - KH)/stride + 1 = %d", I(9), oh);
    if (I(3) + 2 * I(8) < I(6) || I(10) != ow)
        return kfail(k, 10, "is %d; (W + 2*pad - KW)/stride + 1 = %d", I(10), ow);
    return 0;
}

static float relu_if(int act, float v) { return (act && !(v > 0.0f)) ? 0.0f : v; }

/* g = grad + wd * P; V = m * V + g; P -= lr * V (sgd_update's rule). */
static void sgd_step(float *P, float *V, int64_t i, float grad, float lr, float m, float wd)
{
    const float g = grad + wd * P[i];
    const float v = m * V[i] + g;
    V[i] = v;
    P[i] -= lr * v;
}

/* B C H W OC KH KW stride pad OH OW at arguments 0..10 (checked). */
static conv_geom conv_geom_of(const kctx *k)
{
    return (conv_geom){I(0), I(1), I(2), I(3), I(4), I(5), I(6), I(7), I(8), I(9), I(10)};
}

CPU_KERNEL(linear_fwd, iiiitttt)
{
    CHECK(check_ints(k, 4, -1, 3));
    const int B = I(0), O = I(1), In = I(2), act = I(3);
    CHECK(kneed_numel(k, 4, (int64_t)B * In, "B*I"));
    CHECK(kneed_numel(k, 5, (int64_t)O * In, "O*I"));
    CHECK(kneed_numel(k, 6, O, "O"));
    CHECK(kneed_numel(k, 7, (int64_t)B * O, "B*O"));
    const float *bias = PF(6);
    float *Y = PF(7);
    cpu_gemm(0, 1, B, O, In, 1.0f, PF(4), PF(5), 0.0f, Y);
    /* the epilogue: a few rows of O, in cache behind the GEMM */
    for (int64_t b = 0; b < B; ++b)
        for (int o = 0; o < O; ++o) Y[b * O + o] = relu_if(act, Y[b * O + o] + bias[o]);
    return 0;
}

/* conv_fwd's epilogue: bias, then ReLU where act. */
typedef struct {
    const float *bias;
    int act;
} bias_act;

static void bias_act_row(const void *ctx, int oc, const float *src, float *dst, int64_t P)
{
    const bias_act *e = ctx;
    for (int64_t p = 0; p < P; ++p) dst[p] = relu_if(e->act, src[p] + e->bias[oc]);
}

CPU_KERNEL(conv_fwd, iiiiiiiiiiiitttt)
{
    CHECK(check_ints(k, 12, 8, 11));
    CHECK(conv_out_dims(k));
    const conv_geom g = conv_geom_of(k);
    CHECK(kneed_numel(k, 12, (int64_t)g.B * g.C * g.H * g.W, "B*C*H*W"));
    CHECK(kneed_numel(k, 13, (int64_t)g.OC * g.C * g.KH * g.KW, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 14, g.OC, "OC"));
    CHECK(kneed_numel(k, 15, (int64_t)g.B * g.OC * g.OH * g.OW, "B*OC*OH*OW"));
    const bias_act e = {PF(14), I(11)};
    cpu_conv_fwd(&g, PF(12), PF(13), PF(15), bias_act_row, &e);
    return 0;
}

static void linear_dx(int B, int O, int In, int relu, const float *dY, const float *W,
                      const float *X, float *dX)
{
    cpu_gemm(0, 0, B, In, O, 1.0f, dY, W, 0.0f, dX);
    if (relu)   /* a select, not a branch: the mask is data (half of it zero after a ReLU) */
        for (int64_t e = 0; e < (int64_t)B * In; ++e) dX[e] = X[e] > 0.0f ? dX[e] : 0.0f;
}

CPU_KERNEL(linear_bwd_data, iiiitttt)
{
    CHECK(check_ints(k, 4, -1, 3));
    const int B = I(0), O = I(1), In = I(2);
    CHECK(kneed_numel(k, 4, (int64_t)B * O, "B*O"));
    CHECK(kneed_numel(k, 5, (int64_t)O * In, "O*I"));
    CHECK(kneed_numel(k, 6, (int64_t)B * In, "B*I"));
    CHECK(kneed_numel(k, 7, (int64_t)B * In, "B*I"));
    linear_dx(B, O, In, I(3), PF(4), PF(5), PF(6), PF(7));
    return 0;
}

/* conv_bwd_data's epilogue: dX masked by the forward input's ReLU (X > 0). */
static void relu_mask_span(const void *ctx, int64_t e0, int64_t e1)
{
    const float *const *xdx = ctx;
    const float *X = xdx[0];
    float *dX = (float *)xdx[1];
    for (int64_t e = e0; e < e1; ++e)   /* a select, not a branch: the mask is data */
        dX[e] = X[e] > 0.0f ? dX[e] : 0.0f;
}

CPU_KERNEL(conv_bwd_data, iiiiiiiiiiiitttt)
{
    CHECK(check_ints(k, 12, 8, 11));
    CHECK(conv_out_dims(k));
    const conv_geom g = conv_geom_of(k);
    const int64_t nx = (int64_t)g.B * g.C * g.H * g.W;
    CHECK(kneed_numel(k, 12, (int64_t)g.B * g.OC * g.OH * g.OW, "B*OC*OH*OW"));
    CHECK(kneed_numel(k, 13, (int64_t)g.OC * g.C * g.KH * g.KW, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 14, nx, "B*C*H*W"));
    CHECK(kneed_numel(k, 15, nx, "B*C*H*W"));
    const float *xdx[2] = {PF(14), PF(15)};
    cpu_conv_bwd_data(&g, PF(12), PF(13), PF(15), I(11) ? relu_mask_span : NULL, xdx);
    return 0;
}

CPU_KERNEL(maxpool_bwd_relu, iiiiiiiitttt)
{
    CHECK(check_ints(k, 6, -1, -1));
    const int B = I(0), C = I(1), H = I(2), W = I(3), K = I(4), s = I(5), OH = I(6), OW = I(7);
    if (H < K || OH != (H - K) / s + 1)
        return kfail(k, 6, "is %d; (H - K)/stride + 1 = %d with H >= K", OH, (H - K) / s + 1);
    if (W < K || OW != (W - K) / s + 1)
        return kfail(k, 7, "is %d; (W - K)/stride + 1 = %d with W >= K", OW, (W - K) / s + 1);
    const int64_t BC = (int64_t)B * C;
    CHECK(kneed_numel(k, 8, BC * OH * OW, "B*C*OH*OW"));
    CHECK(kneed_numel(k, 9, BC * OH * OW, "B*C*OH*OW"));
    CHECK(kneed_numel(k, 10, BC * H * W, "B*C*H*W"));
    CHECK(kneed_numel(k, 11, BC * H * W, "B*C*H*W"));
    const float *dY = PF(8), *X = PF(10);
    const int *argmax = PI(9);
    float *dX = PF(11);
#pragma omp parallel for if (BC * H * W > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {
        float *dx = dX + bc * H * W;
        const float *x = X + bc * H * W, *dy = dY + bc * OH * OW;
        const int *am = argmax + bc * OH * OW;
        memset(dx, 0, (size_t)H * W * sizeof(float));
        for (int o = 0; o < OH * OW; ++o)   /* scatter in window order within one image */
            if (am[o] >= 0 && am[o] < H * W) dx[am[o]] += dy[o];
        for (int i = 0; i < H * W; ++i)   /* a select, not a branch (the mask is data) */
            dx[i] = x[i] > 0.0f ? dx[i] : 0.0f;
    }
    return 0;
}

CPU_KERNEL(softmax_xent_bwd, iiiittttttt)
{
    CHECK(check_ints(k, 4, -1, 3));
    const int B = I(0), C = I(1), In = I(2);
    CHECK(kneed_numel(k, 4, (int64_t)B * C, "B*C"));
    CHECK(kneed_numel(k, 5, B, "B"));
    CHECK(kneed_numel(k, 6, (int64_t)C * In, "C*I"));
    CHECK(kneed_numel(k, 7, (int64_t)B * In, "B*I"));
    CHECK(kneed_numel(k, 8, (int64_t)B * C, "B*C"));
    CHECK(kneed_numel(k, 9, (int64_t)B * In, "B*I"));
    CHECK(kneed_numel(k, 10, 1, "1"));
    CHECK(kneed_labels(k, 5, B, C));
    const int *labels = PI(5);
    const float *logits = PF(4);
    float *dlogits = PF(8);
    const float inv_b = 1.0f / (float)B;
    float total = 0.0f;   /* row losses summed in row order, as mean() does */
    for (int b = 0; b < B; ++b)
        total += softmax_xent_row(logits + (int64_t)b * C, C, labels[b], inv_b,
                                  dlogits + (int64_t)b * C);
    PF(10)[0] = total / (float)B;
    linear_dx(B, C, In, I(3), dlogits, PF(6), PF(7), PF(9));
    return 0;
}

CPU_KERNEL(linear_sgd, iiiffftttttt)
{
    CHECK(check_ints(k, 3, -1, -1));
    const int B = I(0), O = I(1), In = I(2);
    const float lr = F(3), m = F(4), wd = F(5);
    CHECK(kneed_numel(k, 6, (int64_t)B * In, "B*I"));
    CHECK(kneed_numel(k, 7, (int64_t)B * O, "B*O"));
    CHECK(kneed_numel(k, 8, (int64_t)O * In, "O*I"));
    CHECK(kneed_numel(k, 9, (int64_t)O * In, "O*I"));
    CHECK(kneed_numel(k, 10, O, "O"));
    CHECK(kneed_numel(k, 11, O, "O"));
    const float *dY = PF(7);
    float *bias = PF(10), *Vb = PF(11);
    cpu_gemm_tn_sgd(O, In, B, dY, PF(6), lr, m, wd, PF(8), PF(9));
    for (int o = 0; o < O; ++o) {   /* the bias: column sums of dY, rows in order */
        float acc = 0.0f;
        for (int b = 0; b < B; ++b) acc += dY[(int64_t)b * O + o];
        sgd_step(bias, Vb, o, acc, lr, m, wd);
    }
    return 0;
}

CPU_KERNEL(conv_sgd, iiiiiiiiiiiffftttttt)
{
    CHECK(check_ints(k, 11, 8, -1));
    CHECK(conv_out_dims(k));
    const conv_geom g = conv_geom_of(k);
    const float lr = F(11), m = F(12), wd = F(13);
    const int64_t ckk = (int64_t)g.C * g.KH * g.KW, P = (int64_t)g.OH * g.OW;
    CHECK(kneed_numel(k, 14, (int64_t)g.B * g.C * g.H * g.W, "B*C*H*W"));
    CHECK(kneed_numel(k, 15, (int64_t)g.B * g.OC * P, "B*OC*OH*OW"));
    CHECK(kneed_numel(k, 16, g.OC * ckk, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 17, g.OC * ckk, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 18, g.OC, "OC"));
    CHECK(kneed_numel(k, 19, g.OC, "OC"));
    const float *dY = PF(15);
    float *bias = PF(18), *Vb = PF(19);
    float *grad = cpu_scratch(SCRATCH_GRADIENT, (size_t)(g.OC * ckk));
    cpu_conv_wgrad(&g, PF(14), dY, grad);
    cpu_sgd_update(g.OC * ckk, lr, m, wd, PF(16), grad, PF(17));
    for (int oc = 0; oc < g.OC; ++oc) {   /* the bias: dY's sums, images then positions in order */
        float acc = 0.0f;
        for (int b = 0; b < g.B; ++b) {
            const float *dy = dY + ((int64_t)b * g.OC + oc) * P;
            for (int64_t p = 0; p < P; ++p) acc += dy[p];
        }
        sgd_step(bias, Vb, oc, acc, lr, m, wd);
    }
    return 0;
}

/* ---------------------------------------------------------------- conv_sgd split along K */

/* Sum over the outputs i0 <= i < i1 (i = (b*OH + oh)*OW + ow) of dY[b,oc,oh,ow] times
 * X[b,c,oh*s-pad+kh,ow*s-pad+kw] (0 outside the image), in i order; bias (kk == C*KH*KW): of
 * dY[b,oc,oh,ow]. One chunk of a split-K weight-gradient sum, walked as row segments (one
 * (b, oh) at a time, as k_conv_sgd's loops). */
static float conv_wgrad_range(const float *X, const float *dY, int C, int H, int W, int OC,
                              int KH, int KW, int s, int pad, int OH, int OW, int64_t oc,
                              int64_t kk, int64_t i0, int64_t i1)
{
    const int64_t P = (int64_t)OH * OW, ckk = (int64_t)C * KH * KW;
    const int kw = (int)(kk % KW), kh = (int)(kk / KW % KH), c = (int)(kk / ((int64_t)KW * KH));
    float acc = 0.0f;
    for (int64_t i = i0; i < i1;) {
        const int64_t b = i / P;
        const int oh = (int)(i % P / OW), ow0 = (int)(i % OW);
        const int ow1 = i1 - i < OW - ow0 ? ow0 + (int)(i1 - i) : OW;
        const float *dy = dY + (b * OC + oc) * P + (int64_t)oh * OW;
        const int ih = oh * s - pad + kh;
        i += ow1 - ow0;
        if (kk == ckk) {
            for (int ow = ow0; ow < ow1; ++ow) acc += dy[ow];
            continue;
        }
        if (ih < 0 || ih >= H) continue;
        const float *x = X + ((b * C + c) * H + ih) * W;
        for (int ow = ow0; ow < ow1; ++ow) {
            const int iw = ow * s - pad + kw;
            if (iw >= 0 && iw < W) acc += dy[ow] * x[iw];
        }
    }
    return acc;
}

CPU_KERNEL(conv_wgrad_partial, iiiiiiiiiiiittt)
{
    CHECK(check_ints(k, 12, 8, -1));
    CHECK(conv_out_dims(k));
    const int B = I(0), C = I(1), H = I(2), W = I(3), OC = I(4), KH = I(5), KW = I(6);
    const int s = I(7), pad = I(8), OH = I(9), OW = I(10), S = I(11);
    const int64_t ckk = (int64_t)C * KH * KW, n = (int64_t)B * OH * OW;
    CHECK(kneed_numel(k, 12, (int64_t)B * C * H * W, "B*C*H*W"));
    CHECK(kneed_numel(k, 13, (int64_t)B * OC * OH * OW, "B*OC*OH*OW"));
    CHECK(kneed_numel(k, 14, (int64_t)S * OC * (ckk + 1), "S*OC*(C*KH*KW+1)"));
    const float *X = PF(12), *dY = PF(13);
    float *part = PF(14);
    const int64_t chunk = (n - 1) / S + 1, outs = (int64_t)S * OC * (ckk + 1);
#pragma omp parallel for if (outs * chunk > PAR_MIN) schedule(static)
    for (int64_t e = 0; e < outs; ++e) {   /* e = (sc*OC + oc)*(ckk+1) + kk */
        const int64_t kk = e % (ckk + 1), oc = e / (ckk + 1) % OC, sc = e / (ckk + 1) / OC;
        const int64_t i0 = sc * chunk < n ? sc * chunk : n;
        const int64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        part[e] = conv_wgrad_range(X, dY, C, H, W, OC, KH, KW, s, pad, OH, OW, oc, kk, i0, i1);
    }
    return 0;
}

CPU_KERNEL(conv_sgd_finish, iiiiifffttttt)
{
    CHECK(check_ints(k, 5, -1, -1));
    const int C = I(0), OC = I(1), KH = I(2), KW = I(3), S = I(4);
    const float lr = F(5), m = F(6), wd = F(7);
    const int64_t ckk = (int64_t)C * KH * KW, outs = (int64_t)OC * (ckk + 1);
    CHECK(kneed_numel(k, 8, (int64_t)S * outs, "S*OC*(C*KH*KW+1)"));
    CHECK(kneed_numel(k, 9, OC * ckk, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 10, OC * ckk, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 11, OC, "OC"));
    CHECK(kneed_numel(k, 12, OC, "OC"));
    const float *part = PF(8);
    float *Wt = PF(9), *V = PF(10), *bias = PF(11), *Vb = PF(12);
#pragma omp parallel for if (outs * S > PAR_MIN) schedule(static)
    for (int64_t e = 0; e < outs; ++e) {   /* e = oc*(ckk+1) + kk */
        const int64_t oc = e / (ckk + 1), kk = e % (ckk + 1);
        float acc = 0.0f;
        for (int sc = 0; sc < S; ++sc) acc += part[sc * outs + e];   /* chunk order */
        if (kk == ckk) sgd_step(bias, Vb, oc, acc, lr, m, wd);
        else sgd_step(Wt, V, oc * ckk + kk, acc, lr, m, wd);
    }
    return 0;
}

