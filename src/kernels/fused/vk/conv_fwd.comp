#version 450
// Direct convolution writing NCHW: Y[b,oc,oh,ow] = act(bias[oc] + sum over (c, kh, kw) of
// weight[oc,c,kh,kw] * X[b, c, oh*stride-pad+kh, ow*stride-pad+kw]) (0 outside the image)
// (kernel ABI: src/kernels/README.md, "Fused kernels"; ../fused.cl's conv_fwd); one
// invocation per output, global [OH*OW, B*OC].
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int p = int(gl_GlobalInvocationID.x), q = int(gl_GlobalInvocationID.y);
    if (p >= OH * OW || q >= B * OC) return;
    const int ow = p % OW, oh = p / OW, oc = q % OC, b = q / OC;
    float acc = conv_output_at(b, oc, oh, ow, C, H, W, OC, KH, KW, stride, pad, 1);
    acc += bias[oc];
    Y[q * OH * OW + p] = (act != 0 && !(acc > 0.0)) ? 0.0 : acc;
}
