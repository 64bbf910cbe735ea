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


# ---- fused kernels: written from the README's formulas (direct loops over the windows),
# not as the unfused sequence phonetrain.reference.fused replays.

def _conv_patches(X, B, C, H, W, KH, KW, stride, pad, OH, OW):
    """[B, OH, OW, C, KH, KW] float64 patches of X (0 outside the image)."""
    out = np.zeros((B, OH, OW, C, KH, KW))
    for kh, kw, win in _windows(X.astype(np.float64), B, C, H, W, KH, KW, stride, pad, OH, OW):
        out[..., kh, kw] = win.transpose(0, 2, 3, 1)
    return out


def _linear_fwd(B, O, I, act, X, W, bias, Y):
    y = X[:B * I].reshape(B, I).astype(np.float64) @ W[:O * I].reshape(O, I).T.astype(
        np.float64) + bias[:O]
    Y[:B * O] = (np.maximum(y, 0) if act else y).ravel()


def _conv_fwd(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, act, X, weight, bias, Y):
    pt = _conv_patches(X, B, C, H, W, KH, KW, stride, pad, OH, OW)
    y = np.einsum("bhwckl,ockl->bohw", pt, weight[:OC * C * KH * KW].reshape(OC, C, KH, KW)
                  .astype(np.float64)) + bias[:OC][None, :, None, None]
    Y[:B * OC * OH * OW] = (np.maximum(y, 0) if act else y).ravel()


def _linear_bwd_data(B, O, I, relu, dY, W, X, dX):
    dx = dY[:B * O].reshape(B, O).astype(np.float64) @ W[:O * I].reshape(O, I)
    dX[:B * I] = np.where((X[:B * I].reshape(B, I) > 0) | (not relu), dx, 0).ravel()


def _conv_bwd_data(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, relu, dY, weight, X, dX):
    dy = dY[:B * OC * OH * OW].reshape(B, OC, OH, OW).astype(np.float64)
    w = weight[:OC * C * KH * KW].reshape(OC, C, KH, KW).astype(np.float64)
    dxp = np.zeros((B, C, H + 2 * pad, W + 2 * pad))
    for kh in range(KH):
        for kw in range(KW):
            dxp[:, :, kh:kh + stride * (OH - 1) + 1:stride,
                kw:kw + stride * (OW - 1) + 1:stride] += np.einsum("bohw,oc->bchw", dy,
                                                                    w[:, :, kh, kw])
    dx = dxp[:, :, pad:pad + H, pad:pad + W].ravel()
    dX[:B * C * H * W] = np.where((X[:B * C * H * W] > 0) | (not relu), dx, 0)


def _maxpool_bwd_relu(B, C, H, W, K, stride, OH, OW, dY, argmax, X, dX):
    _maxpool_bwd(B, C, H, W, K, stride, OH, OW, dY, argmax, dX)
    dX[:B * C * H * W] = np.where(X[:B * C * H * W] > 0, dX[:B * C * H * W], 0)


def _softmax_xent_bwd(B, C, I, relu, logits, labels, W, X, dlogits, dX, loss):
    rows = np.zeros(B)
    _softmax_xent(B, C, logits, labels, dlogits, rows)
    loss[0] = rows.mean()
    _linear_bwd_data(B, C, I, relu, dlogits, W, X, dX)


def _sgd64(P, V, g, lr, momentum, weight_decay):
    n = g.size
    v = momentum * V[:n].astype(np.float64) + g + weight_decay * P[:n].astype(np.float64)
    V[:n] = v
    P[:n] = P[:n].astype(np.float64) - lr * v


def _linear_sgd(B, O, I, lr, momentum, weight_decay, X, dY, W, V, bias, Vb):
    dy = dY[:B * O].reshape(B, O).astype(np.float64)
    _sgd64(W, V, (dy.T @ X[:B * I].reshape(B, I)).ravel(), lr, momentum, weight_decay)
    _sgd64(bias, Vb, dy.sum(axis=0), lr, momentum, weight_decay)


