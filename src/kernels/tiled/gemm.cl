/* tiled: GEMM with local-memory tiling and a 2-D register block per work-item.
 *
 * A work-group computes a TSM x TSN tile of C. Per step of TSK along K it stages a TSM x TSK
 * tile of op(A) and a TSK x TSN tile of op(B) in local memory (zero outside the matrices), then
 * each work-item accumulates WPTM x WPTN outputs spaced RTSM / RTSN apart (strided ownership:
 * neighbouring work-items touch neighbouring addresses, which coalesces on GPUs and vectorizes
 * across work-items on PoCL). Technique after Nugteren's "Tutorial: OpenCL SGEMM tuning for
 * Kepler" (kernels 2-6, cnugteren.github.io/tutorial) and CLBlast's xgemm.
 *
 * Launch geometry (rule "tiled" of phonetrain.kernels.launch): local = [TSN/WPTN, TSM/WPTM],
 * global = [ceil(N/TSN) * TSN/WPTN, ceil(M/TSM) * TSM/WPTM]. Kernel ABI: src/kernels/README.md.
 * Tuning parameters (-D, defaults below = version.yaml's defines): TSM, TSN (tile of C), TSK
 * (K depth of a staged slice), WPTM, WPTN (outputs per work-item, dividing TSM, TSN), PAD
 * (extra words per local-memory row: with PAD = 0 and TSM a multiple of the bank count, the
 * transposing stores of op(A) hit one bank; 1 spreads them), VW (1, 2 or 4: a work-item owns
 * vectors of VW neighbouring outputs, the vectors TSM/WPTM resp. TSN/WPTN work-items apart, and
 * reads them from local memory as floatVW: VW times fewer local loads per multiply-add, the
 * limit of the scalar form on GPUs whose shared memory issues one load per cycle).
 * PREFETCH (0 or 1): 1 loads the next K slice from global memory into registers (LPTA + LPTB
 * per work-item) while the current local tile is multiplied, then stores them after the
 * slice's trailing barrier, so the global-load latency overlaps the multiply-adds (Nugteren's
 * tutorial kernel 7, CLBlast xgemm's global-to-register-to-local staging). DBUF (0 or 1): 1
 * keeps two local tiles and alternates them, one barrier per slice instead of two. Both 0 is
 * the plain staged loop. Each output's sum runs over k in ascending order in every variant,
 * so they give bitwise equal results.
 * Work-groups whose tile and K slice lie wholly inside the matrices take an unchecked load path
 * (the test is uniform per work-group, so it does not diverge); edge tiles keep the checks.
 */
#ifndef TSM
#define TSM 64
#endif
#ifndef TSN
#define TSN 64
#endif
#ifndef TSK
#define TSK 8
#endif
#ifndef WPTM
#define WPTM 8
#endif
#ifndef WPTN
#define WPTN 4
#endif
#ifndef PAD
#define PAD 1
#endif
#ifndef VW
#define VW 1
#endif
#ifndef PREFETCH
#define PREFETCH 0
#endif
#ifndef DBUF
#define DBUF 0
#endif
#if (PREFETCH != 0 && PREFETCH != 1) || (DBUF != 0 && DBUF != 1)
#error "PREFETCH and DBUF must be 0 or 1"
#endif
#if VW == 1
#define floatv float
#elif VW == 2
#define floatv float2
#elif VW == 4
#define floatv float4
#else
#error "VW must be 1, 2 or 4"
#endif
#define RTSM (TSM / WPTM) /* local size along M (dimension 1) */
#define RTSN (TSN / WPTN) /* local size along N (dimension 0) */
#define NTHREADS (RTSM * RTSN)
#define NBUF (DBUF + 1)           /* local tiles per operand */
#define LPTA ((TSM * TSK + NTHREADS - 1) / NTHREADS) /* op(A) slice elements per work-item */
#define LPTB ((TSK * TSN + NTHREADS - 1) / NTHREADS) /* op(B) slice elements per work-item */

#if (TSM % WPTM) || (TSN % WPTN)
#error "TSM must be a multiple of WPTM and TSN a multiple of WPTN"
#endif
#if (WPTM % VW) || (WPTN % VW) || ((TSM + PAD) % VW) || ((TSN + PAD) % VW)
#error "VW must divide WPTM, WPTN, TSM + PAD and TSN + PAD (aligned vector rows)"
#endif
/* Tile offset of a work-item's i-th output along one side: vectors of VW neighbours, the
 * vectors RT work-items apart (VW = 1: single elements RT apart, the strided ownership). */
#define OWNED(i, t, RT) ((((i) / VW) * (RT) + (t)) * VW + (i) % VW)

