/* CPU backend: the mobile CNN operators of the kernel ABI (src/kernels/README.md, section
 * "Mobile CNN operators") in C11 + OpenMP: depthwise 3x3 convolution, batch normalization in
 * training mode, ReLU6, element-wise add, global average pooling.
 *
 * Same contract as every kernel file of the backend (the shared checks of cpu_kernel_ctx.h;
 * found through the generated table of cpu_kernels.c): each kernel checks its arguments
 * first and reports the first bad one as "kernel: argument i (name) ..."; reductions are
 * per-output gathers in a fixed order (no atomics), so results do not depend on the thread
 * count. */
#include "cpu_kernel_ctx.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- depthwise 3x3 convolution -------------------------------------------------------- */

/* The 8 int arguments B C H W stride pad OH OW, OH = (H + 2*pad - 3)/stride + 1 (floor), and
 * the three tensors: image-sized (B*C*H*W), output-sized (B*C*OH*OW), weights (C*9). */
static int dw_dims(const kctx *k, int x_arg, int y_arg, int w_arg)
{
    for (int i = 0; i < 5; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W stride */
    CHECK(kneed_min(k, 5, 0));                               /* pad */
    const int oh = (I(2) + 2 * I(5) - 3) / I(4) + 1, ow = (I(3) + 2 * I(5) - 3) / I(4) + 1;
    if (I(2) + 2 * I(5) < 3 || I(6) != oh)
        return kfail(k, 6, "is %d; (H + 2*pad - 3)/stride + 1 = %d with H + 2*pad >= 3", I(6), oh);
    if (I(3) + 2 * I(5) < 3 || I(7) != ow)
        return kfail(k, 7, "is %d; (W + 2*pad - 3)/stride + 1 = %d with W + 2*pad >= 3", I(7), ow);
    const int64_t bc = (int64_t)I(0) * I(1);
    CHECK(kneed_numel(k, x_arg, bc * I(2) * I(3), "B*C*H*W"));
    CHECK(kneed_numel(k, y_arg, bc * I(6) * I(7), "B*C*OH*OW"));
    CHECK(kneed_numel(k, w_arg, (int64_t)I(1) * 9, "C*9"));
    return 0;
}

/* The geometry of one depthwise plane in a zero-padded buffer: the image at row `pad`, column
 * `pad` of an Hp x Wp grid (Hp = H + 2*pad, Wp = W + 2*pad), followed by one spare zero row so
 * that the flattened stride-1 loops below may read up to 2 elements past the grid.
 * Padding the plane once removes every bounds test from the tap loops: a tap on the padding
 * reads 0, and adding w * 0 to a sum that starts at +0 leaves it bitwise unchanged, so the
 * results equal those of a loop that skips the padding taps. */
typedef struct {
    int H, W, s, pad, OH, OW, Hp, Wp;
} dw_plane;

static dw_plane dw_plane_of(const kctx *k)
{
    const int H = I(2), W = I(3), pad = I(5);
    return (dw_plane){H, W, I(4), pad, I(6), I(7), H + 2 * pad, W + 2 * pad};
}

/* Lanes of the dot products of dwconv3x3_bwd_weight (dw_dot). */
#define DW_LANES 16

/* Floats of a padded grid: Hp + 1 rows and DW_LANES spare zeros, so a stride-1 dot product
 * rounded up to whole lanes stays inside (see dw_bwd_weight_plane). */
static int64_t dw_padded_len(const dw_plane *g)
{
    return (int64_t)(g->Hp + 1) * g->Wp + DW_LANES;
}

/* Row copies of a few dozen floats: a plain loop the compiler inlines, where a memcpy call
 * per row would cost as much as the row's arithmetic. */
static inline CPU_ISA_BODY void dw_copy_row(float *restrict dst, const float *restrict src, int n)
{
    for (int i = 0; i < n; ++i) dst[i] = src[i];
}

/* Scratch of n floats for the calling thread, freed by the caller; aborts when memory runs
 * out (a kernel has no error path for it). */
static float *dw_scratch(int64_t n)
{
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) {
        fprintf(stderr, "depthwise conv: out of memory for %lld floats of scratch\n",
                (long long)n);
        abort();
    }
    return p;
}

