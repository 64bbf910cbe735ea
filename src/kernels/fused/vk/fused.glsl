// fused (Vulkan): helpers of the fused shaders, the GLSL counterparts of common.cl's wg_sum,
// SGD_STEP, conv_output_at, conv_tap_gather, conv_wgrad_chunk_share and
// conv_bgrad_chunk_share (same loops, same summation orders). Included by every shader of this
// folder after vk_abi.glsl. GLSL passes no buffer to a function, so a helper reads the
// shader's own buffers by their ABI names: each is defined only where the including shader
// has the buffers it reads (vk_abi.glsl's PT_BINDING_<arg>), indexed by element offsets.

#include "common.glsl"

// The largest work-group of the reductions (common.cl's RL_MAX): the length of the scratch.
#define RL_MAX 256
shared float fused_scratch[RL_MAX];

// The sum over dimension 0 of the work-group of one value per invocation, by a tree in
// shared memory (common.cl's wg_sum: s = L/2, ..., 1: scratch[l] += scratch[l+s]); each row
// of the work-group (dimension 1) has its own stretch of the scratch, so a work-group that
// spans several rows (a local size [Lx, Ly]) sums each row apart. Every invocation gets its
// row's total. Local size in dimension 0: a power of two, Lx * Ly <= RL_MAX. Every
// invocation of the work-group must call it (it holds barriers); it ends with a barrier, so
// the next call may reuse the scratch.
float wg_sum_row(const float v)
{
    const uint L = gl_WorkGroupSize.x, l = gl_LocalInvocationID.x;
    const uint row = gl_LocalInvocationID.y * L;
    fused_scratch[row + l] = v;
    barrier();
    for (uint s = L / 2u; s > 0u; s >>= 1) {
        if (l < s) fused_scratch[row + l] += fused_scratch[row + l + s];
        barrier();
    }
    const float total = fused_scratch[row];
    barrier();
    return total;
}

// g = grad + weight_decay * P; V = momentum * V + g; P -= lr * V (sgd_update's rule), for a
// shader whose arguments name lr, momentum and weight_decay.
#define SGD_STEP(P, V, idx, grad)                                   \
    {                                                               \
        const float g_ = (grad) + weight_decay * P[idx];            \
        const float v_ = momentum * V[idx] + g_;                    \
        V[idx] = v_;                                                \
        P[idx] -= lr * v_;                                          \
    }

#if defined(PT_BINDING_X) && defined(PT_BINDING_weight)
// One output Z[b,oc,oh,ow] of a grouped convolution (groups = 1: a plain one): the sum over
// the input channels ci of oc's group, then (kh, kw), of weight[oc,ci,kh,kw] *
// X[b, g*C/groups+ci, oh*stride-pad+kh, ow*stride-pad+kw], taps outside the image skipped
// (common.cl's conv_output_at). conv_fwd, gconv_stats_fwd.
float conv_output_at(const int b, const int oc, const int oh, const int ow, const int C,
                     const int H, const int W_, const int OC, const int KH, const int KW,
                     const int stride, const int pad, const int groups)
{
    const int cg = C / groups, g = oc / (OC / groups);
    const int w0 = oc * cg * KH * KW;
    float acc = 0.0;
    for (int ci = 0; ci < cg; ++ci) {
        const int x0 = (b * C + g * cg + ci) * H * W_;
        for (int kh = 0; kh < KH; ++kh) {
            const int ih = oh * stride - pad + kh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                const int iw = ow * stride - pad + kw;
                if (iw >= 0 && iw < W_)
                    acc += weight[w0 + (ci * KH + kh) * KW + kw] * X[x0 + ih * W_ + iw];
            }
        }
    }
    return acc;
}
#endif

#if defined(PT_BINDING_dY) && defined(PT_BINDING_weight)
// acc plus one output channel's share of the input gradient at (h, w): over the taps
// (kh, kw), in that order, whose output (oh, ow) exists (conv_tap_output),
// acc += weight[wt0 + kh*KW+kw] * dY[dy0 + oh*OW+ow] (common.cl's conv_tap_gather; dy0: the
// channel's OH x OW plane, wt0: its KH x KW weights for this input channel). gconv_bwd_data.
float conv_tap_gather(float acc, const int dy0, const int wt0, const int h, const int w,
                      const int KH, const int KW, const int stride, const int pad,
                      const int OH, const int OW)
{
    for (int kh = 0; kh < KH; ++kh) {
        const int oh = conv_tap_output(h, pad, kh, stride, OH);
        if (oh < 0) continue;
        for (int kw = 0; kw < KW; ++kw) {
            const int ow = conv_tap_output(w, pad, kw, stride, OW);
            if (ow < 0) continue;
            acc += weight[wt0 + kh * KW + kw] * dY[dy0 + oh * OW + ow];
        }
    }
    return acc;
}
#endif

#if defined(PT_BINDING_X) && defined(PT_BINDING_dY)
// Invocation l's share of a convolution's weight gradient dW[oc, (c, kh, kw)] over the
// outputs i0 <= i < i1 (i = (b*OH + oh)*OW + ow): the sum, over i = i0+l, i0+l+L, ... < i1,
// of dY[b,oc,oh,ow] * X[b, c, oh*stride-pad+kh, ow*stride-pad+kw] (0 outside the image); c is
// the input channel the weight reads. (b, oh, ow) step by L as a mixed-radix addition, as
// common.cl's conv_wgrad_chunk_share: the same elements in the same order.
float conv_wgrad_chunk_share(const int B, const int C, const int H, const int W_, const int OC,
                             const int OH, const int OW, const int stride, const int pad,
                             const int oc, const int c, const int kh, const int kw,
                             const int i0, const int i1, const int l, const int L)
{
    const int P = OH * OW;
    const int lb = L / P, loh = (L % P) / OW, low = L % OW, j = i0 + l;
    int b = j / P, oh = (j / OW) % OH, ow = j % OW;
    float part = 0.0;
    for (int i = j; i < i1; i += L) {
        const int ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W_)
            part += dY[(b * OC + oc) * P + oh * OW + ow] * X[((b * C + c) * H + ih) * W_ + iw];
        ow += low;
        oh += loh;
        b += lb;
        if (ow >= OW) { ow -= OW; ++oh; }
        if (oh >= OH) { oh -= OH; ++b; }
    }
    return part;
}
#endif

#if defined(PT_BINDING_dY)
// Invocation l's share of a convolution's bias gradient db[oc] over the outputs i0 <= i < i1
// (i = b*P + p): the sum, over i = i0+l, i0+l+L, ... < i1, of dY[b,oc,p] (common.cl's
// conv_bgrad_chunk_share).
float conv_bgrad_chunk_share(const int OC, const int P, const int oc, const int i0,
                             const int i1, const int l, const int L)
{
    const int lb = L / P, lp = L % P, j = i0 + l;
    int b = j / P, p = j % P;
    float part = 0.0;
    for (int i = j; i < i1; i += L) {
        part += dY[(b * OC + oc) * P + p];
        p += lp;
        b += lb;
        if (p >= P) { p -= P; ++b; }
    }
    return part;
}
#endif
