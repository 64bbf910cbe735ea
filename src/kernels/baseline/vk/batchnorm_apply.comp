#version 450
// Y = ((X - mean[c]) * invstd[c]) * gamma[c] + beta[c] (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [B*C*HW].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * HW) return;
    const int c = (i / HW) % C;
    Y[i] = ((X[i] - mean[c]) * invstd[c]) * gamma[c] + beta[c];
}