/* Copies one H x W image into the padded grid xp (whose border is already 0). */
static inline CPU_ISA_BODY void dw_pad_in(const dw_plane *g, const float *restrict x,
                                          float *restrict xp)
{
    for (int h = 0; h < g->H; ++h)
        dw_copy_row(xp + (int64_t)(h + g->pad) * g->Wp + g->pad, x + (int64_t)h * g->W, g->W);
}

/* The 3x3 taps at column c of the padded rows x0, x1, x2, summed from 0 in tap order (the
 * order every clone and stride share, so results do not depend on either). */
static inline CPU_ISA_BODY float dw_taps(const float *w, const float *x0, const float *x1,
                                         const float *x2, int64_t c)
{
    float acc = 0.0f;
    acc += w[0] * x0[c];
    acc += w[1] * x0[c + 1];
    acc += w[2] * x0[c + 2];
    acc += w[3] * x1[c];
    acc += w[4] * x1[c + 1];
    acc += w[5] * x1[c + 2];
    acc += w[6] * x2[c];
    acc += w[7] * x2[c + 1];
    acc += w[8] * x2[c + 2];
    return acc;
}

/* y[oh, ow] = sum over taps (kh, kw) in order of w[kh*3+kw] * xp[oh*s+kh, ow*s+kw]. At stride
 * 1 each output row is computed over the padded width Wp (the last Wp - OW columns are junk,
 * never copied out), so the loop over q is one contiguous run the compiler vectorizes. */
static inline CPU_ISA_BODY void dw_fwd_plane_body(const dw_plane *g, const float *restrict x,
                                                   float *restrict xp, const float *w,
                                                   float *restrict yrow, float *restrict y)
{
    const int Wp = g->Wp;
    dw_pad_in(g, x, xp);
    if (g->s == 1) {
        const int64_t n = (int64_t)g->OH * Wp;
        const float *x0 = xp, *x1 = xp + Wp, *x2 = xp + 2 * Wp;
        for (int64_t q = 0; q < n; ++q) {
            yrow[q] = dw_taps(w, x0, x1, x2, q);
        }
        for (int oh = 0; oh < g->OH; ++oh)
            dw_copy_row(y + (int64_t)oh * g->OW, yrow + (int64_t)oh * Wp, g->OW);
        return;
    }
    for (int oh = 0; oh < g->OH; ++oh) {
        const float *x0 = xp + (int64_t)oh * g->s * Wp, *x1 = x0 + Wp, *x2 = x1 + Wp;
        float *restrict yo = y + (int64_t)oh * g->OW;
        for (int ow = 0; ow < g->OW; ++ow) {
            yo[ow] = dw_taps(w, x0, x1, x2, (int64_t)ow * g->s);
        }
    }
}

CPU_ISA_CLONES(dw_fwd_plane,
               (const dw_plane *g, const float *restrict x, float *restrict xp, const float *w,
                float *restrict yrow, float *restrict y),
               (g, x, xp, w, yrow, y))

CPU_KERNEL(dwconv3x3_fwd, iiiiiiiittt)
{
    CHECK(dw_dims(k, 8, 10, 9));
    const dw_plane g = dw_plane_of(k);
    const int C = I(1);
    const int64_t BC = (int64_t)I(0) * C;
    const float *X = PF(8), *Wt = PF(9);
    float *Y = PF(10);
    const int64_t plen = dw_padded_len(&g), rlen = (int64_t)g.OH * g.Wp + 2;
    void (*const fwd)(const dw_plane *, const float *restrict, float *restrict, const float *,
                      float *restrict, float *restrict) = CPU_ISA_PICK(dw_fwd_plane);
#pragma omp parallel if (BC * g.OH * g.OW * 9 > PAR_MIN)
    {
        float *xp = dw_scratch(plen + rlen), *yrow = xp + plen;
        memset(xp, 0, (size_t)plen * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t bc = 0; bc < BC; ++bc) {
            fwd(&g, X + bc * g.H * g.W, xp, Wt + (bc % C) * 9, yrow, Y + bc * g.OH * g.OW);
        }
        free(xp);
    }
    return 0;
}

