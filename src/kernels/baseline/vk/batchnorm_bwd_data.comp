#version 450
// dX = gamma[c]*invstd[c]/n * ((n*dY - dbeta[c]) - xhat*dgamma[c]), n = B*HW (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [B*C*HW].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * HW) return;
    const int c = (i / HW) % C;
    const float cnt = float(B * HW);
    const float xhat = (X[i] - mean[c]) * invstd[c];
    const float scale = gamma[c] * invstd[c] / cnt;
    dX[i] = scale * ((cnt * dY[i] - dbeta[c]) - xhat * dgamma[c]);
}
