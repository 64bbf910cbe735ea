#version 450
// Weight gradient + SGD step of a grouped convolution (kernel ABI: src/kernels/README.md,
// "Fused batch-norm kernels"; ../fused_bn.cl's gconv_sgd): for k = (ci*KH+kh)*KW+kw <
// (C/groups)*KH*KW, dW[oc,k] = sum over (b, oh, ow) of dY[b,oc,oh,ow] *
// X[b, g*(C/groups)+ci, oh*stride-pad+kh, ow*stride-pad+kw] (0 outside the image; g the
// group of oc), then the SGD step on weight[oc,k], V[oc,k]. One work-group per (k, oc):
// global [(C/groups)*KH*KW*L, OC], local [L, Ly] (version.yaml: [256, 1]).
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int k = int(gl_WorkGroupID.x), oc = int(gl_GlobalInvocationID.y);
    const int l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    const int cg = C / groups, ckk = cg * KH * KW, n = B * OH * OW;
    if (k >= ckk) return;   // a whole work-group: no barrier is skipped by part of one
    float part = 0.0;
    if (oc < OC)
        part = conv_wgrad_chunk_share(B, C, H, W, OC, OH, OW, stride, pad, oc,
                                      (oc / (OC / groups)) * cg + k / (KW * KH), (k / KW) % KH,
                                      k % KW, 0, n, l, L);
    const float total = wg_sum_row(part);
    if (l != 0 || oc >= OC) return;
    SGD_STEP(weight, V, oc * ckk + k, total)
}
