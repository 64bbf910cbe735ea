// tiled (Vulkan): GEMM with shared-memory tiling and a 2-D register block per invocation, the
// GLSL twin of ../gemm.cl with its VW, PREFETCH and DBUF variants, plus vec4 global loads.
//
// A work-group computes a TSM x TSN tile of C. Per step of TSK along K it stages a TSM x TSK
// tile of op(A) and a TSK x TSN tile of op(B) in shared memory (zero outside the matrices),
// then each invocation accumulates WPTM x WPTN outputs: vectors of VW neighbouring outputs,
// the vectors RTSM / RTSN vectors apart (strided ownership: neighbouring invocations touch
// neighbouring addresses, which coalesces on GPUs; VW = 1 is the scalar strided block).
// Technique after Nugteren's "Tutorial: OpenCL SGEMM tuning for Kepler" (kernels 2-7,
// cnugteren.github.io/tutorial) and CLBlast's xgemm; each output sums over k in ascending
// order in every variant, as baseline/vk/gemm_*.comp and ../gemm.cl do.
//
// Launch geometry (rule "tiled" of phonetrain.kernels.launch): work-group size (specialization
// constants 0, 1) = [TSN/WPTN, TSM/WPTM], work-groups = [ceil(N/TSN), ceil(M/TSM)].
// Tuning parameters: specialization constants (vk_abi.glsl's PT_SPEC_* ids); the defaults below
// = ../version.yaml's defines (GVW, which the OpenCL kernel lacks: tuning.yaml's defaults);
// the runner sets them from the program's -DNAME=VALUE options, as the OpenCL build's -D
// overrides gemm.cl's #ifndef defaults. GLSL cannot #error on a specialization constant: the
// conditions below are tuning.yaml's constraints, which every candidate is checked against.
//   TSM, TSN   tile of C per work-group (rows, columns)
//   TSK        K depth of a staged slice
//   WPTM, WPTN outputs per invocation along M, N (dividing TSM, TSN)
//   PAD        extra words per shared-memory row (spreads the transposing stores over banks)
//   VW         1 or 4: an invocation owns vectors of VW neighbouring outputs and, with VW = 4
//              and (TSM + PAD), (TSN + PAD) multiples of 4, reads them from shared memory as
//              vec4 (4 times fewer shared loads per multiply-add, the limit of the scalar
//              form on GPUs whose shared memory issues one load per cycle), and where N is a
//              multiple of 4 stores each owned vector as one vec4 of C; VW divides WPTM,
//              WPTN. Another VW that divides them is correct but reads scalars.
//   PREFETCH   0 or 1: 1 loads the next K slice from global memory into registers while the
//              current one is multiplied and stores them after the slice's barrier, so the
//              global-load latency overlaps the multiply-adds (Nugteren's kernel 7)
//   DBUF       0 or 1: 1 keeps two shared tiles per operand and alternates them, one barrier
//              per slice instead of two (slice s overwrites the tile slice s - 2 read, and the
//              barrier of slice s - 1 lies between)
//   GVW        1 or 4: the staged loads move chunks of GVW elements neighbouring in the
//              operand's memory order; with 4, a chunk of a slice wholly inside the matrices
//              whose contiguous dimension is a multiple of 4 is one vec4 load (16-byte
//              transactions), and an op(A)^T / op(B) chunk is one vec4 shared store; edge
//              slices load the chunk's elements one by one, bounds-checked. GVW = 4 needs TSM,
//              TSN and TSK multiples of 4.
// Shared memory: 4 * (DBUF + 1) * TSK * (TSM + PAD + TSN + PAD) bytes (the device's
// maxComputeSharedMemorySize bounds it; Vulkan guarantees 16 KiB, desktop GPUs 48 KiB).
// Candidates for per-device tuning: tuning.yaml beside this file.
// Included by gemm_nn.comp, gemm_nt.comp, gemm_tn.comp, which define TA and TB (0 or 1:
// op(A) = A^T, op(B) = B^T). Kernel ABI: src/kernels/README.md.
#extension GL_EXT_control_flow_attributes : require
#include "vk_abi.glsl"

layout(constant_id = PT_SPEC_TSM) const int TSM = 64;
layout(constant_id = PT_SPEC_TSN) const int TSN = 64;
layout(constant_id = PT_SPEC_TSK) const int TSK = 8;
layout(constant_id = PT_SPEC_WPTM) const int WPTM = 8;
layout(constant_id = PT_SPEC_WPTN) const int WPTN = 4;
layout(constant_id = PT_SPEC_PAD) const int PAD = 1;
layout(constant_id = PT_SPEC_VW) const int VW = 1;
layout(constant_id = PT_SPEC_PREFETCH) const int PREFETCH = 0;
layout(constant_id = PT_SPEC_DBUF) const int DBUF = 0;
layout(constant_id = PT_SPEC_GVW) const int GVW = 1;

