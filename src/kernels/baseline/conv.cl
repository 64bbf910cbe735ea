/* Baseline convolution helpers (kernel ABI: src/kernels/README.md): im2col, its adjoint
 * col2im (a gather: one work-item per dX element, no atomics), swap01 (NCHW <-> CNHW), and
 * conv2d_fwd, the direct forward convolution the lowering uses instead of im2col + GEMM +
 * swap01 where tuning.json says it is faster. One work-item per output element, global memory
 * only; out-of-range work-items return. col2im walks its taps with common.cl's
 * FOR_EACH_CONV_TAP (common.cl is staged in front of this file). */

/* col[(c*KH+kh)*KW+kw, (b*OH+oh)*OW+ow] = X[b, c, oh*stride-pad+kh, ow*stride-pad+kw],
 * 0 outside the image. NDRange [B*OH*OW, C*KH*KW]: global[0] is the column of col. */
__kernel void im2col(const int B, const int C, const int H, const int W, const int KH,
                     const int KW, const int stride, const int pad, const int OH, const int OW,
                     __global const float *X, __global float *col)
{
    const int j = get_global_id(0);         /* (b*OH+oh)*OW+ow */
    const int r = get_global_id(1);         /* (c*KH+kh)*KW+kw */
    const int ncols = B * OH * OW;
    if (j >= ncols || r >= C * KH * KW) return;
    const int ow = j % OW, oh = (j / OW) % OH, b = j / (OW * OH);
    const int kw = r % KW, kh = (r / KW) % KH, c = r / (KW * KH);
    const int h = oh * stride - pad + kh, w = ow * stride - pad + kw;
    float v = 0.0f;
    if (h >= 0 && h < H && w >= 0 && w < W)
        v = X[(((size_t)b * C + c) * H + h) * W + w];
    col[(size_t)r * ncols + j] = v;
}

/* dX[b,c,h,w] = sum of the col entries im2col read from (b,c,h,w); overwrites dX.
 * NDRange [B*C*H*W]. */
__kernel void col2im(const int B, const int C, const int H, const int W, const int KH,
                     const int KW, const int stride, const int pad, const int OH, const int OW,
                     __global const float *col, __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= B * C * H * W) return;
    const int w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, b = i / (W * H * C);
    const size_t ncols = (size_t)B * OH * OW;
    float acc = 0.0f;
    FOR_EACH_CONV_TAP(h, w, KH, KW, stride, pad, OH, OW, {
        const size_t r = ((size_t)c * KH + kh) * KW + kw;
        acc += col[r * ncols + ((size_t)b * OH + oh) * OW + ow];
    })
    dX[i] = acc;
}

/* Y[j,i,k] = X[i,j,k] for X of shape [D0,D1,D2]. NDRange [D0*D1*D2], one work-item per Y
 * element (coalesced writes). */
__kernel void swap01(const int D0, const int D1, const int D2, __global const float *X,
                     __global float *Y)
{
    const int o = get_global_id(0);
    if (o >= D0 * D1 * D2) return;
    const int k = o % D2, i = (o / D2) % D0, j = o / (D2 * D0);
    Y[o] = X[((size_t)i * D1 + j) * D2 + k];
}

/* Direct convolution, for small channel counts where im2col + GEMM moves more data than it
 * computes: Y[b,oc,oh,ow] = sum over (c, kh, kw), in that order, of
 * Wt[oc,c,kh,kw] * X[b, c, oh*stride-pad+kh, ow*stride-pad+kw] (taps outside the image are
 * skipped: padding reads as 0). Overwrites Y (NCHW; no bias). NDRange [B*OH*OW]: one work-item
 * per output pixel computes CONV_OCB output channels at a time in registers, so each input
 * value is loaded once per CONV_OCB channels; the window is clipped to the image once, so the
 * tap loops have no branches. Neighbouring work-items (along ow) read neighbouring X and
 * write neighbouring Y. */
/* Output channels per pass (fixed, not a tuning parameter: the baseline has none). */
#define CONV_OCB 8
__kernel void conv2d_fwd(const int B, const int C, const int H, const int W, const int OC,
                         const int KH, const int KW, const int stride, const int pad,
                         const int OH, const int OW, __global const float *X,
                         __global const float *Wt, __global float *Y)
{
    const int o = get_global_id(0);          /* (b*OH+oh)*OW+ow */
    if (o >= B * OH * OW) return;
    const int ow = o % OW, oh = (o / OW) % OH, b = o / (OW * OH);
    const int h0 = oh * stride - pad, w0 = ow * stride - pad;
    const int kh_lo = max(0, -h0), kh_hi = min(KH, H - h0);
    const int kw_lo = max(0, -w0), kw_hi = min(KW, W - w0);
    const int taps = KH * KW;
    for (int oc0 = 0; oc0 < OC; oc0 += CONV_OCB) {
        float acc[CONV_OCB];
        for (int j = 0; j < CONV_OCB; ++j) acc[j] = 0.0f;
        const int nj = min(CONV_OCB, OC - oc0);
        for (int c = 0; c < C; ++c) {
            __global const float *x = X + ((size_t)b * C + c) * H * W;
            __global const float *wt = Wt + ((size_t)oc0 * C + c) * taps;
            for (int kh = kh_lo; kh < kh_hi; ++kh)
                for (int kw = kw_lo; kw < kw_hi; ++kw) {
                    const float xv = x[(h0 + kh) * W + w0 + kw];
                    const int t = kh * KW + kw;
                    for (int j = 0; j < CONV_OCB; ++j)
                        if (j < nj) acc[j] += wt[(size_t)j * C * taps + t] * xv;
                }
        }
        for (int j = 0; j < nj; ++j)
            Y[(((size_t)b * OC + oc0 + j) * OH + oh) * OW + ow] = acc[j];
    }
}
