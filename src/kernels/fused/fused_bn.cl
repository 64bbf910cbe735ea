/* Fused kernels of bias-free (grouped) convolutions followed by batch normalization, the
 * MobileNetV2 layer unit "conv -> BatchNorm2d -> [ReLU6] [+ residual]" (kernel ABI:
 * src/kernels/README.md, "Fused batch-norm kernels"):
 *
 *   gconv_stats_fwd the convolution over the whole output, one work-group per tile of a
 *                   channel's outputs, and each tile's mean and sum of squared deviations;
 *   bn_act_fwd      the channel statistics merged from the tiles' (Chan, Golub & LeVeque
 *                   1979), the normalization, the activation and the residual add, one
 *                   work-group per tile; the running statistics;
 *   bn_bwd_sgd      the batch-norm backward of one channel (parameter gradients, the input
 *                   gradient through the statistics) and the SGD step of gamma and beta;
 *   gconv_bwd_data  the convolution's input gradient with the activation mask of its input
 *                   and, optionally, the residual gradient added;
 *   gconv_sgd       the convolution's weight gradient and its SGD step, one work-group per
 *                   weight; for long, few sums split along B x OH x OW into
 *                   gconv_wgrad_partial (one work-group per weight and chunk) and
 *                   gconv_sgd_finish (the chunks' sums in order, the step).
 *
 * Grouped convolution: C input and OC output channels in `groups` groups (C % groups == 0,
 * OC % groups == 0), weight[OC, C/groups, KH, KW]; groups == 1 is a plain convolution,
 * groups == C == OC the depthwise one. Activation codes: 0 none, 1 ReLU, 2 ReLU6.
 * Every sum is a gather in a fixed order (no atomics): deterministic run to run. The
 * work-group reductions (gconv_stats_fwd, bn_act_fwd, bn_bwd_sgd, gconv_sgd) take strided
 * partial sums, then a tree in local memory (wg_sum and RL_MAX from common.cl;
 * conv_output_at for gconv_stats_fwd, conv_tap_gather for gconv_bwd_data, conv_wgrad_share
 * for gconv_sgd); any power-of-two
 * local size up to RL_MAX, work-groups past the edge return as a whole.
 *
 * Parameters: none. The tile of the forward's statistics is the `tile` argument of
 * gconv_stats_fwd and bn_act_fwd, not a define: it fixes the layout of the partial-statistics
 * tensor that the plan allocates (phonetrain.lowering.fused_bn chooses it per layer); the
 * reductions' local size is the launch's (64 by the ABI). */

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

/* Merges the statistics a = (count, mean, M2, -) of one set of values with those b of another,
 * disjoint set: the pairwise update of Chan, Golub & LeVeque, "Updating formulae and a
 * pairwise algorithm for computing sample variances" (1979): d = mean_b - mean_a,
 * n = n_a + n_b, mean = mean_a + d * n_b / n, M2 = M2_a + M2_b + d^2 * n_a * n_b / n. An empty
 * set (count 0) leaves the other unchanged; counts are exact in float up to 2^24. */
static inline float4 chan_merge(const float4 a, const float4 b)
{
    if (b.x == 0.0f) return a;
    if (a.x == 0.0f) return b;
    const float n = a.x + b.x, d = b.y - a.y, f = b.x / n;
    return (float4)(n, a.y + d * f, a.z + (b.z + d * d * a.x * f), 0.0f);
}

/* Z = the grouped convolution (bias-free), and the statistics of each tile of its channels.
 * Channel oc's n = B*OH*OW outputs, in (b, oh, ow) order, form T = ceil(n/tile) tiles of tile
 * outputs (the last one shorter); work-group (t, oc) computes tile t: Z of its outputs, then
 * their mean m = sum(Z)/count and M2 = sum((Z - m)^2) (two passes, each work-item re-reading
 * only the Z it wrote), part[(oc*T + t)*2 + 0] = m, part[...+1] = M2 (float, Z units and Z
 * units squared). NDRange [T*L, OC], local [L, 1]. */
