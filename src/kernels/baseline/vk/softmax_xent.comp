#version 450
// Per row b: p = softmax(logits[b,:]) (max-subtracted), row_loss[b] = -log(p[labels[b]]),
// dlogits[b,:] = (p - onehot(labels[b])) / B (kernel ABI: src/kernels/README.md); global [B].
#include "vk_abi.glsl"

void main()
{
    const int b = int(gl_GlobalInvocationID.x);
    if (b >= B) return;
    const int x0 = b * C, label = labels[b];
    float mx = logits[x0];
    for (int c = 1; c < C; ++c)
        mx = max(mx, logits[x0 + c]);
    float sum = 0.0;
    for (int c = 0; c < C; ++c)
        sum += exp(logits[x0 + c] - mx);
    const float inv_sum = 1.0 / sum, inv_b = 1.0 / float(B);
    for (int c = 0; c < C; ++c)
        dlogits[x0 + c] = (exp(logits[x0 + c] - mx) * inv_sum - (c == label ? 1.0 : 0.0)) * inv_b;
    // an out-of-range label gives NaN, as the OpenCL kernel (0/0: GLSL has no NAN constant)
    row_loss[b] = (label >= 0 && label < C) ? log(sum) - (logits[x0 + label] - mx)
                                            : uintBitsToFloat(0x7fc00000u);
}
