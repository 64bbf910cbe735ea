/* Baseline mobile CNN operators (kernel ABI: src/kernels/README.md, section "Mobile CNN
 * operators"): depthwise 3x3 convolution, batch normalization in training mode, ReLU6,
 * element-wise add, global average pooling. One work-item per output element, global memory
 * only; out-of-range work-items return early. The long reductions (the batch-norm statistics
 * and gradients per channel, the depthwise weight gradient per weight) take one work-group
 * per output instead: its work-items sum strided slices of the B x spatial values, then a
 * tree in local memory (common.cl's wg_sum; common.cl is staged in front of this file, and
 * RL_MAX, the largest work-group, comes from it) adds the partial sums, in a fixed order (no
 * atomics), so a launch is deterministic for a given local size. NDRange [outputs * L], local
 * [L], L a power of two <= RL_MAX (the ABI's launches use L = 64). The depthwise gradients'
 * tap loops are common.cl's: conv_tap_gather (dwconv3x3_bwd_data) and conv_wgrad_share
 * (dwconv3x3_bwd_weight). */

/* Y[b,c,oh,ow] = sum over kh, kw of Wt[c,kh,kw] * X[b,c,oh*stride-pad+kh, ow*stride-pad+kw]
 * (0 outside the image). NDRange [B*C*OH*OW]. */
__kernel void dwconv3x3_fwd(const int B, const int C, const int H, const int W,
                            const int stride, const int pad, const int OH, const int OW,
                            __global const float *X, __global const float *Wt,
                            __global float *Y)
{
    const int o = get_global_id(0);
    if (o >= B * C * OH * OW) return;
    const int ow = o % OW, oh = (o / OW) % OH, bc = o / (OW * OH);
    const __global float *x = X + (size_t)bc * H * W;
    const __global float *w = Wt + (bc % C) * 9;
    float acc = 0.0f;
    for (int kh = 0; kh < 3; ++kh) {
        const int h = oh * stride - pad + kh;
        for (int kw = 0; kw < 3; ++kw) {
            const int wi = ow * stride - pad + kw;
            const float v = (h >= 0 && h < H && wi >= 0 && wi < W) ? x[h * W + wi] : 0.0f;
            acc += w[kh * 3 + kw] * v;
        }
    }
    Y[o] = acc;
}

/* dX[b,c,h,w] = sum of Wt[c,kh,kw] * dY[b,c,oh,ow] over the taps with
 * oh*stride - pad + kh == h (and likewise w), in (kh, kw) order. NDRange [B*C*H*W]. */
__kernel void dwconv3x3_bwd_data(const int B, const int C, const int H, const int W,
                                 const int stride, const int pad, const int OH, const int OW,
                                 __global const float *dY, __global const float *Wt,
                                 __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= B * C * H * W) return;
    const int w = i % W, h = (i / W) % H, bc = i / (W * H);
    const __global float *dy = dY + (size_t)bc * OH * OW;
    const __global float *wt = Wt + (bc % C) * 9;
    dX[i] = conv_tap_gather(0.0f, dy, wt, h, w, 3, 3, stride, pad, OH, OW);
}

/* dWt[c,kh,kw] = sum over b, oh, ow of dY[b,c,oh,ow] * X[b,c,oh*stride-pad+kh,
 * ow*stride-pad+kw] (0 outside the image). One work-group per weight t = (c, kh, kw):
 * NDRange [C*9*L], local [L]. */
__kernel void dwconv3x3_bwd_weight(const int B, const int C, const int H, const int W,
                                   const int stride, const int pad, const int OH, const int OW,
                                   __global const float *X, __global const float *dY,
                                   __global float *dWt)
{
    __local float scratch[RL_MAX];
    const int t = get_group_id(0), l = get_local_id(0), L = get_local_size(0);
    if (t >= C * 9) return;   /* whole work-groups only: no barrier is skipped by part of one */
    const int c = t / 9, kh = (t % 9) / 3, kw = t % 3;
    /* channel c of dY is the output channel of input channel c (OC = C) */
    const float part = conv_wgrad_share(dY, X, B, C, H, W, C, OH, OW, stride, pad, c, c, kh, kw,
                                        l, L);
    const float total = wg_sum(part, scratch);
    if (l == 0) dWt[t] = total;
}

/* Per channel c over n = B*HW inputs: mean (a sum shifted by the channel's first value),
 * biased variance (second pass over deviations),
 * invstd = 1/sqrt(var + eps); running_mean/var = (1-momentum)*old + momentum*(mean, unbiased
 * var = var*n/(n-1), var when n = 1). One work-group per channel: NDRange [C*L], local [L]. */
