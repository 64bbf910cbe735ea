#version 450
// Y = min(max(X, 0), 6) (kernel ABI: src/kernels/README.md, "Mobile CNN operators"); global [n].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= n) return;
    const float v = X[i] > 0.0 ? X[i] : 0.0;
    Y[i] = v < 6.0 ? v : 6.0;
}
