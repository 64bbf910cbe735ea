#version 450
// One work-group does the loss and the last Linear layer's input gradient (kernel ABI:
// src/kernels/README.md, "Fused kernels"; ../fused.cl's softmax_xent_bwd): per row b,
// p = softmax(logits[b,:]) (max-subtracted), dlogits[b,:] = (p - onehot(labels[b])) / B,
// loss[0] = mean_b(-log p[labels[b]]) (row b's loss added to invocation b % nw's partial in
// row order, then the partials summed by invocation 0 in order: fixed, no atomics); after a
// barrier, dX[b,i] = sum_c dlogits[b,c] * W[c,i], times (X[b,i] > 0) when relu. A label
// outside [0, C) gives a NaN loss. Global = one work-group of any size (version.yaml: 256);
// invocations of other work-groups do nothing.
// Tuning parameter (specialization constant; default = ../version.yaml's define):
//   LOSS_WG  the largest number of invocations that take rows (the shared loss partials)
#include "vk_abi.glsl"

layout(constant_id = PT_SPEC_LOSS_WG) const int LOSS_WG = 64;

shared float part[LOSS_WG];

// dlogits as written by this work-group and read back by its other invocations after the
// barrier: a coherent view of the same binding, so the writes are visible to them.
layout(std430, set = 0, binding = PT_BINDING_dlogits) coherent buffer PtBuf_dlogits_c
{
    float dlogits_c[];
};

// Softmax + cross-entropy of row b: writes its dlogits and returns the row loss
// (common.cl's softmax_xent_row).
float softmax_xent_row(const int b, const float inv_b)
{
    const int x0 = b * C, label = labels[b];
    float mx = logits[x0];
    for (int c = 1; c < C; ++c)
        mx = max(mx, logits[x0 + c]);
    float sum = 0.0;
    for (int c = 0; c < C; ++c)
        sum += exp(logits[x0 + c] - mx);
    const float inv_sum = 1.0 / sum;
    for (int c = 0; c < C; ++c)
        dlogits_c[x0 + c] = (exp(logits[x0 + c] - mx) * inv_sum - (c == label ? 1.0 : 0.0)) *
                            inv_b;
    // an out-of-range label gives NaN (GLSL has no NAN constant)
    return (label >= 0 && label < C) ? log(sum) - (logits[x0 + label] - mx)
                                     : uintBitsToFloat(0x7fc00000u);
}

void main()
{
    // every invocation reaches the barrier; only work-group 0 works
    const int lid = int(gl_LocalInvocationID.x), nl = int(gl_WorkGroupSize.x);
    const int nw = gl_WorkGroupID.x != 0u ? 0 : min(nl, LOSS_WG);
    const float inv_b = 1.0 / float(B);
    if (lid < nw) {
        float acc = 0.0;
        for (int b = lid; b < B; b += nw)
            acc += softmax_xent_row(b, inv_b);
        part[lid] = acc;
    }
    memoryBarrierBuffer();
    memoryBarrierShared();
    barrier();
    if (nw == 0) return;
    if (lid == 0) {
        float s = 0.0;
        for (int w = 0; w < nw; ++w)
            s += part[w];
        loss[0] = s * inv_b;
    }
    for (int e = lid; e < B * I; e += nl) {
        if (relu != 0 && !(X[e] > 0.0)) {
            dX[e] = 0.0;
            continue;
        }
        const int dy0 = (e / I) * C, i = e % I;
        float acc = 0.0;
        for (int c = 0; c < C; ++c)
            acc += dlogits_c[dy0 + c] * W[c * I + i];
        dX[e] = acc;
    }
}
