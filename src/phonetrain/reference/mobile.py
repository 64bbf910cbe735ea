"""The mobile CNN operators of the kernel ABI in numpy (``src/kernels/README.md``, section
"Mobile CNN operators"): depthwise 3x3 convolution, batch normalization in training mode,
ReLU6, element-wise add (residual), global average pooling.

Same conventions as :mod:`.kernels`: in place on flat arrays of the caller's dtype; sums in
float32 run in sequence in the order the C and OpenCL kernels use (depthwise taps ``kh``
then ``kw``; reductions over ``b`` then the spatial index), float64 sums are pairwise.
Registered in :data:`phonetrain.reference.kernels.KERNELS`.
"""

from __future__ import annotations

import numpy as np

from .summation import sum_last as _sum_last

_DW_DIMS = ("B", "C", "H", "W", "stride", "pad", "OH", "OW")


def _dw_dims(d):
    B, C, H, W, s, p, OH, OW = (int(d[k]) for k in _DW_DIMS)
    if H + 2 * p < 3 or W + 2 * p < 3 or OH != (H + 2 * p - 3) // s + 1 or \
            OW != (W + 2 * p - 3) // s + 1:
        raise ValueError(f"OH, OW = {OH}, {OW} but (H + 2*pad - 3)/stride + 1 = "
                         f"{(H + 2 * p - 3) // s + 1}, {(W + 2 * p - 3) // s + 1}")
    return B, C, H, W, s, p, OH, OW


def _padded(x: np.ndarray, H: int, W: int, s: int, p: int, OH: int, OW: int) -> np.ndarray:
    """``x [B, C, H, W]`` zero-padded to hold every 3x3 window (padding reads as 0)."""
    hp, wp = max(H + 2 * p, (OH - 1) * s + 3), max(W + 2 * p, (OW - 1) * s + 3)
    xp = np.zeros((*x.shape[:2], hp, wp), x.dtype)
    xp[:, :, p:p + H, p:p + W] = x
    return xp


def _tap(a: np.ndarray, kh: int, kw: int, s: int, OH: int, OW: int) -> np.ndarray:
    """The ``[B, C, OH, OW]`` view of padded ``a`` that tap ``(kh, kw)`` reads."""
    return a[:, :, kh:kh + s * (OH - 1) + 1:s, kw:kw + s * (OW - 1) + 1:s]


def _dwconv3x3_fwd(d) -> None:
    B, C, H, W, s, p, OH, OW = _dw_dims(d)
    x = d["X"][: B * C * H * W].reshape(B, C, H, W)
    wt = d["Wt"][: C * 9].reshape(C, 3, 3)
    xp = _padded(x, H, W, s, p, OH, OW)
    acc = np.zeros((B, C, OH, OW), x.dtype)
    for kh in range(3):
        for kw in range(3):
            acc += wt[None, :, kh, kw, None, None] * _tap(xp, kh, kw, s, OH, OW)
    d["Y"][: B * C * OH * OW] = acc.ravel()


def _dwconv3x3_bwd_data(d) -> None:
    B, C, H, W, s, p, OH, OW = _dw_dims(d)
    dy = d["dY"][: B * C * OH * OW].reshape(B, C, OH, OW)
    wt = d["Wt"][: C * 9].reshape(C, 3, 3)
    dxp = _padded(np.zeros((B, C, H, W), dy.dtype), H, W, s, p, OH, OW)
    for kh in range(3):
        for kw in range(3):
            _tap(dxp, kh, kw, s, OH, OW)[...] += wt[None, :, kh, kw, None, None] * dy
    d["dX"][: B * C * H * W] = dxp[:, :, p:p + H, p:p + W].ravel()


def _dwconv3x3_bwd_weight(d) -> None:
    B, C, H, W, s, p, OH, OW = _dw_dims(d)
    x = d["X"][: B * C * H * W].reshape(B, C, H, W)
    dy = d["dY"][: B * C * OH * OW].reshape(B, C, OH, OW)
    xp = _padded(x, H, W, s, p, OH, OW)
    dw = d["dWt"][: C * 9].reshape(C, 3, 3)
    for kh in range(3):
        for kw in range(3):
            prod = (_tap(xp, kh, kw, s, OH, OW) * dy).transpose(1, 0, 2, 3).reshape(C, B, -1)
            dw[:, kh, kw] = _sum_last(_sum_last(prod))   # per image, then over the batch


def _bn_shape(d):
    B, C, HW = int(d["B"]), int(d["C"]), int(d["HW"])
    return B, C, HW, B * C * HW


