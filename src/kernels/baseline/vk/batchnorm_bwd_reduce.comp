#version 450
// dbeta[c] = sum dY, dgamma[c] = sum dY * xhat over the channel's B*HW values; one work-group per channel (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [C*64, local 64].
#include "vk_abi.glsl"
#include "reduce.glsl"

void main()
{
    const int c = int(gl_WorkGroupID.x), l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    if (c >= C) return;
    const int n = B * HW;
    const float mu = mean[c], is = invstd[c];
    float pg = 0.0, pb = 0.0;
    for (int i = l; i < n; i += L) {
        const int at = ((i / HW) * C + c) * HW + i % HW;
        pb += dY[at];
        pg += dY[at] * ((X[at] - mu) * is);
    }
    const float sg = wg_sum(pg);
    const float sb = wg_sum(pb);
    if (l == 0) {
        dgamma[c] = sg;
        dbeta[c] = sb;
    }
}
