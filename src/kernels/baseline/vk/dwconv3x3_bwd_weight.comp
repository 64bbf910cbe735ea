#version 450
// dWt[c,kh,kw] = sum over b, oh, ow of dY[b,c,oh,ow] * X[b,c,oh*stride-pad+kh, ow*stride-pad+kw]; one work-group per weight (strided partial sums, then wg_sum) (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [C*9*64, local 64].
#include "vk_abi.glsl"
#include "reduce.glsl"

void main()
{
    const int t = int(gl_WorkGroupID.x), l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    if (t >= C * 9) return;   // whole work-groups only: no barrier is skipped by part of one
    const int c = t / 9, kh = (t % 9) / 3, kw = t % 3, n = B * OH * OW;
    float part = 0.0;
    for (int i = l; i < n; i += L) {
        const int ow = i % OW, oh = (i / OW) % OH, b = i / (OW * OH);
        const int h = oh * stride - pad + kh, w = ow * stride - pad + kw;
        if (h >= 0 && h < H && w >= 0 && w < W)
            part += X[((b * C + c) * H + h) * W + w] * dY[((b * C + c) * OH + oh) * OW + ow];
    }
    const float total = wg_sum(part);
    if (l == 0) dWt[t] = total;
}
