#version 450
// Y[b,c,hw] += bias[c] (kernel ABI: src/kernels/README.md); one invocation per element, global [B*C*HW].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= B * C * HW) return;
    Y[i] += bias[(i / HW) % C];
}
