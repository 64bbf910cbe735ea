/* CPU backend of the fused batch-norm kernels (src/kernels/README.md, "Fused batch-norm
 * kernels"): bias-free grouped convolutions with batch normalization, the same semantics as
 * src/kernels/fused/fused_bn.cl. A grouped convolution runs on the engine its groups allow
 * (gconv_engine): the GEMM engine (cpu_conv.c) for groups = 1, the depthwise 3x3 kernels
 * (cpu_mobile.c) for a 3x3 window with groups = C = OC, else loops of one output element (or
 * weight) per iteration. The batch-norm reductions run one channel per iteration in
 * CPU_LANES interleaved partial sums across the images, as cpu_mobile.c's; the forward's
 * tile statistics are merged in tile order. Every sum runs in an order fixed by the shape:
 * deterministic at any thread count. Argument checks report the first bad argument as
 * cpu_kernel_ctx.h's checks do. */
#include "cpu_kernel_ctx.h"

#include <math.h>
#include <stdint.h>

/* B C H W OC KH KW stride pad OH OW groups at arguments 0..11 (all >= 1 but pad >= 0, the
 * output size following the convolution rule, groups dividing C and OC); then `nflags`
 * activation/residual codes at 12.. (act in 0..2 at 12, res in 0..1 at 13). */
static int gconv_dims(const kctx *k, int nflags)
{
    for (int i = 0; i < 12; ++i) CHECK(kneed_min(k, i, i == 8 ? 0 : 1));
    const int oh = (I(2) + 2 * I(8) - I(5)) / I(7) + 1, ow = (I(3) + 2 * I(8) - I(6)) / I(7) + 1;
    if (I(2) + 2 * I(8) < I(5) || I(9) != oh)
        return kfail(k, 9, "is %d; (H + 2*pad - KH)/stride + 1 = %d", I(9), oh);
    if (I(3) + 2 * I(8) < I(6) || I(10) != ow)
        return kfail(k, 10, "is %d; (W + 2*pad - KW)/stride + 1 = %d", I(10), ow);
    if (I(1) % I(11) || I(4) % I(11))
        return kfail(k, 11, "is %d; it must divide C = %d and OC = %d", I(11), I(1), I(4));
    if (nflags > 0 && (I(12) < 0 || I(12) > 2))
        return kfail(k, 12, "is %d; it must be 0 (none), 1 (ReLU) or 2 (ReLU6)", I(12));
    if (nflags > 1 && I(13) != 0 && I(13) != 1)
        return kfail(k, 13, "is %d; it must be 0 or 1", I(13));
    return 0;
}

/* Selects, not fminf/fmaxf (library calls in a baseline x86-64 build); NaN gives 0, as
 * fmin(fmax(NaN, 0), 6) does. */
static float act_of(float v, int act)
{
    if (act == 1) return v > 0.0f ? v : 0.0f;
    if (act == 2) return v > 0.0f ? (v < 6.0f ? v : 6.0f) : 0.0f;
    return v;
}

/* Whether the activation (by its output y) lets a gradient through. Non-short-circuit
 * operators and the callers' unconditional loads keep the mask a select: the mask is data
 * (ReLU6 outputs clip at 0 and 6 at random), and a branch on it mispredicts half the time. */
static int act_passes(float y, int act)
{
    const int above = y > 0.0f, below = y < 6.0f;
    return act == 0 ? 1 : above & (act == 1 ? 1 : below);
}

/* g = grad + wd * P; V = m * V + g; P -= lr * V (sgd_update's rule). */
static void sgd_step(float *P, float *V, int64_t i, float grad, float lr, float m, float wd)
{
    const float g = grad + wd * P[i];
    const float v = m * V[i] + g;
    V[i] = v;
    P[i] -= lr * v;
}

typedef struct {
    int B, C, H, W, OC, KH, KW, s, pad, OH, OW, G;
} gconv;

static gconv gconv_of(const kctx *k)
{
    const gconv g = {I(0), I(1), I(2), I(3), I(4), I(5), I(6), I(7), I(8), I(9), I(10), I(11)};
    return g;
}

