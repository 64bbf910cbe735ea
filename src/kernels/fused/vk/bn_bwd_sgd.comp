#version 450
// The batch-norm backward of one channel c per work-group and the SGD step of gamma, beta
// (kernel ABI: src/kernels/README.md, "Fused batch-norm kernels"; ../fused_bn.cl's
// bn_bwd_sgd): d = dY, times the activation mask of Y when act != 0; xhat = (X - mean[c]) *
// invstd[c]; dbeta = sum d, dgamma = sum d * xhat (strided partial sums, then a tree in
// shared memory); dX = gamma[c] * invstd[c] / n * ((n * d - dbeta) - xhat * dgamma),
// n = B*HW, with the old gamma; then the SGD step of gamma[c] (Vg) and beta[c] (Vb).
// Global [C*L], local [L] (version.yaml: 256).
#include "vk_abi.glsl"
#include "fused.glsl"
#include "bn.glsl"

void main()
{
    const int c = int(gl_WorkGroupID.x), l = int(gl_LocalInvocationID.x);
    const int L = int(gl_WorkGroupSize.x);
    if (c >= C) return;   // a whole work-group
    const int n = B * HW;
    const float mu = mean[c], is = invstd[c], ga = gamma[c], cnt = float(n);
    float pg = 0.0, pb = 0.0;
    for (int i = l; i < n; i += L) {
        const int at = ((i / HW) * C + c) * HW + i % HW;
        const float d = bn_act_passes(Y[at], act) ? dY[at] : 0.0;
        pb += d;
        pg += d * ((X[at] - mu) * is);
    }
    // every invocation read gamma[c] above, before the barriers of wg_sum_row
    const float sg = wg_sum_row(pg), sb = wg_sum_row(pb);
    const float scale = ga * is / cnt;
    for (int i = l; i < n; i += L) {
        const int at = ((i / HW) * C + c) * HW + i % HW;
        const float d = bn_act_passes(Y[at], act) ? dY[at] : 0.0;
        dX[at] = scale * ((cnt * d - sb) - ((X[at] - mu) * is) * sg);
    }
    if (l != 0) return;
    SGD_STEP(gamma, Vg, c, sg)
    SGD_STEP(beta, Vb, c, sb)
}