__kernel void batchnorm_stats(const int B, const int C, const int HW, const float eps,
                              const float momentum, __global const float *X,
                              __global float *mean, __global float *invstd,
                              __global float *running_mean, __global float *running_var)
{
    __local float scratch[RL_MAX];
    const int c = get_group_id(0), l = get_local_id(0), L = get_local_size(0);
    if (c >= C) return;
    const int n = B * HW;
    const float cnt = (float)n;
    /* shifted sum: values equal to the channel's first one add exactly 0 (README) */
    const float shift = X[(size_t)c * HW];
    float part = 0.0f;
    for (int i = l; i < n; i += L) part += X[((size_t)(i / HW) * C + c) * HW + i % HW] - shift;
    const float mu = shift + wg_sum(part, scratch) / cnt;
    float sq = 0.0f;
    for (int i = l; i < n; i += L) {
        const float dv = X[((size_t)(i / HW) * C + c) * HW + i % HW] - mu;
        sq += dv * dv;
    }
    const float var = wg_sum(sq, scratch) / cnt;
    if (l != 0) return;
    const float unbiased = cnt > 1.0f ? var * cnt / (cnt - 1.0f) : var;
    mean[c] = mu;
    invstd[c] = 1.0f / sqrt(var + eps);
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mu;
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
}

/* Y = ((X - mean[c]) * invstd[c]) * gamma[c] + beta[c]. NDRange [B*C*HW]. */
__kernel void batchnorm_apply(const int B, const int C, const int HW, __global const float *X,
                              __global const float *mean, __global const float *invstd,
                              __global const float *gamma, __global const float *beta,
                              __global float *Y)
{
    const int i = get_global_id(0);
    if (i >= B * C * HW) return;
    const int c = (i / HW) % C;
    Y[i] = ((X[i] - mean[c]) * invstd[c]) * gamma[c] + beta[c];
}

/* dbeta[c] = sum dY, dgamma[c] = sum dY * xhat over the channel's B*HW values,
 * xhat = (X - mean[c]) * invstd[c]. One work-group per channel: NDRange [C*L], local [L]. */
__kernel void batchnorm_bwd_reduce(const int B, const int C, const int HW,
                                   __global const float *X, __global const float *dY,
                                   __global const float *mean, __global const float *invstd,
                                   __global float *dgamma, __global float *dbeta)
{
    __local float scratch[RL_MAX];
    const int c = get_group_id(0), l = get_local_id(0), L = get_local_size(0);
    if (c >= C) return;
    const int n = B * HW;
    const float mu = mean[c], is = invstd[c];
    float pg = 0.0f, pb = 0.0f;
    for (int i = l; i < n; i += L) {
        const size_t at = ((size_t)(i / HW) * C + c) * HW + i % HW;
        pb += dY[at];
        pg += dY[at] * ((X[at] - mu) * is);
    }
    const float sg = wg_sum(pg, scratch), sb = wg_sum(pb, scratch);
    if (l == 0) {
        dgamma[c] = sg;
        dbeta[c] = sb;
    }
}

/* dX = gamma[c]*invstd[c]/n * ((n*dY - dbeta[c]) - xhat*dgamma[c]), n = B*HW.
 * NDRange [B*C*HW]. */
__kernel void batchnorm_bwd_data(const int B, const int C, const int HW,
                                 __global const float *X, __global const float *dY,
                                 __global const float *mean, __global const float *invstd,
                                 __global const float *gamma, __global const float *dgamma,
                                 __global const float *dbeta, __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= B * C * HW) return;
    const int c = (i / HW) % C;
    const float cnt = (float)(B * HW);
    const float xhat = (X[i] - mean[c]) * invstd[c];
    const float scale = gamma[c] * invstd[c] / cnt;
    dX[i] = scale * ((cnt * dY[i] - dbeta[c]) - xhat * dgamma[c]);
}

/* Y = min(max(X, 0), 6). NDRange [n]. */
__kernel void relu6_fwd(const int n, __global const float *X, __global float *Y)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float v = X[i] > 0.0f ? X[i] : 0.0f;
    Y[i] = v < 6.0f ? v : 6.0f;
}

/* dX = 0 < Y < 6 ? dY : 0. NDRange [n]. */
__kernel void relu6_bwd(const int n, __global const float *Y, __global const float *dY,
                        __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    dX[i] = (Y[i] > 0.0f && Y[i] < 6.0f) ? dY[i] : 0.0f;
}

/* Y = A + B (residual add; also the sum of a skip connection's two gradients). NDRange [n]. */
__kernel void add(const int n, __global const float *A, __global const float *B,
                  __global float *Y)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    Y[i] = A[i] + B[i];
}

/* Y[b,c] = sum over hw (in order) of X[b,c,hw], divided by HW. NDRange [B*C]. */
__kernel void gap_fwd(const int B, const int C, const int HW, __global const float *X,
                      __global float *Y)
{
    const int r = get_global_id(0);
    if (r >= B * C) return;
    const __global float *x = X + (size_t)r * HW;
    float acc = 0.0f;
    for (int j = 0; j < HW; ++j) acc += x[j];
    Y[r] = acc / (float)HW;
}

/* dX[b,c,hw] = dY[b,c] / HW. NDRange [B*C*HW]. */
__kernel void gap_bwd(const int B, const int C, const int HW, __global const float *dY,
                      __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= B * C * HW) return;
    dX[i] = dY[i / HW] / (float)HW;
}