static conv_geom conv_of(const gconv *g)
{
    return (conv_geom){g->B, g->C, g->H, g->W, g->OC, g->KH, g->KW, g->s, g->pad, g->OH, g->OW};
}

/* The engine a grouped convolution runs on: the GEMM engine for one group, the depthwise
 * 3x3 kernels for a 3x3 window with one input and one output channel per group, else the
 * loops below. */
enum { GCONV_LOOPS, GCONV_GEMM, GCONV_DW3X3 };
static int gconv_engine(const gconv *g)
{
    if (g->G == 1) return GCONV_GEMM;
    if (g->G == g->C && g->G == g->OC && g->KH == 3 && g->KW == 3) return GCONV_DW3X3;
    return GCONV_LOOPS;
}

/* One of cpu_mobile.c's depthwise 3x3 kernels through the ABI (arguments B C H W stride pad
 * OH OW and three tensors of na, nb, nc floats; the caller has checked the geometry). */
static void dw3x3_run(const char *kernel, const gconv *g, const float *a, int64_t na,
                      const float *b, int64_t nb, float *c, int64_t nc)
{
    const rt_arg args[11] = {
        {'i', g->B, 0, NULL, 0},  {'i', g->C, 0, NULL, 0},   {'i', g->H, 0, NULL, 0},
        {'i', g->W, 0, NULL, 0},  {'i', g->s, 0, NULL, 0},   {'i', g->pad, 0, NULL, 0},
        {'i', g->OH, 0, NULL, 0}, {'i', g->OW, 0, NULL, 0},  {'t', 0, 0, (void *)a, na},
        {'t', 0, 0, (void *)b, nb}, {'t', 0, 0, c, nc}};
    cpu_kernel_run_checked(kernel, args, 11);
}

/* Z[b,oc,oh,ow]: taps in (ci, kh, kw) order, 0 outside the image. */
static float gconv_at(const gconv *g, const float *X, const float *Wt, int64_t b, int oc,
                      int oh, int ow)
{
    const int cg = g->C / g->G, grp = oc / (g->OC / g->G);
    const float *w = Wt + (int64_t)oc * cg * g->KH * g->KW;
    float acc = 0.0f;
    for (int ci = 0; ci < cg; ++ci) {
        const float *x = X + (b * g->C + grp * cg + ci) * g->H * g->W;
        for (int kh = 0; kh < g->KH; ++kh) {
            const int ih = oh * g->s - g->pad + kh;
            if (ih < 0 || ih >= g->H) continue;
            for (int kw = 0; kw < g->KW; ++kw) {
                const int iw = ow * g->s - g->pad + kw;
                if (iw >= 0 && iw < g->W)
                    acc += w[(ci * g->KH + kh) * g->KW + kw] * x[ih * g->W + iw];
            }
        }
    }
    return acc;
}

/* Sum over channel oc's outputs i0 <= i < i1 (i = b*P + p) of Z (sq = 0) or (Z - m)^2
 * (sq = 1); the runs are the pieces within one image. */
static float tile_sum(const float *Z, int OC, int64_t P, int oc, int64_t i0, int64_t i1,
                      float m, int sq)
{
    float lane[CPU_LANES] = {0.0f};
    for (int64_t i = i0; i < i1;) {
        const int64_t b = i / P, p0 = i % P, p1 = i1 - i < P - p0 ? p0 + (i1 - i) : P;
        const float *z = Z + (b * OC + oc) * P + p0;
        if (sq) cpu_lanes_add_sq_dev(lane, z, (int)(p1 - p0), m);
        else cpu_lanes_add(lane, z, (int)(p1 - p0));
        i += p1 - p0;
    }
    return cpu_lanes_total(lane);
}

/* Z = the grouped convolution; part[(oc*T + t)*2 + {0, 1}] = tile t's mean and sum of
 * squared deviations from it (T = ceil(n/tile) tiles of channel oc's n = B*OH*OW outputs in
 * (b, oh, ow) order, the last one shorter): Z on its engine, then one (oc, t) per loop
 * iteration. */
