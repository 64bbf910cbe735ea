#version 450
// dX[b,c,hw] = dY[b,c] / HW (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [B*C*HW].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * HW) return;
    dX[i] = dY[i / HW] / float(HW);
}
