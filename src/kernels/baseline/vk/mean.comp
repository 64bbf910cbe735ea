#version 450
// out[0] = sum(X[0:n]) / n, in index order by one invocation (kernel ABI:
// src/kernels/README.md); global [1].
#include "vk_abi.glsl"

void main()
{
    if (gl_GlobalInvocationID.x != 0u) return;
    float acc = 0.0;
    for (int i = 0; i < n; ++i)
        acc += X[i];
    out_[0] = acc / float(n);
}
