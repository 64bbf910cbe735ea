#version 450
// Split-K form of gconv_sgd, first launch (kernel ABI: src/kernels/README.md, "Fused
// batch-norm kernels"; ../fused_bn.cl's gconv_wgrad_partial): the sum of weight (oc, k) over
// chunk s = [s*Kc, min((s+1)*Kc, n)), Kc = ceil(n/S), of its n = B*OH*OW products into
// part[s, oc, k] (part: [S, OC, (C/groups)*KH*KW]), as gconv_sgd sums all of them. Global
// [(C/groups)*KH*KW*L, OC*S] (dimension 1: oc*S + s), local [L, Ly] (version.yaml: [256, 1]).
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int k = int(gl_WorkGroupID.x), q = int(gl_GlobalInvocationID.y);
    const int l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    const int cg = C / groups, ckk = cg * KH * KW, n = B * OH * OW;
    if (k >= ckk) return;   // a whole work-group: no barrier is skipped by part of one
    const int oc = q / S, s = q % S;
    const bool live = q < OC * S;
    const int chunk = (n - 1) / S + 1, i0 = min(n, s * chunk), i1 = min(n, i0 + chunk);
    float v = 0.0;
    if (live)
        v = conv_wgrad_chunk_share(B, C, H, W, OC, OH, OW, stride, pad, oc,
                                   (oc / (OC / groups)) * cg + k / (KW * KH), (k / KW) % KH,
                                   k % KW, i0, i1, l, L);
    const float total = wg_sum_row(v);
    if (l != 0 || !live) return;
    part[(s * OC + oc) * ckk + k] = total;
}