/* Stride 1 as a gather: dx[h, w] = sum over taps (kh, kw) in order of
 * w[kh*3+kw] * dy[h+pad-kh, w+pad-kw] (0 outside dy). dy sits in a grid `dp` of Wq = OW + 4
 * columns with a border of 2 zeros (written once per thread), so every tap of every pixel
 * reads inside it, and each image row is computed over the grid's width as one contiguous
 * vectorized run (the spare columns are never copied out). Every pixel sums its terms in tap
 * order from +0, as the scatter form below does; the gather accumulates in registers, where
 * the scatter's taps, one element apart, would reload vectors just stored at an offset (a
 * store-forwarding stall per vector). */
static inline CPU_ISA_BODY void dw_bwd_data_s1(const dw_plane *g, const float *restrict dy,
                                               const float *w, float *restrict dp,
                                               float *restrict out, float *restrict dx)
{
    const int Wq = g->OW + 4;
    for (int oh = 0; oh < g->OH; ++oh)
        dw_copy_row(dp + (int64_t)(oh + 2) * Wq + 2, dy + (int64_t)oh * g->OW, g->OW);
    const float *r0 = dp + (int64_t)(g->pad + 2) * Wq + g->pad + 2;   /* tap (0, 0) */
    const float *r1 = r0 - Wq, *r2 = r1 - Wq;
    const int64_t n = (int64_t)g->H * Wq;
    for (int64_t q = 0; q < n; ++q) {
        float acc = 0.0f;
        acc += w[0] * r0[q];
        acc += w[1] * r0[q - 1];
        acc += w[2] * r0[q - 2];
        acc += w[3] * r1[q];
        acc += w[4] * r1[q - 1];
        acc += w[5] * r1[q - 2];
        acc += w[6] * r2[q];
        acc += w[7] * r2[q - 1];
        acc += w[8] * r2[q - 2];
        out[q] = acc;
    }
    for (int h = 0; h < g->H; ++h)
        dw_copy_row(dx + (int64_t)h * g->W, out + (int64_t)h * Wq, g->W);
}

/* Floats of dp (with its spare row) and of out in dw_bwd_data_s1. */
static int64_t dw_s1_dp_len(const dw_plane *g) { return (int64_t)(g->OH + 5) * (g->OW + 4); }
static int64_t dw_s1_out_len(const dw_plane *g) { return (int64_t)g->H * (g->OW + 4); }

/* Other strides as a scatter: dxp[oh*s+kh, ow*s+kw] += w[kh*3+kw] * dy[oh, ow], taps in
 * (kh, kw) order, over a zeroed padded grid whose image part is then copied out. Every input
 * pixel thus sums its terms in the order of the OpenCL kernel's gather (which loops over the
 * same taps); consecutive stores of one tap are s elements apart, so no vector is reloaded
 * at an offset. */
static inline CPU_ISA_BODY void dw_bwd_data_strided(const dw_plane *g, const float *restrict dy,
                                                    const float *w, float *restrict dxp,
                                                    float *restrict dx)
{
    const int Wp = g->Wp;
    memset(dxp, 0, (size_t)dw_padded_len(g) * sizeof(float));
    for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) {
            const float wv = w[kh * 3 + kw];
            for (int oh = 0; oh < g->OH; ++oh) {
                float *restrict d = dxp + (int64_t)(oh * g->s + kh) * Wp + kw;
                const float *restrict s = dy + (int64_t)oh * g->OW;
                for (int ow = 0; ow < g->OW; ++ow) d[ow * g->s] += wv * s[ow];
            }
        }
    for (int h = 0; h < g->H; ++h)
        dw_copy_row(dx + (int64_t)h * g->W, dxp + (int64_t)(h + g->pad) * Wp + g->pad, g->W);
}

