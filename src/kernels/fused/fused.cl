/* Fused kernels (kernel ABI: src/kernels/README.md, "Fused kernels"): each launch does what
 * the layer-by-layer lowering needs several kernels for -- bias, ReLU and the NCHW layout in
 * the forward kernels, the ReLU mask in the backward-data kernels, softmax + cross-entropy +
 * batch mean + the last layer's input gradient in one work-group, and the weight/bias
 * gradient with the SGD update in one kernel. One work-item per output element, global memory
 * only (the baseline's technique; the lever here is the number of launches), but conv_sgd's
 * long sums over batch x output pixels take one work-group per weight (strided partial sums,
 * then a tree in local memory: wg_sum), split along B x OH x OW into a partial-sum and a
 * finish launch when those sums are long and few (conv_wgrad_partial, conv_sgd_finish), and
 * linear_fwd stages its rows of X and W in local memory. Every sum is a gather in a fixed
 * order (no atomics):
 * results are deterministic run to run. Any size >= 1; work-items past a rounded-up global
 * size return early.
 *
 * Shared helpers from common.cl (staged in front of this file): wg_sum, RL_MAX,
 * conv_wgrad_share, conv_wgrad_chunk_share, conv_bgrad_chunk_share and SGD_STEP (conv_sgd,
 * conv_wgrad_partial, the *_sgd kernels), conv_output_at (conv_fwd), FOR_EACH_CONV_TAP
 * (conv_bwd_data), maxpool_grad_at (maxpool_bwd_relu), softmax_xent_row (softmax_xent_bwd).
 *
 * Parameters: LOSS_WG, the largest work-group softmax_xent_bwd uses for its rows (the local
 * array of per-work-item loss partials; extra work-items still share the input-gradient
 * product); LIN_T, the largest work-group side of linear_fwd (the rows of its local tiles)
 * and LIN_TK, the depth of the slices of X and W it stages in local memory. */

#ifndef LOSS_WG
#define LOSS_WG 64
#endif
#ifndef LIN_T
#define LIN_T 16
#endif
#ifndef LIN_TK
#define LIN_TK 64
#endif

/* Y[b,o] = act(sum_i X[b,i] * W[o,i] + bias[o]), act = ReLU when act != 0.
 * NDRange [O, B] rounded up to whole work-groups of at most [LIN_T, LIN_T] (version.yaml sets
 * [LIN_T, LIN_T]). A work-group stages LIN_TK-deep slices of its rows of X and of W in local
 * memory, loaded along i (coalesced: rows are contiguous, while one work-item per output
 * reading its own rows would stride by I), and each work-item still sums its i in order: the
 * same sum as one work-item looping over i. */
