#version 450
// Per channel over n = B*HW inputs: the mean (a sum shifted by the channel's first value), the biased variance, invstd = 1/sqrt(var + eps), running statistics updated with the unbiased variance; one work-group per channel (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [C*64, local 64].
#include "vk_abi.glsl"
#include "reduce.glsl"

void main()
{
    const int c = int(gl_WorkGroupID.x), l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    if (c >= C) return;
    const int n = B * HW;
    const float cnt = float(n);
    const float shift = X[c * HW];   // values equal to the first one add exactly 0
    float part = 0.0;
    for (int i = l; i < n; i += L) part += X[((i / HW) * C + c) * HW + i % HW] - shift;
    const float mu = shift + wg_sum(part) / cnt;
    float sq = 0.0;
    for (int i = l; i < n; i += L) {
        const float dv = X[((i / HW) * C + c) * HW + i % HW] - mu;
        sq += dv * dv;
    }
    const float var = wg_sum(sq) / cnt;
    if (l != 0) return;
    const float unbiased = cnt > 1.0 ? var * cnt / (cnt - 1.0) : var;
    mean[c] = mu;
    invstd[c] = 1.0 / sqrt(var + eps);
    running_mean[c] = (1.0 - momentum) * running_mean[c] + momentum * mu;
    running_var[c] = (1.0 - momentum) * running_var[c] + momentum * unbiased;
}
