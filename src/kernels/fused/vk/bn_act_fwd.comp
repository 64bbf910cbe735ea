#version 450
// Batch normalization with activation of Z[B, C, HW] from its tile statistics part[C, T, 2]
// (gconv_stats_fwd, same tile) (kernel ABI: src/kernels/README.md, "Fused batch-norm
// kernels"; ../fused_bn.cl's bn_act_fwd): each work-group merges its channel's T tiles
// (invocation l merges tiles l, l+L, ... in turn, then a tree over the invocations, both with
// Chan et al.'s update), so every work-group of a channel gets the same statistics bit for
// bit; invstd = 1/sqrt(M2/n + eps); Y = act(((Z - mean) * invstd) * gamma + beta) (+ R when
// res != 0) for tile t of work-group (t, c). Invocation 0 of work-group (0, c) writes
// mean[c], invstd[c] and steps the running statistics (unbiased variance var*n/(n-1)).
// Global [T*L, C], local [L, Ly] (the ABI: [64, 1]).
#include "vk_abi.glsl"
#include "bn.glsl"

#define RL_MAX 256
shared vec4 sv[RL_MAX];

void main()
{
    const int t = int(gl_WorkGroupID.x), c = int(gl_GlobalInvocationID.y);
    const int l = int(gl_LocalInvocationID.x), L = int(gl_WorkGroupSize.x);
    const int r = int(gl_LocalInvocationID.y) * L;   // this row's stretch of sv
    const int n = B * HW, T = (n - 1) / tile + 1;
    if (t >= T) return;   // a whole work-group: no barrier is skipped by part of one
    const bool live = c < C;
    const int p0 = min(c, C - 1) * T * 2;
    vec4 acc = vec4(0.0);
    for (int u = l; live && u < T; u += L)
        acc = chan_merge(acc, vec4(float(min(tile, n - u * tile)), part[p0 + u * 2],
                                   part[p0 + u * 2 + 1], 0.0));
    sv[r + l] = acc;
    barrier();
    for (int s = L / 2; s > 0; s >>= 1) {
        if (l < s) sv[r + l] = chan_merge(sv[r + l], sv[r + l + s]);
        barrier();
    }
    const vec4 st = sv[r];
    const float cnt = float(n), var = st.z / cnt, is = 1.0 / sqrt(var + eps);
    if (!live) return;   // after the last barrier
    const int i0 = t * tile, m = min(tile, n - i0), c0 = c * HW;
    const float ga = gamma[c], be = beta[c];
    for (int j = l; j < m; j += L) {
        const int at = c0 + ((i0 + j) / HW) * C * HW + (i0 + j) % HW;
        const float v = bn_act(((Z[at] - st.y) * is) * ga + be, act);
        Y[at] = res != 0 ? v + R[at] : v;
    }
    if (t == 0 && l == 0) {
        const float unbiased = cnt > 1.0 ? var * cnt / (cnt - 1.0) : var;
        mean[c] = st.y;
        invstd[c] = is;
        running_mean[c] = (1.0 - momentum) * running_mean[c] + momentum * st.y;
        running_var[c] = (1.0 - momentum) * running_var[c] + momentum * unbiased;
    }
}
