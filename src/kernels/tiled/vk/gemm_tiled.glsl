// tiled (Vulkan): GEMM with shared-memory tiling and a 2-D register block per invocation, the
// GLSL twin of ../gemm.cl (its PREFETCH = 0, DBUF = 0, VW = 1 variant).
//
// A work-group computes a TSM x TSN tile of C. Per step of TSK along K it stages a TSM x TSK
// tile of op(A) and a TSK x TSN tile of op(B) in shared memory (zero outside the matrices),
// then each invocation accumulates WPTM x WPTN outputs spaced RTSM / RTSN apart (strided
// ownership: neighbouring invocations touch neighbouring addresses, which coalesces on GPUs).
// Technique after Nugteren's "Tutorial: OpenCL SGEMM tuning for Kepler" (kernels 2-6,
// cnugteren.github.io/tutorial) and CLBlast's xgemm; each output sums over k in ascending
// order, as baseline/vk/gemm_*.comp and ../gemm.cl do.
//
// Launch geometry (rule "tiled" of phonetrain.kernels.launch): work-group size (specialization
// constants 0, 1) = [TSN/WPTN, TSM/WPTM], work-groups = [ceil(N/TSN), ceil(M/TSM)].
// Tuning parameters: specialization constants (vk_abi.glsl's PT_SPEC_* ids), the defaults below
// = ../version.yaml's defines; the runner sets them from the program's -DNAME=VALUE options,
// as the OpenCL build's -D overrides gemm.cl's #ifndef defaults. TSM, TSN (tile of C), TSK
// (K depth of a staged slice), WPTM, WPTN (outputs per invocation, dividing TSM, TSN), PAD
// (extra words per shared-memory row: spreads the transposing stores of op(A) over banks).
// Candidates for per-device tuning: tuning.yaml beside this file.
// Included by gemm_nn.comp, gemm_nt.comp, gemm_tn.comp, which define TA and TB (0 or 1:
// op(A) = A^T, op(B) = B^T). Kernel ABI: src/kernels/README.md.
#include "vk_abi.glsl"

layout(constant_id = PT_SPEC_TSM) const int TSM = 64;
layout(constant_id = PT_SPEC_TSN) const int TSN = 64;
layout(constant_id = PT_SPEC_TSK) const int TSK = 8;
layout(constant_id = PT_SPEC_WPTM) const int WPTM = 8;
layout(constant_id = PT_SPEC_WPTN) const int WPTN = 4;
layout(constant_id = PT_SPEC_PAD) const int PAD = 1;

const int RTSM = TSM / WPTM;     // work-group size along M (dimension 1)
const int RTSN = TSN / WPTN;     // work-group size along N (dimension 0)
const int NTHREADS = RTSM * RTSN;
const int LDA = TSM + PAD;       // shared-memory row lengths
const int LDB = TSN + PAD;

shared float As[TSK * LDA];      // As[kk * LDA + mm] = op(A)(m0 + mm, k0 + kk)
shared float Bs[TSK * LDB];      // Bs[kk * LDB + nn] = op(B)(k0 + kk, n0 + nn)

// op(A)(m, k) and op(B)(k, n), zero outside the matrices.
float load_a(int m, int k)
{
    if (m >= M || k >= K) return 0.0;
    return TA != 0 ? A[k * M + m] : A[m * K + k];
}

float load_b(int k, int n)
{
    if (k >= K || n >= N) return 0.0;
    return TB != 0 ? B[n * K + k] : B[k * N + n];
}

// Slice k0 of op(A) and op(B) into shared memory; the cooperative loads' fastest-varying
// index follows the operand's memory order.
void stage_slice(int k0, int m0, int n0, int tid)
{
    for (int i = tid; i < TSM * TSK; i += NTHREADS) {
        const int mm = TA != 0 ? i % TSM : i / TSK, kk = TA != 0 ? i / TSM : i % TSK;
        As[kk * LDA + mm] = load_a(m0 + mm, k0 + kk);
    }
    for (int i = tid; i < TSK * TSN; i += NTHREADS) {
        const int nn = TB != 0 ? i / TSK : i % TSN, kk = TB != 0 ? i % TSK : i / TSN;
        Bs[kk * LDB + nn] = load_b(k0 + kk, n0 + nn);
    }
}

void main()
{
    const int tn = int(gl_LocalInvocationID.x), tm = int(gl_LocalInvocationID.y);
    const int tid = tm * RTSN + tn;
    const int n0 = int(gl_WorkGroupID.x) * TSN, m0 = int(gl_WorkGroupID.y) * TSM;
    float acc[WPTM * WPTN];
    for (int i = 0; i < WPTM * WPTN; i++)
        acc[i] = 0.0;
    float b[WPTN];
    for (int k0 = 0; k0 < K; k0 += TSK) {
        stage_slice(k0, m0, n0, tid);
        barrier();
        for (int kk = 0; kk < TSK; kk++) {
            for (int j = 0; j < WPTN; j++)
                b[j] = Bs[kk * LDB + j * RTSN + tn];
            for (int i = 0; i < WPTM; i++) {
                const float a = As[kk * LDA + i * RTSM + tm];
                for (int j = 0; j < WPTN; j++)
                    acc[i * WPTN + j] += a * b[j];
            }
        }
        barrier();
    }
    for (int i = 0; i < WPTM; i++) {
        const int m = m0 + i * RTSM + tm;
        if (m >= M) break;
        for (int j = 0; j < WPTN; j++) {
            const int n = n0 + j * RTSN + tn;
            if (n < N) {
                const int idx = m * N + n;
                C[idx] = beta == 0.0 ? alpha * acc[i * WPTN + j]
                                     : alpha * acc[i * WPTN + j] + beta * C[idx];
            }
        }
    }
}
