"""The CPU backend's kernels (src/runner/cpu_*.c) called directly through ctypes: the
argument checks (count, kinds, sizes against numel) and their messages, plus a GEMM check at
thread counts 1 and 2. Full numerical coverage of every kernel runs through the runner in
tests/kernels/test_kernels.py."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers.kernel_cases import Case, group_cases
from helpers.kernel_cases_bn import ORACLE_BN
from phonetrain.devices.toolchains import cpu_backend_sources


class RtArg(ctypes.Structure):
    """Mirror of ``rt_arg`` in src/runner/cpu_kernels.h."""
    _fields_ = [("kind", ctypes.c_char), ("i", ctypes.c_int), ("f", ctypes.c_float),
                ("p", ctypes.c_void_p), ("numel", ctypes.c_long)]


def build_lib(out_dir: Path, defines: tuple[str, ...] = ()) -> ctypes.CDLL:
    """The CPU backend (src/runner/cpu_*.c: the dispatch of cpu_kernels.c and every kernel
    file) built as a shared library with the runner's flags (runner.BASE_FLAGS)."""
    so = out_dir / "libcpu_kernels.so"
    subprocess.run(["cc", "-std=c11", "-O3", "-fopenmp", "-fPIC", "-shared", "-Wall", "-Wextra",
                    "-Werror", *defines, *map(str, cpu_backend_sources()), "-o", str(so),
                    "-lm"], check=True)
    lib = ctypes.CDLL(str(so))
    lib.cpu_kernel_run.argtypes = [ctypes.c_char_p, ctypes.POINTER(RtArg), ctypes.c_int,
                                   ctypes.c_char_p, ctypes.c_int]
    lib.cpu_kernel_known.argtypes = [ctypes.c_char_p]
    return lib


@pytest.fixture(scope="module")
def cpu_lib(tmp_path_factory) -> ctypes.CDLL:
    return build_lib(tmp_path_factory.mktemp("cpu_kernels"))


def call(lib, name: str, args: list, numel: dict | None = None) -> tuple[int, str]:
    """Run kernel ``name``; args are ints, floats or numpy arrays (numel from the array unless
    ``numel`` maps the arg index to a smaller claimed size). Returns (rc, error text)."""
    arr = (RtArg * max(len(args), 1))()
    for k, a in enumerate(args):
        if isinstance(a, np.ndarray):
            n = (numel or {}).get(k, a.size)
            arr[k] = RtArg(b"t", 0, 0.0, a.ctypes.data, n)
        elif isinstance(a, float):
            arr[k] = RtArg(b"f", 0, a, None, 0)
        else:
            arr[k] = RtArg(b"i", a, 0.0, None, 0)
    err = ctypes.create_string_buffer(512)
    rc = lib.cpu_kernel_run(name.encode(), arr, len(args), err, 512)
    return rc, err.value.decode()


def run_case(lib, case: Case) -> dict[str, np.ndarray]:
    arrays = {k: v.copy() for k, v in case.arrays.items()}
    rc, err = call(lib, case.kernel, [arrays[a] if isinstance(a, str) else a for a in case.args])
    assert rc == 0, err
    return arrays


@pytest.mark.parametrize("group,threads", [("gemm", 1), ("gemm", 2), ("elementwise", 2),
                                           ("conv", 2), ("pool", 2), ("loss", 2),
                                           ("fused", 1), ("fused", 2)])
def test_cpu_kernels_match_numpy(cpu_lib, group, threads):
    ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
    for case in group_cases(group):
        got = run_case(cpu_lib, case)
        for out in case.outputs:
            if case.exact:
                np.testing.assert_array_equal(got[out], case.expected[out], err_msg=case.label)
            else:
                np.testing.assert_allclose(got[out], case.expected[out], rtol=case.rtol,
                                           atol=case.atol, err_msg=case.label)


@pytest.mark.parametrize("x86_max", [0, 1], ids=["generic", "avx2"])
def test_narrower_gemm_micro_kernels_match_numpy(tmp_path, x86_max):
    """The x86 GEMM micro-kernels the dispatcher skips on a wider CPU (GEMM_X86_MAX caps it;
    on a CPU without AVX2 both builds run the generic one)."""
    lib = build_lib(tmp_path, (f"-DGEMM_X86_MAX={x86_max}",))
    for case in group_cases("gemm"):
        got = run_case(lib, case)
        np.testing.assert_allclose(got["C"], case.expected["C"], rtol=case.rtol,
                                   atol=case.atol, err_msg=case.label)