__kernel void gconv_stats_fwd(const int B, const int C, const int H, const int W, const int OC,
                              const int KH, const int KW, const int stride, const int pad,
                              const int OH, const int OW, const int groups, const int tile,
                              __global const float *X, __global const float *weight,
                              __global float *Z, __global float *part)
{
    __local float scratch[RL_MAX];
    const int t = get_group_id(0), oc = get_global_id(1);
    const int l = get_local_id(0), L = get_local_size(0);
    const int P = OH * OW, n = B * P, T = (n - 1) / tile + 1;
    if (t >= T) return;   /* a whole work-group: no barrier is skipped by part of one */
    __local float *row = scratch + get_local_id(1) * L;
    const int i0 = t * tile, cnt = min(tile, n - i0);
    float s = 0.0f;
    if (oc < OC)
        for (int j = l; j < cnt; j += L) {
            const int b = (i0 + j) / P, p = (i0 + j) % P;
            const float z = conv_output_at(X, weight, b, oc, p / OW, p % OW, C, H, W, OC, KH,
                                           KW, stride, pad, groups);
            Z[((size_t)b * OC + oc) * P + p] = z;
            s += z;
        }
    const float m = wg_sum(s, row) / (float)cnt;
    float q = 0.0f;
    if (oc < OC)
        for (int j = l; j < cnt; j += L) {
            const int b = (i0 + j) / P, p = (i0 + j) % P;
            const float dv = Z[((size_t)b * OC + oc) * P + p] - m;
            q += dv * dv;
        }
    const float m2 = wg_sum(q, row);
    if (l == 0 && oc < OC) {
        part[((size_t)oc * T + t) * 2] = m;
        part[((size_t)oc * T + t) * 2 + 1] = m2;
    }
}

/* The channel statistics (count, mean, M2, -) from the T = ceil(n/tile) tile statistics
 * part[T, 2] of gconv_stats_fwd (n = B*HW; none read unless `live`): work-item l merges
 * tiles l, l+L, ... in turn (chan_merge), then a tree over the work-items in `sv` (L float4
 * of local memory; s = L/2, ..., 1: l merges l+s); every work-group of a channel runs the same
 * merges, so all get the same statistics bit for bit. Every work-item must call it. */