CPU_KERNEL(gconv_stats_fwd, iiiiiiiiiiiiitttt)
{
    CHECK(gconv_dims(k, 0));
    CHECK(kneed_min(k, 12, 1));
    const gconv g = gconv_of(k);
    const int P = g.OH * g.OW, n = g.B * P, tile = I(12), T = (n - 1) / tile + 1;
    const int64_t nx = (int64_t)g.B * g.C * g.H * g.W, ny = (int64_t)g.B * g.OC * P;
    const int64_t nw = (int64_t)g.OC * (g.C / g.G) * g.KH * g.KW;
    CHECK(kneed_numel(k, 13, nx, "B*C*H*W"));
    CHECK(kneed_numel(k, 14, nw, "OC*(C/groups)*KH*KW"));
    CHECK(kneed_numel(k, 15, ny, "B*OC*OH*OW"));
    CHECK(kneed_numel(k, 16, (int64_t)g.OC * T * 2, "OC*ceil(B*OH*OW/tile)*2"));
    const float *X = PF(13), *Wt = PF(14);
    float *Z = PF(15), *part = PF(16);
    const int engine = gconv_engine(&g);
    if (engine == GCONV_GEMM) {
        const conv_geom cg = conv_of(&g);
        cpu_conv_fwd(&cg, X, Wt, Z, NULL, NULL);
    } else if (engine == GCONV_DW3X3) {
        dw3x3_run("dwconv3x3_fwd", &g, X, nx, Wt, nw, Z, ny);
    } else {
#pragma omp parallel for if (ny * (g.C / g.G) * g.KH * g.KW > PAR_MIN) schedule(static)
        for (int64_t e = 0; e < ny; ++e) {   /* e = (b*OC + oc)*P + p */
            const int p = (int)(e % P), oc = (int)(e / P % g.OC);
            Z[e] = gconv_at(&g, X, Wt, e / P / g.OC, oc, p / g.OW, p % g.OW);
        }
    }
#pragma omp parallel for if (ny > PAR_MIN) schedule(static)
    for (int64_t e = 0; e < (int64_t)g.OC * T; ++e) {
        const int oc = (int)(e / T), t = (int)(e % T), i0 = t * tile;
        const int i1 = tile < n - i0 ? i0 + tile : n;
        const float m = tile_sum(Z, g.OC, P, oc, i0, i1, 0.0f, 0) / (float)(i1 - i0);
        part[e * 2] = m;
        part[e * 2 + 1] = tile_sum(Z, g.OC, P, oc, i0, i1, m, 1);
    }
    return 0;
}

/* Channel c's mean and M2 from its T tile statistics, merged in order by the pairwise update
 * of Chan, Golub & LeVeque (1979). */
static void merged_stats(const float *part, int T, int n, int tile, float *mean, float *m2)
{
    float na = 0.0f, ma = 0.0f, qa = 0.0f;
    for (int t = 0; t < T; ++t) {
        const float nb = (float)(tile < n - t * tile ? tile : n - t * tile);
        const float nab = na + nb, d = part[2 * t] - ma, f = nb / nab;
        ma += d * f;
        qa += part[2 * t + 1] + d * d * na * f;
        na = nab;
    }
    *mean = ma;
    *m2 = qa;
}