F32 = np.zeros(64, np.float32)
ERRORS = [
    ("gemm_nn", [2, 2, 2, 1.0, F32[:3], F32, 0.0, F32],
     "gemm_nn: argument 4 (A) has 3 elements but M*K = 4 are needed"),
    ("gemm_tn", [2, 2, 2, 1.0, F32, F32, 0.0], "gemm_tn: 7 arguments given, 8 expected"),
    ("gemm_nt", [2, 2, 2, 1, F32, F32, 0.0, F32],
     "gemm_nt: argument 3 (alpha) has kind 'i'; expected 'f'"),
    ("relu_fwd", [0, F32, F32], "relu_fwd: argument 0 (n) is 0; it must be >= 1"),
    ("im2col", [1, 1, 5, 5, 3, 3, 1, 0, 4, 3, F32, F32],
     "im2col: argument 8 (OH) is 4; (H + 2*pad - KH)/stride + 1 = 3"),
    ("col2im", [1, 1, 5, 5, 3, 3, 1, 1, 5, 5, F32, F32[:20]],
     "col2im: argument 11 (dX) has 20 elements but B*C*H*W = 25 are needed"),
    ("maxpool_fwd", [1, 1, 5, 5, 2, 2, 3, 2, F32, F32, F32],
     "maxpool_fwd: argument 6 (OH) is 3; (H - K)/stride + 1 = 2"),
    ("softmax_xent", [2, 3, F32, np.array([0, 3], np.int32), F32, F32],
     "softmax_xent: argument 3 (labels) holds label 3 at row 1"),
    ("sgd_update", [65, 0.1, 0.9, 0.0, F32, F32, F32],
     "sgd_update: argument 4 (W) has 64 elements but n = 65 are needed"),
    ("linear_fwd", [2, 2, 2, 2, F32, F32, F32, F32],
     "linear_fwd: argument 3 (act) is 2; it must be 0 or 1"),
    ("conv_sgd", [1, 1, 5, 5, 1, 3, 3, 1, 0, 4, 3, 0.1, 0.9, 0.0, F32, F32, F32, F32, F32, F32],
     "conv_sgd: argument 9 (OH) is 4; (H + 2*pad - KH)/stride + 1 = 3"),
    ("softmax_xent_bwd", [2, 3, 4, 1, F32, np.array([0, 3], np.int32), F32, F32, F32, F32, F32],
     "softmax_xent_bwd: argument 5 (labels) holds label 3 at row 1"),
    ("linear_sgd", [4, 4, 4, 0.1, 0.9, 0.0, F32, F32, F32, F32[:15], F32, F32],
     "linear_sgd: argument 9 (V) has 15 elements but O*I = 16 are needed"),
    ("conv_wgrad_partial", [1, 1, 5, 5, 1, 3, 3, 1, 0, 3, 3, 0, F32, F32, F32],
     "conv_wgrad_partial: argument 11 (S) is 0; it must be >= 1"),
    ("conv_sgd_finish", [1, 2, 2, 2, 4, 0.1, 0.9, 0.0, F32[:39], F32, F32, F32, F32],
     "conv_sgd_finish: argument 8 (part) has 39 elements but S*OC*(C*KH*KW+1) = 40 are "
     "needed"),
    # fused batch-norm kernels (cpu_fused_bn.c)
    ("gconv_sgd", [1, 4, 3, 3, 6, 1, 1, 1, 0, 3, 3, 4, 0.1, 0.9, 0.0, F32, F32, F32, F32],
     "gconv_sgd: argument 11 (groups) is 4; it must divide C = 4 and OC = 6"),
    ("gconv_bwd_data", [1, 2, 3, 3, 2, 3, 3, 1, 1, 3, 3, 2, 3, 0, F32, F32, F32, F32, F32],
     "gconv_bwd_data: argument 12 (act) is 3; it must be 0 (none), 1 (ReLU) or 2 (ReLU6)"),
    ("gconv_stats_fwd", [1, 1, 4, 4, 2, 1, 1, 1, 0, 4, 4, 1, 5, F32, F32, F32, F32[:15]],
     "gconv_stats_fwd: argument 16 (part) has 15 elements but OC*ceil(B*OH*OW/tile)*2 = 16 "
     "are needed"),
    ("bn_act_fwd", [2, 2, 8, 8, 2, 1, 1e-5, 0.1, F32, F32, F32, F32, F32[:31], F32, F32, F32,
                    F32, F32],
     "bn_act_fwd: argument 12 (R) has 31 elements but B*C*HW = 32 are needed"),
    ("bn_bwd_sgd", [2, 2, 4, 0, 0.1, 0.9, 0.0, F32, F32, F32, F32, F32, F32, F32, F32, F32,
                    F32[:15]],
     "bn_bwd_sgd: argument 16 (dX) has 15 elements but B*C*HW = 16 are needed"),
    ("adam_update", [4, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, np.zeros(1, np.float32), F32, F32, F32,
                     F32], "adam_update: argument 7 (step) holds step count 0; adam_step must "
                           "run before adam_update"),
    ("adam_update", [4, 1e-3, 0.9, 1.0, 1e-8, 0.0, 1, np.ones(1, np.float32), F32, F32, F32,
                     F32], "adam_update: argument 3 (beta2) is 1; a moment decay rate is in"),
    ("adam_update", [65, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0, np.ones(1, np.float32), F32, F32, F32,
                     F32], "adam_update: argument 8 (W) has 64 elements but n = 65"),
    ("adam_step", [F32[:0]], "adam_step: argument 0 (step) has 0 elements; the step count needs 1"),
]


