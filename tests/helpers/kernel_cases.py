"""Kernel-ABI test cases and an independent numpy oracle (src/kernels/README.md).

A :class:`Case` is one kernel launch on random data: its positional arguments (ints, floats
and names of the case's arrays), the arrays, and which of them the kernel writes. The oracle
:func:`numpy_kernel` computes the expected result with plain numpy (float64 accumulation),
written from the README's formulas and independent of ``phonetrain.reference``.

Cases come in groups (:data:`GROUPS`) so a test runs a whole group as one plan: one runner
invocation per backend x group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Sizes that are 1, odd, a power of two, one past it, prime, and the MLP's 784.
# The CPU backend's paths: K split into 1024-long chunks for a small C and K >= 2048 (gemm_nt
# as dot products: 6x25x3001 is LeNet conv1's weight-gradient shape with a shorter K; rows
# past a multiple of 4), more than one GEMM_MC (192) row block, a column range past GEMM_NC.
GEMM_SHAPES = [(1, 1, 1), (3, 17, 31), (16, 16, 16), (17, 3, 784), (31, 784, 3),
               (32, 16, 128), (200, 70, 300), (3, 2100, 5), (6, 25, 3001), (1, 9, 2049),
               (197, 5, 33), (2, 4099, 3)]
# (alpha, beta): plain product, scaled accumulate, accumulate.
GEMM_SCALARS = [(1.0, 0.0), (0.5, -1.5), (2.0, 1.0)]


@dataclass
class Case:
    """One launch: ``args`` are ints, floats, or names of ``arrays``; ``outputs`` are the
    arrays the kernel writes (compared after the run); ``exact`` demands bitwise equality."""

    kernel: str
    args: list
    arrays: dict[str, np.ndarray]
    outputs: tuple[str, ...]
    exact: bool = False
    label: str = ""
    atol: float = 1e-5
    rtol: float = 1e-4
    expected: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        arrays = {k: v.copy() for k, v in self.arrays.items()}
        numpy_kernel(self.kernel, [arrays[a] if isinstance(a, str) else a for a in self.args])
        self.expected = {k: arrays[k] for k in self.outputs}


def _rand(rng: np.random.Generator, *shape: int, low: float = -1.0, high: float = 1.0):
    return rng.uniform(low, high, size=shape).astype(np.float32)


# ----------------------------------------------------------------------------- oracle

def numpy_kernel(name: str, a: list) -> None:
    """Run ABI kernel ``name`` on positional args ``a`` (ints, floats, flat numpy arrays),
    writing outputs in place. Raises ``KeyError`` for a name outside the ABI."""
    ORACLE[name](*a)


def _gemm(ta: bool, tb: bool):
    def run(M, N, K, alpha, A, B, beta, C):
        a = A[:M * K].reshape((K, M) if ta else (M, K)).astype(np.float64)
        b = B[:K * N].reshape((N, K) if tb else (K, N)).astype(np.float64)
        prod = alpha * ((a.T if ta else a) @ (b.T if tb else b))
        c = C[:M * N].reshape(M, N)
        c[...] = prod if beta == 0 else prod + beta * c.astype(np.float64)
    return run


def _bias_add(B, C, HW, Y, bias):
    Y[:B * C * HW].reshape(B, C, HW)[...] += bias[:C][None, :, None]


def _bias_grad(B, C, HW, dY, db):
    db[:C] = dY[:B * C * HW].reshape(B, C, HW).astype(np.float64).sum(axis=(0, 2))


def _relu_fwd(n, X, Y):
    Y[:n] = np.maximum(X[:n], 0)


def _relu_bwd(n, Y, dY, dX):
    dX[:n] = np.where(Y[:n] > 0, dY[:n], 0)


def _windows(X, B, C, H, W, KH, KW, stride, pad, OH, OW):
    """Yields (kh, kw, view of padded X [B, C, OH, OW]) for every kernel offset."""
    xp = np.zeros((B, C, H + 2 * pad, W + 2 * pad), X.dtype)
    xp[:, :, pad:pad + H, pad:pad + W] = X[:B * C * H * W].reshape(B, C, H, W)
    for kh in range(KH):
        for kw in range(KW):
            yield kh, kw, xp[:, :, kh:kh + stride * (OH - 1) + 1:stride,
                             kw:kw + stride * (OW - 1) + 1:stride]


def _im2col(B, C, H, W, KH, KW, stride, pad, OH, OW, X, col):
    c6 = col[:C * KH * KW * B * OH * OW].reshape(C, KH, KW, B, OH, OW)
    for kh, kw, win in _windows(X, B, C, H, W, KH, KW, stride, pad, OH, OW):
        c6[:, kh, kw] = win.transpose(1, 0, 2, 3)


def _col2im(B, C, H, W, KH, KW, stride, pad, OH, OW, col, dX):
    c6 = col[:C * KH * KW * B * OH * OW].reshape(C, KH, KW, B, OH, OW).astype(np.float64)
    dxp = np.zeros((B, C, H + 2 * pad, W + 2 * pad))
    for kh in range(KH):
        for kw in range(KW):
            dxp[:, :, kh:kh + stride * (OH - 1) + 1:stride,
                kw:kw + stride * (OW - 1) + 1:stride] += c6[:, kh, kw].transpose(1, 0, 2, 3)
    dX[:B * C * H * W] = dxp[:, :, pad:pad + H, pad:pad + W].ravel()


def _conv2d_fwd(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, X, Wt, Y):
    w = Wt[:OC * C * KH * KW].reshape(OC, C, KH, KW).astype(np.float64)
    y = np.zeros((B, OC, OH, OW))
    for kh, kw, win in _windows(X, B, C, H, W, KH, KW, stride, pad, OH, OW):
        y += np.einsum("oc,bcij->boij", w[:, :, kh, kw], win.astype(np.float64))
    Y[:y.size] = y.reshape(-1)


def _swap01(D0, D1, D2, X, Y):
    Y[:D0 * D1 * D2] = X[:D0 * D1 * D2].reshape(D0, D1, D2).transpose(1, 0, 2).ravel()


def _maxpool_fwd(B, C, H, W, K, stride, OH, OW, X, Y, argmax):
    wins = [w for _, _, w in _windows(X, B, C, H, W, K, K, stride, 0, OH, OW)]
    stack = np.stack(wins, axis=-1)                      # [B, C, OH, OW, K*K], kh-major
    first = stack.argmax(axis=-1)                         # first maximum in scan order
    oh = np.arange(OH)[:, None] * stride
    ow = np.arange(OW)[None, :] * stride
    Y[:B * C * OH * OW] = stack.max(axis=-1).ravel()
    argmax[:B * C * OH * OW] = ((oh + first // K) * W + ow + first % K).ravel()


def _maxpool_bwd(B, C, H, W, K, stride, OH, OW, dY, argmax, dX):
    dx = np.zeros((B * C, H * W))
    rows = np.repeat(np.arange(B * C), OH * OW)
    np.add.at(dx, (rows, argmax[:B * C * OH * OW]), dY[:B * C * OH * OW])
    dX[:B * C * H * W] = dx.ravel()


def _softmax_xent(B, C, logits, labels, dlogits, row_loss):
    x = logits[:B * C].reshape(B, C).astype(np.float64)
    z = x - x.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    lab = labels[:B]
    row_loss[:B] = -logp[np.arange(B), lab]
    onehot = np.zeros((B, C))
    onehot[np.arange(B), lab] = 1
    dlogits[:B * C] = ((np.exp(logp) - onehot) / B).ravel()


def _mean(n, X, out):
    out[0] = X[:n].astype(np.float64).mean()


def _sgd_update(n, lr, momentum, weight_decay, W, dW, V):
    w, g = W[:n].astype(np.float64), dW[:n].astype(np.float64) + weight_decay * W[:n]
    v = momentum * V[:n].astype(np.float64) + g
    V[:n] = v
    W[:n] = w - lr * v


def _fill(n, value, X):
    X[:n] = value


def _copy(n, X, Y):
    Y[:n] = X[:n]


ORACLE = {
    "gemm_nn": _gemm(False, False), "gemm_nt": _gemm(False, True),
    "gemm_tn": _gemm(True, False), "bias_add": _bias_add, "bias_grad": _bias_grad,
    "relu_fwd": _relu_fwd, "relu_bwd": _relu_bwd, "im2col": _im2col, "col2im": _col2im,
    "swap01": _swap01, "conv2d_fwd": _conv2d_fwd, "maxpool_fwd": _maxpool_fwd,
    "maxpool_bwd": _maxpool_bwd,
    "softmax_xent": _softmax_xent, "mean": _mean, "sgd_update": _sgd_update,
    "fill": _fill, "copy": _copy,
}


# ----------------------------------------------------------------------------- cases

def gemm_cases(rng: np.random.Generator) -> list[Case]:
    """Every transpose x :data:`GEMM_SHAPES`, cycling through :data:`GEMM_SCALARS`."""
    out = []
    for t, kernel in enumerate(("gemm_nn", "gemm_nt", "gemm_tn")):
        for s, (M, N, K) in enumerate(GEMM_SHAPES):
            alpha, beta = GEMM_SCALARS[(s + t) % len(GEMM_SCALARS)]
            C = _rand(rng, M * N) if beta != 0 else np.full(M * N, np.nan, np.float32)
            out.append(Case(kernel, [M, N, K, alpha, "A", "B", beta, "C"],
                            {"A": _rand(rng, M * K), "B": _rand(rng, K * N), "C": C},
                            ("C",), label=f"{kernel} {M}x{N}x{K} a={alpha} b={beta}",
                            atol=1e-6 * K + 1e-5))
    return out


def elementwise_cases(rng: np.random.Generator) -> list[Case]:
    """bias add/grad (linear and conv layouts), ReLU, SGD, fill, copy at odd sizes."""
    out = []
    for B, C, HW in [(1, 1, 1), (32, 16, 1), (3, 17, 31), (2, 6, 784)]:
        n = B * C * HW
        out.append(Case("bias_add", [B, C, HW, "Y", "bias"],
                        {"Y": _rand(rng, n), "bias": _rand(rng, C)}, ("Y",),
                        label=f"bias_add {B}x{C}x{HW}"))
        out.append(Case("bias_grad", [B, C, HW, "dY", "db"],
                        {"dY": _rand(rng, n), "db": np.full(C, np.nan, np.float32)}, ("db",),
                        label=f"bias_grad {B}x{C}x{HW}", atol=1e-6 * B * HW + 1e-5))
    for n in (1, 17, 784, 100003):
        x = _rand(rng, n)
        x[::7] = 0.0  # ReLU's edge: exactly zero is "not > 0"
        out.append(Case("relu_fwd", [n, "X", "Y"], {"X": x, "Y": np.zeros(n, np.float32)},
                        ("Y",), exact=True, label=f"relu_fwd {n}"))
        out.append(Case("relu_bwd", [n, "Y", "dY", "dX"],
                        {"Y": np.maximum(x, 0), "dY": _rand(rng, n),
                         "dX": np.full(n, np.nan, np.float32)},
                        ("dX",), exact=True, label=f"relu_bwd {n}"))
        out.append(Case("fill", [n, 0.25, "X"], {"X": _rand(rng, n)}, ("X",), exact=True,
                        label=f"fill {n}"))
        out.append(Case("copy", [n, "X", "Y"], {"X": x, "Y": np.zeros(n, np.float32)},
                        ("Y",), exact=True, label=f"copy {n}"))
    for n, lr, momentum, wd in [(1, 0.1, 0.0, 0.0), (31, 0.05, 0.9, 1e-4),
                                (100003, 0.01, 0.5, 5e-4)]:
        out.append(Case("sgd_update", [n, lr, momentum, wd, "W", "dW", "V"],
                        {"W": _rand(rng, n), "dW": _rand(rng, n), "V": _rand(rng, n)},
                        ("W", "V"), label=f"sgd_update {n} m={momentum}", atol=1e-6))
    return out


def conv_cases(rng: np.random.Generator) -> list[Case]:
    """im2col / col2im with stride and padding (LeNet's 5x5 included), the direct conv2d_fwd
    and swap01."""
    out = []
    for B, C, H, W, KH, KW, stride, pad in [(1, 1, 1, 1, 1, 1, 1, 0), (2, 3, 7, 5, 3, 3, 1, 1),
                                            (3, 2, 9, 8, 3, 2, 2, 1), (2, 1, 28, 28, 5, 5, 1, 2),
                                            (1, 4, 17, 16, 4, 4, 3, 0)]:
        OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
        dims = [B, C, H, W, KH, KW, stride, pad, OH, OW]
        ncol = C * KH * KW * B * OH * OW
        tag = f"{B}x{C}x{H}x{W} k{KH}x{KW} s{stride} p{pad}"
        out.append(Case("im2col", dims + ["X", "col"],
                        {"X": _rand(rng, B * C * H * W), "col": np.full(ncol, np.nan, np.float32)},
                        ("col",), exact=True, label=f"im2col {tag}"))
        out.append(Case("col2im", dims + ["col", "dX"],
                        {"col": _rand(rng, ncol), "dX": np.full(B * C * H * W, np.nan, np.float32)},
                        ("dX",), label=f"col2im {tag}"))
    # Direct convolution: LeNet's conv1 (pad 2) and conv2 at batch 2, odd sizes with stride 2
    # and 3, non-square kernels, a kernel as large as the padded image, one pixel.
    for B, C, H, W, OC, KH, KW, stride, pad in [
            (2, 1, 28, 28, 6, 5, 5, 1, 2), (2, 6, 14, 14, 16, 5, 5, 1, 0),
            (3, 2, 9, 8, 5, 3, 2, 2, 1), (1, 3, 17, 16, 7, 4, 4, 3, 0),
            (2, 4, 5, 7, 3, 7, 9, 1, 1), (1, 1, 1, 1, 1, 1, 1, 1, 0)]:
        OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
        out.append(Case("conv2d_fwd", [B, C, H, W, OC, KH, KW, stride, pad, OH, OW, "X", "Wt",
                                       "Y"],
                        {"X": _rand(rng, B * C * H * W), "Wt": _rand(rng, OC * C * KH * KW),
                         "Y": np.full(B * OC * OH * OW, np.nan, np.float32)}, ("Y",),
                        label=f"conv2d_fwd {B}x{C}x{H}x{W} oc{OC} k{KH}x{KW} s{stride} p{pad}",
                        atol=1e-6 * C * KH * KW + 1e-5))
    for D0, D1, D2 in [(1, 1, 1), (6, 3, 784), (17, 5, 1), (2, 31, 16)]:
        n = D0 * D1 * D2
        out.append(Case("swap01", [D0, D1, D2, "X", "Y"],
                        {"X": _rand(rng, n), "Y": np.zeros(n, np.float32)}, ("Y",), exact=True,
                        label=f"swap01 {D0}x{D1}x{D2}"))
    return out


def pool_cases(rng: np.random.Generator) -> list[Case]:
    """Max pooling: LeNet's 2x2/2, overlapping 3x3/2, odd image sizes, one-pixel images."""
    out = []
    for B, C, H, W, K, stride, ties in [(1, 1, 1, 1, 1, 1, False), (2, 6, 28, 28, 2, 2, False),
                                        (3, 2, 7, 9, 3, 2, False), (1, 3, 17, 16, 3, 1, False),
                                        (2, 2, 9, 8, 3, 2, True)]:
        OH, OW = (H - K) // stride + 1, (W - K) // stride + 1
        dims = [B, C, H, W, K, stride, OH, OW]
        ny, nx = B * C * OH * OW, B * C * H * W
        tag = f"{B}x{C}x{H}x{W} k{K} s{stride}" + (" ties" if ties else "")
        # ties: values in {0, 1, 2}, so windows hold equal maxima and argmax must be the first
        x = rng.integers(0, 3, nx).astype(np.float32) if ties else _rand(rng, nx)
        fwd = Case("maxpool_fwd", dims + ["X", "Y", "argmax"],
                   {"X": x, "Y": np.zeros(ny, np.float32), "argmax": np.full(ny, -1, np.int32)},
                   ("Y", "argmax"), exact=True, label=f"maxpool_fwd {tag}")
        out.append(fwd)
        out.append(Case("maxpool_bwd", dims + ["dY", "argmax", "dX"],
                        {"dY": _rand(rng, ny), "argmax": fwd.expected["argmax"],
                         "dX": np.full(nx, np.nan, np.float32)},
                        ("dX",), label=f"maxpool_bwd {tag}"))
    return out


def loss_cases(rng: np.random.Generator) -> list[Case]:
    """Fused softmax + cross-entropy (large logits test the max subtraction) and mean."""
    out = []
    for B, C, scale in [(1, 1, 1.0), (32, 16, 3.0), (3, 17, 60.0), (17, 784, 1.0)]:
        labels = rng.integers(0, C, size=B).astype(np.int32)
        out.append(Case("softmax_xent", [B, C, "logits", "labels", "dlogits", "row_loss"],
                        {"logits": _rand(rng, B * C, low=-scale, high=scale), "labels": labels,
                         "dlogits": np.full(B * C, np.nan, np.float32),
                         "row_loss": np.full(B, np.nan, np.float32)},
                        ("dlogits", "row_loss"), label=f"softmax_xent {B}x{C} x{scale}",
                        atol=1e-5))
    for n in (1, 17, 784):
        out.append(Case("mean", [n, "X", "out"],
                        {"X": _rand(rng, n), "out": np.full(1, np.nan, np.float32)}, ("out",),
                        label=f"mean {n}", atol=1e-6))
    return out


GROUPS = {"gemm": gemm_cases, "elementwise": elementwise_cases, "conv": conv_cases,
          "pool": pool_cases, "loss": loss_cases}


def group_cases(group: str, seed: int = 0) -> list[Case]:
    """The cases of one group on data from ``seed`` (deterministic)."""
    return GROUPS[group](np.random.default_rng(seed))