CPU_KERNEL(bn_act_fwd, iiiiiifftttttttttt)
{
    for (int i = 0; i < 4; ++i) CHECK(kneed_min(k, i, 1));
    if (I(4) < 0 || I(4) > 2)
        return kfail(k, 4, "is %d; it must be 0 (none), 1 (ReLU) or 2 (ReLU6)", I(4));
    if (I(5) != 0 && I(5) != 1) return kfail(k, 5, "is %d; it must be 0 or 1", I(5));
    if (!(F(6) > 0.0f)) return kfail(k, 6, "is %g; eps must be > 0", (double)F(6));
    const int B = I(0), C = I(1), HW = I(2), tile = I(3), act = I(4), res = I(5);
    const int n = B * HW, T = (n - 1) / tile + 1;
    const float eps = F(6), m = F(7);
    const int64_t ny = (int64_t)n * C;
    CHECK(kneed_numel(k, 8, ny, "B*C*HW"));
    CHECK(kneed_numel(k, 9, (int64_t)C * T * 2, "C*ceil(B*HW/tile)*2"));
    for (int i = 10; i <= 11; ++i) CHECK(kneed_numel(k, i, C, "C"));
    /* R (12) is read only when res */
    for (int i = res ? 12 : 13; i <= 13; ++i) CHECK(kneed_numel(k, i, ny, "B*C*HW"));
    for (int i = 14; i <= 17; ++i) CHECK(kneed_numel(k, i, C, "C"));
    const float *Z = PF(8), *part = PF(9), *gamma = PF(10), *beta = PF(11), *R = PF(12);
    float *Y = PF(13), *mean = PF(14), *invstd = PF(15), *rmean = PF(16), *rvar = PF(17);
    const float cnt = (float)n;
#pragma omp parallel for if (ny > PAR_MIN) schedule(static)
    for (int c = 0; c < C; ++c) {
        float mu, m2;
        merged_stats(part + (int64_t)c * T * 2, T, n, tile, &mu, &m2);
        const float var = m2 / cnt, is = 1.0f / sqrtf(var + eps);
        for (int64_t b = 0; b < B; ++b) {
            const int64_t at = (b * C + c) * HW;
            for (int p = 0; p < HW; ++p) {
                const float y = act_of(((Z[at + p] - mu) * is) * gamma[c] + beta[c], act);
                Y[at + p] = res ? y + R[at + p] : y;
            }
        }
        const float unbiased = cnt > 1.0f ? var * cnt / (cnt - 1.0f) : var;
        mean[c] = mu;
        invstd[c] = is;
        rmean[c] = (1.0f - m) * rmean[c] + m * mu;
        rvar[c] = (1.0f - m) * rvar[c] + m * unbiased;
    }
    return 0;
}

/* d where the activation's output y lets it through, else 0 (d already loaded: a select). */
static float masked(float d, float y, int act) { return act_passes(y, act) ? d : 0.0f; }

/* lb[j % CPU_LANES] += d[j] and lg[j % CPU_LANES] += d[j] * xhat[j] over one plane of n
 * values: d = dY masked by the activation's output Y, xhat = (X - mu) * is. Two passes (the
 * plane is in L1 for the second): both lane arrays in one loop spill a baseline build's 16
 * SSE registers, as cpu_mobile.c's batchnorm_bwd_reduce says. */
static void lanes_add_masked(float *restrict lb, float *restrict lg, const float *restrict X,
                             const float *restrict Y, const float *restrict dY, int n, int act,
                             float mu, float is)
{
    int j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; ++l) lb[l] += masked(dY[j + l], Y[j + l], act);
    for (int l = 0; l < n - j; ++l) lb[l] += masked(dY[j + l], Y[j + l], act);
    for (j = 0; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; ++l)
            lg[l] += masked(dY[j + l], Y[j + l], act) * ((X[j + l] - mu) * is);
    for (int l = 0; l < n - j; ++l)
        lg[l] += masked(dY[j + l], Y[j + l], act) * ((X[j + l] - mu) * is);
}

CPU_KERNEL(bn_bwd_sgd, iiiiffftttttttttt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    if (I(3) < 0 || I(3) > 2)
        return kfail(k, 3, "is %d; it must be 0 (none), 1 (ReLU) or 2 (ReLU6)", I(3));
    const int B = I(0), C = I(1), HW = I(2), act = I(3);
    const float lr = F(4), m = F(5), wd = F(6);
    const int64_t n = (int64_t)B * C * HW;
    for (int i = 7; i <= 9; ++i) CHECK(kneed_numel(k, i, n, "B*C*HW"));
    for (int i = 10; i <= 15; ++i) CHECK(kneed_numel(k, i, C, "C"));
    CHECK(kneed_numel(k, 16, n, "B*C*HW"));
    const float *X = PF(7), *Y = PF(8), *dY = PF(9), *mean = PF(10), *invstd = PF(11);
    float *gamma = PF(12), *beta = PF(13), *Vg = PF(14), *Vb = PF(15), *dX = PF(16);
    const float cnt = (float)((int64_t)B * HW);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int c = 0; c < C; ++c) {
        const float mu = mean[c], is = invstd[c];
        float lg[CPU_LANES] = {0.0f}, lb[CPU_LANES] = {0.0f};
        for (int64_t b = 0; b < B; ++b) {
            const int64_t at = (b * C + c) * HW;
            lanes_add_masked(lb, lg, X + at, Y + at, dY + at, HW, act, mu, is);
        }
        const float sg = cpu_lanes_total(lg), sb = cpu_lanes_total(lb);
        const float scale = gamma[c] * is / cnt;
        for (int64_t b = 0; b < B; ++b) {
            const int64_t at = (b * C + c) * HW;
            for (int j = 0; j < HW; ++j) {
                const float d = masked(dY[at + j], Y[at + j], act);
                dX[at + j] = scale * ((cnt * d - sb) - ((X[at + j] - mu) * is) * sg);
            }
        }
        sgd_step(gamma, Vg, c, sg, lr, m, wd);
        sgd_step(beta, Vb, c, sb, lr, m, wd);
    }
    return 0;
}