/* One (b, c) plane of dwconv3x3_bwd_data; `a` and `b` are the calling thread's scratch (see
 * k_dwconv3x3_bwd_data). */
static inline CPU_ISA_BODY void dw_bwd_data_plane_body(const dw_plane *g,
                                                        const float *restrict dy,
                                                        const float *w, float *restrict a,
                                                        float *restrict b, float *restrict dx)
{
    if (g->s == 1)
        dw_bwd_data_s1(g, dy, w, a, b, dx);
    else
        dw_bwd_data_strided(g, dy, w, a, dx);
}

CPU_ISA_CLONES(dw_bwd_data_plane,
               (const dw_plane *g, const float *restrict dy, const float *w,
                float *restrict a, float *restrict b, float *restrict dx),
               (g, dy, w, a, b, dx))

CPU_KERNEL(dwconv3x3_bwd_data, iiiiiiiittt)
{
    CHECK(dw_dims(k, 10, 8, 9));
    const dw_plane g = dw_plane_of(k);
    const int C = I(1);
    const int64_t BC = (int64_t)I(0) * C;
    const float *dY = PF(8), *Wt = PF(9);
    float *dX = PF(10);
    /* scratch a: dp (stride 1, its zero border kept between planes) or dxp; b: out */
    const int64_t alen = g.s == 1 ? dw_s1_dp_len(&g) : dw_padded_len(&g);
    const int64_t blen = g.s == 1 ? dw_s1_out_len(&g) : 0;
    void (*const bwd)(const dw_plane *, const float *restrict, const float *, float *restrict,
                      float *restrict, float *restrict) = CPU_ISA_PICK(dw_bwd_data_plane);
    /* Threads own whole images: no races, a fixed order. */
#pragma omp parallel if (BC * g.OH * g.OW * 9 > PAR_MIN)
    {
        float *a = dw_scratch(alen + blen), *b = a + alen;
        memset(a, 0, (size_t)alen * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t bc = 0; bc < BC; ++bc)
            bwd(&g, dY + bc * g.OH * g.OW, Wt + (bc % C) * 9, a, b, dX + bc * g.H * g.W);
        free(a);
    }
    return 0;
}

/* acc[t][q % DW_LANES] += dy[q] * xp[off(t) + q] for q < n (n a multiple of DW_LANES),
 * off(t) = (t / 3) * Wp + t % 3: the 9 tap dot products of a stride-1 plane in one pass, so
 * each load of dy feeds 9 multiply-adds and 9 independent sums hide the add's latency. */
static inline CPU_ISA_BODY void dw_dot9_lanes(float (*restrict acc)[DW_LANES],
                                              const float *restrict dy,
                                              const float *restrict xp, int Wp, int64_t n)
{
    float a0[DW_LANES], a1[DW_LANES], a2[DW_LANES], a3[DW_LANES], a4[DW_LANES],
        a5[DW_LANES], a6[DW_LANES], a7[DW_LANES], a8[DW_LANES];
    for (int l = 0; l < DW_LANES; ++l) {
        a0[l] = acc[0][l], a1[l] = acc[1][l], a2[l] = acc[2][l], a3[l] = acc[3][l];
        a4[l] = acc[4][l], a5[l] = acc[5][l], a6[l] = acc[6][l], a7[l] = acc[7][l];
        a8[l] = acc[8][l];
    }
    const float *x0 = xp, *x1 = xp + Wp, *x2 = xp + 2 * Wp;
    for (int64_t q = 0; q < n; q += DW_LANES)
        for (int l = 0; l < DW_LANES; ++l) {
            const float d = dy[q + l];
            a0[l] += d * x0[q + l];
            a1[l] += d * x0[q + l + 1];
            a2[l] += d * x0[q + l + 2];
            a3[l] += d * x1[q + l];
            a4[l] += d * x1[q + l + 1];
            a5[l] += d * x1[q + l + 2];
            a6[l] += d * x2[q + l];
            a7[l] += d * x2[q + l + 1];
            a8[l] += d * x2[q + l + 2];
        }
    for (int l = 0; l < DW_LANES; ++l) {
        acc[0][l] = a0[l], acc[1][l] = a1[l], acc[2][l] = a2[l], acc[3][l] = a3[l];
        acc[4][l] = a4[l], acc[5][l] = a5[l], acc[6][l] = a6[l], acc[7][l] = a7[l];
        acc[8][l] = a8[l];
    }
}

