#version 450
// Split-K form of conv_sgd, second launch (kernel ABI: src/kernels/README.md, "Fused
// kernels"; ../fused.cl's conv_sgd_finish): g = part[0, oc, k] + ... + part[S-1, oc, k] (in
// that order), then the SGD step on weight[oc, k], V (k < C*KH*KW) or bias[oc], Vb
// (k == C*KH*KW). One invocation per output, global [C*KH*KW+1, OC].
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int k = int(gl_GlobalInvocationID.x), oc = int(gl_GlobalInvocationID.y);
    const int ckk = C * KH * KW;
    if (k > ckk || oc >= OC) return;
    const int stride_s = OC * (ckk + 1), p0 = oc * (ckk + 1) + k;
    float total = 0.0;
    for (int s = 0; s < S; ++s)
        total += part[p0 + s * stride_s];
    if (k == ckk) SGD_STEP(bias, Vb, oc, total)
    else SGD_STEP(weight, V, oc * ckk + k, total)
}