/* gconv_bwd_data's epilogue on dX's elements [e0, e1): the residual's gradient R added where
 * res, then the mask of the activation whose output is X (the layer's input). */
typedef struct {
    const float *X, *R;
    float *dX;
    int act, res;
} act_res;

static void act_res_span(const void *ctx, int64_t e0, int64_t e1)
{
    const act_res *a = ctx;
    for (int64_t e = e0; e < e1; ++e)
        a->dX[e] = masked(a->res ? a->dX[e] + a->R[e] : a->dX[e], a->X[e], a->act);
}

/* dX[e] for the loops' engine: one input element per iteration, its taps gathered. */
static float gconv_dx_at(const gconv *g, const float *dY, const float *Wt, int64_t e)
{
    const int cg = g->C / g->G, og = g->OC / g->G;
    const int w = (int)(e % g->W), h = (int)(e / g->W % g->H);
    const int c = (int)(e / ((int64_t)g->W * g->H) % g->C);
    const int64_t b = e / ((int64_t)g->W * g->H * g->C);
    const int grp = c / cg, ci = c % cg;
    float acc = 0.0f;
    for (int j = 0; j < og; ++j) {
        const int oc = grp * og + j;
        for (int kh = 0; kh < g->KH; ++kh) {
            const int th = h + g->pad - kh;
            if (th < 0 || th % g->s || th / g->s >= g->OH) continue;
            for (int kw = 0; kw < g->KW; ++kw) {
                const int tw = w + g->pad - kw;
                if (tw < 0 || tw % g->s || tw / g->s >= g->OW) continue;
                acc += Wt[(((int64_t)oc * cg + ci) * g->KH + kh) * g->KW + kw] *
                       dY[((b * g->OC + oc) * g->OH + th / g->s) * g->OW + tw / g->s];
            }
        }
    }
    return acc;
}

CPU_KERNEL(gconv_bwd_data, iiiiiiiiiiiiiittttt)
{
    CHECK(gconv_dims(k, 2));
    const gconv g = gconv_of(k);
    const int act = I(12), res = I(13);
    const int64_t nx = (int64_t)g.B * g.C * g.H * g.W, ny = (int64_t)g.B * g.OC * g.OH * g.OW;
    const int64_t nw = (int64_t)g.OC * (g.C / g.G) * g.KH * g.KW;
    CHECK(kneed_numel(k, 14, ny, "B*OC*OH*OW"));
    CHECK(kneed_numel(k, 15, nw, "OC*(C/groups)*KH*KW"));
    for (int i = 16; i <= 18; ++i)   /* R (17) is read only when res */
        if (i != 17 || res) CHECK(kneed_numel(k, i, nx, "B*C*H*W"));
    const float *dY = PF(14), *Wt = PF(15);
    float *dX = PF(18);
    const act_res epi = {PF(16), PF(17), dX, act, res};
    const int engine = gconv_engine(&g), plain = act == 0 && res == 0;
    if (engine == GCONV_GEMM) {
        const conv_geom cg = conv_of(&g);
        cpu_conv_bwd_data(&cg, dY, Wt, dX, plain ? NULL : act_res_span, &epi);
        return 0;
    }
    if (engine == GCONV_DW3X3) {
        dw3x3_run("dwconv3x3_bwd_data", &g, dY, ny, Wt, nw, dX, nx);
    } else {
#pragma omp parallel for if (nx * (g.OC / g.G) * g.KH * g.KW > PAR_MIN) schedule(static)
        for (int64_t e = 0; e < nx; ++e) dX[e] = gconv_dx_at(&g, dY, Wt, e);
    }
    if (plain) return 0;
    const int64_t span = 4096, spans = (nx + span - 1) / span;
#pragma omp parallel for if (nx > PAR_MIN) schedule(static)
    for (int64_t t = 0; t < spans; ++t)
        act_res_span(&epi, t * span, (t + 1) * span < nx ? (t + 1) * span : nx);
    return 0;
}

