/* Baseline optimizer kernels (kernel ABI: src/kernels/README.md, section "Optimizers"): Adam
 * and AdamW as PyTorch's torch.optim.Adam / torch.optim.AdamW define them (Kingma & Ba, ICLR
 * 2015; Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019). The step
 * count t lives in a one-element float tensor that adam_step increments on the device, so the
 * bias corrections need no value from the host. One work-item per element, global memory
 * only; work-items past n (rounded-up global size) return early. */

/* step[0] += 1; NDRange [1] (work-items past the first return) */
__kernel void adam_step(__global float *step)
{
    if (get_global_id(0) != 0) return;
    step[0] += 1.0f;
}

/* 1 - beta^t as -expm1(t * log(beta)): the same value without the cancellation of 1 - pow()
 * when beta is close to 1 (0.999: pow's rounding error would be amplified 1000 times). */
static inline float adam_bias_correction(const float beta, const float t)
{
    return -expm1(t * log(beta));
}

/* t = step[0]; g = dW[i]; AdamW (decoupled = 1): W *= 1 - lr*wd; Adam: g += wd*W;
 * M = beta1*M + (1-beta1)*g; V = beta2*V + (1-beta2)*g*g;
 * W -= lr / (1 - beta1^t) * M / (sqrt(V) / sqrt(1 - beta2^t) + eps); NDRange [n] */
__kernel void adam_update(const int n, const float lr, const float beta1, const float beta2,
                          const float eps, const float weight_decay, const int decoupled,
                          __global const float *step, __global float *W,
                          __global const float *dW, __global float *M, __global float *V)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float t = step[0];
    float w = W[i], g = dW[i];
    if (decoupled)
        w *= 1.0f - lr * weight_decay;
    else
        g += weight_decay * w;
    const float m = beta1 * M[i] + (1.0f - beta1) * g;
    const float v = beta2 * V[i] + (1.0f - beta2) * g * g;
    M[i] = m;
    V[i] = v;
    const float step_size = lr / adam_bias_correction(beta1, t);
    const float bc2_sqrt = sqrt(adam_bias_correction(beta2, t));
    W[i] = w - step_size * m / (sqrt(v) / bc2_sqrt + eps);
}
