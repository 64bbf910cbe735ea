/* CPU backend: the kernels of src/kernels/baseline/conv.cl (im2col, col2im, swap01,
 * conv2d_fwd; at the end of this file) and the convolutions on the GEMM engine that the fused
 * kernels (cpu_fused.c) and the fused batch-norm kernels (cpu_fused_bn.c) share.
 *
 * A convolution's columns are made per image or chunk of images by the ABI's im2col/col2im
 * (below), so they stay in L2 unless one image's columns are larger; each product is
 * cpu_gemm's; the caller's epilogue runs on the output while it is in cache. A 1x1
 * convolution at stride 1 without padding multiplies the image itself (its columns are the
 * image) from 32 outputs per image. Every sum runs in an order fixed by the shape, never the
 * thread count. */
#include "cpu_kernel_ctx.h"

#include <stdint.h>
#include <string.h>

#include <omp.h>

/* The ABI's im2col or col2im on nb images: img [nb, C, H, W], col [C*KH*KW, nb*OH*OW] (the
 * caller has checked the geometry). */
static void image_cols(const char *kernel, const conv_geom *g, int nb, const float *img,
                       float *col, int to_image)
{
    const long n_img = (long)nb * g->C * g->H * g->W;
    const long n_col = (long)nb * g->C * g->KH * g->KW * g->OH * g->OW;
    rt_arg a[12] = {{'i', nb, 0, NULL, 0},   {'i', g->C, 0, NULL, 0},  {'i', g->H, 0, NULL, 0},
                    {'i', g->W, 0, NULL, 0}, {'i', g->KH, 0, NULL, 0}, {'i', g->KW, 0, NULL, 0},
                    {'i', g->s, 0, NULL, 0}, {'i', g->pad, 0, NULL, 0},
                    {'i', g->OH, 0, NULL, 0}, {'i', g->OW, 0, NULL, 0}};
    a[10] = to_image ? (rt_arg){'t', 0, 0, col, n_col} : (rt_arg){'t', 0, 0, (void *)img, n_img};
    a[11] = to_image ? (rt_arg){'t', 0, 0, (void *)img, n_img} : (rt_arg){'t', 0, 0, col, n_col};
    cpu_kernel_run_checked(kernel, a, 12);
}

/* 1x1, stride 1, no padding: an image [C, H*W] is its own columns. */
static int cols_are_image(const conv_geom *g)
{
    return g->KH == 1 && g->KW == 1 && g->s == 1 && g->pad == 0;
}

/* Images per chunk of a weight gradient: as many as keep the chunk's columns (per_image
 * floats each) within CONV_CHUNK_FLOATS, at least 1. Depends on the shape only. */
#ifndef CONV_CHUNK_FLOATS
#define CONV_CHUNK_FLOATS 131072
#endif
static int conv_chunk_images(int B, int64_t per_image)
{
    const int64_t nb = CONV_CHUNK_FLOATS / per_image;
    return nb < 1 ? 1 : nb > B ? B : (int)nb;
}

/* Images per GEMM of the forward and data-gradient products: one where an image has
 * CONV_MIN_COLUMNS outputs, else enough for that many columns (a narrower product wastes the
 * micro-kernel's tiles), at most B. A 1x1 image that is its own columns goes alone from
 * CONV_MIN_COLUMNS/16 outputs (6x6 images and up): from 7x7 to 16x16 the product of one
 * image mostly beat copying images together, at 4x4 it lost by half (conv_fwd +
 * conv_bwd_data, 1 and 2 threads). Depends on the shape only. */
#ifndef CONV_MIN_COLUMNS
#define CONV_MIN_COLUMNS 512
#endif
static int conv_images_per_gemm(const conv_geom *g)
{
    const int64_t P = (int64_t)g->OH * g->OW, nb = (CONV_MIN_COLUMNS + P - 1) / P;
    if (cols_are_image(g) && 16 * P >= CONV_MIN_COLUMNS) return 1;
    return nb > g->B ? g->B : (int)nb;
}

/* A convolution's sizes: the columns' rows (C*KH*KW), outputs and inputs per image and
 * channel, its MACs, and its chunks of nb images per product (conv_images_per_gemm). */
