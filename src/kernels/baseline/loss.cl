/* Baseline loss kernels (kernel ABI: src/kernels/README.md): fused softmax + cross-entropy
 * per row, and the mean of the per-row losses. Global memory only. */

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
    const int label = labels[b];
    float mx = x[0];
    for (int c = 1; c < C; ++c)
        mx = fmax(mx, x[c]);
    float sum = 0.0f;
    for (int c = 0; c < C; ++c)
        sum += exp(x[c] - mx);
    const float inv_sum = 1.0f / sum, inv_b = 1.0f / (float)B;
    for (int c = 0; c < C; ++c)
        dx[c] = (exp(x[c] - mx) * inv_sum - (c == label ? 1.0f : 0.0f)) * inv_b;
    row_loss[b] = (label >= 0 && label < C) ? log(sum) - (x[label] - mx) : NAN;
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