@pytest.mark.parametrize("name,args,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_arguments_are_named(cpu_lib, name, args, message):
    rc, err = call(cpu_lib, name, args)
    assert rc == -1
    assert err.startswith(message), err


def test_unknown_kernel_name_is_refused_and_not_known(cpu_lib):
    assert call(cpu_lib, "gemm_xx", [])[0] == -2
    assert cpu_lib.cpu_kernel_known(b"col2im") == 1
    assert cpu_lib.cpu_kernel_known(b"conv_sgd") == 1   # a fused kernel (cpu_fused.c)
    assert cpu_lib.cpu_kernel_known(b"gconv_sgd") == 1  # a fused batch-norm kernel (cpu_fused_bn.c)
    assert cpu_lib.cpu_kernel_known(b"gemm_xx") == 0


@pytest.mark.parametrize("kernel,M,N,K", [("gemm_nt", 6, 25, 3001), ("gemm_nt", 16, 150, 3200),
                                          ("gemm_nt", 7, 50, 333), ("gemm_nt", 32, 256, 784),
                                          ("gemm_nn", 200, 70, 300), ("gemm_tn", 150, 513, 16),
                                          ("gemm_tn", 256, 784, 32), ("gemm_tn", 7, 3200, 5)])
def test_gemm_is_bitwise_the_same_at_1_2_and_3_threads(cpu_lib, kernel, M, N, K):
    """The summation order of every C element depends on the shape only (K chunks are fixed
    by GEMM_KSPLIT, never by the thread count)."""
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, M * K).astype(np.float32)
    B = rng.uniform(-1, 1, K * N).astype(np.float32)
    outs = []
    for threads in (1, 2, 3):
        ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
        C = np.full(M * N, np.nan, np.float32)
        rc, err = call(cpu_lib, kernel, [M, N, K, 1.0, A, B, 0.0, C])
        assert rc == 0, err
        outs.append(C)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


# ---- convolution helpers and the long-K gemm_nt per ISA clone and thread count -------------

# (B, C, H, W, KH, KW, stride, pad): "same" taps at stride 1 (3x3 pad 1, 5x5 pad 2, 1x1; a flat
# copy / add over the shifted plane with the edge columns fixed up), widths that are not a
# multiple of a vector (13, 17, 28 floats), stride 2, no padding, a non-square kernel, and a
# tall plane whose 5x5 taps have more edge elements than col2im saves at once (600 rows x 2
# columns > COL2IM_SAVED_MAX = 1024: the row-by-row path).
CONV_GEOMETRIES = [(2, 3, 13, 13, 3, 3, 1, 1), (3, 2, 28, 28, 3, 3, 1, 1),
                   (2, 2, 17, 17, 5, 5, 1, 2), (2, 5, 7, 7, 1, 1, 1, 0),
                   (2, 3, 13, 17, 3, 3, 2, 1), (2, 2, 14, 14, 5, 5, 1, 0),
                   (1, 2, 9, 11, 3, 2, 1, 1), (1, 1, 600, 8, 5, 5, 1, 2)]


def conv_geometry_id(g) -> str:
    B, C, H, W, KH, KW, stride, pad = g
    return f"{B}x{C}x{H}x{W}_k{KH}x{KW}_s{stride}_p{pad}"