typedef struct {
    int64_t ckk, P, HW, macs;
    int nb, chunks;
} conv_sizes;

static conv_sizes sizes_of(const conv_geom *g)
{
    const int64_t ckk = (int64_t)g->C * g->KH * g->KW, P = (int64_t)g->OH * g->OW;
    const int nb = conv_images_per_gemm(g);
    return (conv_sizes){ckk, P, (int64_t)g->H * g->W, g->B * g->OC * P * ckk, nb,
                        (g->B + nb - 1) / nb};
}

/* n images src [n, R, P] into dst [R, n*P] (channel-major, images side by side: dY's
 * channels, or a 1x1 convolution's columns); returns dst. Rows on the threads (inside a chunk
 * loop's parallel region a team of one, unless nested parallelism is on). */
static float *channel_major(const float *src, int n, int R, int64_t P, float *dst)
{
#pragma omp parallel for collapse(2) if ((int64_t)n * R * P > PAR_MIN) schedule(static)
    for (int j = 0; j < n; ++j)
        for (int r = 0; r < R; ++r)
            memcpy(dst + ((int64_t)r * n + j) * P, src + ((int64_t)j * R + r) * P,
                   (size_t)P * sizeof(float));
    return dst;
}

void cpu_conv_fwd(const conv_geom *g, const float *X, const float *Wt, float *Y,
                  conv_row_epilogue epi, const void *ctx)
{
    const conv_sizes z = sizes_of(g);
    /* chunk by chunk of nb images: the columns, their product with the weights
     * ([OC, nb*P]: for one image its block of Y), then the epilogue row by row */
#pragma omp parallel for if (z.chunks > 1 && z.macs > PAR_MIN) schedule(static)
    for (int t = 0; t < z.chunks; ++t) {
        const int b0 = t * z.nb, n = g->B - b0 < z.nb ? g->B - b0 : z.nb;
        const float *x = X + (int64_t)b0 * g->C * z.HW, *col = x;
        if (n > 1 || !cols_are_image(g)) {
            float *c = cpu_scratch(SCRATCH_COLUMNS, (size_t)(z.ckk * n * z.P));
            image_cols("im2col", g, n, x, c, 0);
            col = c;
        }
        float *out = n == 1 ? Y + (int64_t)b0 * g->OC * z.P
                            : cpu_scratch(SCRATCH_CHANNEL_MAJOR, (size_t)(g->OC * n * z.P));
        cpu_gemm(0, 0, g->OC, (int)(n * z.P), (int)z.ckk, 1.0f, Wt, col, 0.0f, out);
        for (int j = 0; j < n; ++j)
            for (int oc = 0; oc < g->OC; ++oc) {
                const float *o = out + ((int64_t)oc * n + j) * z.P;
                float *y = Y + ((int64_t)(b0 + j) * g->OC + oc) * z.P;
                if (epi) epi(ctx, oc, o, y, z.P);
                else if (o != y) memcpy(y, o, (size_t)z.P * sizeof(float));
            }
    }
}

void cpu_conv_bwd_data(const conv_geom *g, const float *dY, const float *Wt, float *dX,
                       conv_span_epilogue epi, const void *ctx)
{
    const conv_sizes z = sizes_of(g);
    /* chunk by chunk of nb images: dY's chunk channel-major [OC, nb*P] (for one image: its
     * block of dY), the column gradient weight^T @ it, col2im into dX's images (a 1x1
     * convolution's one image: the product is dX), then the epilogue on them */
#pragma omp parallel for if (z.chunks > 1 && z.macs > PAR_MIN) schedule(static)
    for (int t = 0; t < z.chunks; ++t) {
        const int b0 = t * z.nb, n = g->B - b0 < z.nb ? g->B - b0 : z.nb;
        float *dx = dX + (int64_t)b0 * g->C * z.HW;
        const float *dyc = dY + (int64_t)b0 * g->OC * z.P;
        if (n > 1)
            dyc = channel_major(dyc, n, g->OC, z.P,
                                cpu_scratch(SCRATCH_CHANNEL_MAJOR, (size_t)(g->OC * n * z.P)));
        if (n == 1 && cols_are_image(g)) {
            cpu_gemm(1, 0, (int)z.ckk, (int)z.P, g->OC, 1.0f, Wt, dyc, 0.0f, dx);
        } else {
            float *col = cpu_scratch(SCRATCH_COLUMNS, (size_t)(z.ckk * n * z.P));
            cpu_gemm(1, 0, (int)z.ckk, (int)(n * z.P), g->OC, 1.0f, Wt, dyc, 0.0f, col);
            image_cols("col2im", g, n, dx, col, 1);
        }
        if (epi) epi(ctx, (int64_t)b0 * g->C * z.HW, (int64_t)(b0 + n) * g->C * z.HW);
    }
}

