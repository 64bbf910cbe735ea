#version 450
// PyTorch's SGD: g = dW + wd*W; V = momentum*V + g; W -= lr*V (kernel ABI: src/kernels/README.md); one invocation per element, global [n].
#include "vk_abi.glsl"

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= n) return;
    const float g = dW[i] + weight_decay * W[i];
    const float v = momentum * V[i] + g;
    V[i] = v;
    W[i] -= lr * v;
}