CPU_KERNEL(gconv_sgd, iiiiiiiiiiiiffftttt)
{
    CHECK(gconv_dims(k, 0));
    const gconv g = gconv_of(k);
    const float lr = F(12), m = F(13), wd = F(14);
    const int cg = g.C / g.G;
    const int64_t ckk = (int64_t)cg * g.KH * g.KW, nw = g.OC * ckk;
    CHECK(kneed_numel(k, 15, (int64_t)g.B * g.C * g.H * g.W, "B*C*H*W"));
    CHECK(kneed_numel(k, 16, (int64_t)g.B * g.OC * g.OH * g.OW, "B*OC*OH*OW"));
    for (int i = 17; i <= 18; ++i) CHECK(kneed_numel(k, i, nw, "OC*(C/groups)*KH*KW"));
    const float *X = PF(15), *dY = PF(16);
    float *Wt = PF(17), *V = PF(18);
    const int engine = gconv_engine(&g);
    if (engine != GCONV_LOOPS) {   /* the gradient, then sgd_update's pass */
        float *grad = cpu_scratch(SCRATCH_GRADIENT, (size_t)nw);
        const conv_geom cg = conv_of(&g);
        if (engine == GCONV_GEMM) cpu_conv_wgrad(&cg, X, dY, grad);
        else dw3x3_run("dwconv3x3_bwd_weight", &g, X, (int64_t)g.B * g.C * g.H * g.W, dY,
                       (int64_t)g.B * g.OC * g.OH * g.OW, grad, nw);
        cpu_sgd_update(nw, lr, m, wd, Wt, grad, V);
        return 0;
    }
#pragma omp parallel for if (nw * g.B * g.OH * g.OW > PAR_MIN) schedule(static)
    for (int64_t e = 0; e < nw; ++e) {
        const int oc = (int)(e / ckk), kk = (int)(e % ckk);
        const int kw = kk % g.KW, kh = kk / g.KW % g.KH;
        const int c = oc / (g.OC / g.G) * cg + kk / (g.KW * g.KH);
        float acc = 0.0f;
        for (int64_t b = 0; b < g.B; ++b) {
            const float *dy = dY + (b * g.OC + oc) * g.OH * g.OW;
            const float *x = X + (b * g.C + c) * g.H * g.W;
            float part = 0.0f;   /* blocked: each image's sum, then the batch's */
            for (int oh = 0; oh < g.OH; ++oh) {
                const int ih = oh * g.s - g.pad + kh;
                if (ih < 0 || ih >= g.H) continue;
                for (int ow = 0; ow < g.OW; ++ow) {
                    const int iw = ow * g.s - g.pad + kw;
                    if (iw >= 0 && iw < g.W) part += dy[oh * g.OW + ow] * x[ih * g.W + iw];
                }
            }
            acc += part;
        }
        sgd_step(Wt, V, e, acc, lr, m, wd);
    }
    return 0;
}

/* ---------------------------------------------------------------- gconv_sgd split along K */

/* Sum over the outputs i0 <= i < i1 (i = (b*OH + oh)*OW + ow) of dY[b,oc,oh,ow] times
 * X[b,c,oh*s-pad+kh,ow*s-pad+kw] (0 outside the image), blocked as k_gconv_sgd: each image's
 * part of the chunk summed in i order, then those sums in image order (so one chunk is
 * k_gconv_sgd's sum, bit for bit). One chunk of a split-K weight-gradient sum, walked as row
 * segments; c: the weight's input channel. */