void cpu_conv_wgrad(const conv_geom *g, const float *X, const float *dY, float *G)
{
    const int64_t ckk = (int64_t)g->C * g->KH * g->KW, P = (int64_t)g->OH * g->OW;
    /* G = sum over chunks of nb images of dY's chunk, channel-major [OC, nb*P], times its
     * columns [C*KH*KW, nb*P]^T, chunks in order (each product on all threads). A chunk's
     * columns fit in L2 unless one image's are larger. */
    const int nb = conv_chunk_images(g->B, ckk * P);
    for (int b0 = 0; b0 < g->B; b0 += nb) {
        const int n = g->B - b0 < nb ? g->B - b0 : nb;
        float *col = cpu_scratch(SCRATCH_COLUMNS, (size_t)(ckk * n * P));
        float *dyc = cpu_scratch(SCRATCH_CHANNEL_MAJOR, (size_t)(g->OC * n * P));
        if (cols_are_image(g))   /* the images side by side: a copy of whole rows */
            channel_major(X + (int64_t)b0 * ckk * P, n, (int)ckk, P, col);
        else
            image_cols("im2col", g, n, X + (int64_t)b0 * g->C * g->H * g->W, col, 0);
        channel_major(dY + (int64_t)b0 * g->OC * P, n, g->OC, P, dyc);
        cpu_gemm(0, 1, g->OC, (int)ckk, (int)(n * P), 1.0f, dyc, col, b0 ? 1.0f : 0.0f, G);
    }
}

/* ---- im2col, col2im, swap01, conv2d_fwd ------------------------------------------ */

/* Checks the 12 int arguments shared by im2col and col2im, including
 * OH = (H + 2*pad - KH)/stride + 1 and OW likewise. */
