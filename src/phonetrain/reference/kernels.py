"""The kernel ABI's semantics in numpy (``src/kernels/README.md``): one function per kernel,
in place on flat arrays of the caller's dtype (float32 or float64; int32 for labels and
argmax).

Sums over many terms (bias gradients, the batch mean, softmax denominators) are sequential in
float32, as the baseline kernels and the runner's CPU backend add them; numpy's own pairwise
summation would make the float32 reference more accurate than the implementations it stands
for, and the per-step check (:mod:`phonetrain.reference.steps`) measures float32 rounding with
it. float64 sums stay pairwise. GEMM uses numpy's BLAS, or with ``sequential_gemm`` (the
per-step check's float32 run) one rank-1 update per ``k``: each element of C summed over ``K``
in sequence, as the baseline, tiled and register-blocked kernels do (OpenBLAS blocks ``K``,
which rounds less on long sums).
"""

from __future__ import annotations

import numpy as np

from phonetrain.kernels import bind_args

from .summation import sum_last as _sum_last



def _gemm(d, trans_a: bool, trans_b: bool) -> None:
    M, N, K = d["M"], d["N"], d["K"]
    a = d["A"][: M * K].reshape((K, M) if trans_a else (M, K))
    b = d["B"][: K * N].reshape((N, K) if trans_b else (K, N))
    c = d["C"][: M * N].reshape(M, N)
    t = d["C"].dtype.type
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    if d.get("_sequential") and c.dtype == np.float32:
        prod = _sequential_sum(a, b)
    else:
        prod = a @ b
    if d["beta"] == 0:
        c[...] = t(d["alpha"]) * prod
    else:
        c[...] = t(d["alpha"]) * prod + t(d["beta"]) * c


SEQUENTIAL_REDUCE_MAX_MN, SEQUENTIAL_REDUCE_MAX_ELEMENTS = 1024, 1 << 24
"""Below M x N = 1024 outputs a float32 sequential GEMM sums a (K, M, N) tensor of products
over K in one reduction, not K Python steps (LeNet-5's first weight gradient, 6 x 25 over
K = 25,088: 10x faster); at most 2^24 products (64 MiB)."""


