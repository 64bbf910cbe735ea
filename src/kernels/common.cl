/* Helpers shared by every kernel version (kernel ABI: src/kernels/README.md, "Shared
 * helpers"). Not a program on its own: phonetrain.kernels.stage_kernels writes each staged
 * .cl file as this file followed by the version's file, with #line directives so compiler
 * messages name the original file and line. Everything here is a macro or a static inline
 * function (OpenCL C 1.2), so a program that uses none of it compiles to the same kernels.
 * Nothing here is a tuning parameter; a version's parameters stay `#ifndef` defaults in its
 * own files. */

/* The largest work-group of the work-group reductions (all dimensions together): the length
 * of the local scratch a caller declares for wg_sum (a capacity, not a tuning parameter; the
 * launches use 64). */
#define RL_MAX 256

/* The sum over dimension 0 of the work-group of one value per work-item, by a tree in
 * `scratch` (get_local_size(0) floats of local memory for this row of the work-group; RL_MAX
 * floats hold the whole work-group): every work-item gets its row's total. Local size in
 * dimension 0: a power of two. Every work-item of the work-group must call it (it holds
 * barriers). Ends with a barrier, so the next call may reuse `scratch`. */
static inline float wg_sum(const float v, __local float *scratch)
{
    const int l = get_local_id(0);
    scratch[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = (int)get_local_size(0) / 2; s > 0; s >>= 1) {
        if (l < s) scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float total = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return total;
}

/* The output coordinate (row or column) whose window tap k reads input coordinate x, for a
 * convolution with this stride and padding and n outputs: o with o*stride - pad + k == x,
 * or -1 when there is none (x + pad - k negative or not a multiple of stride, or o >= n).
 * The gather loops of the input gradients (col2im, the depthwise and fused backward-data
 * kernels) skip the taps where it is -1. */
static inline int conv_tap_output(const int x, const int pad, const int k, const int stride,
                                  const int n)
{
    const int t = x + pad - k;          /* = o*stride */
    if (t < 0 || t % stride) return -1;
    const int o = t / stride;
    return o < n ? o : -1;
}

/* The gather loop of an input gradient at input coordinates (h, w): for each window tap
 * (kh, kw), kh then kw ascending, whose output (oh, ow) exists (conv_tap_output), runs the
 * statements `body` with kh, kw, oh and ow in scope. `body` holds no comma outside
 * parentheses (a macro argument). The loops of col2im, conv_bwd_data and conv_tap_gather. */
#define FOR_EACH_CONV_TAP(h, w, KH, KW, stride, pad, OH, OW, body)     \
    for (int kh = 0; kh < (KH); ++kh) {                               \
        const int oh = conv_tap_output(h, pad, kh, stride, OH);       \
        if (oh < 0) continue;                                         \
        for (int kw = 0; kw < (KW); ++kw) {                           \
            const int ow = conv_tap_output(w, pad, kw, stride, OW);   \
            if (ow < 0) continue;                                     \
            body                                                      \
        }                                                             \
    }

/* One output Z[b,oc,oh,ow] of a grouped convolution (groups = 1: a plain one): the sum over
 * the input channels ci of oc's group, then (kh, kw), in that order, of
 * weight[oc,ci,kh,kw] * X[b, g*C/groups+ci, oh*stride-pad+kh, ow*stride-pad+kw] (g the group
 * of oc; taps outside the image skipped: padding reads as 0). weight is [OC, C/groups, KH,
 * KW]. The forward gathers of the direct convolutions (conv_fwd, gconv_stats_fwd). */
static inline float conv_output_at(__global const float *X, __global const float *weight,
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

/* acc plus one output channel's share of the input gradient at (h, w): over the taps (kh, kw)
 * in that order whose output (oh, ow) exists (conv_tap_output), acc += wt[kh*KW+kw] *
 * dy[oh*OW+ow]. `dy`: the channel's OH x OW gradient plane; `wt`: its KH x KW weights for
 * this input channel. The gather loops of dwconv3x3_bwd_data and gconv_bwd_data. */
static inline float conv_tap_gather(float acc, const __global float *dy,
                                    const __global float *wt, const int h, const int w,
                                    const int KH, const int KW, const int stride,
                                    const int pad, const int OH, const int OW)
{
    FOR_EACH_CONV_TAP(h, w, KH, KW, stride, pad, OH, OW,
                      acc += wt[kh * KW + kw] * dy[oh * OW + ow];)
    return acc;
}

/* g = grad + weight_decay * P; V = momentum * V + g; P -= lr * V (sgd_update's rule), in a
 * kernel whose arguments name lr, momentum and weight_decay. */
#define SGD_STEP(P, V, idx, grad)                                   \
    do {                                                            \
        const float g_ = (grad) + weight_decay * (P)[idx];          \
        const float v_ = momentum * (V)[idx] + g_;                  \
        (V)[idx] = v_;                                              \
        (P)[idx] -= lr * v_;                                        \
    } while (0)

/* One work-item's share of a convolution's weight gradient dW[oc, (ci, kh, kw)] over the
 * outputs i0 <= i < i1 (i = (b*OH + oh)*OW + ow): the sum, over i = i0+l, i0+l+L, ... < i1, of
 * dY[b,oc,oh,ow] * X[b, c, oh*stride-pad+kh, ow*stride-pad+kw] (0 outside the image). `c` is
 * the input channel the weight reads (the group's channel for a grouped convolution). The
 * caller sums the shares of its work-group (wg_sum); a split-K caller takes one chunk
 * [i0, i1) of the B*OH*OW outputs per work-group. */
static inline float conv_wgrad_chunk_share(const __global float *dY, const __global float *X,
                                           const int B, const int C, const int H, const int W,
                                           const int OC, const int OH, const int OW,
                                           const int stride, const int pad, const int oc,
                                           const int c, const int kh, const int kw,
                                           const int i0, const int i1, const int l,
                                           const int L)
{
    const int P = OH * OW;
    /* (b, oh, ow) of element i, stepped by L as a mixed-radix addition (digits of L: lb,
     * loh, low) instead of three integer divisions per element: the same elements in the
     * same order, so the same sum. */
    const int lb = L / P, loh = (L % P) / OW, low = L % OW, j = i0 + l;
    int b = j / P, oh = (j / OW) % OH, ow = j % OW;
    float part = 0.0f;
    for (int i = j; i < i1; i += L) {
        const int ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
        if (ih >= 0 && ih < H && iw >= 0 && iw < W)
            part += dY[((size_t)b * OC + oc) * P + oh * OW + ow] *
                    X[(((size_t)b * C + c) * H + ih) * W + iw];
        ow += low;
        oh += loh;
        b += lb;
        if (ow >= OW) { ow -= OW; ++oh; }
        if (oh >= OH) { oh -= OH; ++b; }
    }
    return part;
}

/* The share of work-item l over all B*OH*OW outputs (conv_sgd, gconv_sgd: one work-group per
 * weight). */
static inline float conv_wgrad_share(const __global float *dY, const __global float *X,
                                     const int B, const int C, const int H, const int W,
                                     const int OC, const int OH, const int OW,
                                     const int stride, const int pad, const int oc,
                                     const int c, const int kh, const int kw, const int l,
                                     const int L)
{
    return conv_wgrad_chunk_share(dY, X, B, C, H, W, OC, OH, OW, stride, pad, oc, c, kh, kw, 0,
                                  B * OH * OW, l, L);
}

/* One work-item's share of a convolution's bias gradient db[oc] over the outputs
 * i0 <= i < i1 (i = b*OH*OW + p): the sum, over i = i0+l, i0+l+L, ... < i1, of dY[b,oc,p]
 * (the bias column of conv_sgd and its split-K partial sums). */
static inline float conv_bgrad_chunk_share(const __global float *dY, const int OC, const int P,
                                           const int oc, const int i0, const int i1,
                                           const int l, const int L)
{
    /* (b, p) of element i stepped by L without divisions, as in conv_wgrad_chunk_share */
    const int lb = L / P, lp = L % P, j = i0 + l;
    int b = j / P, p = j % P;
    float part = 0.0f;
    for (int i = j; i < i1; i += L) {
        part += dY[((size_t)b * OC + oc) * P + p];
        p += lp;
        b += lb;
        if (p >= P) { p -= P; ++b; }
    }
    return part;
}

/* Max-pooling gradient of one input element (h, w) of a plane: the sum, over the windows
 * containing it (oh*stride <= h < oh*stride + K, likewise w) in row-major window order, of
 * dy[oh*OW+ow] where argmax[oh*OW+ow] == h*W+w. `dy`, `argmax`: the plane's OH x OW
 * gradients and argmax indices. */
static inline float maxpool_grad_at(const __global float *dy, const __global int *argmax,
                                    const int h, const int w, const int W, const int K,
                                    const int stride, const int OH, const int OW)
{
    const int self = h * W + w;
    const int oh0 = h < K ? 0 : (h - K) / stride + 1, oh1 = min(h / stride, OH - 1);
    const int ow0 = w < K ? 0 : (w - K) / stride + 1, ow1 = min(w / stride, OW - 1);
    float acc = 0.0f;
    for (int oh = oh0; oh <= oh1; ++oh)
        for (int ow = ow0; ow <= ow1; ++ow)
            if (argmax[oh * OW + ow] == self)
                acc += dy[oh * OW + ow];
    return acc;
}

/* Softmax + cross-entropy of one row of C logits `x` with label `label`: writes
 * dx[c] = (p[c] - (c == label)) * inv_b with p = softmax(x) (max-subtracted for range
 * safety) and returns the row loss -log p[label] = log(sum exp(x - max)) - (x[label] - max),
 * NaN for a label outside [0, C). */
static inline float softmax_xent_row(const __global float *x, __global float *dx,
                                     const int label, const int C, const float inv_b)
{
    float mx = x[0];
    for (int c = 1; c < C; ++c)
        mx = fmax(mx, x[c]);
    float sum = 0.0f;
    for (int c = 0; c < C; ++c)
        sum += exp(x[c] - mx);
    const float inv_sum = 1.0f / sum;
    for (int c = 0; c < C; ++c)
        dx[c] = (exp(x[c] - mx) * inv_sum - (c == label ? 1.0f : 0.0f)) * inv_b;
    return (label >= 0 && label < C) ? log(sum) - (x[label] - mx) : NAN;
}