def col2im_float32(B, C, H, W, KH, KW, stride, pad, OH, OW, col) -> np.ndarray:
    """col2im in float32 with every element summed from 0 in (kh, kw) order, the kernel's
    order (src/kernels/README.md): the CPU backend must match it bit for bit."""
    c6 = col.reshape(C, KH, KW, B, OH, OW)
    dxp = np.zeros((B, C, H + 2 * pad, W + 2 * pad), np.float32)
    for kh in range(KH):
        for kw in range(KW):
            dxp[:, :, kh:kh + stride * (OH - 1) + 1:stride,
                kw:kw + stride * (OW - 1) + 1:stride] += c6[:, kh, kw].transpose(1, 0, 2, 3)
    return dxp[:, :, pad:pad + H, pad:pad + W].ravel()


@pytest.fixture(scope="module")
def isa_libs(tmp_path_factory) -> dict:
    """The library with the x86 clones capped at generic (0), AVX2 (1) and AVX-512 (2), for
    the element-wise helpers (CPU_X86_MAX) and the GEMM kernels (GEMM_X86_MAX) alike; on a
    CPU without a level, its build runs the next narrower clone."""
    return {level: build_lib(tmp_path_factory.mktemp(f"isa{level}"),
                             (f"-DCPU_X86_MAX={level}", f"-DGEMM_X86_MAX={level}"))
            for level in (0, 1, 2)}


@pytest.mark.parametrize("geometry", CONV_GEOMETRIES, ids=conv_geometry_id)
def test_im2col_col2im_exact_at_every_clone_and_thread_count(isa_libs, geometry):
    from helpers.kernel_cases import numpy_kernel
    B, C, H, W, KH, KW, stride, pad = geometry
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    dims = [B, C, H, W, KH, KW, stride, pad, OH, OW]
    rng = np.random.default_rng(7)
    X = rng.uniform(-1, 1, B * C * H * W).astype(np.float32)
    ncol = C * KH * KW * B * OH * OW
    dcol = rng.uniform(-1, 1, ncol).astype(np.float32)
    want_col = np.full(ncol, np.nan, np.float32)
    numpy_kernel("im2col", dims + [X, want_col])
    want_dx = col2im_float32(*dims, dcol)
    for level, lib in isa_libs.items():
        for threads in (1, 2, 3):
            ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
            col = np.full(ncol, np.nan, np.float32)
            rc, err = call(lib, "im2col", dims + [X, col])
            assert rc == 0, err
            np.testing.assert_array_equal(col, want_col, err_msg=f"im2col clone {level}, "
                                                                  f"{threads} threads")
            dx = np.full(B * C * H * W, np.nan, np.float32)
            rc, err = call(lib, "col2im", dims + [dcol, dx])
            assert rc == 0, err
            np.testing.assert_array_equal(dx, want_dx, err_msg=f"col2im clone {level}, "
                                                               f"{threads} threads")


@pytest.mark.parametrize("M,N,K", [(8, 72, 25088), (7, 23, 2100), (16, 150, 3217),
                                   (3, 5, 2049)])
def test_long_k_gemm_nt_same_bits_at_avx2_avx512_and_1_to_3_threads(isa_libs, M, N, K):
    """gemm_nt's dot products for small C and long K (a conv's weight gradient) are register
    blocked 4 x 1 (AVX2) and 4 x 4 (AVX-512) with 16 lane sums each: the blocking must not
    change any element's order, so the two FMA clones agree bit for bit; row and column counts
    past a multiple of 4 and a K tail past a multiple of 16 included."""
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, M * K).astype(np.float32)
    B = rng.uniform(-1, 1, N * K).astype(np.float32)
    want = A.reshape(M, K).astype(np.float64) @ B.reshape(N, K).astype(np.float64).T
    got = {}
    for level in (1, 2):
        for threads in (1, 2, 3):
            ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
            C = np.full(M * N, np.nan, np.float32)
            rc, err = call(isa_libs[level], "gemm_nt", [M, N, K, 1.0, A, B, 0.0, C])
            assert rc == 0, err
            np.testing.assert_allclose(C.reshape(M, N), want, rtol=1e-4, atol=1e-6 * K)
            got[level, threads] = C
    for key, C in got.items():
        np.testing.assert_array_equal(C, got[1, 1], err_msg=f"clone, threads = {key}")


# gemm_nt shapes of the register-tiled dot-product path (cpu_gemm_shapes.c, gemm_ntd: K in
# [128, 2048), M*K <= 65536; taken where the CPU has AVX-512, else the blocked engine runs
# them): the MLP's fc1 forward, rows of A and of B past a multiple of the 4 x 6 tile, K past a
# multiple of the 16 lanes (the zero-padded tail step), a single row and column, the largest A.
NTD_SHAPES = [(32, 256, 784), (7, 13, 200), (5, 6, 128), (1, 1, 130), (33, 25, 1000),
              (4, 7, 2047), (256, 5, 256)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, -1.5)])
