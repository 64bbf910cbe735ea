/* CPU backend: convolutions on the GEMM engine, shared by the fused kernels (cpu_fused.c) and
 * the fused batch-norm kernels (cpu_fused_bn.c). A convolution's columns are made per image
 * or chunk of images by the ABI's im2col/col2im (cpu_kernels.c), so they stay in L2 unless
 * one image's columns are larger; each product is cpu_gemm's; the caller's epilogue runs on
 * the output while it is in cache. A 1x1 convolution at stride 1 without padding multiplies the
 * image itself (its columns are the image) from 32 outputs per image. Every sum runs in an
 * order fixed by the shape, never the thread count. */
#include "cpu_kernel_ctx.h"

#include <stdint.h>
#include <string.h>

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