// vec4 views of the operands (the same bindings as vk_abi.glsl's A, B and C; C4 is used only
// where C is not, so neither view's accesses need ordering against the other's)
layout(std430, set = 0, binding = PT_BINDING_A) readonly buffer PtBuf_A4 { vec4 A4[]; };
layout(std430, set = 0, binding = PT_BINDING_B) readonly buffer PtBuf_B4 { vec4 B4[]; };
layout(std430, set = 0, binding = PT_BINDING_C) buffer PtBuf_C4 { vec4 C4[]; };

const int RTSM = TSM / WPTM;     // work-group size along M (dimension 1)
const int RTSN = TSN / WPTN;     // work-group size along N (dimension 0)
const int NTHREADS = RTSM * RTSN;
const int LDA = TSM + PAD;       // shared-memory row lengths
const int LDB = TSN + PAD;
const int TILE_A = TSK * LDA;    // floats of one op(A) tile, one op(B) tile
const int TILE_B = TSK * LDB;
const int NBUF = DBUF + 1;       // tiles per operand
const int CHUNKS_A = TSM * TSK / GVW;   // GVW-element chunks of an op(A), op(B) slice
const int CHUNKS_B = TSK * TSN / GVW;
const int LPTA = (CHUNKS_A + NTHREADS - 1) / NTHREADS;  // chunks per invocation
const int LPTB = (CHUNKS_B + NTHREADS - 1) / NTHREADS;

// Element f of the tiles is As[f >> 2][f & 3]: As[buf * TILE_A + kk * LDA + mm] =
// op(A)(m0 + mm, k0 + kk), Bs[buf * TILE_B + kk * LDB + nn] = op(B)(k0 + kk, n0 + nn).
// vec4 storage, so that the VW = 4 reads and the GVW = 4 stores are one access.
shared vec4 As[(NBUF * TILE_A + 3) / 4];
shared vec4 Bs[(NBUF * TILE_B + 3) / 4];

float acc[WPTM * WPTN];          // the register block, acc[i * WPTN + j]
vec4 ra[LPTA];                   // PREFETCH: the next slice's chunks, lanes 0..GVW-1
vec4 rb[LPTB];

// Tile offset of an invocation's i-th output along one side: vectors of VW neighbours, the
// vectors RT invocations apart (VW = 1: single elements RT apart).
int owned(int i, int t, int RT)
{
    return ((i / VW) * RT + t) * VW + i % VW;
}

// Chunk c of an op(A) slice: its first element (mm, kk); its GVW elements run along k
// (A, row-major M x K) or along m (A^T, stored K x M): the operand's memory order.
void a_chunk_at(int c, out int mm, out int kk)
{
    if (TA != 0) { kk = c / (TSM / GVW); mm = (c % (TSM / GVW)) * GVW; }
    else { mm = c / (TSK / GVW); kk = (c % (TSK / GVW)) * GVW; }
}

// Chunk c of an op(B) slice: its first element (kk, nn); along n (B, K x N) or k (B^T, N x K).
void b_chunk_at(int c, out int kk, out int nn)
{
    if (TB != 0) { nn = c / (TSK / GVW); kk = (c % (TSK / GVW)) * GVW; }
    else { kk = c / (TSN / GVW); nn = (c % (TSN / GVW)) * GVW; }
}

// Chunk c of op(A)'s slice k0 as lanes 0..GVW-1: one vec4 load where `as_vec4` (the slice
// inside the matrices, aligned), else element by element, bounds-checked unless `inside`.
vec4 load_a(int c, int k0, int m0, bool inside, bool as_vec4)
{
    int mm, kk;
    a_chunk_at(c, mm, kk);
    const int m = m0 + mm, k = k0 + kk;
    if (GVW == 4 && as_vec4)
        return A4[(TA != 0 ? k * M + m : m * K + k) >> 2];
    vec4 v = vec4(0.0);
    [[unroll]] for (int e = 0; e < GVW; e++) {
        const int me = TA != 0 ? m + e : m, ke = TA != 0 ? k : k + e;
        if (inside || (me < M && ke < K))
            v[e] = TA != 0 ? A[ke * M + me] : A[me * K + ke];
    }
    return v;
}