@pytest.mark.parametrize("M,N,K", NTD_SHAPES)
def test_gemm_nt_dot_tiles_match_numpy(cpu_lib, M, N, K, alpha, beta, threads):
    """C = alpha * A @ B^T + beta * C against float64; beta == 0 must not read C (NaN)."""
    ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (N, K)).astype(np.float32)
    C0 = (rng.uniform(-1, 1, (M, N)) if beta else np.full((M, N), np.nan)).astype(np.float32)
    C = C0.copy()
    rc, err = call(cpu_lib, "gemm_nt", [M, N, K, alpha, A.ravel(), B.ravel(), beta, C.ravel()])
    assert rc == 0, err
    want = alpha * (A.astype(np.float64) @ B.astype(np.float64).T)
    if beta:
        want += beta * C0.astype(np.float64)
    np.testing.assert_allclose(C, want, rtol=0, atol=2e-6 * K)


# gemm_tn shapes of the short-K path (cpu_gemm_shapes.c, gemm_tns: K <= 64, A and B read in place;
# taken where the CPU has AVX-512, else the blocked engine runs them): the MLP's fc1 and fc2
# weight gradients (256 x 784 = 4 rows x 10 blocks of 5 vectors, the last of 4; 128 x 256 = 4
# blocks of 4 vectors), rows past a multiple of 4, columns past a multiple of 16 (the padded
# edge tile), a single row and column, K = 1 and K = 64, a B wider than one L2 panel.
TNS_SHAPES = [(256, 784, 32), (128, 256, 32), (7, 13, 3), (1, 1, 1), (5, 100, 64),
              (150, 3200, 16), (72, 2500, 8), (33, 17, 32)]


def gemm_tn_case(M, N, K, beta):
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    A = rng.uniform(-1, 1, (K, M)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    C0 = (rng.uniform(-1, 1, (M, N)) if beta else np.full((M, N), np.nan)).astype(np.float32)
    return A, B, C0


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, -1.5), (-2.0, 0.0)])
@pytest.mark.parametrize("M,N,K", TNS_SHAPES)
def test_gemm_tn_short_k_tiles_match_numpy(cpu_lib, M, N, K, alpha, beta, threads):
    """C = alpha * A^T @ B + beta * C against float64; beta == 0 must not read C (NaN)."""
    ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
    A, B, C0 = gemm_tn_case(M, N, K, beta)
    C = C0.copy()
    rc, err = call(cpu_lib, "gemm_tn", [M, N, K, alpha, A.ravel(), B.ravel(), beta, C.ravel()])
    assert rc == 0, err
    want = alpha * (A.astype(np.float64).T @ B.astype(np.float64))
    if beta:
        want += beta * C0.astype(np.float64)
    np.testing.assert_allclose(C, want, rtol=0, atol=4e-7 * K * abs(alpha) + 1e-6)


def test_gemm_tn_short_k_path_is_bitwise_the_blocked_engine(cpu_lib, tmp_path):
    """The short-K path sums each element in the engine's order (a zero sum, then one
    multiply-add per k in k order, then alpha * sum + beta * C): a build without the path
    (GEMM_TNS_MAX_K=0) gives the same bits, at 1 and 3 threads."""
    engine = build_lib(tmp_path, ("-DGEMM_TNS_MAX_K=0",))
    for M, N, K in TNS_SHAPES:
        for alpha, beta in [(1.0, 0.0), (0.5, -1.5)]:
            A, B, C0 = gemm_tn_case(M, N, K, beta)
            outs = []
            for lib, threads in [(cpu_lib, 1), (cpu_lib, 3), (engine, 1)]:
                ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
                C = C0.copy()
                rc, err = call(lib, "gemm_tn", [M, N, K, alpha, A.ravel(), B.ravel(), beta,
                                                C.ravel()])
                assert rc == 0, err
                outs.append(C)
            np.testing.assert_array_equal(outs[0], outs[1], err_msg=f"{M}x{N}x{K}")
            np.testing.assert_array_equal(outs[0], outs[2], err_msg=f"{M}x{N}x{K}")


