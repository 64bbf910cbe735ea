#version 450
// db[c] = sum over b, hw of dY[b,c,hw] (overwrites db) (kernel ABI: src/kernels/README.md);
// one invocation per channel, global [C].
#include "vk_abi.glsl"

void main()
{
    const int c = int(gl_GlobalInvocationID.x);
    if (c >= C) return;
    float acc = 0.0;
    for (int b = 0; b < B; ++b)
        for (int hw = 0; hw < HW; ++hw)
            acc += dY[(b * C + c) * HW + hw];
    db[c] = acc;
}
