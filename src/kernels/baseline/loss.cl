/* Baseline loss kernels (kernel ABI: src/kernels/README.md): fused softmax + cross-entropy
 * per row, and the mean of the per-row losses. Global memory only. The row's softmax and
 * loss are common.cl's softmax_xent_row (common.cl is staged in front of this file). */

/* Per row b: p = softmax(logits[b,:]) (max-subtracted for range safety),
 * row_loss[b] = -log p[labels[b]] = log(sum exp(x - max)) - (x[label] - max),
 * dlogits[b,:] = (p - onehot(labels[b])) / B. A label outside [0, C) gives a NaN row loss
 * (the runner's non-finite-loss check then stops the run). NDRange [B]. */
__kernel void softmax_xent(const int B, const int C, __global const float *logits,
                           __global const int *labels, __global float *dlogits,
                           __global float *row_loss)
{
    const int b = get_global_id(0);
    if (b >= B) return;
    const __global float *x = logits + (size_t)b * C;
    __global float *dx = dlogits + (size_t)b * C;
    row_loss[b] = softmax_xent_row(x, dx, labels[b], C, 1.0f / (float)B);
}

/* out[0] = sum(X[0:n]) / n, by work-item 0 alone (n is a batch size: small).
 * NDRange [1]; extra work-items return. */
__kernel void mean(const int n, __global const float *X, __global float *out)
{
    if (get_global_id(0) != 0) return;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i)
        acc += X[i];
    out[0] = acc / (float)n;
}
