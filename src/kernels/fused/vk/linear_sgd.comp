#version 450
// Weight gradient + SGD update of a Linear layer, no gradient buffer (kernel ABI:
// src/kernels/README.md, "Fused kernels"; ../fused.cl's linear_sgd): for i < I,
// dW[o,i] = sum_b dY[b,o] * X[b,i] and W[o,i], V[o,i] take sgd_update's step; column i == I
// is the bias: db[o] = sum_b dY[b,o], bias[o], Vb[o] take the step. One invocation per
// output, global [I+1, O].
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x), o = int(gl_GlobalInvocationID.y);
    if (i > I || o >= O) return;
    float acc = 0.0;
    if (i == I) {
        for (int b = 0; b < B; ++b)
            acc += dY[b * O + o];
        SGD_STEP(bias, Vb, o, acc)
        return;
    }
    for (int b = 0; b < B; ++b)
        acc += dY[b * O + o] * X[b * I + i];
    SGD_STEP(W, V, o * I + i, acc)
}