def _sequential_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (float32, (M, K) x (K, N)) summed over K in order, k = 0, 1, ..., each step
    rounded to float32, as a device kernel's K loop adds: a reduction over the outer axis of
    a C-ordered (K, M, N) product tensor adds it row after row (numpy sums pairwise only along
    the contiguous axis), the same sums as the loop (tests/reference: bit for bit)."""
    (M, K), N = a.shape, b.shape[1]
    if M * N <= SEQUENTIAL_REDUCE_MAX_MN and K * M * N <= SEQUENTIAL_REDUCE_MAX_ELEMENTS:
        return np.add.reduce(np.ascontiguousarray(a.T)[:, :, None] * b[:, None, :], axis=0)
    prod = np.zeros((M, N), np.float32)
    for k in range(K):
        prod += a[:, k, None] * b[None, k, :]
    return prod


def _windows(x: np.ndarray, k: int, s: int, oh: int, ow: int):
    """Yield ``(kh, kw, x[:, :, kh::s, kw::s] cropped to [OH, OW])``."""
    for kh in range(k):
        for kw in range(k):
            yield kh, kw, x[:, :, kh:kh + s * (oh - 1) + 1:s, kw:kw + s * (ow - 1) + 1:s]


_CONV_DIMS = ("B", "C", "H", "W", "KH", "KW", "stride", "pad", "OH", "OW")


def _im2col(d) -> None:
    B, C, H, W, KH, KW, s, p, OH, OW = (d[k] for k in _CONV_DIMS)
    x = d["X"][: B * C * H * W].reshape(B, C, H, W)
    hp, wp = max(H + 2 * p, (OH - 1) * s + KH), max(W + 2 * p, (OW - 1) * s + KW)
    xp = np.zeros((B, C, hp, wp), x.dtype)
    xp[:, :, p:p + H, p:p + W] = x
    col = d["col"][: C * KH * KW * B * OH * OW].reshape(C, KH, KW, B, OH, OW)
    for kh in range(KH):
        for kw in range(KW):
            col[:, kh, kw] = xp[:, :, kh:kh + s * (OH - 1) + 1:s,
                                kw:kw + s * (OW - 1) + 1:s].transpose(1, 0, 2, 3)


def _col2im(d) -> None:
    B, C, H, W, KH, KW, s, p, OH, OW = (d[k] for k in _CONV_DIMS)
    col = d["col"][: C * KH * KW * B * OH * OW].reshape(C, KH, KW, B, OH, OW)
    hp, wp = max(H + 2 * p, (OH - 1) * s + KH), max(W + 2 * p, (OW - 1) * s + KW)
    dxp = np.zeros((B, C, hp, wp), col.dtype)
    for kh in range(KH):
        for kw in range(KW):
            dxp[:, :, kh:kh + s * (OH - 1) + 1:s, kw:kw + s * (OW - 1) + 1:s] += \
                col[:, kh, kw].transpose(1, 0, 2, 3)
    d["dX"][: B * C * H * W] = dxp[:, :, p:p + H, p:p + W].ravel()


def _conv2d_fwd(d) -> None:
    B, C, H, W, KH, KW, s, p, OH, OW = (d[k] for k in _CONV_DIMS)
    OC = d["OC"]
    x = d["X"][: B * C * H * W].reshape(B, C, H, W)
    hp, wp = max(H + 2 * p, (OH - 1) * s + KH), max(W + 2 * p, (OW - 1) * s + KW)
    xp = np.zeros((B, C, hp, wp), x.dtype)
    xp[:, :, p:p + H, p:p + W] = x
    wt = d["Wt"][: OC * C * KH * KW].reshape(OC, C, KH, KW)
    y = np.zeros((B, OC, OH, OW), d["Y"].dtype)
    for c in range(C):          # the kernels' order: c, then kh, then kw
        for kh in range(KH):
            for kw in range(KW):
                win = xp[:, c, kh:kh + s * (OH - 1) + 1:s, kw:kw + s * (OW - 1) + 1:s]
                y += wt[None, :, c, kh, kw, None, None] * win[:, None]
    d["Y"][: y.size] = y.reshape(-1)


def _maxpool_fwd(d) -> None:
    B, C, H, W, K, s, OH, OW = (d[k] for k in ("B", "C", "H", "W", "K", "stride", "OH", "OW"))
    x = d["X"][: B * C * H * W].reshape(B, C, H, W)
    vals = np.stack([w for _, _, w in _windows(x, K, s, OH, OW)])  # [K*K, B, C, OH, OW]
    first = np.argmax(vals, axis=0)  # first maximum in (kh, kw) scan order
    kh, kw = first // K, first % K
    oh = np.arange(OH)[:, None]
    ow = np.arange(OW)[None, :]
    d["Y"][: B * C * OH * OW] = np.take_along_axis(vals, first[None], 0).ravel()
    d["argmax"][: B * C * OH * OW] = ((oh * s + kh) * W + (ow * s + kw)).ravel()


def _maxpool_bwd(d) -> None:
    B, C, H, W, OH, OW = (d[k] for k in ("B", "C", "H", "W", "OH", "OW"))
    dx = np.zeros((B * C, H * W), d["dX"].dtype)
    idx = d["argmax"][: B * C * OH * OW].reshape(B * C, OH * OW)
    np.add.at(dx, (np.arange(B * C)[:, None], idx), d["dY"][: B * C * OH * OW].reshape(B * C, -1))
    d["dX"][: B * C * H * W] = dx.ravel()


def _softmax_xent(d) -> None:
    B, C = d["B"], d["C"]
    z = d["logits"][: B * C].reshape(B, C)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    sums = _sum_last(e)
    p = e / sums[:, None]
    lab = d["labels"][:B].astype(np.int64)
    if lab.min(initial=0) < 0 or lab.max(initial=0) >= C:
        raise ValueError(f"softmax_xent: label outside 0..{C - 1}")
    rows = np.arange(B)
    d["row_loss"][:B] = np.log(sums) - z[rows, lab]
    p[rows, lab] -= 1
    d["dlogits"][: B * C] = (p / p.dtype.type(B)).ravel()


def _sgd(d) -> None:
    n = d["n"]
    W, dW, V = d["W"][:n], d["dW"][:n], d["V"][:n]
    t = W.dtype.type
    g = dW + t(d["weight_decay"]) * W
    V[...] = t(d["momentum"]) * V + g
    W -= t(d["lr"]) * V


def _bias_add(d) -> None:
    B, C, HW = d["B"], d["C"], d["HW"]
    d["Y"][: B * C * HW].reshape(B, C, HW)[...] += d["bias"][:C][None, :, None]


def _bias_grad(d) -> None:
    B, C, HW = d["B"], d["C"], d["HW"]
    dy = d["dY"][: B * C * HW].reshape(B, C, HW).transpose(1, 0, 2).reshape(C, B * HW)
    d["db"][:C] = _sum_last(dy)


def _relu_fwd(d) -> None:
    n = d["n"]
    d["Y"][:n] = np.maximum(d["X"][:n], 0)


def _relu_bwd(d) -> None:
    n = d["n"]
    d["dX"][:n] = np.where(d["Y"][:n] > 0, d["dY"][:n], 0)


def _swap01(d) -> None:
    D0, D1, D2 = d["D0"], d["D1"], d["D2"]
    n = D0 * D1 * D2
    d["Y"][:n] = d["X"][:n].reshape(D0, D1, D2).transpose(1, 0, 2).ravel()


def _mean(d) -> None:
    x = d["X"][: d["n"]]
    d["out"][0] = _sum_last(x) / x.dtype.type(d["n"])


def _fill(d) -> None:
    d["X"][: d["n"]] = d["value"]


def _copy(d) -> None:
    d["Y"][: d["n"]] = d["X"][: d["n"]]


KERNELS = {
    "gemm_nn": lambda d: _gemm(d, False, False),
    "gemm_nt": lambda d: _gemm(d, False, True),
    "gemm_tn": lambda d: _gemm(d, True, False),
    "bias_add": _bias_add, "bias_grad": _bias_grad, "relu_fwd": _relu_fwd,
    "relu_bwd": _relu_bwd, "im2col": _im2col, "col2im": _col2im, "swap01": _swap01,
    "conv2d_fwd": _conv2d_fwd,
    "maxpool_fwd": _maxpool_fwd, "maxpool_bwd": _maxpool_bwd, "softmax_xent": _softmax_xent,
    "mean": _mean, "sgd_update": _sgd, "fill": _fill, "copy": _copy,
}


def run_kernel(name: str, args: list[dict], arrays, *, sequential_gemm: bool = False) -> None:
    """Execute one ABI kernel in numpy, in place.

    ``args`` are plan-style (``[{"i": 32}, {"f": 1.0}, {"t": 3}, ...]`` in ABI order);
    ``arrays[tensor_id]`` is a flat, writable numpy array (float32/float64 data, int32 for
    ``labels``/``argmax``); ``sequential_gemm``: float32 GEMM sums over K in sequence (module
    docstring). Raises ``ValueError`` naming the kernel for a bad signature or a buffer too
    small for the sizes given.
    """
    bound = bind_args(name, args)
    d = {k: (arrays[v] if "t" in a else v) for (k, v), a in zip(bound.items(), args)}
    d["_sequential"] = sequential_gemm
    try:
        KERNELS[name](d)
    except (ValueError, IndexError) as e:
        raise ValueError(f"kernel {name}: {e}") from None


# The mobile CNN operators live in their own module and join the registry here.
from .mobile import MOBILE_KERNELS  # noqa: E402

KERNELS.update(MOBILE_KERNELS)

# Adam and AdamW (the optimizer kernels) likewise.
from .optim import OPTIM_KERNELS  # noqa: E402

KERNELS.update(OPTIM_KERNELS)
