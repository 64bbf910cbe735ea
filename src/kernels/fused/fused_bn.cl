/* Fused kernels of bias-free (grouped) convolutions followed by batch normalization, the
 * MobileNetV2 layer unit "conv -> BatchNorm2d -> [ReLU6] [+ residual]" (kernel ABI:
 * src/kernels/README.md, "Fused batch-norm kernels"):
 *
 *   conv_bn_fwd     the convolution, the batch statistics, the normalization, the activation
 *                   and the residual add of one output channel in one work-group;
 *   bn_bwd_sgd      the batch-norm backward of one channel (parameter gradients, the input
 *                   gradient through the statistics) and the SGD step of gamma and beta;
 *   gconv_bwd_data  the convolution's input gradient with the activation mask of its input
 *                   and, optionally, the residual gradient added;
 *   gconv_sgd       the convolution's weight gradient and its SGD step, one work-group per
 *                   weight.
 *
 * Grouped convolution: C input and OC output channels in `groups` groups (C % groups == 0,
 * OC % groups == 0), weight[OC, C/groups, KH, KW]; groups == 1 is a plain convolution,
 * groups == C == OC the depthwise one. Activation codes: 0 none, 1 ReLU, 2 ReLU6.
 * Every sum is a gather in a fixed order (no atomics): deterministic run to run. The
 * work-group reductions (conv_bn_fwd, bn_bwd_sgd, gconv_sgd) take strided partial sums, then
 * a tree in local memory (wg_sum and RL_MAX from common.cl; conv_tap_output for
 * gconv_bwd_data); any power-of-two local size up to RL_MAX, work-groups past the edge
 * return as a whole.
 *
 * Parameters: none (the reductions' local size is the launch's, 64 by the ABI). */

/* act(v) for the activation codes above. */
static inline float bn_act(const float v, const int act)
{
    if (act == 1) return v > 0.0f ? v : 0.0f;
    if (act == 2) return fmin(fmax(v, 0.0f), 6.0f);
    return v;
}

/* Whether the gradient passes the activation whose output is y (relu_bwd / relu6_bwd). */
static inline int bn_act_passes(const float y, const int act)
{
    if (act == 1) return y > 0.0f;
    if (act == 2) return y > 0.0f && y < 6.0f;
    return 1;
}

/* Z[b,oc,oh,ow] of a grouped convolution: taps in (ci, kh, kw) order, 0 outside the image. */
static inline float gconv_at(__global const float *X, __global const float *weight,
                             const int b, const int oc, const int oh, const int ow,
                             const int C, const int H, const int W, const int OC,
                             const int KH, const int KW, const int stride, const int pad,
                             const int groups)
{
    const int cg = C / groups, g = oc / (OC / groups);
    const __global float *w = weight + (size_t)oc * cg * KH * KW;
    float acc = 0.0f;
    for (int ci = 0; ci < cg; ++ci) {
        const __global float *x = X + ((size_t)b * C + g * cg + ci) * H * W;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oh * stride - pad + kh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const int iw = ow * stride - pad + kw;
                if (iw >= 0 && iw < W) acc += w[(ci * KH + kh) * KW + kw] * x[ih * W + iw];
            }
        }
    }
    return acc;
}

/* One output channel oc per work-group: Z = the grouped convolution (stored, the backward's
 * batch-norm input); mean[oc] = s + sum(Z - s) / n with s = Z[0,oc,0] (the shifted sum of
 * batchnorm_stats), var = sum((Z - mean)^2) / n, invstd = 1 / sqrt(var + eps), running
 * statistics as batchnorm_stats; then Y = act(((Z - mean) * invstd) * gamma + beta) (+ R when
 * res != 0), n = B*OH*OW. Work-item l handles the positions l, l+L, ... of the channel and
 * re-reads only the Z values it wrote itself. NDRange [OC*L], local [L]. */