/* Adds one image's terms of the 9 tap sums: sum over (oh, ow) of
 * xp[oh*s+kh, ow*s+kw] * dy[oh, ow] for t = kh*3 + kw, into acc[t][0..DW_LANES). At stride 1
 * dy is spread over the padded width (zeros in the spare columns and up to whole DW_LANES,
 * whose terms add nothing) so each tap is one contiguous dot product over the plane, kept in
 * DW_LANES partial sums across the images (element q of the spread plane in lane
 * q % DW_LANES); at stride 2 one pass keeps nine running sums in row-major order and adds
 * each to lane 0. The caller adds the lanes in order once per channel. */
static inline CPU_ISA_BODY void dw_bwd_weight_plane_body(const dw_plane *g,
                                                         const float *restrict x,
                                                         float *restrict xp,
                                                         const float *restrict dy,
                                                         float *restrict dyp,
                                                         float (*restrict acc)[DW_LANES])
{
    const int Wp = g->Wp;
    dw_pad_in(g, x, xp);
    if (g->s == 1) {
        for (int oh = 0; oh < g->OH; ++oh) {
            dw_copy_row(dyp + (int64_t)oh * Wp, dy + (int64_t)oh * g->OW, g->OW);
            for (int j = g->OW; j < Wp; ++j) dyp[(int64_t)oh * Wp + j] = 0.0f;
        }
        const int64_t n = ((int64_t)g->OH * Wp + DW_LANES - 1) / DW_LANES * DW_LANES;
        for (int64_t q = (int64_t)g->OH * Wp; q < n; ++q) dyp[q] = 0.0f;
        dw_dot9_lanes(acc, dyp, xp, Wp, n);
        return;
    }
    float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f, p4 = 0.0f, p5 = 0.0f, p6 = 0.0f,
          p7 = 0.0f, p8 = 0.0f;
    for (int oh = 0; oh < g->OH; ++oh) {
        const float *x0 = xp + (int64_t)oh * g->s * Wp, *x1 = x0 + Wp, *x2 = x1 + Wp;
        const float *d = dy + (int64_t)oh * g->OW;
        for (int ow = 0; ow < g->OW; ++ow) {
            const int c = ow * g->s;
            const float v = d[ow];
            p0 += x0[c] * v;
            p1 += x0[c + 1] * v;
            p2 += x0[c + 2] * v;
            p3 += x1[c] * v;
            p4 += x1[c + 1] * v;
            p5 += x1[c + 2] * v;
            p6 += x2[c] * v;
            p7 += x2[c + 1] * v;
            p8 += x2[c + 2] * v;
        }
    }
    acc[0][0] += p0, acc[1][0] += p1, acc[2][0] += p2, acc[3][0] += p3, acc[4][0] += p4;
    acc[5][0] += p5, acc[6][0] += p6, acc[7][0] += p7, acc[8][0] += p8;
}

CPU_ISA_CLONES(dw_bwd_weight_plane,
               (const dw_plane *g, const float *restrict x, float *restrict xp,
                const float *restrict dy, float *restrict dyp, float (*restrict acc)[DW_LANES]),
               (g, x, xp, dy, dyp, acc))

