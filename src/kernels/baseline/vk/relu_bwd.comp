#version 450
// dX[i] = Y[i] > 0 ? dY[i] : 0; dX may alias dY (kernel ABI: src/kernels/README.md); one invocation per element, global [n].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= n) return;
    dX[i] = Y[i] > 0.0 ? dY[i] : 0.0;
}
