#version 450
// Split-K form of gconv_sgd, second launch (kernel ABI: src/kernels/README.md, "Fused
// batch-norm kernels"; ../fused_bn.cl's gconv_sgd_finish): g = part[0, oc, k] + ... +
// part[S-1, oc, k] (in that order), then the SGD step on weight[oc, k], V[oc, k]. One
// invocation per weight, global [(C/groups)*KH*KW, OC].
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int k = int(gl_GlobalInvocationID.x), oc = int(gl_GlobalInvocationID.y);
    const int ckk = C / groups * KH * KW;
    if (k >= ckk || oc >= OC) return;
    const int stride_s = OC * ckk, e = oc * ckk + k;
    float total = 0.0;
    for (int s = 0; s < S; ++s)
        total += part[s * stride_s + e];
    SGD_STEP(weight, V, e, total)
}