CPU_KERNEL(dwconv3x3_bwd_weight, iiiiiiiittt)
{
    CHECK(dw_dims(k, 8, 9, 10));
    const dw_plane g = dw_plane_of(k);
    const int B = I(0), C = I(1);
    const float *X = PF(8), *dY = PF(9);
    float *dW = PF(10);
    const int64_t plen = dw_padded_len(&g);
    void (*const plane)(const dw_plane *, const float *restrict, float *restrict,
                        const float *restrict, float *restrict, float (*restrict)[DW_LANES]) =
        CPU_ISA_PICK(dw_bwd_weight_plane);
    /* One sum per (c, kh, kw) over images and positions (lanes, see dw_bwd_weight_plane). A
     * thread owns whole channels, so the order does not depend on the thread count. */
#pragma omp parallel if ((int64_t)B * C * g.OH * g.OW * 9 > PAR_MIN)
    {
        float *xp = dw_scratch(2 * plen), *dyp = xp + plen;
        memset(xp, 0, (size_t)plen * sizeof(float));
#pragma omp for schedule(static)
        for (int c = 0; c < C; ++c) {
            float acc[9][DW_LANES] = {{0.0f}};
            for (int b = 0; b < B; ++b) {
                const int64_t bc = (int64_t)b * C + c;
                plane(&g, X + bc * g.H * g.W, xp, dY + bc * g.OH * g.OW, dyp, acc);
            }
            for (int t = 0; t < 9; ++t) {
                float s = 0.0f;
                for (int l = 0; l < DW_LANES; ++l) s += acc[t][l];
                dW[(int64_t)c * 9 + t] = s;
            }
        }
        free(xp);
    }
    return 0;
}

/* ---- batch normalization (training mode) ---------------------------------------------- */

/* B C HW >= 1 and the tensors at `big` hold B*C*HW, those at `small` C elements. */
static int bn_dims(const kctx *k, const int *big, int nbig, const int *small, int nsmall)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t n = (int64_t)I(0) * I(1) * I(2);
    for (int i = 0; i < nbig; ++i) CHECK(kneed_numel(k, big[i], n, "B*C*HW"));
    for (int i = 0; i < nsmall; ++i) CHECK(kneed_numel(k, small[i], I(1), "C"));
    return 0;
}

/* Per-channel sums run in CPU_LANES interleaved partial sums (cpu_kernel_ctx.h): element j of
 * every image's plane goes to lane j % CPU_LANES, images in order, and the lanes are added in
 * lane order once per channel. A thread owns whole channels, so the order does not depend on
 * the thread count. */
float cpu_lanes_total(const float *lane)
{
    float s = 0.0f;
    for (int l = 0; l < CPU_LANES; ++l) s += lane[l];
    return s;
}

/* lane[j % CPU_LANES] += x[j] - shift. */
static void lanes_add_shifted(float *restrict lane, const float *restrict x, int n, float shift)
{
    int j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; ++l) lane[l] += x[j + l] - shift;
    for (int l = 0; l < n - j; ++l) lane[l] += x[j + l] - shift;
}

void cpu_lanes_add_sq_dev(float *restrict lane, const float *restrict x, int n, float mu)
{
    int j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; ++l) {
            const float dv = x[j + l] - mu;
            lane[l] += dv * dv;
        }
    for (int l = 0; l < n - j; ++l) {
        const float dv = x[j + l] - mu;
        lane[l] += dv * dv;
    }
}

CPU_KERNEL(batchnorm_stats, iiiffttttt)
{
    static const int big[] = {5}, small[] = {6, 7, 8, 9};
    CHECK(bn_dims(k, big, 1, small, 4));
    if (!(F(3) > 0.0f)) return kfail(k, 3, "is %g; eps must be > 0", (double)F(3));
    const int B = I(0), C = I(1), HW = I(2);
    const float eps = F(3), m = F(4);
    const float *X = PF(5);
    float *mean = PF(6), *invstd = PF(7), *rmean = PF(8), *rvar = PF(9);
    const float cnt = (float)((int64_t)B * HW);
#pragma omp parallel for if ((int64_t)B * C * HW > PAR_MIN) schedule(static)
    for (int c = 0; c < C; ++c) {
        /* Shifted sum (Chan, Golub & LeVeque, "Algorithms for computing the sample
         * variance", Am. Stat. 37(3), 1983): values equal to the channel's first one add
         * exactly 0, so a near-constant channel (an image background) gets an accurate mean,
         * which 1/sqrt(var + eps) would otherwise amplify the rounding of. */
        const float shift = X[(int64_t)c * HW];
        float lane[CPU_LANES] = {0.0f};
        for (int b = 0; b < B; ++b)
            lanes_add_shifted(lane, X + ((int64_t)b * C + c) * HW, HW, shift);
        const float mu = shift + cpu_lanes_total(lane) / cnt;
        float lsq[CPU_LANES] = {0.0f};   /* second pass: squared deviations (no cancellation) */
        for (int b = 0; b < B; ++b)
            cpu_lanes_add_sq_dev(lsq, X + ((int64_t)b * C + c) * HW, HW, mu);
        const float var = cpu_lanes_total(lsq) / cnt;
        const float unbiased = cnt > 1.0f ? var * cnt / (cnt - 1.0f) : var;
        mean[c] = mu;
        invstd[c] = 1.0f / sqrtf(var + eps);
        rmean[c] = (1.0f - m) * rmean[c] + m * mu;
        rvar[c] = (1.0f - m) * rvar[c] + m * unbiased;
    }
    return 0;
}