@pytest.mark.parametrize("x86_max", [None, 0, 1], ids=["widest", "generic", "avx2"])
def test_sgd_update_is_numpys_float32_step_at_every_clone_and_thread_count(tmp_path, x86_max):
    """sgd_update's x86 clones (AVX-512, AVX2, SSE2; CPU_X86_MAX caps the pick) all compute
    g = dW + wd*W, V = momentum*V + g, W -= lr*V with separate float32 multiplies and adds:
    numpy's float32 result bit for bit, at 1, 2 and 3 threads (n above PAR_MIN, and a tail
    past a multiple of 16)."""
    lib = build_lib(tmp_path, () if x86_max is None else (f"-DCPU_X86_MAX={x86_max}",))
    rng = np.random.default_rng(7)
    n = 40_003
    W0 = rng.uniform(-1, 1, n).astype(np.float32)
    dW = rng.uniform(-1, 1, n).astype(np.float32)
    V0 = rng.uniform(-1, 1, n).astype(np.float32)
    for lr, momentum, wd in [(0.05, 0.0, 0.0), (0.1, 0.9, 5e-4)]:
        lr32, m32, wd32 = np.float32(lr), np.float32(momentum), np.float32(wd)
        v = m32 * V0 + (dW + wd32 * W0)
        want_W, want_V = W0 - lr32 * v, v
        for threads in (1, 2, 3):
            ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
            W, V = W0.copy(), V0.copy()
            rc, err = call(lib, "sgd_update", [n, lr, momentum, wd, W, dW, V])
            assert rc == 0, err
            np.testing.assert_array_equal(V, want_V)
            np.testing.assert_array_equal(W, want_W)


@pytest.mark.parametrize("B,C", [(32, 256), (64, 300), (3, 17)])
def test_linear_bias_kernels_are_exact_at_1_2_and_3_threads(cpu_lib, B, C):
    """HW = 1 (a linear layer): bias_add adds the bias row to every row; bias_grad sums each
    channel image by image from 0 (the float32 order the row-at-a-time loop keeps), the same
    bits at every thread count (64 x 300 is above PAR_MIN, so it runs on threads)."""
    rng = np.random.default_rng(B + C)
    dY = rng.uniform(-1, 1, (B, C)).astype(np.float32)
    bias = rng.uniform(-1, 1, C).astype(np.float32)
    want_db = np.zeros(C, np.float32)
    for b in range(B):
        want_db = want_db + dY[b]
    for threads in (1, 2, 3):
        ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
        db = np.full(C, np.nan, np.float32)
        rc, err = call(cpu_lib, "bias_grad", [B, C, 1, dY.ravel(), db])
        assert rc == 0, err
        np.testing.assert_array_equal(db, want_db)
        Y = dY.copy()
        rc, err = call(cpu_lib, "bias_add", [B, C, 1, Y.ravel(), bias])
        assert rc == 0, err
        np.testing.assert_array_equal(Y, dY + bias[None, :])


def uniform32(rng: np.random.Generator, n: int) -> np.ndarray:
    """n float32 values uniform in [-1, 1)."""
    return rng.uniform(-1, 1, n).astype(np.float32)


# (B, O, I): the MLP's layers, edges of the 4-row and 16-lane tiles, a batch past the short-K
# tiles (GEMM_TNS_MAX_K = 64: the gradient through scratch), the ntd path's K >= 128
LINEAR_SHAPES = [(32, 256, 784), (32, 16, 128), (3, 17, 31), (1, 1, 1), (70, 9, 40),
                 (64, 300, 130)]


def baseline_linear(lib, B, O, I, X, W, bias, dY, Xr, lr, momentum, wd, W0, V0, b0, Vb0):
    """The baseline kernels' sequence for one linear layer: the forward (gemm_nt, bias_add,
    relu_fwd), the input gradient (gemm_nn, relu_bwd on Xr) and the update (gemm_tn,
    bias_grad, two sgd_update)."""
    Y = np.empty(B * O, np.float32)
    dX = np.empty(B * I, np.float32)
    dW, db = np.empty(O * I, np.float32), np.empty(O, np.float32)
    W1, V1, b1, Vb1 = W0.copy(), V0.copy(), b0.copy(), Vb0.copy()
    for name, args in [("gemm_nt", [B, O, I, 1.0, X, W, 0.0, Y]),
                       ("bias_add", [B, O, 1, Y, bias]), ("relu_fwd", [B * O, Y, Y]),
                       ("gemm_nn", [B, I, O, 1.0, dY, W, 0.0, dX]),
                       ("relu_bwd", [B * I, Xr, dX, dX]),
                       ("gemm_tn", [O, I, B, 1.0, dY, X, 0.0, dW]),
                       ("bias_grad", [B, O, 1, dY, db]),
                       ("sgd_update", [O * I, lr, momentum, wd, W1, dW, V1]),
                       ("sgd_update", [O, lr, momentum, wd, b1, db, Vb1])]:
        rc, err = call(lib, name, args)
        assert rc == 0, err
    return Y, dX, W1, V1, b1, Vb1


