#version 450
// Input gradient of a grouped convolution, reading dY in NCHW (kernel ABI:
// src/kernels/README.md, "Fused batch-norm kernels"; ../fused_bn.cl's gconv_bwd_data):
// dX[b,c,h,w] = sum over the output channels oc of c's group, then (kh, kw) with
// oh = (h+pad-kh)/stride, ow = (w+pad-kw)/stride whole and in range, of
// weight[oc, c % (C/groups), kh, kw] * dY[b,oc,oh,ow]; plus R[b,c,h,w] when res != 0; times
// the activation mask of X (the layer's input) when act != 0. Global [H*W, B*C].
#include "vk_abi.glsl"
#include "fused.glsl"
#include "bn.glsl"

void main()
{
    const int p = int(gl_GlobalInvocationID.x), q = int(gl_GlobalInvocationID.y);
    if (p >= H * W || q >= B * C) return;
    const int w = p % W, h = p / W, c = q % C, b = q / C;
    const int e = q * H * W + p;
    if (!bn_act_passes(X[e], act)) {
        dX[e] = 0.0;
        return;
    }
    const int cg = C / groups, og = OC / groups, g = c / cg, ci = c % cg;
    float acc = 0.0;
    for (int j = 0; j < og; ++j) {
        const int oc = g * og + j;
        acc = conv_tap_gather(acc, (b * OC + oc) * OH * OW, (oc * cg + ci) * KH * KW, h, w, KH,
                              KW, stride, pad, OH, OW);
    }
    dX[e] = res != 0 ? acc + R[e] : acc;
}
