#version 450
// Input gradient of a convolution, reading dY in NCHW: dX[b,c,h,w] = sum over (kh, kw), then
// oc, with oh = (h+pad-kh)/stride, ow = (w+pad-kw)/stride whole and in range, of
// weight[oc,c,kh,kw] * dY[b,oc,oh,ow]; times (X[b,c,h,w] > 0) when relu != 0 (kernel ABI:
// src/kernels/README.md, "Fused kernels"; ../fused.cl's conv_bwd_data, its FOR_EACH_CONV_TAP
// loop); one invocation per input element (a gather), global [H*W, B*C].
#include "vk_abi.glsl"
#include "common.glsl"

void main()
{
    const int p = int(gl_GlobalInvocationID.x), q = int(gl_GlobalInvocationID.y);
    if (p >= H * W || q >= B * C) return;
    const int w = p % W, h = p / W, c = q % C, b = q / C;
    const int e = q * H * W + p;
    if (relu != 0 && !(X[e] > 0.0)) {
        dX[e] = 0.0;
        return;
    }
    float acc = 0.0;
    for (int kh = 0; kh < KH; ++kh) {
        const int oh = conv_tap_output(h, pad, kh, stride, OH);
        if (oh < 0) continue;
        for (int kw = 0; kw < KW; ++kw) {
            const int ow = conv_tap_output(w, pad, kw, stride, OW);
            if (ow < 0) continue;
            for (int oc = 0; oc < OC; ++oc)
                acc += weight[((oc * C + c) * KH + kh) * KW + kw] *
                       dY[((b * OC + oc) * OH + oh) * OW + ow];
        }
    }
    dX[e] = acc;
}