static float gconv_wgrad_range(const gconv *g, const float *X, const float *dY, int oc, int c,
                               int kh, int kw, int64_t i0, int64_t i1)
{
    const int64_t P = (int64_t)g->OH * g->OW;
    float acc = 0.0f, part = 0.0f;
    int64_t cur = i0 / P;
    for (int64_t i = i0; i < i1;) {
        const int64_t b = i / P;
        const int oh = (int)(i % P / g->OW), ow0 = (int)(i % g->OW);
        const int ow1 = i1 - i < g->OW - ow0 ? ow0 + (int)(i1 - i) : g->OW;
        const int ih = oh * g->s - g->pad + kh;
        i += ow1 - ow0;
        if (b != cur) {   /* the next image: its own partial sum */
            acc += part;
            part = 0.0f;
            cur = b;
        }
        if (ih < 0 || ih >= g->H) continue;
        const float *dy = dY + (b * g->OC + oc) * P + (int64_t)oh * g->OW;
        const float *x = X + ((b * g->C + c) * g->H + ih) * g->W;
        for (int ow = ow0; ow < ow1; ++ow) {
            const int iw = ow * g->s - g->pad + kw;
            if (iw >= 0 && iw < g->W) part += dy[ow] * x[iw];
        }
    }
    return acc + part;
}

CPU_KERNEL(gconv_wgrad_partial, iiiiiiiiiiiiittt)
{
    CHECK(gconv_dims(k, 0));
    CHECK(kneed_min(k, 12, 1));
    const gconv g = gconv_of(k);
    const int S = I(12), cg = g.C / g.G;
    const int64_t ckk = (int64_t)cg * g.KH * g.KW, n = (int64_t)g.B * g.OH * g.OW;
    CHECK(kneed_numel(k, 13, (int64_t)g.B * g.C * g.H * g.W, "B*C*H*W"));
    CHECK(kneed_numel(k, 14, (int64_t)g.B * g.OC * g.OH * g.OW, "B*OC*OH*OW"));
    CHECK(kneed_numel(k, 15, (int64_t)S * g.OC * ckk, "S*OC*(C/groups)*KH*KW"));
    const float *X = PF(13), *dY = PF(14);
    float *part = PF(15);
    const int64_t chunk = (n - 1) / S + 1, outs = (int64_t)S * g.OC * ckk;
#pragma omp parallel for if (outs * chunk > PAR_MIN) schedule(static)
    for (int64_t e = 0; e < outs; ++e) {   /* e = (sc*OC + oc)*ckk + kk */
        const int kk = (int)(e % ckk), oc = (int)(e / ckk % g.OC);
        const int64_t sc = e / ckk / g.OC;
        const int64_t i0 = sc * chunk < n ? sc * chunk : n;
        const int64_t i1 = i0 + chunk < n ? i0 + chunk : n;
        const int c = oc / (g.OC / g.G) * cg + kk / (g.KW * g.KH);
        part[e] = gconv_wgrad_range(&g, X, dY, oc, c, kk / g.KW % g.KH, kk % g.KW, i0, i1);
    }
    return 0;
}

CPU_KERNEL(gconv_sgd_finish, iiiiiifffttt)
{
    for (int i = 0; i < 6; ++i) CHECK(kneed_min(k, i, 1));
    const int C = I(0), OC = I(1), KH = I(2), KW = I(3), G = I(4), S = I(5);
    if (C % G || OC % G)
        return kfail(k, 4, "is %d; it must divide C = %d and OC = %d", G, C, OC);
    const float lr = F(6), m = F(7), wd = F(8);
    const int64_t nw = (int64_t)OC * (C / G) * KH * KW;
    CHECK(kneed_numel(k, 9, (int64_t)S * nw, "S*OC*(C/groups)*KH*KW"));
    for (int i = 10; i <= 11; ++i) CHECK(kneed_numel(k, i, nw, "OC*(C/groups)*KH*KW"));
    const float *part = PF(9);
    float *Wt = PF(10), *V = PF(11);
#pragma omp parallel for if (nw * S > PAR_MIN) schedule(static)
    for (int64_t e = 0; e < nw; ++e) {
        float acc = 0.0f;
        for (int sc = 0; sc < S; ++sc) acc += part[sc * nw + e];   /* chunk order */
        sgd_step(Wt, V, e, acc, lr, m, wd);
    }
    return 0;
}