/* op(A)(m, k) and op(B)(k, n), zero outside the matrices. */
#define LOAD_A(m, k) (((m) < M && (k) < K) ? (ta ? A[(k) * M + (m)] : A[(m) * K + (k)]) : 0.0f)
#define LOAD_B(k, n) (((k) < K && (n) < N) ? (tb ? B[(n) * K + (k)] : B[(k) * N + (n)]) : 0.0f)
/* The same without the bounds test, for slices wholly inside the matrices. */
#define FAST_A(m, k) (ta ? A[(k) * M + (m)] : A[(m) * K + (k)])
#define FAST_B(k, n) (tb ? B[(n) * K + (k)] : B[(k) * N + (n)])

/* ------------------------------------------------------------ K slices into local memory */

/* (mm, kk) of element i of an op(A) slice and (kk, nn) of an op(B) slice, the
 * fastest-varying index following the operand's memory order (coalesced loads). */
#define A_SLICE_AT(i) const int mm = ta ? i % TSM : i / TSK, kk = ta ? i / TSM : i % TSK
#define B_SLICE_AT(i) const int nn = tb ? i / TSK : i % TSN, kk = tb ? i % TSK : i / TSN

/* The loops of stage_slice: element (mm, kk) of op(A)'s slice k0 to As[kk][mm] and (kk, nn) of
 * op(B)'s to Bs[kk][nn], loaded by LD_A / LD_B (FAST_* or LOAD_*), work-item tid taking
 * elements tid, tid + NTHREADS, ... */
#define STAGE_SLICE(LD_A, LD_B)                                 \
    for (int i = tid; i < TSM * TSK; i += NTHREADS) {           \
        A_SLICE_AT(i);                                          \
        As[kk][mm] = LD_A(m0 + mm, k0 + kk);                    \
    }                                                           \
    for (int i = tid; i < TSK * TSN; i += NTHREADS) {           \
        B_SLICE_AT(i);                                          \
        Bs[kk][nn] = LD_B(k0 + kk, n0 + nn);                    \
    }

/* Element l < LPT of work-item tid's share of a slice of SIZE elements (slice index
 * i = tid + l * NTHREADS, its coordinates declared by SLICE_AT: A_SLICE_AT or B_SLICE_AT):
 * `body` for each one inside the slice. `body` holds no comma outside parentheses; a
 * `#pragma unroll` in front of the macro applies to its loop. */
#define FOR_OWN_ELEMENT(LPT, SLICE_AT, SIZE, body)              \
    for (int l = 0; l < LPT; l++) {                             \
        const int i = tid + l * NTHREADS;                       \
        SLICE_AT(i);                                            \
        if (SIZE % NTHREADS == 0 || i < SIZE)                   \
            body                                                \
    }

/* Slice k0 of op(A) and op(B) straight from global into local memory (PREFETCH = 0): the
 * cooperative loads' fastest-varying index follows the operand's memory order. */
inline void stage_slice(const int M, const int N, const int K, const int k0, const int m0,
                        const int n0, const bool inside, const int tid,
                        const __global float *restrict A, const __global float *restrict B,
                        const int ta, const int tb,
                        __local float (*As)[TSM + PAD], __local float (*Bs)[TSN + PAD])
{
    if (inside && k0 + TSK <= K) {
        STAGE_SLICE(FAST_A, FAST_B)
    } else {
        STAGE_SLICE(LOAD_A, LOAD_B)
    }
}

/* The same element ownership as stage_slice (element l of a work-item is slice index
 * tid + l * NTHREADS), held in registers (PREFETCH = 1): the loads of slice k0 are issued
 * before the multiply-adds of the previous slice and only waited for by store_slice. */
inline void fetch_slice(const int M, const int N, const int K, const int k0, const int m0,
                        const int n0, const bool inside, const int tid,
                        const __global float *restrict A, const __global float *restrict B,
                        const int ta, const int tb, float *ra, float *rb)
{
    if (inside && k0 + TSK <= K) {
#pragma unroll
        FOR_OWN_ELEMENT(LPTA, A_SLICE_AT, TSM * TSK, ra[l] = FAST_A(m0 + mm, k0 + kk);)
#pragma unroll
        FOR_OWN_ELEMENT(LPTB, B_SLICE_AT, TSK * TSN, rb[l] = FAST_B(k0 + kk, n0 + nn);)
    } else {
#pragma unroll
        FOR_OWN_ELEMENT(LPTA, A_SLICE_AT, TSM * TSK, ra[l] = LOAD_A(m0 + mm, k0 + kk);)
#pragma unroll
        FOR_OWN_ELEMENT(LPTB, B_SLICE_AT, TSK * TSN, rb[l] = LOAD_B(k0 + kk, n0 + nn);)
    }
}

