#version 450
// Y[b,c] = sum over hw (in order) of X[b,c,hw], divided by HW (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [B*C].
#include "vk_abi.glsl"

void main()
{
    const int r = int(gl_GlobalInvocationID.x);
    if (r >= B * C) return;
    float acc = 0.0;
    for (int j = 0; j < HW; ++j) acc += X[r * HW + j];
    Y[r] = acc / float(HW);
}
