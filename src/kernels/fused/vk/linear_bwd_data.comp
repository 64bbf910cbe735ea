#version 450
// dX[b,i] = sum_o dY[b,o] * W[o,i], times (X[b,i] > 0) when relu != 0 (X: the layer's input,
// a ReLU's output) (kernel ABI: src/kernels/README.md, "Fused kernels"; ../fused.cl's
// linear_bwd_data); one invocation per output, global [I, B].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x), b = int(gl_GlobalInvocationID.y);
    if (i >= I || b >= B) return;
    const int e = b * I + i;
    if (relu != 0 && !(X[e] > 0.0)) {
        dX[e] = 0.0;
        return;
    }
    const int dy0 = b * O;
    float acc = 0.0;
    for (int o = 0; o < O; ++o)
        acc += dY[dy0 + o] * W[o * I + i];
    dX[e] = acc;
}
