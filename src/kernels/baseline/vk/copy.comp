#version 450
// Y[i] = X[i] (kernel ABI: src/kernels/README.md); one invocation per element, global [n].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= n) return;
    Y[i] = X[i];
}
