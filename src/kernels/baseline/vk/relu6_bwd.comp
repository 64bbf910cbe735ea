#version 450
// dX = 0 < Y < 6 ? dY : 0 (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [n].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= n) return;
    dX[i] = (Y[i] > 0.0 && Y[i] < 6.0) ? dY[i] : 0.0;
}