/* Per (b, c) plane, so the channel's constants are loaded once and the element loop is a
 * plain vectorizable run (no division per element to find the channel). */
CPU_KERNEL(batchnorm_apply, iiitttttt)
{
    static const int big[] = {3, 8}, small[] = {4, 5, 6, 7};
    CHECK(bn_dims(k, big, 2, small, 4));
    const int C = I(1), HW = I(2);
    const int64_t n = (int64_t)I(0) * C * HW, BC = (int64_t)I(0) * C;
    const float *X = PF(3), *mean = PF(4), *invstd = PF(5), *gamma = PF(6), *beta = PF(7);
    float *Y = PF(8);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {
        const int c = (int)(bc % C);
        const float mu = mean[c], is = invstd[c], ga = gamma[c], be = beta[c];
        const float *x = X + bc * HW;
        float *y = Y + bc * HW;   /* may alias x: no restrict, the compiler checks */
        for (int j = 0; j < HW; ++j) y[j] = ((x[j] - mu) * is) * ga + be;
    }
    return 0;
}

void cpu_lanes_add(float *restrict lane, const float *restrict dy, int n)
{
    int j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; ++l) lane[l] += dy[j + l];
    for (int l = 0; l < n - j; ++l) lane[l] += dy[j + l];
}

/* lane[j % CPU_LANES] += dy[j] * xhat[j], xhat = (x[j] - mu) * is. A pass of its own, not
 * fused with cpu_lanes_add: two lane arrays in one loop exhaust the 16 SSE registers of a
 * baseline x86-64 build and the compiler spills; the plane is in L1 for the second pass. */
static void lanes_add_dy_xhat(float *restrict lane, const float *restrict x,
                              const float *restrict dy, int n, float mu, float is)
{
    int j = 0;
    for (; j + CPU_LANES <= n; j += CPU_LANES)
        for (int l = 0; l < CPU_LANES; ++l) lane[l] += dy[j + l] * ((x[j + l] - mu) * is);
    for (int l = 0; l < n - j; ++l) lane[l] += dy[j + l] * ((x[j + l] - mu) * is);
}

CPU_KERNEL(batchnorm_bwd_reduce, iiitttttt)
{
    static const int big[] = {3, 4}, small[] = {5, 6, 7, 8};
    CHECK(bn_dims(k, big, 2, small, 4));
    const int B = I(0), C = I(1), HW = I(2);
    const float *X = PF(3), *dY = PF(4), *mean = PF(5), *invstd = PF(6);
    float *dgamma = PF(7), *dbeta = PF(8);
#pragma omp parallel for if ((int64_t)B * C * HW > PAR_MIN) schedule(static)
    for (int c = 0; c < C; ++c) {
        float lg[CPU_LANES] = {0.0f}, lb[CPU_LANES] = {0.0f};
        for (int b = 0; b < B; ++b) {
            const int64_t off = ((int64_t)b * C + c) * HW;
            lanes_add_dy_xhat(lg, X + off, dY + off, HW, mean[c], invstd[c]);
            cpu_lanes_add(lb, dY + off, HW);
        }
        dgamma[c] = cpu_lanes_total(lg);
        dbeta[c] = cpu_lanes_total(lb);
    }
    return 0;
}

