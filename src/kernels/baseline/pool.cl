/* Baseline max pooling (kernel ABI: src/kernels/README.md), no padding. One work-item per
 * output element, global memory only; out-of-range work-items return early. Windows are
 * clipped to the image so a caller's oversized OH/OW cannot read out of bounds (the CPU
 * backend rejects such sizes instead). maxpool_bwd's gather over the windows is common.cl's
 * maxpool_grad_at (common.cl is staged in front of this file). */

/* Y[b,c,oh,ow] = max of the K x K window at (oh*stride, ow*stride); argmax (int) = h*W+w of
 * its first maximum in row-major scan order. NDRange [B*C*OH*OW]. */
__kernel void maxpool_fwd(const int B, const int C, const int H, const int W, const int K,
                          const int stride, const int OH, const int OW,
                          __global const float *X, __global float *Y, __global int *argmax)
{
    const int o = get_global_id(0);
    if (o >= B * C * OH * OW) return;
    const int ow = o % OW, oh = (o / OW) % OH, bc = o / (OW * OH);
    const __global float *x = X + (size_t)bc * H * W;
    const int h0 = oh * stride, w0 = ow * stride;
    const int h1 = min(h0 + K, H), w1 = min(w0 + K, W);
    int best = h0 * W + w0;
    float m = x[best];
    for (int h = h0; h < h1; ++h)
        for (int w = w0; w < w1; ++w)
            if (x[h * W + w] > m) {
                m = x[h * W + w];
                best = h * W + w;
            }
    Y[o] = m;
    argmax[o] = best;
}

/* dX[b,c,h,w] = sum of dY[b,c,oh,ow] over windows whose argmax is h*W+w (overwrites dX).
 * NDRange [B*C*H*W]: a gather over the windows that contain (h, w), no atomics. */
__kernel void maxpool_bwd(const int B, const int C, const int H, const int W, const int K,
                          const int stride, const int OH, const int OW,
                          __global const float *dY, __global const int *argmax,
                          __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= B * C * H * W) return;
    const int w = i % W, h = (i / W) % H, bc = i / (W * H);
    const size_t base = (size_t)bc * OH * OW;
    dX[i] = maxpool_grad_at(dY + base, argmax + base, h, w, W, K, stride, OH, OW);
}