vec4 load_b(int c, int k0, int n0, bool inside, bool as_vec4)
{
    int kk, nn;
    b_chunk_at(c, kk, nn);
    const int k = k0 + kk, n = n0 + nn;
    if (GVW == 4 && as_vec4)
        return B4[(TB != 0 ? n * K + k : k * N + n) >> 2];
    vec4 v = vec4(0.0);
    [[unroll]] for (int e = 0; e < GVW; e++) {
        const int ke = TB != 0 ? k + e : k, ne = TB != 0 ? n : n + e;
        if (inside || (ke < K && ne < N))
            v[e] = TB != 0 ? B[ne * K + ke] : B[ke * N + ne];
    }
    return v;
}

// Lanes 0..GVW-1 of chunk c into tile `buf`: one vec4 store where the chunk lies along a
// shared-memory row (A^T, B) and rows are vec4-aligned, else one store per element.
void store_a(int c, int buf, vec4 v)
{
    int mm, kk;
    a_chunk_at(c, mm, kk);
    const int f = buf * TILE_A + kk * LDA + mm;
    if (GVW == 4 && TA != 0 && LDA % 4 == 0) {
        As[f >> 2] = v;
        return;
    }
    [[unroll]] for (int e = 0; e < GVW; e++) {
        const int fe = TA != 0 ? f + e : f + e * LDA;
        As[fe >> 2][fe & 3] = v[e];
    }
}

void store_b(int c, int buf, vec4 v)
{
    int kk, nn;
    b_chunk_at(c, kk, nn);
    const int f = buf * TILE_B + kk * LDB + nn;
    if (GVW == 4 && TB == 0 && LDB % 4 == 0) {
        Bs[f >> 2] = v;
        return;
    }
    [[unroll]] for (int e = 0; e < GVW; e++) {
        const int fe = TB != 0 ? f + e * LDB : f + e;
        Bs[fe >> 2][fe & 3] = v[e];
    }
}

// Slice k0 straight into tile `buf` (PREFETCH = 0), invocation tid taking chunks tid,
// tid + NTHREADS, ...; ina / inb: the op(A) / op(B) slice lies inside the matrices, va / vb:
// and may be loaded as vec4.
void stage_slice(int k0, int m0, int n0, int tid, int buf, bool ina, bool inb, bool va, bool vb)
{
    for (int c = tid; c < CHUNKS_A; c += NTHREADS)
        store_a(c, buf, load_a(c, k0, m0, ina, va));
    for (int c = tid; c < CHUNKS_B; c += NTHREADS)
        store_b(c, buf, load_b(c, k0, n0, inb, vb));
}

// The same chunks into registers (PREFETCH = 1): issued before the multiply-adds of the
// previous slice, waited for only by store_slice.
void fetch_slice(int k0, int m0, int n0, int tid, bool ina, bool inb, bool va, bool vb)
{
    [[unroll]] for (int l = 0; l < LPTA; l++) {
        const int c = tid + l * NTHREADS;
        if (CHUNKS_A % NTHREADS == 0 || c < CHUNKS_A)
            ra[l] = load_a(c, k0, m0, ina, va);
    }
    [[unroll]] for (int l = 0; l < LPTB; l++) {
        const int c = tid + l * NTHREADS;
        if (CHUNKS_B % NTHREADS == 0 || c < CHUNKS_B)
            rb[l] = load_b(c, k0, n0, inb, vb);
    }
}

void store_slice(int tid, int buf)
{
    [[unroll]] for (int l = 0; l < LPTA; l++) {
        const int c = tid + l * NTHREADS;
        if (CHUNKS_A % NTHREADS == 0 || c < CHUNKS_A)
            store_a(c, buf, ra[l]);
    }
    [[unroll]] for (int l = 0; l < LPTB; l++) {
        const int c = tid + l * NTHREADS;
        if (CHUNKS_B % NTHREADS == 0 || c < CHUNKS_B)
            store_b(c, buf, rb[l]);
    }
}