/* Registers of fetch_slice into the local tiles. */
inline void store_slice(const int tid, const int ta, const int tb, const float *ra,
                        const float *rb, __local float (*As)[TSM + PAD],
                        __local float (*Bs)[TSN + PAD])
{
#pragma unroll
    FOR_OWN_ELEMENT(LPTA, A_SLICE_AT, TSM * TSK, As[kk][mm] = ra[l];)
#pragma unroll
    FOR_OWN_ELEMENT(LPTB, B_SLICE_AT, TSK * TSN, Bs[kk][nn] = rb[l];)
}

/* ------------------------------------------------------------ register block */

/* acc += the local slice's product, kk ascending (each output's sum runs over k in order). */
inline void multiply_slice(const int tm, const int tn, __local float (*As)[TSM + PAD],
                           __local float (*Bs)[TSN + PAD], float (*acc)[WPTN])
{
    for (int kk = 0; kk < TSK; kk++) {
        /* VW-wide local reads: one vector load per VW outputs of the block. */
        floatv bv[WPTN / VW];
        for (int q = 0; q < WPTN / VW; q++)
            bv[q] = *(const __local floatv *)&Bs[kk][(q * RTSN + tn) * VW];
        for (int p = 0; p < WPTM / VW; p++) {
            floatv av = *(const __local floatv *)&As[kk][(p * RTSM + tm) * VW];
            for (int r = 0; r < VW; r++) {
                const float a = ((const float *)&av)[r];
                for (int q = 0; q < WPTN / VW; q++)
                    for (int v = 0; v < VW; v++)
                        acc[p * VW + r][q * VW + v] =
                            mad(a, ((const float *)&bv[q])[v], acc[p * VW + r][q * VW + v]);
            }
        }
    }
}

/* ------------------------------------------------------------ the GEMM body */

/* As, Bs: NBUF local tiles each. Per slice: stage (PREFETCH = 0) or store the registers
 * fetched during the previous slice (PREFETCH = 1), barrier, fetch the next slice's
 * registers, multiply. With one buffer a second barrier guards the tile against the next
 * slice's stores; with two (DBUF = 1) slice s writes the buffer that slice s - 2 read, and
 * the barrier of slice s - 1 already separates the two, so one barrier per slice remains. */
inline void gemm_tiled(const int M, const int N, const int K, const float alpha,
                       const __global float *restrict A, const __global float *restrict B,
                       const float beta, __global float *C, const int ta, const int tb,
                       __local float (*As)[TSK][TSM + PAD], __local float (*Bs)[TSK][TSN + PAD])
{
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int tid = tm * RTSN + tn;
    const int n0 = get_group_id(0) * TSN, m0 = get_group_id(1) * TSM;
    const bool inside = m0 + TSM <= M && n0 + TSN <= N;
    float acc[WPTM][WPTN];
    for (int i = 0; i < WPTM; i++)
        for (int j = 0; j < WPTN; j++)
            acc[i][j] = 0.0f;
#if PREFETCH
    float ra[LPTA], rb[LPTB];
    fetch_slice(M, N, K, 0, m0, n0, inside, tid, A, B, ta, tb, ra, rb);
#endif
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += TSK) {
#if PREFETCH
        store_slice(tid, ta, tb, ra, rb, As[buf], Bs[buf]);
#else
        stage_slice(M, N, K, k0, m0, n0, inside, tid, A, B, ta, tb, As[buf], Bs[buf]);
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
#if PREFETCH
        if (k0 + TSK < K)
            fetch_slice(M, N, K, k0 + TSK, m0, n0, inside, tid, A, B, ta, tb, ra, rb);
#endif
        multiply_slice(tm, tn, As[buf], Bs[buf], acc);
#if DBUF
        buf ^= 1;
#else
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }
    for (int i = 0; i < WPTM; i++) {
        const int m = m0 + OWNED(i, tm, RTSM);
        if (m >= M)
            break;
        for (int j = 0; j < WPTN; j++) {
            const int n = n0 + OWNED(j, tn, RTSN);
            if (n < N)
                C[m * N + n] = beta == 0.0f ? alpha * acc[i][j]
                                            : alpha * acc[i][j] + beta * C[m * N + n];
        }
    }
}

#define GEMM_KERNEL(name, ta, tb)                                                          \
    __kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))                        \
    void name(const int M, const int N, const int K, const float alpha,                   \
              const __global float *restrict A, const __global float *restrict B,         \
              const float beta, __global float *C)                                        \
    {                                                                                     \
        __local float As[NBUF][TSK][TSM + PAD] __attribute__((aligned(16)));              \
        __local float Bs[NBUF][TSK][TSN + PAD] __attribute__((aligned(16)));              \
        gemm_tiled(M, N, K, alpha, A, B, beta, C, ta, tb, As, Bs);                        \
    }

GEMM_KERNEL(gemm_nn, 0, 0)
GEMM_KERNEL(gemm_nt, 0, 1)
GEMM_KERNEL(gemm_tn, 1, 0)
