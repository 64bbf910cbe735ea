#version 450
// Weight gradient + SGD update of a convolution, reading dY in NCHW and X directly (kernel
// ABI: src/kernels/README.md, "Fused kernels"; ../fused.cl's conv_sgd): for
// k = (c*KH+kh)*KW+kw < C*KH*KW, dW[oc,k] = sum over (b, oh, ow) of dY[b,oc,oh,ow] *
// X[b, c, oh*stride-pad+kh, ow*stride-pad+kw] (0 outside the image), then the SGD step on
// weight/V; column k == C*KH*KW is the bias (db[oc] = sum of dY[b,oc,:,:]). One work-group
// per (k, oc): strided partial sums, then a tree in shared memory (wg_sum_row); global
// [(C*KH*KW+1)*L, OC], local [L, Ly] (version.yaml: [256, 1]).
#include "vk_abi.glsl"
#include "fused.glsl"

void main()
{
    const int k = int(gl_WorkGroupID.x), oc = int(gl_GlobalInvocationID.y);
    const int l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    const int ckk = C * KH * KW, P = OH * OW, n = B * P;
    if (k > ckk) return;   // a whole work-group: no barrier is skipped by part of one
    // an oc past the edge (a work-group spanning several oc) sums nothing but meets the
    // barriers
    float part = 0.0;
    if (oc < OC && k == ckk)
        part = conv_bgrad_chunk_share(OC, P, oc, 0, n, l, L);
    else if (oc < OC)
        part = conv_wgrad_chunk_share(B, C, H, W, OC, OH, OW, stride, pad, oc, k / (KW * KH),
                                      (k / KW) % KH, k % KW, 0, n, l, L);
    const float total = wg_sum_row(part);
    if (l != 0 || oc >= OC) return;
    if (k == ckk) SGD_STEP(bias, Vb, oc, total)
    else SGD_STEP(weight, V, oc * ckk + k, total)
}