def _per_channel(a: np.ndarray, B: int, C: int, HW: int) -> np.ndarray:
    """``a [B, C, HW]`` as ``[C, B, HW]``."""
    return a.reshape(B, C, HW).transpose(1, 0, 2)


def _channel_sum(a: np.ndarray) -> np.ndarray:
    """``[C, B, HW] -> [C]`` in the kernels' order: each image's ``HW`` values, then the ``B``
    partial sums (README: blocked per-channel sums)."""
    return _sum_last(_sum_last(a))


def _batchnorm_stats(d) -> None:
    B, C, HW, n = _bn_shape(d)
    x = _per_channel(d["X"][:n], B, C, HW)
    t = x.dtype.type
    cnt = B * HW
    shift = x[:, :1, :1]   # the channel's first value (README: shifted sum)
    mean = shift[:, 0, 0] + _channel_sum(x - shift) / t(cnt)
    var = _channel_sum((x - mean[:, None, None]) ** 2) / t(cnt)
    d["mean"][:C] = mean
    d["invstd"][:C] = t(1) / np.sqrt(var + t(d["eps"]))
    m = t(d["momentum"])
    unbiased = var * t(cnt) / t(cnt - 1) if cnt > 1 else var
    d["running_mean"][:C] = (t(1) - m) * d["running_mean"][:C] + m * mean
    d["running_var"][:C] = (t(1) - m) * d["running_var"][:C] + m * unbiased


def _batchnorm_apply(d) -> None:
    B, C, HW, n = _bn_shape(d)
    x = d["X"][:n].reshape(B, C, HW)
    col = lambda k: d[k][:C][None, :, None]  # noqa: E731
    d["Y"][:n] = (((x - col("mean")) * col("invstd")) * col("gamma") + col("beta")).ravel()


def _batchnorm_bwd_reduce(d) -> None:
    B, C, HW, n = _bn_shape(d)
    x = _per_channel(d["X"][:n], B, C, HW)
    dy = _per_channel(d["dY"][:n], B, C, HW)
    xhat = (x - d["mean"][:C, None, None]) * d["invstd"][:C, None, None]
    d["dbeta"][:C] = _channel_sum(dy)
    d["dgamma"][:C] = _channel_sum(dy * xhat)


def _batchnorm_bwd_data(d) -> None:
    B, C, HW, n = _bn_shape(d)
    x = d["X"][:n].reshape(B, C, HW)
    dy = d["dY"][:n].reshape(B, C, HW)
    t = x.dtype.type
    col = lambda k: d[k][:C][None, :, None]  # noqa: E731
    xhat = (x - col("mean")) * col("invstd")
    cnt = t(B * HW)
    scale = col("gamma") * col("invstd") / cnt
    d["dX"][:n] = (scale * ((cnt * dy - col("dbeta")) - xhat * col("dgamma"))).ravel()


def _relu6_fwd(d) -> None:
    n = d["n"]
    t = d["X"].dtype.type
    d["Y"][:n] = np.minimum(np.maximum(d["X"][:n], t(0)), t(6))


def _relu6_bwd(d) -> None:
    n = d["n"]
    y = d["Y"][:n]
    d["dX"][:n] = np.where((y > 0) & (y < 6), d["dY"][:n], 0)


def _add(d) -> None:
    n = d["n"]
    d["Y"][:n] = d["A"][:n] + d["B"][:n]


def _gap_fwd(d) -> None:
    B, C, HW, n = _bn_shape(d)
    x = d["X"][:n].reshape(B * C, HW)
    d["Y"][: B * C] = _sum_last(x) / x.dtype.type(HW)


def _gap_bwd(d) -> None:
    B, C, HW, n = _bn_shape(d)
    dy = d["dY"][: B * C]
    d["dX"][:n] = np.repeat(dy / dy.dtype.type(HW), HW)


MOBILE_KERNELS = {
    "dwconv3x3_fwd": _dwconv3x3_fwd, "dwconv3x3_bwd_data": _dwconv3x3_bwd_data,
    "dwconv3x3_bwd_weight": _dwconv3x3_bwd_weight, "batchnorm_stats": _batchnorm_stats,
    "batchnorm_apply": _batchnorm_apply, "batchnorm_bwd_reduce": _batchnorm_bwd_reduce,
    "batchnorm_bwd_data": _batchnorm_bwd_data, "relu6_fwd": _relu6_fwd,
    "relu6_bwd": _relu6_bwd, "add": _add, "gap_fwd": _gap_fwd, "gap_bwd": _gap_bwd,
}