__kernel void linear_fwd(const int B, const int O, const int I, const int act,
                         __global const float *X, __global const float *W,
                         __global const float *bias, __global float *Y)
{
    __local float xs[LIN_T][LIN_TK + 1], ws[LIN_T][LIN_TK + 1];   /* +1: rows in other banks */
    const int lx = get_local_size(0), ly = get_local_size(1), nl = lx * ly;
    const int lo = get_local_id(0), lb = get_local_id(1), lid = lb * lx + lo;
    const int o0 = get_group_id(0) * lx, b0 = get_group_id(1) * ly;
    float acc = 0.0f;
    for (int i0 = 0; i0 < I; i0 += LIN_TK) {
        /* every work-item meets the barriers: rows and columns past the edge load zeros */
        for (int e = lid; e < ly * LIN_TK; e += nl) {
            const int r = e / LIN_TK, k = e % LIN_TK;
            xs[r][k] = (b0 + r < B && i0 + k < I) ? X[(size_t)(b0 + r) * I + i0 + k] : 0.0f;
        }
        for (int e = lid; e < lx * LIN_TK; e += nl) {
            const int r = e / LIN_TK, k = e % LIN_TK;
            ws[r][k] = (o0 + r < O && i0 + k < I) ? W[(size_t)(o0 + r) * I + i0 + k] : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int kn = min(LIN_TK, I - i0);
        for (int k = 0; k < kn; ++k)
            acc += xs[lb][k] * ws[lo][k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int o = o0 + lo, b = b0 + lb;
    if (o >= O || b >= B) return;
    acc += bias[o];
    Y[(size_t)b * O + o] = (act && !(acc > 0.0f)) ? 0.0f : acc;
}

/* Direct convolution writing NCHW: Y[b,oc,oh,ow] = act(bias[oc] + sum over (c, kh, kw) of
 * weight[oc,c,kh,kw] * X[b, c, oh*stride-pad+kh, ow*stride-pad+kw]) (0 outside the image).
 * NDRange [OH*OW, B*OC]. */
__kernel void conv_fwd(const int B, const int C, const int H, const int W, const int OC,
                       const int KH, const int KW, const int stride, const int pad,
                       const int OH, const int OW, const int act, __global const float *X,
                       __global const float *weight, __global const float *bias,
                       __global float *Y)
{
    const int p = get_global_id(0), q = get_global_id(1);
    if (p >= OH * OW || q >= B * OC) return;
    const int ow = p % OW, oh = p / OW, oc = q % OC, b = q / OC;
    float acc = conv_output_at(X, weight, b, oc, oh, ow, C, H, W, OC, KH, KW, stride, pad, 1);
    acc += bias[oc];
    Y[(size_t)q * OH * OW + p] = (act && !(acc > 0.0f)) ? 0.0f : acc;
}

/* dX[b,i] = sum_o dY[b,o] * W[o,i], times (X[b,i] > 0) when relu != 0 (X: the layer's input,
 * a ReLU's output, so this is that ReLU's backward too). NDRange [I, B]. */
__kernel void linear_bwd_data(const int B, const int O, const int I, const int relu,
                              __global const float *dY, __global const float *W,
                              __global const float *X, __global float *dX)
{
    const int i = get_global_id(0), b = get_global_id(1);
    if (i >= I || b >= B) return;
    const size_t e = (size_t)b * I + i;
    if (relu && !(X[e] > 0.0f)) {
        dX[e] = 0.0f;
        return;
    }
    const __global float *dy = dY + (size_t)b * O;
    float acc = 0.0f;
    for (int o = 0; o < O; ++o)
        acc += dy[o] * W[(size_t)o * I + i];
    dX[e] = acc;
}

/* Input gradient of a convolution, reading dY in NCHW: dX[b,c,h,w] = sum over (oc, kh, kw)
 * with oh = (h+pad-kh)/stride, ow = (w+pad-kw)/stride whole and inside [0,OH) x [0,OW) of
 * weight[oc,c,kh,kw] * dY[b,oc,oh,ow]; times (X[b,c,h,w] > 0) when relu != 0.
 * NDRange [H*W, B*C] (a gather: what gemm_tn + col2im compute). */
__kernel void conv_bwd_data(const int B, const int C, const int H, const int W, const int OC,
                            const int KH, const int KW, const int stride, const int pad,
                            const int OH, const int OW, const int relu,
                            __global const float *dY, __global const float *weight,
                            __global const float *X, __global float *dX)
{
    const int p = get_global_id(0), q = get_global_id(1);
    if (p >= H * W || q >= B * C) return;
    const int w = p % W, h = p / W, c = q % C, b = q / C;
    const size_t e = (size_t)q * H * W + p;
    if (relu && !(X[e] > 0.0f)) {
        dX[e] = 0.0f;
        return;
    }
    float acc = 0.0f;
    FOR_EACH_CONV_TAP(h, w, KH, KW, stride, pad, OH, OW, {
        for (int oc = 0; oc < OC; ++oc)
            acc += weight[(((size_t)oc * C + c) * KH + kh) * KW + kw] *
                   dY[(((size_t)b * OC + oc) * OH + oh) * OW + ow];
    })
    dX[e] = acc;
}

/* maxpool_bwd times the ReLU mask of the pool's input: dX[b,c,h,w] = (X[b,c,h,w] > 0) *
 * sum of dY[b,c,oh,ow] over windows whose argmax is h*W+w. NDRange [B*C*H*W]. */
__kernel void maxpool_bwd_relu(const int B, const int C, const int H, const int W, const int K,
                               const int stride, const int OH, const int OW,
                               __global const float *dY, __global const int *argmax,
                               __global const float *X, __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= B * C * H * W) return;
    if (!(X[i] > 0.0f)) {
        dX[i] = 0.0f;
        return;
    }
    const int w = i % W, h = (i / W) % H, bc = i / (W * H);
    const size_t base = (size_t)bc * OH * OW;
    dX[i] = maxpool_grad_at(dY + base, argmax + base, h, w, W, K, stride, OH, OW);
}

/* One work-group does the loss and the last Linear layer's input gradient:
 * per row b, p = softmax(logits[b,:]), dlogits[b,:] = (p - onehot(labels[b])) / B,
 * loss[0] = mean_b(-log p[labels[b]]) (row b's loss added to work-item b % nw's partial in
 * row order, then the partials summed by work-item 0 in order: fixed, no atomics);
 * after a barrier, dX[b,i] = sum_c dlogits[b,c] * W[c,i], times (X[b,i] > 0) when relu.
 * A label outside [0, C) gives a NaN loss. NDRange: one work-group (global = local, any
 * local size; work-items of other groups do nothing). */
__kernel void softmax_xent_bwd(const int B, const int C, const int I, const int relu,
                               __global const float *logits, __global const int *labels,
                               __global const float *W, __global const float *X,
                               __global float *dlogits, __global float *dX,
                               __global float *loss)
{
    __local float part[LOSS_WG];
    /* Every work-item reaches the barrier (no return before it: with an early return of the
     * other groups PoCL 3.1 corrupted host memory in multi-kernel plans); only group 0 works. */
    const int lid = get_local_id(0), nl = get_local_size(0);
    const int nw = get_group_id(0) != 0 ? 0 : (nl < LOSS_WG ? nl : LOSS_WG);
    const float inv_b = 1.0f / (float)B;
    if (lid < nw) {
        float acc = 0.0f;
        for (int b = lid; b < B; b += nw) {
            const __global float *x = logits + (size_t)b * C;
            __global float *dx = dlogits + (size_t)b * C;
            acc += softmax_xent_row(x, dx, labels[b], C, inv_b);
        }
        part[lid] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (nw == 0) return;
    if (lid == 0) {
        float s = 0.0f;
        for (int w = 0; w < nw; ++w)
            s += part[w];
        loss[0] = s * inv_b;
    }
    for (int e = lid; e < B * I; e += nl) {
        if (relu && !(X[e] > 0.0f)) {
            dX[e] = 0.0f;
            continue;
        }
        const __global float *dy = dlogits + (size_t)(e / I) * C;
        const int i = e % I;
        float acc = 0.0f;
        for (int c = 0; c < C; ++c)
            acc += dy[c] * W[(size_t)c * I + i];
        dX[e] = acc;
    }
}

/* Weight gradient + SGD update of a Linear layer, no gradient buffer: for i < I,
 * dW[o,i] = sum_b dY[b,o] * X[b,i] and W[o,i], V[o,i] take the SGD step; column i == I is
 * the bias: db[o] = sum_b dY[b,o], bias[o], Vb[o] take the step. NDRange [I+1, O]. */
__kernel void linear_sgd(const int B, const int O, const int I, const float lr,
                         const float momentum, const float weight_decay,
                         __global const float *X, __global const float *dY, __global float *W,
                         __global float *V, __global float *bias, __global float *Vb)
{
    const int i = get_global_id(0), o = get_global_id(1);
    if (i > I || o >= O) return;
    float acc = 0.0f;
    if (i == I) {
        for (int b = 0; b < B; ++b)
            acc += dY[(size_t)b * O + o];
        SGD_STEP(bias, Vb, o, acc);
        return;
    }
    for (int b = 0; b < B; ++b)
        acc += dY[(size_t)b * O + o] * X[(size_t)b * I + i];
    SGD_STEP(W, V, (size_t)o * I + i, acc);
}

/* Weight gradient + SGD update of a convolution, reading dY in NCHW and X directly (no
 * im2col): for k = (c*KH+kh)*KW+kw < C*KH*KW, dW[oc,k] = sum over (b, oh, ow) of
 * dY[b,oc,oh,ow] * X[b, c, oh*stride-pad+kh, ow*stride-pad+kw] (0 outside the image), then
 * the SGD step on weight/V; column k == C*KH*KW is the bias (db[oc] = sum of dY[b,oc,:,:]).
 * One work-group per (k, oc): NDRange [(C*KH*KW+1)*L, OC], local [L, 1]. */
__kernel void conv_sgd(const int B, const int C, const int H, const int W, const int OC,
                       const int KH, const int KW, const int stride, const int pad,
                       const int OH, const int OW, const float lr, const float momentum,
                       const float weight_decay, __global const float *X,
                       __global const float *dY, __global float *weight, __global float *V,
                       __global float *bias, __global float *Vb)
{
    __local float scratch[RL_MAX];
    const int k = get_group_id(0), oc = get_global_id(1);
    const int l = get_local_id(0), L = get_local_size(0);
    const int ckk = C * KH * KW, P = OH * OW, n = B * P;
    if (k > ckk) return;   /* a whole work-group: no barrier is skipped by part of one */
    /* a work-group may span several oc (local size in dimension 1 > 1): each its own row of
     * scratch; an oc past the edge sums nothing but still meets the barriers */
    __local float *row = scratch + get_local_id(1) * L;
    float part = 0.0f;
    if (oc < OC && k == ckk) {
        part = conv_bgrad_chunk_share(dY, OC, P, oc, 0, n, l, L);
    } else if (oc < OC) {
        part = conv_wgrad_share(dY, X, B, C, H, W, OC, OH, OW, stride, pad, oc, k / (KW * KH),
                                (k / KW) % KH, k % KW, l, L);
    }
    /* one call site for the whole work-group: its barriers are never inside a branch */
    const float total = wg_sum(part, row);
    if (l != 0 || oc >= OC) return;
    if (k == ckk) SGD_STEP(bias, Vb, oc, total);
    else SGD_STEP(weight, V, (size_t)oc * ckk + k, total);
}

/* Split-K form of conv_sgd for long sums (few outputs, long B*OH*OW), two launches in this
 * order: conv_wgrad_partial sums chunk s of the n = B*OH*OW products of every output (weight
 * k < C*KH*KW, bias column k == C*KH*KW) into part[s, oc, k]; conv_sgd_finish adds the S
 * partial sums of each output in chunk order and takes the SGD step. Chunk s is
 * [s*Kc, min((s+1)*Kc, n)) with Kc = ceil(n/S) (the last one shorter or empty); within a
 * chunk, the strided partial sums and the tree of conv_sgd (wg_sum). S = 1 is conv_sgd's
 * order exactly.
 * conv_wgrad_partial: one work-group per (k, oc, s): NDRange [(C*KH*KW+1)*L, OC*S] (dimension
 * 1: q = oc*S + s), local [L, 1]; part holds S*OC*(C*KH*KW+1) floats. */
__kernel void conv_wgrad_partial(const int B, const int C, const int H, const int W,
                                 const int OC, const int KH, const int KW, const int stride,
                                 const int pad, const int OH, const int OW, const int S,
                                 __global const float *X, __global const float *dY,
                                 __global float *part)
{
    __local float scratch[RL_MAX];
    const int k = get_group_id(0), q = get_global_id(1);
    const int l = get_local_id(0), L = get_local_size(0);
    const int ckk = C * KH * KW, P = OH * OW, n = B * P;
    if (k > ckk) return;   /* a whole work-group: no barrier is skipped by part of one */
    const int oc = q / S, s = q % S, live = q < OC * S;
    const int chunk = (n - 1) / S + 1, i0 = min(n, s * chunk), i1 = min(n, i0 + chunk);
    /* each row of the work-group (dimension 1) its own row of scratch, as in conv_sgd */
    __local float *row = scratch + get_local_id(1) * L;
    float v = 0.0f;
    if (live && k == ckk)
        v = conv_bgrad_chunk_share(dY, OC, P, oc, i0, i1, l, L);
    else if (live)
        v = conv_wgrad_chunk_share(dY, X, B, C, H, W, OC, OH, OW, stride, pad, oc,
                                   k / (KW * KH), (k / KW) % KH, k % KW, i0, i1, l, L);
    const float total = wg_sum(v, row);
    if (l != 0 || !live) return;
    part[((size_t)s * OC + oc) * (ckk + 1) + k] = total;
}

/* conv_sgd_finish: g = part[0, oc, k] + part[1, oc, k] + ... + part[S-1, oc, k] (in that
 * order), then the SGD step on weight[oc, k], V (k < C*KH*KW) or bias[oc], Vb (k ==
 * C*KH*KW), as conv_sgd. One work-item per output: NDRange [C*KH*KW+1, OC]. */
__kernel void conv_sgd_finish(const int C, const int OC, const int KH, const int KW,
                              const int S, const float lr, const float momentum,
                              const float weight_decay, __global const float *part,
                              __global float *weight, __global float *V,
                              __global float *bias, __global float *Vb)
{
    const int k = get_global_id(0), oc = get_global_id(1), ckk = C * KH * KW;
    if (k > ckk || oc >= OC) return;
    const size_t stride_s = (size_t)OC * (ckk + 1);
    const __global float *p = part + (size_t)oc * (ckk + 1) + k;
    float total = 0.0f;
    for (int s = 0; s < S; ++s)
        total += p[s * stride_s];
    if (k == ckk) SGD_STEP(bias, Vb, oc, total);
    else SGD_STEP(weight, V, (size_t)oc * ckk + k, total);
}
