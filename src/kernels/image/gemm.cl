/* image: GEMM reading B through an image2d_t (the texture path), A from global memory.
 *
 * B arrives as the runner's image view of its buffer (plan argument
 * {"t": B, "image_width4": W}, src/runner/cl_image.h): CL_RGBA / CL_FLOAT, W pixels per row,
 * float i of B at component i % 4 of pixel i / 4, pixel p at (p % W, p / W). The view's padding
 * past the tensor is zero and reads past the image clamp to the zero border
 * (CLK_ADDRESS_CLAMP), so a 4-float read never faults; lanes outside the matrix are masked or
 * never stored. Texture caches (Adreno's L1 texture path) serve B; A and C use global memory.
 *
 * Each work-item computes an RM x 4 block of C (4 = one pixel of columns):
 * - gemm_nn / gemm_tn: outer products; per k, one 4-float read of B's row k (two pixels when
 *   k*N + n0 is not a multiple of 4) times RM scalars of op(A)'s column k.
 * - gemm_nt: dot products along K; per 4 k, one 4-float read of each of B's 4 rows and a
 *   vload4 of each of A's RM rows; the K tail is masked.
 * Rows of A past M are clamped to M-1 for reading and never stored, so any M, N, K >= 1 is
 * correct. Tuning parameters (-D, defaults below = version.yaml's defines): RM (rows per
 * work-item); RN must be 4. Launch geometry (rule "image" of phonetrain.kernels.launch, the
 * regblock rule): local = [LX, LY] from version.yaml / tuning.json,
 * global = [ceil(ceil(N/4)/LX)*LX, ceil(ceil(M/RM)/LY)*LY]. Kernel ABI: src/kernels/README.md.
 */
#ifndef RM
#define RM 4
#endif
#ifndef RN
#define RN 4
#endif
#if RN != 4
#error "image: RN must be 4 (one RGBA pixel of columns per work-item)"
#endif

/* OpenCL C defines __IMAGE_SUPPORT__ only on devices with images (OpenCL C 1.2, 6.10). Without
 * it the program builds empty, and a run of this version stops before looking its kernels up
 * with the runner's missing-capability exit code (8) and the reason, like an absent CLBlast. */
#ifdef __IMAGE_SUPPORT__

__constant sampler_t SMP = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_CLAMP | CLK_FILTER_NEAREST;

inline float4 pixel(read_only image2d_t img, const int w, const int p)
{
    return read_imagef(img, SMP, (int2)(p % w, p / w));
}

/* Floats idx .. idx+3 of the buffer behind img (one or two pixels). */
inline float4 load4(read_only image2d_t img, const int w, const int idx)
{
    const int p = idx >> 2, o = idx & 3;
    const float4 a = pixel(img, w, p);
    if (o == 0)
        return a;
    const float4 b = pixel(img, w, p + 1);
    return o == 1 ? (float4)(a.yzw, b.x) : o == 2 ? (float4)(a.zw, b.xy) : (float4)(a.w, b.xyz);
}

/* C[m, n0..n0+3] = alpha * acc + beta * C (beta == 0 never reads C); columns past N dropped. */
inline void store4(__global float *C, const int N, const int m, const int n0, const float alpha,
                   const float beta, const float4 acc)
{
    __global float *c = C + m * N + n0;
    if (n0 + 4 <= N) {
        vstore4(beta == 0.0f ? alpha * acc : alpha * acc + beta * vload4(0, c), 0, c);
        return;
    }
    const float v[4] = {acc.x, acc.y, acc.z, acc.w};
    for (int j = 0; n0 + j < N; j++)
        c[j] = beta == 0.0f ? alpha * v[j] : alpha * v[j] + beta * c[j];
}

/* gemm_nn (ta = 0) or gemm_tn (ta = 1): B is [K, N]. */
inline void gemm_outer(const int M, const int N, const int K, const float alpha,
                       const __global float *A, read_only image2d_t B, const float beta,
                       __global float *C, const int m0, const int n0, const int ta)
{
    const int w = get_image_width(B);
    float4 acc[RM];
    int rows[RM];
    for (int i = 0; i < RM; i++) {
        acc[i] = (float4)(0.0f);
        rows[i] = min(m0 + i, M - 1);
    }
    for (int k = 0; k < K; k++) {
        const float4 b = load4(B, w, k * N + n0);
        for (int i = 0; i < RM; i++)
            acc[i] = mad((float4)(ta ? A[k * M + rows[i]] : A[rows[i] * K + k]), b, acc[i]);
    }
    for (int i = 0; i < RM && m0 + i < M; i++)
        store4(C, N, m0 + i, n0, alpha, beta, acc[i]);
}

/* gemm_nt: B is [N, K]; rows of B past N are clamped to N-1 (their outputs are dropped). */
inline void gemm_dot(const int M, const int N, const int K, const float alpha,
                     const __global float *A, read_only image2d_t B, const float beta,
                     __global float *C, const int m0, const int n0)
{
    const int w = get_image_width(B);
    float4 acc[RM][4];
    int rows[RM], cols[4];
    for (int i = 0; i < RM; i++) {
        rows[i] = min(m0 + i, M - 1);
        for (int j = 0; j < 4; j++)
            acc[i][j] = (float4)(0.0f);
    }
    for (int j = 0; j < 4; j++)
        cols[j] = min(n0 + j, N - 1);
    for (int k = 0; k < K; k += 4) {
        /* the K tail: lanes past K belong to the next row of A and B, mask both */
        const int4 live = (int4)(k, k + 1, k + 2, k + 3) < (int4)(K);
        float4 b[4];
        for (int j = 0; j < 4; j++)
            b[j] = select((float4)(0.0f), load4(B, w, cols[j] * K + k), live);
        for (int i = 0; i < RM; i++) {
            const __global float *a = A + rows[i] * K + k;
            const float4 av = k + 4 <= K ? vload4(0, a)
                : (float4)(a[0], k + 1 < K ? a[1] : 0.0f, k + 2 < K ? a[2] : 0.0f, 0.0f);
            for (int j = 0; j < 4; j++)
                acc[i][j] = mad(av, b[j], acc[i][j]);
        }
    }
    for (int i = 0; i < RM && m0 + i < M; i++) {
        float4 s;
        s.x = dot(acc[i][0], (float4)(1.0f));
        s.y = dot(acc[i][1], (float4)(1.0f));
        s.z = dot(acc[i][2], (float4)(1.0f));
        s.w = dot(acc[i][3], (float4)(1.0f));
        store4(C, N, m0 + i, n0, alpha, beta, s);
    }
}

#define GEMM_KERNEL(name, ta, tb)                                                          \
    __kernel void name(const int M, const int N, const int K, const float alpha,          \
                       const __global float *restrict A, read_only image2d_t B,           \
                       const float beta, __global float *C)                               \
    {                                                                                     \
        const int n0 = get_global_id(0) * 4, m0 = get_global_id(1) * RM;                  \
        if (m0 >= M || n0 >= N)                                                           \
            return;                                                                       \
        if (tb)                                                                           \
            gemm_dot(M, N, K, alpha, A, B, beta, C, m0, n0);                              \
        else                                                                              \
            gemm_outer(M, N, K, alpha, A, B, beta, C, m0, n0, ta);                        \
    }

GEMM_KERNEL(gemm_nn, 0, 0)
GEMM_KERNEL(gemm_nt, 0, 1)
GEMM_KERNEL(gemm_tn, 1, 0)

#endif /* __IMAGE_SUPPORT__ */