__kernel void conv_bn_fwd(const int B, const int C, const int H, const int W, const int OC,
                          const int KH, const int KW, const int stride, const int pad,
                          const int OH, const int OW, const int groups, const int act,
                          const int res, const float eps, const float momentum,
                          __global const float *X, __global const float *weight,
                          __global const float *gamma, __global const float *beta,
                          __global const float *R, __global float *Z, __global float *Y,
                          __global float *mean, __global float *invstd,
                          __global float *running_mean, __global float *running_var)
{
    __local float scratch[RL_MAX];
    const int oc = get_group_id(0), l = get_local_id(0), L = get_local_size(0);
    if (oc >= OC) return;
    const int P = OH * OW, n = B * P;
    const float cnt = (float)n;
    const float shift = gconv_at(X, weight, 0, oc, 0, 0, C, H, W, OC, KH, KW, stride, pad,
                                 groups);
    float part = 0.0f;
    for (int i = l; i < n; i += L) {
        const int b = i / P, p = i % P;
        const float z = gconv_at(X, weight, b, oc, p / OW, p % OW, C, H, W, OC, KH, KW, stride,
                                 pad, groups);
        Z[((size_t)b * OC + oc) * P + p] = z;
        part += z - shift;
    }
    const float mu = shift + wg_sum(part, scratch) / cnt;
    float sq = 0.0f;
    for (int i = l; i < n; i += L) {
        const float dv = Z[((size_t)(i / P) * OC + oc) * P + i % P] - mu;
        sq += dv * dv;
    }
    const float var = wg_sum(sq, scratch) / cnt;
    const float is = 1.0f / sqrt(var + eps), ga = gamma[oc], be = beta[oc];
    for (int i = l; i < n; i += L) {
        const size_t at = ((size_t)(i / P) * OC + oc) * P + i % P;
        const float y = bn_act(((Z[at] - mu) * is) * ga + be, act);
        Y[at] = res ? y + R[at] : y;
    }
    if (l != 0) return;
    const float unbiased = cnt > 1.0f ? var * cnt / (cnt - 1.0f) : var;
    mean[oc] = mu;
    invstd[oc] = is;
    running_mean[oc] = (1.0f - momentum) * running_mean[oc] + momentum * mu;
    running_var[oc] = (1.0f - momentum) * running_var[oc] + momentum * unbiased;
}

/* g = grad + weight_decay * P; V = momentum * V + g; P -= lr * V (sgd_update's rule). */
#define BN_SGD_STEP(P, V, idx, grad)                                \
    do {                                                            \
        const float g_ = (grad) + weight_decay * (P)[idx];          \
        const float v_ = momentum * (V)[idx] + g_;                  \
        (V)[idx] = v_;                                              \
        (P)[idx] -= lr * v_;                                        \
    } while (0)

/* One channel c per work-group: d = dY, times the activation mask of Y when act != 0
 * (relu_bwd / relu6_bwd of the layer's output); xhat = (X - mean[c]) * invstd[c];
 * dbeta = sum d, dgamma = sum d * xhat; dX = gamma[c] * invstd[c] / n * ((n * d - dbeta) -
 * xhat * dgamma), n = B*HW (batchnorm_bwd_data, with the old gamma); then the SGD step of
 * gamma[c] (Vg) and beta[c] (Vb) with dgamma, dbeta. NDRange [C*L], local [L]. */
__kernel void bn_bwd_sgd(const int B, const int C, const int HW, const int act, const float lr,
                         const float momentum, const float weight_decay,
                         __global const float *X, __global const float *Y,
                         __global const float *dY, __global const float *mean,
                         __global const float *invstd, __global float *gamma,
                         __global float *beta, __global float *Vg, __global float *Vb,
                         __global float *dX)
{
    __local float scratch[RL_MAX];
    const int c = get_group_id(0), l = get_local_id(0), L = get_local_size(0);
    if (c >= C) return;
    const int n = B * HW;
    const float mu = mean[c], is = invstd[c], ga = gamma[c], cnt = (float)n;
    float pg = 0.0f, pb = 0.0f;
    for (int i = l; i < n; i += L) {
        const size_t at = ((size_t)(i / HW) * C + c) * HW + i % HW;
        const float d = bn_act_passes(Y[at], act) ? dY[at] : 0.0f;
        pb += d;
        pg += d * ((X[at] - mu) * is);
    }
    /* every work-item read gamma[c] above, before the barriers of wg_sum */
    const float sg = wg_sum(pg, scratch), sb = wg_sum(pb, scratch);
    const float scale = ga * is / cnt;
    for (int i = l; i < n; i += L) {
        const size_t at = ((size_t)(i / HW) * C + c) * HW + i % HW;
        const float d = bn_act_passes(Y[at], act) ? dY[at] : 0.0f;
        dX[at] = scale * ((cnt * d - sb) - ((X[at] - mu) * is) * sg);
    }
    if (l != 0) return;
    BN_SGD_STEP(gamma, Vg, c, sg);
    BN_SGD_STEP(beta, Vb, c, sb);
}

