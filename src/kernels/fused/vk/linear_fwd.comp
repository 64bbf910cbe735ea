#version 450
// Y[b,o] = act(sum_i X[b,i] W[o,i] + bias[o]) (act: ReLU when act != 0) (kernel ABI:
// src/kernels/README.md, "Fused kernels"; ../fused.cl's linear_fwd). Global [O, B] in
// work-groups of at most [LIN_T, LIN_T] (version.yaml: [16, 16]); a work-group stages
// LIN_TK-deep slices of its rows of X and of W in shared memory, loaded along i (coalesced),
// and each invocation sums its i in order: the sum of one invocation looping over i.
// Tuning parameters (specialization constants; defaults = ../version.yaml's defines):
//   LIN_T   the largest work-group side (rows of the shared tiles)
//   LIN_TK  depth of the staged slices
#include "vk_abi.glsl"
#include "fused.glsl"

layout(constant_id = PT_SPEC_LIN_T) const int LIN_T = 16;
layout(constant_id = PT_SPEC_LIN_TK) const int LIN_TK = 64;

const int LDS = LIN_TK + 1;   // +1: the rows in other banks
shared float xs[LIN_T * LDS], ws[LIN_T * LDS];

void main()
{
    const int lx = int(gl_WorkGroupSize.x), ly = int(gl_WorkGroupSize.y), nl = lx * ly;
    const int lo = int(gl_LocalInvocationID.x), lb = int(gl_LocalInvocationID.y);
    const int lid = lb * lx + lo;
    const int o0 = int(gl_WorkGroupID.x) * lx, b0 = int(gl_WorkGroupID.y) * ly;
    float acc = 0.0;
    for (int i0 = 0; i0 < I; i0 += LIN_TK) {
        // every invocation meets the barriers: rows and columns past the edge load zeros
        for (int e = lid; e < ly * LIN_TK; e += nl) {
            const int r = e / LIN_TK, k = e % LIN_TK;
            xs[r * LDS + k] = (b0 + r < B && i0 + k < I) ? X[(b0 + r) * I + i0 + k] : 0.0;
        }
        for (int e = lid; e < lx * LIN_TK; e += nl) {
            const int r = e / LIN_TK, k = e % LIN_TK;
            ws[r * LDS + k] = (o0 + r < O && i0 + k < I) ? W[(o0 + r) * I + i0 + k] : 0.0;
        }
        barrier();
        const int kn = min(LIN_TK, I - i0);
        for (int k = 0; k < kn; ++k)
            acc += xs[lb * LDS + k] * ws[lo * LDS + k];
        barrier();
    }
    const int o = o0 + lo, b = b0 + lb;
    if (o >= O || b >= B) return;
    acc += bias[o];
    Y[b * O + o] = (act != 0 && !(acc > 0.0)) ? 0.0 : acc;
}
