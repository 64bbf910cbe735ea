#version 450
// step[0] += 1 by one invocation (kernel ABI: src/kernels/README.md, "Optimizers");
// global [1].
#include "vk_abi.glsl"

void main()
{
    if (gl_GlobalInvocationID.x != 0u) return;
    step[0] += 1.0;
}
