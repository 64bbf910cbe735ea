/* CPU backend: the optimizer kernels of the kernel ABI (src/kernels/README.md, section
 * "Optimizers") in C11 + OpenMP: Adam and AdamW as PyTorch's torch.optim.Adam/AdamW define
 * them (Kingma & Ba, ICLR 2015; Loshchilov & Hutter, "Decoupled Weight Decay
 * Regularization", ICLR 2019).
 *
 * Same contract as every kernel file of the backend (the shared checks of cpu_kernel_ctx.h;
 * found through the generated table of cpu_kernels.c): each kernel checks its arguments
 * first and reports the first bad one as "kernel: argument i (name) ...". Element-wise:
 * results do not depend on the thread count. */
#include "cpu_kernel_ctx.h"

#include <math.h>
#include <stdint.h>

/* The step count argument idx: a float tensor of at least one element. */
static int need_step(const kctx *k, int idx)
{
    if (k->a[idx].numel < 1)
        return kfail(k, idx, "has %ld elements; the step count needs 1", k->a[idx].numel);
    return 0;
}

/* adam_step(step): step[0] += 1 (the step count t). */
CPU_KERNEL(adam_step, t)
{
    CHECK(need_step(k, 0));
    PF(0)[0] += 1.0f;
    return 0;
}

/* 1 - beta^t, in double as -expm1(t * log(beta)) (no cancellation for beta near 1), rounded
 * to float as the OpenCL kernel's float result is. */
static float bias_correction(float beta, float t)
{
    return (float)(-expm1((double)t * log((double)beta)));
}

static int adam_check(const kctx *k)
{
    CHECK(kneed_min(k, 0, 1));
    const int64_t n = I(0);
    for (int i = 2; i <= 3; ++i)
        if (!(F(i) >= 0.0f && F(i) < 1.0f))
            return kfail(k, i, "is %g; a moment decay rate is in [0, 1)", (double)F(i));
    CHECK(need_step(k, 7));
    if (!(PF(7)[0] >= 1.0f))
        return kfail(k, 7, "holds step count %g; adam_step must run before adam_update (>= 1)",
                     (double)PF(7)[0]);
    for (int i = 8; i <= 11; ++i) CHECK(kneed_numel(k, i, n, "n"));
    return 0;
}

/* adam_update(n, lr, beta1, beta2, eps, weight_decay, decoupled, step, W, dW, M, V), t =
 * step[0]: AdamW (decoupled) W *= 1 - lr*wd, else g = dW + wd*W; M = beta1*M + (1-beta1)*g;
 * V = beta2*V + (1-beta2)*g*g; W -= lr/(1-beta1^t) * M / (sqrt(V)/sqrt(1-beta2^t) + eps). */
CPU_KERNEL(adam_update, ifffffittttt)
{
    CHECK(adam_check(k));
    const int64_t n = I(0);
    const float lr = F(1), b1 = F(2), b2 = F(3), eps = F(4), wd = F(5), t = PF(7)[0];
    const int decoupled = I(6) != 0;
    const float step_size = lr / bias_correction(b1, t);
    const float bc2_sqrt = sqrtf(bias_correction(b2, t));
    float *W = PF(8), *M = PF(10), *V = PF(11);
    const float *dW = PF(9);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float w = W[i], g = dW[i];
        if (decoupled)
            w *= 1.0f - lr * wd;
        else
            g += wd * w;
        const float m = b1 * M[i] + (1.0f - b1) * g;
        const float v = b2 * V[i] + (1.0f - b2) * g * g;
        M[i] = m;
        V[i] = v;
        W[i] = w - step_size * m / (sqrtf(v) / bc2_sqrt + eps);
    }
    return 0;
}

