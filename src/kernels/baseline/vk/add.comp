#version 450
// Y = A + B (a residual add) (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [n].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= n) return;
    Y[i] = A[i] + B[i];
}
