#version 450
// Y[j, i, k] = X[i, j, k] for X of shape [D0, D1, D2] (kernel ABI: src/kernels/README.md); one invocation per element, global [D0*D1*D2].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= D0 * D1 * D2) return;
    const int k = i % D2, a = (i / D2) % D0, j = i / (D2 * D0);
    Y[i] = X[(a * D1 + j) * D2 + k];
}
