#version 450
// Split-K form of conv_sgd, first launch (kernel ABI: src/kernels/README.md, "Fused kernels";
// ../fused.cl's conv_wgrad_partial): the sum of output (oc, k) (weight k < C*KH*KW, bias
// column k == C*KH*KW) over chunk s = [s*Kc, min((s+1)*Kc, n)), Kc = ceil(n/S), of its
// n = B*OH*OW products, summed as conv_sgd sums all of them, into part[s, oc, k]. One
// work-group per (k, oc, s): global [(C*KH*KW+1)*L, OC*S] (dimension 1: oc*S + s), local
// [L, Ly] (version.yaml: [256, 1]).
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int k = int(gl_WorkGroupID.x), q = int(gl_GlobalInvocationID.y);
    const int l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    const int ckk = C * KH * KW, P = OH * OW, n = B * P;
    if (k > ckk) return;   // a whole work-group: no barrier is skipped by part of one
    const int oc = q / S, s = q % S;
    const bool live = q < OC * S;
    const int chunk = (n - 1) / S + 1, i0 = min(n, s * chunk), i1 = min(n, i0 + chunk);
    float v = 0.0;
    if (live && k == ckk)
        v = conv_bgrad_chunk_share(OC, P, oc, i0, i1, l, L);
    else if (live)
        v = conv_wgrad_chunk_share(B, C, H, W, OC, OH, OW, stride, pad, oc, k / (KW * KH),
                                   (k / KW) % KH, k % KW, i0, i1, l, L);
    const float total = wg_sum_row(v);
    if (l != 0 || !live) return;
    part[(s * OC + oc) * (ckk + 1) + k] = total;
}