@pytest.mark.parametrize("B,O,I", LINEAR_SHAPES)
def test_fused_linear_kernels_are_the_baseline_sequence_bit_for_bit(isa_libs, B, O, I):
    """linear_fwd, linear_bwd_data and linear_sgd run the GEMM engine and then their
    epilogues (linear_sgd's SGD step inside the short-K tiles, or through a scratch gradient
    past them): the same bits as the baseline kernels one after another, at every x86 clone
    and at 1, 2 and 3 threads."""
    rng = np.random.default_rng(B * 10007 + O * 101 + I)
    X, W, bias, dY = (uniform32(rng, n) for n in (B * I, O * I, O, B * O))
    Xr = np.maximum(uniform32(rng, B * I), 0)   # a ReLU output, half 0
    V0, Vb0 = uniform32(rng, O * I), uniform32(rng, O)
    for level, lib in isa_libs.items():
        for lr, momentum, wd in [(0.05, 0.0, 0.0), (0.1, 0.9, 5e-4)]:
            ctypes.CDLL("libgomp.so.1").omp_set_num_threads(1)
            want = baseline_linear(lib, B, O, I, X, W, bias, dY, Xr, lr, momentum, wd, W, V0,
                                   bias, Vb0)
            for threads in (1, 2, 3):
                ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
                Y, dX = np.full(B * O, np.nan, np.float32), np.full(B * I, np.nan, np.float32)
                W1, V1, b1, Vb1 = W.copy(), V0.copy(), bias.copy(), Vb0.copy()
                for name, args in [("linear_fwd", [B, O, I, 1, X, W, bias, Y]),
                                   ("linear_bwd_data", [B, O, I, 1, dY, W, Xr, dX]),
                                   ("linear_sgd", [B, O, I, lr, momentum, wd, X, dY, W1, V1, b1,
                                                   Vb1])]:
                    rc, err = call(lib, name, args)
                    assert rc == 0, err
                for got, exp, what in zip((Y, dX, W1, V1, b1, Vb1), want,
                                          ("Y", "dX", "W", "V", "bias", "Vb")):
                    np.testing.assert_array_equal(
                        got, exp, err_msg=f"{what}: clone {level}, threads {threads}, m {momentum}")


@pytest.mark.parametrize("geometry", [(13, 1, 28, 28, 6, 5, 5, 1, 2),
                                      (7, 6, 14, 14, 16, 5, 5, 1, 0),
                                      (3, 8, 15, 15, 8, 3, 3, 2, 1)],
                         ids=lambda g: "x".join(map(str, g)))
def test_fused_convolutions_are_the_same_bits_at_1_2_and_3_threads(cpu_lib, geometry):
    """conv_fwd and conv_bwd_data (image by image on the threads) and conv_sgd (chunks of
    images in order, each product on all threads) sum in an order fixed by the shape: the
    same bits at every thread count. The batch of 13 at 28 x 28 gives conv_sgd three chunks
    (6, 6, 1: CONV_CHUNK_FLOATS / (25 * 784)); the batch of 7 at 14 x 14 gives conv_fwd and
    conv_bwd_data a partial last chunk (6, 1)."""
    B, C, H, W, OC, KH, KW, s, pad = geometry
    OH, OW = (H + 2 * pad - KH) // s + 1, (W + 2 * pad - KW) // s + 1
    dims = [B, C, H, W, OC, KH, KW, s, pad, OH, OW]
    rng = np.random.default_rng(sum(geometry))
    X, Xr = uniform32(rng, B * C * H * W), np.maximum(uniform32(rng, B * C * H * W), 0)
    Wt, bias, dY = (uniform32(rng, n) for n in (OC * C * KH * KW, OC, B * OC * OH * OW))
    V0, Vb0 = uniform32(rng, OC * C * KH * KW), uniform32(rng, OC)
    outs = []
    for threads in (1, 2, 3):
        ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
        Y, dX = np.full(B * OC * OH * OW, np.nan, np.float32), np.full(X.size, np.nan, np.float32)
        W1, V1, b1, Vb1 = Wt.copy(), V0.copy(), bias.copy(), Vb0.copy()
        for name, args in [("conv_fwd", [*dims, 1, X, Wt, bias, Y]),
                           ("conv_bwd_data", [*dims, 1, dY, Wt, Xr, dX]),
                           ("conv_sgd", [*dims, 0.05, 0.9, 5e-4, X, dY, W1, V1, b1, Vb1])]:
            rc, err = call(cpu_lib, name, args)
            assert rc == 0, err
        outs.append((Y, dX, W1, V1, b1, Vb1))
    assert np.isfinite(outs[0][0]).all() and np.isfinite(outs[0][1]).all()
    for got in outs[1:]:
        for a, b, what in zip(outs[0], got, ("Y", "dX", "W", "V", "bias", "Vb")):
            np.testing.assert_array_equal(a, b, err_msg=what)


