#version 450
// Direct convolution Y[b,oc,oh,ow] = sum over (c, kh, kw), in that order, of
// Wt[oc,c,kh,kw] * X[b,c,oh*stride-pad+kh,ow*stride-pad+kw], taps outside the image skipped
// (kernel ABI: src/kernels/README.md); one invocation per output pixel, all OC;
// global [B*OH*OW].
#include "vk_abi.glsl"

void main()
{
    const int o = int(gl_GlobalInvocationID.x);
    if (o >= B * OH * OW) return;
    const int ow = o % OW, oh = (o / OW) % OH, b = o / (OW * OH);
    const int h0 = oh * stride - pad, w0 = ow * stride - pad;
    const int kh_lo = max(0, -h0), kh_hi = min(KH, H - h0);
    const int kw_lo = max(0, -w0), kw_hi = min(KW, W - w0);
    for (int oc = 0; oc < OC; ++oc) {
        float acc = 0.0;
        for (int c = 0; c < C; ++c)
            for (int kh = kh_lo; kh < kh_hi; ++kh)
                for (int kw = kw_lo; kw < kw_hi; ++kw)
                    acc += Wt[((oc * C + c) * KH + kh) * KW + kw] *
                           X[((b * C + c) * H + h0 + kh) * W + w0 + kw];
        Y[((b * OC + oc) * OH + oh) * OW + ow] = acc;
    }
}
