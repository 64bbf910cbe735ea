#version 450
// Adam/AdamW step (README "Optimizers"); 1 - beta^t as -expm1(t log beta) (kernel ABI: src/kernels/README.md); one invocation per element, global [n].
#include "vk_abi.glsl"

// -expm1(x) for x = t * log(beta) <= 0 (GLSL has no expm1): Kahan's exp(x) - 1 =
// (u - 1) * x / log(u) with u = exp(x), exact where u rounds to 1 (then it is x).
float bias_correction(const float beta, const float t)
{
    const float x = t * log(beta);
    const float u = exp(x);
    if (u == 1.0) return -x;
    const float um1 = u - 1.0;
    if (um1 == -1.0) return 1.0;
    return -um1 * x / log(u);
}

void main()
{
    const int i = int(gl_GlobalInvocationID.x);
    if (i >= n) return;
    const float t = step[0];
    float w = W[i], g = dW[i];
    if (decoupled != 0)
        w *= 1.0 - lr * weight_decay;
    else
        g += weight_decay * w;
    const float m = beta1 * M[i] + (1.0 - beta1) * g;
    const float v = beta2 * V[i] + (1.0 - beta2) * g * g;
    M[i] = m;
    V[i] = v;
    const float step_size = lr / bias_correction(beta1, t);
    const float bc2_sqrt = sqrt(bias_correction(beta2, t));
    W[i] = w - step_size * m / (sqrt(v) / bc2_sqrt + eps);
}