static inline float4 bn_channel_stats(__global const float *part, const int T, const int n,
                                      const int tile, const int live, __local float4 *sv)
{
    const int l = get_local_id(0), L = get_local_size(0);
    float4 acc = (float4)(0.0f);
    for (int u = l; live && u < T; u += L)
        acc = chan_merge(acc, (float4)((float)min(tile, n - u * tile), part[(size_t)u * 2],
                                       part[(size_t)u * 2 + 1], 0.0f));
    sv[l] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = L / 2; s > 0; s >>= 1) {
        if (l < s) sv[l] = chan_merge(sv[l], sv[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return sv[0];
}

/* Y = act(((Z - mu) * is) * ga + be) (+ R when res != 0) for the cnt positions i0, i0+1, ...
 * (in (b, hw) order) of one channel whose planes start at z, y, r, `stride` floats apart
 * (C*HW), HW positions each; work-item l takes positions l, l+L, ... */
static inline void bn_act_tile(__global const float *z, __global float *y,
                               __global const float *r, const int stride, const int HW,
                               const int i0, const int cnt, const float mu, const float is,
                               const float ga, const float be, const int act, const int res)
{
    for (int j = get_local_id(0); j < cnt; j += get_local_size(0)) {
        const size_t at = (size_t)((i0 + j) / HW) * stride + (i0 + j) % HW;
        const float v = bn_act(((z[at] - mu) * is) * ga + be, act);
        y[at] = res ? v + r[at] : v;
    }
}

/* Batch normalization with activation of Z[B, C, HW] (the convolution's output) from its tile
 * statistics part[C, T, 2] (gconv_stats_fwd, same tile): mean and var = M2/n of each channel
 * (bn_channel_stats), invstd = 1/sqrt(var + eps); Y = act(((Z - mean) * invstd) * gamma + beta)
 * (+ R when res != 0) for the tile t of work-group (t, c). Work-item 0 of work-group (0, c)
 * writes mean[c], invstd[c] and steps the running statistics (batchnorm_stats' rule: the
 * unbiased variance var*n/(n-1)). NDRange [T*L, C], local [L, 1]. */
__kernel void bn_act_fwd(const int B, const int C, const int HW, const int tile, const int act,
                         const int res, const float eps, const float momentum,
                         __global const float *Z, __global const float *part,
                         __global const float *gamma, __global const float *beta,
                         __global const float *R, __global float *Y, __global float *mean,
                         __global float *invstd, __global float *running_mean,
                         __global float *running_var)
{
    __local float4 sv[RL_MAX];
    const int t = get_group_id(0), c = get_global_id(1);
    const int r = get_local_id(1) * get_local_size(0);
    const int n = B * HW, T = (n - 1) / tile + 1;
    if (t >= T) return;   /* a whole work-group: no barrier is skipped by part of one */
    const float4 st = bn_channel_stats(part + (size_t)min(c, C - 1) * T * 2, T, n, tile, c < C,
                                       sv + r);
    const float cnt = (float)n, var = st.z / cnt, is = 1.0f / sqrt(var + eps);
    if (c < C)   /* no return after the barriers: the rows past C just skip the tail */
        bn_act_tile(Z + (size_t)c * HW, Y + (size_t)c * HW, R + (size_t)c * HW, C * HW, HW,
                    t * tile, min(tile, n - t * tile), st.y, is, gamma[c], beta[c], act, res);
    if (c < C && t == 0 && get_local_id(0) == 0) {
        const float unbiased = cnt > 1.0f ? var * cnt / (cnt - 1.0f) : var;
        mean[c] = st.y;
        invstd[c] = is;
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * st.y;
        running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
    }
}

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
    SGD_STEP(gamma, Vg, c, sg);
    SGD_STEP(beta, Vb, c, sb);
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
        acc = conv_tap_gather(acc, dY + ((size_t)b * OC + oc) * OH * OW,
                              weight + ((size_t)oc * cg + ci) * KH * KW, h, w, KH, KW, stride,
                              pad, OH, OW);
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
    const int cg = C / groups, ckk = cg * KH * KW;
    if (k >= ckk) return;   /* a whole work-group: no barrier is skipped by part of one */
    __local float *row = scratch + get_local_id(1) * L;
    float part = 0.0f;
    if (oc < OC)
        part = conv_wgrad_share(dY, X, B, C, H, W, OC, OH, OW, stride, pad, oc,
                                (oc / (OC / groups)) * cg + k / (KW * KH), (k / KW) % KH,
                                k % KW, l, L);
    const float total = wg_sum(part, row);
    if (l != 0 || oc >= OC) return;
    SGD_STEP(weight, V, (size_t)oc * ckk + k, total);
}

/* Split-K form of gconv_sgd (as conv_wgrad_partial / conv_sgd_finish of fused.cl, without the
 * bias column): gconv_wgrad_partial sums chunk s = [s*Kc, min((s+1)*Kc, n)), Kc = ceil(n/S),
 * of the n = B*OH*OW products of weight (oc, k) into part[s, oc, k] (part: [S, OC,
 * (C/groups)*KH*KW]), as gconv_sgd sums all of them. NDRange [(C/groups)*KH*KW*L, OC*S]
 * (dimension 1: oc*S + s), local [L, 1]. */
__kernel void gconv_wgrad_partial(const int B, const int C, const int H, const int W,
                                  const int OC, const int KH, const int KW, const int stride,
                                  const int pad, const int OH, const int OW, const int groups,
                                  const int S, __global const float *X,
                                  __global const float *dY, __global float *part)
{
    __local float scratch[RL_MAX];
    const int k = get_group_id(0), q = get_global_id(1);
    const int l = get_local_id(0), L = get_local_size(0);
    const int cg = C / groups, ckk = cg * KH * KW, n = B * OH * OW;
    if (k >= ckk) return;   /* a whole work-group: no barrier is skipped by part of one */
    const int oc = q / S, s = q % S, live = q < OC * S;
    const int chunk = (n - 1) / S + 1, i0 = min(n, s * chunk), i1 = min(n, i0 + chunk);
    __local float *row = scratch + get_local_id(1) * L;
    float v = 0.0f;
    if (live)
        v = conv_wgrad_chunk_share(dY, X, B, C, H, W, OC, OH, OW, stride, pad, oc,
                                   (oc / (OC / groups)) * cg + k / (KW * KH), (k / KW) % KH,
                                   k % KW, i0, i1, l, L);
    const float total = wg_sum(v, row);
    if (l != 0 || !live) return;
    part[((size_t)s * OC + oc) * ckk + k] = total;
}

/* gconv_sgd_finish: g = part[0, oc, k] + ... + part[S-1, oc, k] (in that order), then the
 * SGD step on weight[oc, k], V[oc, k]. One work-item per weight: NDRange
 * [(C/groups)*KH*KW, OC]. */
__kernel void gconv_sgd_finish(const int C, const int OC, const int KH, const int KW,
                               const int groups, const int S, const float lr,
                               const float momentum, const float weight_decay,
                               __global const float *part, __global float *weight,
                               __global float *V)
{
    const int k = get_global_id(0), oc = get_global_id(1), ckk = C / groups * KH * KW;
    if (k >= ckk || oc >= OC) return;
    const size_t stride_s = (size_t)OC * ckk, e = (size_t)oc * ckk + k;
    float total = 0.0f;
    for (int s = 0; s < S; ++s)
        total += part[s * stride_s + e];
    SGD_STEP(weight, V, e, total);
}