CPU_KERNEL(batchnorm_bwd_data, iiitttttttt)
{
    static const int big[] = {3, 4, 10}, small[] = {5, 6, 7, 8, 9};
    CHECK(bn_dims(k, big, 3, small, 5));
    const int C = I(1), HW = I(2);
    const int64_t n = (int64_t)I(0) * C * HW, BC = (int64_t)I(0) * C;
    const float *X = PF(3), *dY = PF(4), *mean = PF(5), *invstd = PF(6), *gamma = PF(7),
                *dgamma = PF(8), *dbeta = PF(9);
    float *dX = PF(10);
    const float cnt = (float)((int64_t)I(0) * HW);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t bc = 0; bc < BC; ++bc) {   /* per plane, as batchnorm_apply */
        const int c = (int)(bc % C);
        const float mu = mean[c], is = invstd[c], dg = dgamma[c], db = dbeta[c];
        const float scale = gamma[c] * is / cnt;
        const float *x = X + bc * HW, *dy = dY + bc * HW;
        float *dx = dX + bc * HW;   /* may alias dy: no restrict, the compiler checks */
        for (int j = 0; j < HW; ++j) {
            const float xhat = (x[j] - mu) * is;
            dx[j] = scale * ((cnt * dy[j] - db) - xhat * dg);
        }
    }
    return 0;
}

/* ---- element-wise and pooling --------------------------------------------------------- */

CPU_KERNEL(relu6_fwd, itt)
{
    int64_t n;
    CHECK(kneed_elements(k, 1, 2, &n));
    const float *X = PF(1);
    float *Y = PF(2);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = X[i] > 0.0f ? X[i] : 0.0f;
        Y[i] = v < 6.0f ? v : 6.0f;
    }
    return 0;
}

CPU_KERNEL(relu6_bwd, ittt)
{
    int64_t n;
    CHECK(kneed_elements(k, 1, 3, &n));
    const float *Y = PF(1), *dY = PF(2);
    float *dX = PF(3);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    /* dY is read whatever the mask, so the select needs no branch and vectorizes. */
    for (int64_t i = 0; i < n; ++i) {
        const float g = dY[i], y = Y[i];
        dX[i] = (y > 0.0f) & (y < 6.0f) ? g : 0.0f;
    }
    return 0;
}

CPU_KERNEL(add, ittt)
{
    int64_t n;
    CHECK(kneed_elements(k, 1, 3, &n));
    const float *A = PF(1), *B = PF(2);
    float *Y = PF(3);
#pragma omp parallel for if (n > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < n; ++i) Y[i] = A[i] + B[i];
    return 0;
}

CPU_KERNEL(gap_fwd, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t BC = (int64_t)I(0) * I(1), HW = I(2);
    CHECK(kneed_numel(k, 3, BC * HW, "B*C*HW"));
    CHECK(kneed_numel(k, 4, BC, "B*C"));
    const float *X = PF(3);
    float *Y = PF(4);
#pragma omp parallel for if (BC * HW > PAR_MIN) schedule(static)
    for (int64_t r = 0; r < BC; ++r) {
        float acc = 0.0f;
        for (int64_t j = 0; j < HW; ++j) acc += X[r * HW + j];
        Y[r] = acc / (float)HW;
    }
    return 0;
}

CPU_KERNEL(gap_bwd, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t BC = (int64_t)I(0) * I(1), HW = I(2);
    CHECK(kneed_numel(k, 3, BC, "B*C"));
    CHECK(kneed_numel(k, 4, BC * HW, "B*C*HW"));
    const float *dY = PF(3);
    float *dX = PF(4);
#pragma omp parallel for if (BC * HW > PAR_MIN) schedule(static)
    for (int64_t i = 0; i < BC * HW; ++i) dX[i] = dY[i / HW] / (float)HW;
    return 0;
}