// acc += tile `buf`'s product, kk ascending: vec4 shared reads (VW = 4, rows vec4-aligned)
// or scalar ones.
void multiply_slice(int tm, int tn, int buf)
{
    const int a0 = buf * TILE_A, b0 = buf * TILE_B;
    if (VW == 4 && LDA % 4 == 0 && LDB % 4 == 0) {
        vec4 bv[(WPTN + 3) / 4];
        [[unroll]] for (int kk = 0; kk < TSK; kk++) {
            [[unroll]] for (int q = 0; q < WPTN / 4; q++)
                bv[q] = Bs[(b0 + kk * LDB + (q * RTSN + tn) * 4) >> 2];
            [[unroll]] for (int p = 0; p < WPTM / 4; p++) {
                const vec4 av = As[(a0 + kk * LDA + (p * RTSM + tm) * 4) >> 2];
                [[unroll]] for (int r = 0; r < 4; r++)
                    [[unroll]] for (int q = 0; q < WPTN / 4; q++)
                        [[unroll]] for (int v = 0; v < 4; v++)
                            acc[(p * 4 + r) * WPTN + q * 4 + v] += av[r] * bv[q][v];
            }
        }
        return;
    }
    float b[WPTN];
    [[unroll]] for (int kk = 0; kk < TSK; kk++) {
        [[unroll]] for (int j = 0; j < WPTN; j++) {
            const int f = b0 + kk * LDB + owned(j, tn, RTSN);
            b[j] = Bs[f >> 2][f & 3];
        }
        [[unroll]] for (int i = 0; i < WPTM; i++) {
            const int f = a0 + kk * LDA + owned(i, tm, RTSM);
            const float a = As[f >> 2][f & 3];
            [[unroll]] for (int j = 0; j < WPTN; j++)
                acc[i * WPTN + j] += a * b[j];
        }
    }
}

// Per slice: stage it (PREFETCH = 0) or store the registers fetched during the previous
// slice (PREFETCH = 1), barrier, fetch the next slice's registers, multiply; with one tile
// per operand a second barrier guards it against the next slice's stores (DBUF = 0).
void main()
{
    const int tn = int(gl_LocalInvocationID.x), tm = int(gl_LocalInvocationID.y);
    const int tid = tm * RTSN + tn;
    const int n0 = int(gl_WorkGroupID.x) * TSN, m0 = int(gl_WorkGroupID.y) * TSM;
    const bool rows_in = m0 + TSM <= M, cols_in = n0 + TSN <= N;
    const bool va = TA != 0 ? M % 4 == 0 : K % 4 == 0;   // vec4 loads stay aligned
    const bool vb = TB != 0 ? K % 4 == 0 : N % 4 == 0;
    [[unroll]] for (int i = 0; i < WPTM * WPTN; i++)
        acc[i] = 0.0;
    if (PREFETCH != 0) {
        const bool kin = TSK <= K;
        fetch_slice(0, m0, n0, tid, rows_in && kin, cols_in && kin, rows_in && kin && va,
                    cols_in && kin && vb);
    }
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += TSK) {
        if (PREFETCH != 0) {
            store_slice(tid, buf);
        } else {
            const bool kin = k0 + TSK <= K;
            stage_slice(k0, m0, n0, tid, buf, rows_in && kin, cols_in && kin,
                        rows_in && kin && va, cols_in && kin && vb);
        }
        barrier();
        const int k1 = k0 + TSK;
        if (PREFETCH != 0 && k1 < K) {
            const bool kin = k1 + TSK <= K;
            fetch_slice(k1, m0, n0, tid, rows_in && kin, cols_in && kin, rows_in && kin && va,
                        cols_in && kin && vb);
        }
        multiply_slice(tm, tn, buf);
        if (DBUF != 0)
            buf ^= 1;
        else
            barrier();
    }
    // unrolled, no early exit: acc stays in registers (a dynamic index would put it in memory)
    if (VW == 4 && N % 4 == 0) {   // an owned vector of 4 outputs is one aligned vec4 of C
        [[unroll]] for (int i = 0; i < WPTM; i++) {
            const int m = m0 + owned(i, tm, RTSM);
            [[unroll]] for (int q = 0; q < WPTN / 4; q++) {
                const int n = n0 + (q * RTSN + tn) * 4;
                if (m < M && n < N) {
                    const int at = i * WPTN + q * 4, idx = (m * N + n) >> 2;
                    const vec4 r = alpha * vec4(acc[at], acc[at + 1], acc[at + 2], acc[at + 3]);
                    C4[idx] = beta == 0.0 ? r : r + beta * C4[idx];
                }
            }
        }
        return;
    }
    [[unroll]] for (int i = 0; i < WPTM; i++) {
        const int m = m0 + owned(i, tm, RTSM);
        [[unroll]] for (int j = 0; j < WPTN; j++) {
            const int n = n0 + owned(j, tn, RTSN);
            if (m < M && n < N) {
                const int idx = m * N + n;
                C[idx] = beta == 0.0 ? alpha * acc[i * WPTN + j]
                                     : alpha * acc[i * WPTN + j] + beta * C[idx];
            }
        }
    }
}
