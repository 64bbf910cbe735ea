#version 450
// Z = the grouped convolution (bias-free) and the statistics of each tile of its channels
// (kernel ABI: src/kernels/README.md, "Fused batch-norm kernels"; ../fused_bn.cl's
// gconv_stats_fwd): channel oc's n = B*OH*OW outputs, in (b, oh, ow) order, form
// T = ceil(n/tile) tiles; work-group (t, oc) computes tile t's Z, then its mean
// m = sum(Z)/count and M2 = sum((Z - m)^2) (two passes, each invocation re-reading only the
// Z it wrote) into part[(oc*T + t)*2 + 0, 1]. Global [T*L, OC], local [L, Ly] (the ABI: [64, 1]).
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int t = int(gl_WorkGroupID.x), oc = int(gl_GlobalInvocationID.y);
    const int l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    const int P = OH * OW, n = B * P, T = (n - 1) / tile + 1;
    if (t >= T) return;   // a whole work-group: no barrier is skipped by part of one
    const int i0 = t * tile, cnt = min(tile, n - i0);
    float s = 0.0;
    if (oc < OC)
        for (int j = l; j < cnt; j += L) {
            const int b = (i0 + j) / P, p = (i0 + j) % P;
            const float z = conv_output_at(b, oc, p / OW, p % OW, C, H, W, OC, KH, KW, stride,
                                           pad, groups);
            Z[(b * OC + oc) * P + p] = z;
            s += z;
        }
    const float m = wg_sum_row(s) / float(cnt);
    float q = 0.0;
    if (oc < OC)
        for (int j = l; j < cnt; j += L) {
            const int b = (i0 + j) / P, p = (i0 + j) % P;
            const float dv = Z[(b * OC + oc) * P + p] - m;
            q += dv * dv;
        }
    const float m2 = wg_sum_row(q);
    if (l == 0 && oc < OC) {
        part[(oc * T + t) * 2] = m;
        part[(oc * T + t) * 2 + 1] = m2;
    }
}