static int conv_dims(const kctx *k)
{
    for (int i = 0; i < 6; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W KH KW */
    CHECK(kneed_min(k, 6, 1));                              /* stride */
    CHECK(kneed_min(k, 7, 0));                              /* pad */
    const int oh = (I(2) + 2 * I(7) - I(4)) / I(6) + 1, ow = (I(3) + 2 * I(7) - I(5)) / I(6) + 1;
    if (I(2) + 2 * I(7) < I(4) || I(8) != oh)
        return kfail(k, 8, "is %d; (H + 2*pad - KH)/stride + 1 = %d", I(8), oh);
    if (I(3) + 2 * I(7) < I(5) || I(9) != ow)
        return kfail(k, 9, "is %d; (W + 2*pad - KW)/stride + 1 = %d", I(9), ow);
    const int64_t ximg = (int64_t)I(0) * I(1) * I(2) * I(3);
    const int64_t ncol = (int64_t)I(1) * I(4) * I(5) * I(0) * I(8) * I(9);
    const int col_arg = strcmp(k->kernel, "im2col") == 0 ? 11 : 10;
    CHECK(kneed_numel(k, col_arg == 11 ? 10 : 11, ximg, "B*C*H*W"));
    CHECK(kneed_numel(k, col_arg, ncol, "C*KH*KW*B*OH*OW"));
    return 0;
}

/* Output columns [*lo, *hi) whose input column ow*stride - pad + kw lies in [0, W). */
static void valid_range(int OW, int W, int stride, int pad, int kw, int *lo, int *hi)
{
    const int first = pad - kw, last = W - 1 + pad - kw;   /* ow*stride in [first, last] */
    int l = first <= 0 ? 0 : (first + stride - 1) / stride;
    int h = last < 0 ? 0 : last / stride + 1;
    if (h > OW) h = OW;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* The geometry of one (kh, kw) tap of a convolution over one image plane: the output rows
 * [oh0, oh1) whose input row lies in the image, the output columns [lo, hi) whose input column
 * does, and the shift of a "same" convolution at stride 1 (OW == W, OH == H): there output
 * (oh, ow) reads input (oh + kh - pad, ow + kw - pad), flat index oh*W + ow + shift. */
typedef struct {
    int H, W, stride, pad, OH, OW, kh, kw;
    int oh0, oh1, lo, hi;
    int same;          /* stride 1, OW == W and OH == H */
    int64_t shift;     /* (kh - pad) * W + (kw - pad), for same */
} conv_tap;

static conv_tap conv_tap_of(int H, int W, int stride, int pad, int OH, int OW, int kh, int kw)
{
    conv_tap t = {H, W, stride, pad, OH, OW, kh, kw, 0, 0, 0, 0, 0, 0};
    valid_range(OH, H, stride, pad, kh, &t.oh0, &t.oh1);
    valid_range(OW, W, stride, pad, kw, &t.lo, &t.hi);
    t.same = stride == 1 && OW == W && OH == H;
    t.shift = (int64_t)(kh - pad) * W + (kw - pad);
    return t;
}

/* The flat range [*i0, *i1) of a same tap's output indices i = oh*OW + ow over its valid rows
 * whose shifted input index i + shift lies in the plane; the indices left out are edge
 * columns (input column outside the image). */
static void conv_tap_flat_range(const conv_tap *t, int64_t *i0, int64_t *i1)
{
    const int64_t n = (int64_t)t->H * t->W;
    *i0 = (int64_t)t->oh0 * t->OW;
    *i1 = (int64_t)t->oh1 * t->OW;
    if (*i0 < -t->shift) *i0 = -t->shift;
    if (*i1 > n - t->shift) *i1 = n - t->shift;
    if (*i1 < *i0) *i1 = *i0;
}

/* d[oh*OW + ow] = x[oh + kh - pad, ow + kw - pad] of one image plane x for a same tap, 0 where
 * that lies outside the image (one row of im2col's column matrix, one image): the valid rows
 * are one contiguous run of the shifted plane, copied at once; then the few edge columns,
 * which picked up a neighbouring row's value, and the rows outside the image are zeroed. Plain
 * loops, no memcpy/memset calls (the row-by-row copy of OW floats cost a call each). */
static inline CPU_ISA_BODY void im2col_same_body(const conv_tap *t, const float *restrict x,
                                                 float *restrict d)
{
    const int OW = t->OW, lo = t->lo, hi = t->hi;
    int64_t i0, i1;
    conv_tap_flat_range(t, &i0, &i1);
    for (int64_t i = 0; i < (int64_t)t->oh0 * OW; ++i) d[i] = 0.0f;
    for (int64_t i = (int64_t)t->oh1 * OW; i < (int64_t)t->OH * OW; ++i) d[i] = 0.0f;
    const float *restrict src = x + t->shift;
    for (int64_t i = i0; i < i1; ++i) d[i] = src[i];
    for (int oh = t->oh0; oh < t->oh1; ++oh) {
        float *restrict row = d + (int64_t)oh * OW;
        for (int ow = 0; ow < lo; ++ow) row[ow] = 0.0f;
        for (int ow = hi; ow < OW; ++ow) row[ow] = 0.0f;
    }
}

CPU_ISA_CLONES(im2col_same, (const conv_tap *t, const float *restrict x, float *restrict d),
               (t, x, d))

/* The same row of col for any other tap, row by row (memcpy of the interior at stride 1). */
static void im2col_rows(const conv_tap *t, const float *restrict x, float *restrict d)
{
    const int OW = t->OW, lo = t->lo, hi = t->hi;
    for (int oh = 0; oh < t->OH; ++oh) {
        float *restrict row = d + (int64_t)oh * OW;
        if (oh < t->oh0 || oh >= t->oh1) {
            memset(row, 0, (size_t)OW * sizeof(float));
            continue;
        }
        const int h = oh * t->stride - t->pad + t->kh;
        const float *restrict src = x + (int64_t)h * t->W - t->pad + t->kw;
        for (int ow = 0; ow < lo; ++ow) row[ow] = 0.0f;
        if (t->stride == 1)
            memcpy(row + lo, src + lo, (size_t)(hi - lo) * sizeof(float));
        else
            for (int ow = lo; ow < hi; ++ow) row[ow] = src[ow * t->stride];
        for (int ow = hi; ow < OW; ++ow) row[ow] = 0.0f;
    }
}

CPU_KERNEL(im2col, iiiiiiiiiitt)
{
    CHECK(conv_dims(k));
    const int B = I(0), C = I(1), H = I(2), W = I(3), KH = I(4), KW = I(5), stride = I(6),
              pad = I(7), OH = I(8), OW = I(9);
    const float *X = PF(10);
    float *col = PF(11);
    const int64_t ncols = (int64_t)B * OH * OW, rows = (int64_t)C * KH * KW;
    void (*const same_copy)(const conv_tap *, const float *restrict, float *restrict) =
        CPU_ISA_PICK(im2col_same);
    /* One task per (row of col, image), images inner: each row of col is written as one
     * sequential run. */
#pragma omp parallel for if (rows * ncols > PAR_MIN) schedule(static)
    for (int64_t rb = 0; rb < rows * B; ++rb) {
        const int64_t r = rb / B;
        const int b = (int)(rb % B);
        const int kw = (int)(r % KW), kh = (int)(r / KW % KH), c = (int)(r / KW / KH);
        const conv_tap t = conv_tap_of(H, W, stride, pad, OH, OW, kh, kw);
        const float *x = X + ((int64_t)b * C + c) * H * W;
        float *d = col + r * ncols + (int64_t)b * OH * OW;
        if (t.same)
            same_copy(&t, x, d);
        else
            im2col_rows(&t, x, d);
    }
    return 0;
}

/* Most edge elements a same tap's flat col2im pass saves and restores (else row by row). */
#define COL2IM_SAVED_MAX 1024

/* Saves (restore = 0) or restores (restore = 1) the elements dst[i] of a same tap's flat run
 * [i0, i1) at its edge columns (ow < lo or ow >= hi), in row order. */
static inline void col2im_edges(const conv_tap *t, int64_t i0, int64_t i1, float *dst,
                                float *saved, int restore)
{
    int n = 0;
    for (int oh = t->oh0; oh < t->oh1; ++oh)
        for (int ow = 0; ow < t->OW; ++ow) {
            if (ow == t->lo && t->hi > ow) ow = t->hi;   /* skip the interior */
            if (ow >= t->OW) break;
            const int64_t i = (int64_t)oh * t->OW + ow;
            if (i < i0 || i >= i1) continue;
            if (restore)
                dst[i] = saved[n++];
            else
                saved[n++] = dst[i];
        }
}

/* img[oh*stride - pad + kh, ow*stride - pad + kw] += s[oh*OW + ow] over the taps inside the
 * image (one row of the column matrix's gradient, one image), row by row. Not an ISA clone:
 * for the short rows of the other shapes (10 floats, or a stride of 2), the AVX-512 clone's
 * loop set-up and strided stores cost more than they saved. */
static void col2im_rows(const conv_tap *t, const float *restrict s, float *restrict img)
{
    const int lo = t->lo, hi = t->hi;
    for (int oh = t->oh0; oh < t->oh1; ++oh) {
        const int h = oh * t->stride - t->pad + t->kh;
        float *restrict dst = img + (int64_t)h * t->W - t->pad + t->kw;
        const float *restrict row = s + (int64_t)oh * t->OW;
        if (t->stride == 1) {
#pragma omp simd
            for (int ow = lo; ow < hi; ++ow) dst[ow] += row[ow];
        } else {
            for (int ow = lo; ow < hi; ++ow) dst[(int64_t)ow * t->stride] += row[ow];
        }
    }
}

/* The same for a same tap: its valid rows are added as one flat run, img[i + shift] += s[i];
 * the run also adds the edge columns' values into the neighbouring row's elements, so those
 * elements (at most pad per row) are saved before and restored after: each element still
 * receives exactly the taps inside the image, in the caller's (kh, kw) order, so the sums
 * are bitwise those of col2im_rows. More than COL2IM_SAVED_MAX edge elements: row by row. */
static inline CPU_ISA_BODY void col2im_same_body(const conv_tap *t, const float *restrict s,
                                                 float *restrict img)
{
    if ((int64_t)(t->oh1 - t->oh0) * (t->OW - (t->hi - t->lo)) > COL2IM_SAVED_MAX) {
        col2im_rows(t, s, img);
        return;
    }
    float saved[COL2IM_SAVED_MAX];
    int64_t i0, i1;
    conv_tap_flat_range(t, &i0, &i1);
    float *restrict dst = img + t->shift;
    col2im_edges(t, i0, i1, dst, saved, 0);
    for (int64_t i = i0; i < i1; ++i) dst[i] += s[i];
    col2im_edges(t, i0, i1, dst, saved, 1);
}

CPU_ISA_CLONES(col2im_same, (const conv_tap *t, const float *restrict s, float *restrict img),
               (t, s, img))

/* Images per col2im task for a same convolution: enough tasks for about 4 per thread, else
 * all B images of a channel in one task (each row of the column gradient is then read as one
 * sequential run). */
static int col2im_images_per_task(int B, int C)
{
    const int want = 4 * omp_get_max_threads();
    if (C >= want) return B;
    const int blocks = (want + C - 1) / C;
    return blocks >= B ? 1 : (B + blocks - 1) / blocks;
}

CPU_KERNEL(col2im, iiiiiiiiiitt)
{
    CHECK(conv_dims(k));
    const int B = I(0), C = I(1), H = I(2), W = I(3), KH = I(4), KW = I(5), stride = I(6),
              pad = I(7), OH = I(8), OW = I(9);
    const float *col = PF(10);
    float *dX = PF(11);
    const int64_t ncols = (int64_t)B * OH * OW;
    const int64_t work = (int64_t)B * C * H * W * KH * KW;
    /* A task owns channel c of images [b0, b0 + nb): it zeroes them, then adds the column
     * gradient's rows (c, kh, kw) in (kh, kw) order, each over the task's images in turn.
     * Every dX element is summed in (kh, kw) order from zero, whatever the blocking or the
     * thread count, and threads own whole images (no races). A same convolution's flat adds
     * run over blocks of images, channel by channel (long sequential reads of col); other
     * shapes add row by row into one image at a time (tasks image by image, channels inner),
     * which keeps the image in L1 across its taps. */
    const int same = stride == 1 && OW == W && OH == H;
    const int nb = !same ? 1 : work > PAR_MIN ? col2im_images_per_task(B, C) : B;
    const int nblocks = (B + nb - 1) / nb;
    void (*const tap_add)(const conv_tap *, const float *restrict, float *restrict) =
        same ? CPU_ISA_PICK(col2im_same) : col2im_rows;
#pragma omp parallel for if (work > PAR_MIN) schedule(static)
    for (int64_t task = 0; task < (int64_t)C * nblocks; ++task) {
        const int c = (int)(same ? task / nblocks : task % C);
        const int b0 = (int)(same ? task % nblocks : task / C) * nb;
        const int b1 = b0 + nb < B ? b0 + nb : B;
        for (int b = b0; b < b1; ++b)
            memset(dX + ((int64_t)b * C + c) * H * W, 0, (size_t)H * W * sizeof(float));
        for (int kh = 0; kh < KH; ++kh)
            for (int kw = 0; kw < KW; ++kw) {
                const conv_tap t = conv_tap_of(H, W, stride, pad, OH, OW, kh, kw);
                const float *src = col + (((int64_t)c * KH + kh) * KW + kw) * ncols;
                for (int b = b0; b < b1; ++b)
                    tap_add(&t, src + (int64_t)b * OH * OW, dX + ((int64_t)b * C + c) * H * W);
            }
    }
    return 0;
}

/* Direct convolution: per (b, oc) output plane, zero it, then for every (c, kh, kw) in order
 * add Wt[oc,c,kh,kw] times the shifted input rows over the valid output columns; each output
 * element is summed in (c, kh, kw) order, as the OpenCL kernel sums it. */
CPU_KERNEL(conv2d_fwd, iiiiiiiiiiittt)
{
    for (int i = 0; i < 7; ++i) CHECK(kneed_min(k, i, 1));  /* B C H W OC KH KW */
    CHECK(kneed_min(k, 7, 1));                              /* stride */
    CHECK(kneed_min(k, 8, 0));                              /* pad */
    const int B = I(0), C = I(1), H = I(2), W = I(3), OC = I(4), KH = I(5), KW = I(6),
              stride = I(7), pad = I(8), OH = I(9), OW = I(10);
    const int oh_want = (H + 2 * pad - KH) / stride + 1, ow_want = (W + 2 * pad - KW) / stride + 1;
    if (H + 2 * pad < KH || OH != oh_want)
        return kfail(k, 9, "is %d; (H + 2*pad - KH)/stride + 1 = %d", OH, oh_want);
    if (W + 2 * pad < KW || OW != ow_want)
        return kfail(k, 10, "is %d; (W + 2*pad - KW)/stride + 1 = %d", OW, ow_want);
    CHECK(kneed_numel(k, 11, (int64_t)B * C * H * W, "B*C*H*W"));
    CHECK(kneed_numel(k, 12, (int64_t)OC * C * KH * KW, "OC*C*KH*KW"));
    CHECK(kneed_numel(k, 13, (int64_t)B * OC * OH * OW, "B*OC*OH*OW"));
    const float *X = PF(11), *Wt = PF(12);
    float *Y = PF(13);
    const int64_t macs = (int64_t)B * OC * OH * OW * C * KH * KW;
#pragma omp parallel for if (macs > PAR_MIN) schedule(static)
    for (int64_t bo = 0; bo < (int64_t)B * OC; ++bo) {
        const int b = (int)(bo / OC), oc = (int)(bo % OC);
        float *restrict y = Y + bo * OH * OW;
        memset(y, 0, (size_t)OH * OW * sizeof(float));
        for (int c = 0; c < C; ++c) {
            const float *x = X + ((int64_t)b * C + c) * H * W;
            const float *wt = Wt + ((int64_t)oc * C + c) * KH * KW;
            for (int kh = 0; kh < KH; ++kh)
                for (int kw = 0; kw < KW; ++kw) {
                    const float wv = wt[kh * KW + kw];
                    int lo, hi;
                    valid_range(OW, W, stride, pad, kw, &lo, &hi);
                    for (int oh = 0; oh < OH; ++oh) {
                        const int h = oh * stride - pad + kh;
                        if (h < 0 || h >= H) continue;
                        const float *restrict src = x + (int64_t)h * W - pad + kw;
                        float *restrict d = y + (int64_t)oh * OW;
                        if (stride == 1) {
#pragma omp simd
                            for (int ow = lo; ow < hi; ++ow) d[ow] += wv * src[ow];
                        } else {
                            for (int ow = lo; ow < hi; ++ow) d[ow] += wv * src[ow * stride];
                        }
                    }
                }
        }
    }
    return 0;
}

CPU_KERNEL(swap01, iiitt)
{
    for (int i = 0; i < 3; ++i) CHECK(kneed_min(k, i, 1));
    const int64_t D0 = I(0), D1 = I(1), D2 = I(2);
    CHECK(kneed_numel(k, 3, D0 * D1 * D2, "D0*D1*D2"));
    CHECK(kneed_numel(k, 4, D0 * D1 * D2, "D0*D1*D2"));
    const float *X = PF(3);
    float *Y = PF(4);
#pragma omp parallel for collapse(2) if (D0 * D1 * D2 > PAR_MIN) schedule(static)
    for (int64_t j = 0; j < D1; ++j)
        for (int64_t i = 0; i < D0; ++i)
            memcpy(Y + (j * D0 + i) * D2, X + (i * D1 + j) * D2, (size_t)D2 * sizeof(float));
    return 0;
}