/* Input gradient of a grouped convolution, reading dY in NCHW: dX[b,c,h,w] = sum over the
 * output channels oc of c's group, then (kh, kw) with oh = (h+pad-kh)/stride,
 * ow = (w+pad-kw)/stride whole and in range, of weight[oc, c % (C/groups), kh, kw] *
 * dY[b,oc,oh,ow]; plus R[b,c,h,w] when res != 0 (the skip connection's gradient); times the
 * activation mask of X (the layer's input, an activation's output) when act != 0.
 * NDRange [H*W, B*C]. */
__kernel void gconv_bwd_data(const int B, const int C, const int H, const int W, const int OC,
                             const int KH, const int KW, const int stride, const int pad,
                             const int OH, const int OW, const int groups, const int act,
                             const int res, __global const float *dY,
                             __global const float *weight, __global const float *X,
                             __global const float *R, __global float *dX)
{
    const int p = get_global_id(0), q = get_global_id(1);
    if (p >= H * W || q >= B * C) return;
    const int w = p % W, h = p / W, c = q % C, b = q / C;
    const size_t e = (size_t)q * H * W + p;
    if (!bn_act_passes(X[e], act)) {
        dX[e] = 0.0f;
        return;
    }
    const int cg = C / groups, og = OC / groups, g = c / cg, ci = c % cg;
    float acc = 0.0f;
    for (int j = 0; j < og; ++j) {
        const int oc = g * og + j;
        for (int kh = 0; kh < KH; ++kh) {
            const int oh = conv_tap_output(h, pad, kh, stride, OH);
            if (oh < 0) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const int ow = conv_tap_output(w, pad, kw, stride, OW);
                if (ow < 0) continue;
                acc += weight[(((size_t)oc * cg + ci) * KH + kh) * KW + kw] *
                       dY[(((size_t)b * OC + oc) * OH + oh) * OW + ow];
            }
        }
    }
    dX[e] = res ? acc + R[e] : acc;
}

/* Weight gradient + SGD step of a grouped convolution: for k = (ci*KH+kh)*KW+kw <
 * (C/groups)*KH*KW, dW[oc,k] = sum over (b, oh, ow) of dY[b,oc,oh,ow] *
 * X[b, g*(C/groups)+ci, oh*stride-pad+kh, ow*stride-pad+kw] (0 outside the image; g the
 * group of oc), then the SGD step on weight[oc,k], V[oc,k]. One work-group per (k, oc):
 * NDRange [(C/groups)*KH*KW*L, OC], local [L, 1] (as conv_sgd, without the bias column). */
__kernel void gconv_sgd(const int B, const int C, const int H, const int W, const int OC,
                        const int KH, const int KW, const int stride, const int pad,
                        const int OH, const int OW, const int groups, const float lr,
                        const float momentum, const float weight_decay,
                        __global const float *X, __global const float *dY,
                        __global float *weight, __global float *V)
{
    __local float scratch[RL_MAX];
    const int k = get_group_id(0), oc = get_global_id(1);
    const int l = get_local_id(0), L = get_local_size(0);
    const int cg = C / groups, ckk = cg * KH * KW, P = OH * OW, n = B * P;
    if (k >= ckk) return;   /* a whole work-group: no barrier is skipped by part of one */
    __local float *row = scratch + get_local_id(1) * L;
    float part = 0.0f;
    if (oc < OC) {
        const int kw = k % KW, kh = (k / KW) % KH, c = (oc / (OC / groups)) * cg + k / (KW * KH);
        for (int i = l; i < n; i += L) {
            const int b = i / P, ow = i % OW, oh = (i / OW) % OH;
            const int ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                part += dY[((size_t)b * OC + oc) * P + oh * OW + ow] *
                        X[(((size_t)b * C + c) * H + ih) * W + iw];
        }
    }
    const float total = wg_sum(part, row);
    if (l != 0 || oc >= OC) return;
    BN_SGD_STEP(weight, V, (size_t)oc * ckk + k, total);
}