# (B, C, H, W, OC, K, stride, pad, groups), one per engine of cpu_fused_bn.c's grouped
# convolutions: a 1x1 expand (GEMM, the image its own columns, one image per product); the
# stem, 3x3/2 (GEMM on im2col columns: 196 outputs per image, so chunks of 3, 3 and 1
# images); a depthwise 3x3/2 (the depthwise kernels); 2 groups (the loops).
GCONV_ENGINES = [(13, 8, 14, 14, 32, 1, 1, 0, 1), (7, 1, 28, 28, 8, 3, 2, 1, 1),
                 (5, 32, 14, 14, 32, 3, 2, 1, 32), (3, 4, 6, 5, 6, 3, 1, 1, 2)]


@pytest.mark.parametrize("geometry", GCONV_ENGINES, ids=lambda g: "x".join(map(str, g)))
def test_fused_bn_kernels_are_the_same_bits_at_1_2_and_3_threads(cpu_lib, geometry):
    """gconv_stats_fwd, gconv_bwd_data (ReLU6 mask and residual) and gconv_sgd on each engine,
    and bn_bwd_sgd, sum in an order fixed by the shape: the same bits at every thread count;
    the convolution (Z) is the float64 one to rounding."""
    B, C, H, W, OC, K, s, pad, G = geometry
    OH, OW = (H + 2 * pad - K) // s + 1, (W + 2 * pad - K) // s + 1
    dims, tile = [B, C, H, W, OC, K, K, s, pad, OH, OW, G], 100
    nx, ny, nw, T = B * C * H * W, B * OC * OH * OW, OC * C // G * K * K, -(-B * OH * OW // 100)
    rng = np.random.default_rng(sum(geometry))
    X, Wt, dY, R, V0 = (uniform32(rng, n) for n in (nx, nw, ny, nx, nw))
    Xa = np.clip(uniform32(rng, nx) * 4 + 3, 0, 6)   # a ReLU6 output: clipped at 0 and 6
    Ya = np.clip(uniform32(rng, ny) * 4 + 3, 0, 6)
    ones = np.ones(OC, np.float32)
    outs = []
    for threads in (1, 2, 3):
        ctypes.CDLL("libgomp.so.1").omp_set_num_threads(threads)
        Z, part = np.full(ny, np.nan, np.float32), np.full(OC * T * 2, np.nan, np.float32)
        dX, dZ = np.full(nx, np.nan, np.float32), np.full(ny, np.nan, np.float32)
        W1, V1, gamma, beta, Vg, Vb = Wt.copy(), V0.copy(), *(ones.copy() for _ in range(4))
        for name, args in [
                ("gconv_stats_fwd", [*dims, tile, X, Wt, Z, part]),
                ("gconv_bwd_data", [*dims, 2, 1, dY, Wt, Xa, R, dX]),
                ("gconv_sgd", [*dims, 0.05, 0.9, 5e-4, X, dY, W1, V1]),
                ("bn_bwd_sgd", [B, OC, OH * OW, 2, 0.05, 0.9, 5e-4, dY, Ya, Z,
                                np.zeros(OC, np.float32), ones, gamma, beta, Vg, Vb, dZ])]:
            rc, err = call(cpu_lib, name, args)
            assert rc == 0, err
        outs.append((Z, part, dX, W1, V1, gamma, beta, dZ))
    assert all(np.isfinite(a).all() for a in outs[0])
    for got in outs[1:]:
        for a, b, what in zip(outs[0], got, ("Z", "part", "dX", "W", "V", "gamma", "beta",
                                             "dZ")):
            np.testing.assert_array_equal(a, b, err_msg=what)
    want = np.zeros(ny)
    ORACLE_BN["gconv_stats_fwd"](*dims, tile, X.astype(np.float64), Wt.astype(np.float64), want,
                                 np.zeros(OC * T * 2))
    np.testing.assert_allclose(outs[0][0], want, rtol=1e-4, atol=1e-6 * (C // G * K * K))
