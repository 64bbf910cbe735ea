/* Baseline element-wise kernels (kernel ABI: src/kernels/README.md): bias add and bias
 * gradient, ReLU forward/backward, SGD update, fill, copy. One work-item per output element,
 * global memory only; work-items past n (rounded-up global size) return early. */

/* Y[b,c,hw] += bias[c]; NDRange [B*C*HW] */
__kernel void bias_add(const int B, const int C, const int HW, __global float *Y,
                       __global const float *bias)
{
    const int i = get_global_id(0);
    if (i >= B * C * HW) return;
    Y[i] += bias[(i / HW) % C];
}

/* db[c] = sum over b, hw of dY[b,c,hw] (overwrites db); NDRange [C] */
__kernel void bias_grad(const int B, const int C, const int HW, __global const float *dY,
                        __global float *db)
{
    const int c = get_global_id(0);
    if (c >= C) return;
    float acc = 0.0f;
    for (int b = 0; b < B; ++b) {
        const __global float *row = dY + ((size_t)b * C + c) * HW;
        for (int hw = 0; hw < HW; ++hw)
            acc += row[hw];
    }
    db[c] = acc;
}

/* Y[i] = max(X[i], 0); Y may alias X (so no restrict); NDRange [n] */
__kernel void relu_fwd(const int n, __global const float *X, __global float *Y)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    Y[i] = fmax(X[i], 0.0f);
}

/* dX[i] = Y[i] > 0 ? dY[i] : 0; dX may alias dY; NDRange [n] */
__kernel void relu_bwd(const int n, __global const float *Y, __global const float *dY,
                       __global float *dX)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    dX[i] = Y[i] > 0.0f ? dY[i] : 0.0f;
}

/* PyTorch's SGD: g = dW + wd*W; V = momentum*V + g; W -= lr*V; NDRange [n] */
__kernel void sgd_update(const int n, const float lr, const float momentum,
                         const float weight_decay, __global float *W,
                         __global const float *dW, __global float *V)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    const float g = dW[i] + weight_decay * W[i];
    const float v = momentum * V[i] + g;
    V[i] = v;
    W[i] -= lr * v;
}

/* X[i] = value; NDRange [n] */
__kernel void fill(const int n, const float value, __global float *X)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    X[i] = value;
}

/* Y[i] = X[i]; NDRange [n] */
__kernel void copy(const int n, __global const float *X, __global float *Y)
{
    const int i = get_global_id(0);
    if (i >= n) return;
    Y[i] = X[i];
}