def _conv_sgd(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, lr, momentum, weight_decay, X, dY,
              weight, V, bias, Vb):
    pt = _conv_patches(X, B, C, H, W, KH, KW, stride, pad, OH, OW)
    dy = dY[:B * OC * OH * OW].reshape(B, OC, OH, OW).astype(np.float64)
    _sgd64(weight, V, np.einsum("bohw,bhwckl->ockl", dy, pt).ravel(), lr, momentum,
           weight_decay)
    _sgd64(bias, Vb, dy.sum(axis=(0, 2, 3)), lr, momentum, weight_decay)


def _splitk_bounds(n, S):
    """The README's split-K chunks: [s*Kc, min((s+1)*Kc, n)), Kc = ceil(n/S)."""
    kc = -(-n // S)
    return [(min(n, s * kc), min(n, s * kc + kc)) for s in range(S)]


def _conv_wgrad_partial(B, C, H, W, OC, KH, KW, stride, pad, OH, OW, S, X, dY, part):
    n, ckk = B * OH * OW, C * KH * KW
    pt = _conv_patches(X, B, C, H, W, KH, KW, stride, pad, OH, OW).reshape(n, ckk)
    dy = dY[:B * OC * OH * OW].reshape(B, OC, OH * OW).transpose(1, 0, 2).reshape(OC, n)
    dy = dy.astype(np.float64)
    p = part[:S * OC * (ckk + 1)].reshape(S, OC, ckk + 1)
    for s, (i0, i1) in enumerate(_splitk_bounds(n, S)):
        p[s, :, :ckk] = dy[:, i0:i1] @ pt[i0:i1]
        p[s, :, ckk] = dy[:, i0:i1].sum(axis=1)


def _conv_sgd_finish(C, OC, KH, KW, S, lr, momentum, weight_decay, part, weight, V, bias, Vb):
    ckk = C * KH * KW
    g = part[:S * OC * (ckk + 1)].reshape(S, OC, ckk + 1).astype(np.float64).sum(axis=0)
    _sgd64(weight, V, g[:, :ckk].ravel(), lr, momentum, weight_decay)
    _sgd64(bias, Vb, g[:, ckk], lr, momentum, weight_decay)


ORACLE = {
    "conv_wgrad_partial": _conv_wgrad_partial, "conv_sgd_finish": _conv_sgd_finish,
    "linear_fwd": _linear_fwd, "conv_fwd": _conv_fwd, "linear_bwd_data": _linear_bwd_data,
    "conv_bwd_data": _conv_bwd_data, "maxpool_bwd_relu": _maxpool_bwd_relu,
    "softmax_xent_bwd": _softmax_xent_bwd, "linear_sgd": _linear_sgd, "conv_sgd": _conv_sgd,
    "gemm_nn": _gemm(False, False), "gemm_nt": _gemm(False, True),
    "gemm_tn": _gemm(True, False), "bias_add": _bias_add, "bias_grad": _bias_grad,
    "relu_fwd": _relu_fwd, "relu_bwd": _relu_bwd, "im2col": _im2col, "col2im": _col2im,
    "swap01": _swap01, "conv2d_fwd": _conv2d_fwd, "maxpool_fwd": _maxpool_fwd,
    "maxpool_bwd": _maxpool_bwd,
    "softmax_xent": _softmax_xent, "mean": _mean, "sgd_update": _sgd_update,
    "fill": _fill, "copy": _copy,
}


# ---- mobile CNN operators (README "Mobile CNN operators"), float64, written from the formulas

def _dw_taps(B, C, H, W, stride, pad, OH, OW):
    """Yields (kh, kw, oh index array, ow index array, valid mask [OH, OW]) per 3x3 tap."""
    oh = np.arange(OH)[:, None] * stride - pad
    ow = np.arange(OW)[None, :] * stride - pad
    for kh in range(3):
        for kw in range(3):
            h, w = oh + kh, ow + kw
            yield kh, kw, h, w, (h >= 0) & (h < H) & (w >= 0) & (w < W)


def _dwconv3x3_fwd(B, C, H, W, stride, pad, OH, OW, X, Wt, Y):
    x = X[:B * C * H * W].reshape(B, C, H, W).astype(np.float64)
    wt = Wt[:C * 9].reshape(C, 3, 3).astype(np.float64)
    y = np.zeros((B, C, OH, OW))
    for kh, kw, h, w, ok in _dw_taps(B, C, H, W, stride, pad, OH, OW):
        vals = np.where(ok, x[:, :, np.clip(h, 0, H - 1), np.clip(w, 0, W - 1)], 0.0)
        y += wt[None, :, kh, kw, None, None] * vals
    Y[:B * C * OH * OW] = y.ravel()


def _dwconv3x3_bwd_data(B, C, H, W, stride, pad, OH, OW, dY, Wt, dX):
    dy = dY[:B * C * OH * OW].reshape(B, C, OH, OW).astype(np.float64)
    wt = Wt[:C * 9].reshape(C, 3, 3).astype(np.float64)
    dx = np.zeros((B, C, H, W))
    for kh, kw, h, w, ok in _dw_taps(B, C, H, W, stride, pad, OH, OW):
        for i, j in zip(*np.nonzero(ok)):
            dx[:, :, h[i, 0], w[0, j]] += wt[:, kh, kw] * dy[:, :, i, j]
    dX[:B * C * H * W] = dx.ravel()


def _dwconv3x3_bwd_weight(B, C, H, W, stride, pad, OH, OW, X, dY, dWt):
    x = X[:B * C * H * W].reshape(B, C, H, W).astype(np.float64)
    dy = dY[:B * C * OH * OW].reshape(B, C, OH, OW).astype(np.float64)
    dw = np.zeros((C, 3, 3))
    for kh, kw, h, w, ok in _dw_taps(B, C, H, W, stride, pad, OH, OW):
        vals = np.where(ok, x[:, :, np.clip(h, 0, H - 1), np.clip(w, 0, W - 1)], 0.0)
        dw[:, kh, kw] = (vals * dy).sum(axis=(0, 2, 3))
    dWt[:C * 9] = dw.ravel()


def _bn_x(B, C, HW, X):
    return X[:B * C * HW].reshape(B, C, HW).astype(np.float64)


def _batchnorm_stats(B, C, HW, eps, momentum, X, mean, invstd, running_mean, running_var):
    x = _bn_x(B, C, HW, X)
    mu, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    n = B * HW
    mean[:C] = mu
    invstd[:C] = 1.0 / np.sqrt(var + eps)
    running_mean[:C] = (1 - momentum) * running_mean[:C] + momentum * mu
    running_var[:C] = (1 - momentum) * running_var[:C] + momentum * (
        var * n / (n - 1) if n > 1 else var)


def _batchnorm_apply(B, C, HW, X, mean, invstd, gamma, beta, Y):
    x = _bn_x(B, C, HW, X)
    c = lambda a: a[:C].astype(np.float64)[None, :, None]  # noqa: E731
    Y[:B * C * HW] = ((x - c(mean)) * c(invstd) * c(gamma) + c(beta)).ravel()


def _batchnorm_bwd_reduce(B, C, HW, X, dY, mean, invstd, dgamma, dbeta):
    x, dy = _bn_x(B, C, HW, X), _bn_x(B, C, HW, dY)
    xhat = (x - mean[:C].astype(np.float64)[None, :, None]) * invstd[:C][None, :, None]
    dbeta[:C] = dy.sum(axis=(0, 2))
    dgamma[:C] = (dy * xhat).sum(axis=(0, 2))


def _batchnorm_bwd_data(B, C, HW, X, dY, mean, invstd, gamma, dgamma, dbeta, dX):
    x, dy = _bn_x(B, C, HW, X), _bn_x(B, C, HW, dY)
    c = lambda a: a[:C].astype(np.float64)[None, :, None]  # noqa: E731
    xhat = (x - c(mean)) * c(invstd)
    n = B * HW
    dX[:B * C * HW] = (c(gamma) * c(invstd) / n * (n * dy - c(dbeta) - xhat * c(dgamma))).ravel()


def _relu6_fwd(n, X, Y):
    Y[:n] = np.clip(X[:n], 0, 6)


def _relu6_bwd(n, Y, dY, dX):
    dX[:n] = np.where((Y[:n] > 0) & (Y[:n] < 6), dY[:n], 0)


def _add(n, A, B, Y):
    Y[:n] = A[:n] + B[:n]


def _gap_fwd(B, C, HW, X, Y):
    Y[:B * C] = X[:B * C * HW].reshape(B * C, HW).astype(np.float64).mean(axis=1)


def _gap_bwd(B, C, HW, dY, dX):
    dX[:B * C * HW] = np.repeat(dY[:B * C].astype(np.float64) / HW, HW)


ORACLE.update({
    "dwconv3x3_fwd": _dwconv3x3_fwd, "dwconv3x3_bwd_data": _dwconv3x3_bwd_data,
    "dwconv3x3_bwd_weight": _dwconv3x3_bwd_weight, "batchnorm_stats": _batchnorm_stats,
    "batchnorm_apply": _batchnorm_apply, "batchnorm_bwd_reduce": _batchnorm_bwd_reduce,
    "batchnorm_bwd_data": _batchnorm_bwd_data, "relu6_fwd": _relu6_fwd,
    "relu6_bwd": _relu6_bwd, "add": _add, "gap_fwd": _gap_fwd, "gap_bwd": _gap_bwd,
})


# ----------------------------------------------------------------------------- cases

def gemm_cases(rng: np.random.Generator, shapes: list[tuple[int, int, int]] = GEMM_SHAPES
               ) -> list[Case]:
    """Every transpose x ``shapes`` (M, N, K; default :data:`GEMM_SHAPES`), cycling through
    :data:`GEMM_SCALARS`."""
    out = []
    for t, kernel in enumerate(("gemm_nn", "gemm_nt", "gemm_tn")):
        for s, (M, N, K) in enumerate(shapes):
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


def mobile_cases(rng: np.random.Generator) -> list[Case]:
    """Depthwise 3x3 (stride 1 and 2, pad 1 and 0, odd and one-pixel images), batch norm
    (training mode; n = B*HW = 1 included), ReLU6 (with its edges 0 and 6 exactly), add,
    global average pooling, at odd sizes."""
    out = []
    for B, C, H, W, stride, pad in [(1, 1, 1, 1, 1, 1), (2, 3, 7, 5, 1, 1), (3, 2, 9, 8, 2, 1),
                                    (1, 5, 6, 7, 2, 1), (2, 4, 5, 3, 1, 0), (1, 17, 14, 14, 2, 1)]:
        OH, OW = (H + 2 * pad - 3) // stride + 1, (W + 2 * pad - 3) // stride + 1
        dims = [B, C, H, W, stride, pad, OH, OW]
        nx, ny = B * C * H * W, B * C * OH * OW
        tag = f"{B}x{C}x{H}x{W} s{stride} p{pad}"
        out.append(Case("dwconv3x3_fwd", dims + ["X", "Wt", "Y"],
                        {"X": _rand(rng, nx), "Wt": _rand(rng, C * 9),
                         "Y": np.full(ny, np.nan, np.float32)}, ("Y",),
                        label=f"dwconv3x3_fwd {tag}"))
        out.append(Case("dwconv3x3_bwd_data", dims + ["dY", "Wt", "dX"],
                        {"dY": _rand(rng, ny), "Wt": _rand(rng, C * 9),
                         "dX": np.full(nx, np.nan, np.float32)}, ("dX",),
                        label=f"dwconv3x3_bwd_data {tag}"))
        out.append(Case("dwconv3x3_bwd_weight", dims + ["X", "dY", "dWt"],
                        {"X": _rand(rng, nx), "dY": _rand(rng, ny),
                         "dWt": np.full(C * 9, np.nan, np.float32)}, ("dWt",),
                        label=f"dwconv3x3_bwd_weight {tag}", atol=1e-6 * B * OH * OW + 1e-5))
    for B, C, HW in [(1, 1, 1), (3, 5, 7), (32, 8, 49), (2, 17, 1)]:
        n = B * C * HW
        tag = f"{B}x{C}x{HW}"
        x = _rand(rng, n, low=-2.0, high=3.0)
        stats = Case("batchnorm_stats", [B, C, HW, 1e-5, 0.1, "X", "mean", "invstd", "rm", "rv"],
                     {"X": x, "mean": np.full(C, np.nan, np.float32),
                      "invstd": np.full(C, np.nan, np.float32), "rm": _rand(rng, C),
                      "rv": _rand(rng, C, low=0.5, high=2.0)},
                     ("mean", "invstd", "rm", "rv"), label=f"batchnorm_stats {tag}",
                     rtol=1e-3 if B * HW == 1 else 1e-4)
        out.append(stats)
        mean, invstd = stats.expected["mean"], stats.expected["invstd"]
        gamma, beta, dy = _rand(rng, C, low=0.5, high=1.5), _rand(rng, C), _rand(rng, n)
        out.append(Case("batchnorm_apply", [B, C, HW, "X", "mean", "invstd", "gamma", "beta", "Y"],
                        {"X": x, "mean": mean, "invstd": invstd, "gamma": gamma, "beta": beta,
                         "Y": np.full(n, np.nan, np.float32)}, ("Y",),
                        label=f"batchnorm_apply {tag}", atol=1e-3 if B * HW == 1 else 1e-5))
        red = Case("batchnorm_bwd_reduce", [B, C, HW, "X", "dY", "mean", "invstd", "dg", "db"],
                   {"X": x, "dY": dy, "mean": mean, "invstd": invstd,
                    "dg": np.full(C, np.nan, np.float32), "db": np.full(C, np.nan, np.float32)},
                   ("dg", "db"), label=f"batchnorm_bwd_reduce {tag}",
                   atol=1e-5 * B * HW + 1e-3 * (B * HW == 1))
        out.append(red)
        if B * HW > 1:   # with n = 1, xhat is 0/0-like (rounding of x - mean times 1/sqrt(eps))
            out.append(Case("batchnorm_bwd_data",
                            [B, C, HW, "X", "dY", "mean", "invstd", "gamma", "dg", "db", "dX"],
                            {"X": x, "dY": dy, "mean": mean, "invstd": invstd, "gamma": gamma,
                             "dg": red.expected["dg"], "db": red.expected["db"],
                             "dX": np.full(n, np.nan, np.float32)}, ("dX",),
                            label=f"batchnorm_bwd_data {tag}", atol=1e-4))
        out.append(Case("gap_fwd", [B, C, HW, "X", "Y"],
                        {"X": x, "Y": np.full(B * C, np.nan, np.float32)}, ("Y",),
                        label=f"gap_fwd {tag}"))
        out.append(Case("gap_bwd", [B, C, HW, "dY", "dX"],
                        {"dY": _rand(rng, B * C), "dX": np.full(n, np.nan, np.float32)}, ("dX",),
                        label=f"gap_bwd {tag}"))
    for n in (1, 17, 785, 100003):
        x = _rand(rng, n, low=-3.0, high=9.0)
        x[::7], x[3::7] = 0.0, 6.0   # ReLU6's edges: exactly 0 and 6 pass no gradient
        y = np.clip(x, 0, 6).astype(np.float32)
        out.append(Case("relu6_fwd", [n, "X", "Y"], {"X": x, "Y": np.zeros(n, np.float32)},
                        ("Y",), exact=True, label=f"relu6_fwd {n}"))
        out.append(Case("relu6_bwd", [n, "Y", "dY", "dX"],
                        {"Y": y, "dY": _rand(rng, n), "dX": np.full(n, np.nan, np.float32)},
                        ("dX",), exact=True, label=f"relu6_bwd {n}"))
        out.append(Case("add", [n, "A", "B", "Y"],
                        {"A": x, "B": _rand(rng, n), "Y": np.full(n, np.nan, np.float32)},
                        ("Y",), exact=True, label=f"add {n}"))
    return out


def _relu_input(rng: np.random.Generator, n: int) -> np.ndarray:
    """A ReLU output: random, a third of it exactly 0 (the mask's edge)."""
    x = np.maximum(_rand(rng, n), 0)
    x[::3] = 0.0
    return x


def fused_cases(rng: np.random.Generator) -> list[Case]:
    """The fused kernels at odd sizes (1, primes, the MLP's 784 and LeNet's shapes), both
    values of act/relu, convolutions with stride and padding, SGD with and without momentum."""
    out = []
    for B, O, I in [(1, 1, 1), (3, 17, 31), (32, 16, 128), (5, 10, 784)]:
        for act in (0, 1):
            out.append(Case("linear_fwd", [B, O, I, act, "X", "W", "bias", "Y"],
                            {"X": _rand(rng, B * I), "W": _rand(rng, O * I),
                             "bias": _rand(rng, O), "Y": np.full(B * O, np.nan, np.float32)},
                            ("Y",), label=f"linear_fwd {B}x{O}x{I} act={act}",
                            atol=1e-6 * I + 1e-5))
            out.append(Case("linear_bwd_data", [B, O, I, act, "dY", "W", "X", "dX"],
                            {"dY": _rand(rng, B * O), "W": _rand(rng, O * I),
                             "X": _relu_input(rng, B * I),
                             "dX": np.full(B * I, np.nan, np.float32)},
                            ("dX",), label=f"linear_bwd_data {B}x{O}x{I} relu={act}",
                            atol=1e-6 * O + 1e-5))
        for momentum, wd in [(0.0, 0.0), (0.9, 5e-4)]:
            out.append(Case("linear_sgd", [B, O, I, 0.05, momentum, wd, "X", "dY", "W", "V",
                                           "bias", "Vb"],
                            {"X": _rand(rng, B * I), "dY": _rand(rng, B * O),
                             "W": _rand(rng, O * I), "V": _rand(rng, O * I),
                             "bias": _rand(rng, O), "Vb": _rand(rng, O)},
                            ("W", "V", "bias", "Vb"),
                            label=f"linear_sgd {B}x{O}x{I} m={momentum}", atol=1e-6 * B + 1e-5))
    for B, C, H, W, OC, K, stride, pad in [(1, 1, 1, 1, 1, 1, 1, 0), (2, 3, 7, 5, 4, 3, 1, 1),
                                           (3, 2, 9, 8, 5, 3, 2, 1), (2, 1, 28, 28, 6, 5, 1, 2),
                                           (2, 6, 14, 14, 16, 5, 1, 0)]:
        OH, OW = (H + 2 * pad - K) // stride + 1, (W + 2 * pad - K) // stride + 1
        dims = [B, C, H, W, OC, K, K, stride, pad, OH, OW]
        nx, ny, nw = B * C * H * W, B * OC * OH * OW, OC * C * K * K
        tag = f"{B}x{C}x{H}x{W} oc{OC} k{K} s{stride} p{pad}"
        for act in (0, 1):
            out.append(Case("conv_fwd", dims + [act, "X", "weight", "bias", "Y"],
                            {"X": _rand(rng, nx), "weight": _rand(rng, nw),
                             "bias": _rand(rng, OC), "Y": np.full(ny, np.nan, np.float32)},
                            ("Y",), label=f"conv_fwd {tag} act={act}", atol=1e-6 * nw + 1e-5))
            out.append(Case("conv_bwd_data", dims + [act, "dY", "weight", "X", "dX"],
                            {"dY": _rand(rng, ny), "weight": _rand(rng, nw),
                             "X": _relu_input(rng, nx), "dX": np.full(nx, np.nan, np.float32)},
                            ("dX",), label=f"conv_bwd_data {tag} relu={act}",
                            atol=1e-6 * nw + 1e-5))
        out.append(Case("conv_sgd", dims + [0.05, 0.9, 5e-4, "X", "dY", "weight", "V", "bias",
                                            "Vb"],
                        {"X": _rand(rng, nx), "dY": _rand(rng, ny), "weight": _rand(rng, nw),
                         "V": _rand(rng, nw), "bias": _rand(rng, OC), "Vb": _rand(rng, OC)},
                        ("weight", "V", "bias", "Vb"), label=f"conv_sgd {tag}",
                        atol=1e-6 * ny + 1e-5))
    out += _splitk_cases(rng)
    for B, C, H, W, K, stride in [(1, 1, 1, 1, 1, 1), (2, 6, 28, 28, 2, 2), (3, 2, 7, 9, 3, 2)]:
        OH, OW = (H - K) // stride + 1, (W - K) // stride + 1
        x = _relu_input(rng, B * C * H * W)
        fwd = Case("maxpool_fwd", [B, C, H, W, K, stride, OH, OW, "X", "Y", "argmax"],
                   {"X": x, "Y": np.zeros(B * C * OH * OW, np.float32),
                    "argmax": np.full(B * C * OH * OW, -1, np.int32)}, ("Y", "argmax"))
        out.append(Case("maxpool_bwd_relu", [B, C, H, W, K, stride, OH, OW, "dY", "argmax", "X",
                                             "dX"],
                        {"dY": _rand(rng, B * C * OH * OW), "argmax": fwd.expected["argmax"],
                         "X": x, "dX": np.full(B * C * H * W, np.nan, np.float32)},
                        ("dX",), label=f"maxpool_bwd_relu {B}x{C}x{H}x{W} k{K} s{stride}"))
    for B, C, I, scale in [(1, 1, 1, 1.0), (32, 16, 128, 3.0), (3, 17, 31, 60.0),
                           (70, 10, 84, 1.0)]:
        for relu in (0, 1):
            out.append(Case("softmax_xent_bwd", [B, C, I, relu, "logits", "labels", "W", "X",
                                                 "dlogits", "dX", "loss"],
                            {"logits": _rand(rng, B * C, low=-scale, high=scale),
                             "labels": rng.integers(0, C, size=B).astype(np.int32),
                             "W": _rand(rng, C * I), "X": _relu_input(rng, B * I),
                             "dlogits": np.full(B * C, np.nan, np.float32),
                             "dX": np.full(B * I, np.nan, np.float32),
                             "loss": np.full(1, np.nan, np.float32)},
                            ("dlogits", "dX", "loss"),
                            label=f"softmax_xent_bwd {B}x{C}x{I} x{scale} relu={relu}"))
    return out


# The fused batch-norm kernels: their own module (imported last, it uses this one's helpers).
from .kernel_cases_bn import ORACLE_BN, fused_bn_cases  # noqa: E402

ORACLE.update(ORACLE_BN)

def _splitk_cases(rng: np.random.Generator) -> list[Case]:
    """conv_sgd's split-K pair: chunks shorter than a work-group and longer (work-items
    wrapping), an uneven last chunk (70 = 24+24+22, 1568 = 4*314+312), an empty one (4
    products in 3 chunks of 2), S = 1; the finish at S = 1 and 4."""
    out = []
    for (B, C, H, W, OC, K, stride, pad), S in [((2, 3, 7, 5, 4, 3, 1, 1), 3),
                                                ((1, 1, 4, 4, 2, 3, 1, 0), 3),
                                                ((2, 1, 28, 28, 6, 5, 1, 2), 5),
                                                ((3, 2, 9, 8, 5, 3, 2, 1), 1)]:
        OH, OW = (H + 2 * pad - K) // stride + 1, (W + 2 * pad - K) // stride + 1
        ckk, n = C * K * K, B * OH * OW
        out.append(Case("conv_wgrad_partial", [B, C, H, W, OC, K, K, stride, pad, OH, OW, S,
                                               "X", "dY", "part"],
                        {"X": _rand(rng, B * C * H * W), "dY": _rand(rng, B * OC * OH * OW),
                         "part": np.full(S * OC * (ckk + 1), np.nan, np.float32)},
                        ("part",), label=f"conv_wgrad_partial {B}x{C}x{H}x{W} oc{OC} k{K} "
                        f"s{stride} p{pad} S={S}", atol=1e-6 * n + 1e-5))
    for C, OC, K, S in [(1, 6, 5, 1), (3, 4, 3, 4)]:
        ckk = C * K * K
        out.append(Case("conv_sgd_finish", [C, OC, K, K, S, 0.05, 0.9, 5e-4, "part", "weight",
                                            "V", "bias", "Vb"],
                        {"part": _rand(rng, S * OC * (ckk + 1)), "weight": _rand(rng, OC * ckk),
                         "V": _rand(rng, OC * ckk), "bias": _rand(rng, OC),
                         "Vb": _rand(rng, OC)},
                        ("weight", "V", "bias", "Vb"),
                        label=f"conv_sgd_finish c{C} oc{OC} k{K} S={S}"))
    return out


GROUPS = {"gemm": gemm_cases, "elementwise": elementwise_cases, "conv": conv_cases,
          "pool": pool_cases, "loss": loss_cases, "mobile": mobile_cases,
          "fused": fused_cases, "fused_bn": fused_bn_cases}


# The optimizer kernels' cases and oracle live in their own module and join here.
from helpers.optim_cases import OPTIM_ORACLE, optim_cases  # noqa: E402

ORACLE.update(OPTIM_ORACLE)
GROUPS["optimizer"] = optim_cases


def group_cases(group: str, seed: int = 0) -> list[Case]:
    """The cases of one group on data from ``seed`` (deterministic)."""
    return GROUPS[group](np.random.default_rng(seed))
