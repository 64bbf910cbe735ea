"""The fused batch-norm kernels of the ABI (``src/kernels/README.md``, "Fused batch-norm
kernels") in numpy: bias-free grouped convolutions with batch normalization.

As :mod:`.fused`, each kernel is the sequence of unfused ABI kernels it replaces, on
temporary arrays of the caller's dtype: a grouped convolution is the ``im2col`` + GEMM path
of ``Conv2d`` per group (the ``dwconv3x3_*`` kernels for a depthwise 3x3), batch
normalization ``batchnorm_apply`` and ``batchnorm_bwd_reduce`` +
``batchnorm_bwd_data``, activations ``relu_*``/``relu6_*``, the residual ``add``, the update
``sgd_update``; the forward's tile statistics (``gconv_stats_fwd``) and their merge
(``bn_act_fwd``, Chan, Golub & LeVeque 1979) have no unfused kernel and are written here in
numpy. Importing this module registers the kernels in
:data:`phonetrain.reference.kernels.KERNELS`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from phonetrain.kernels import KERNEL_ARGS, bind_args

from .kernels import KERNELS

_ACT_FWD = {1: "relu_fwd", 2: "relu6_fwd"}
_ACT_BWD = {1: "relu_bwd", 2: "relu6_bwd"}


def _run(name: str, d: dict, **kw) -> None:
    """Run unfused kernel ``name`` with named args ``kw``, keeping ``_sequential``."""
    KERNELS[name]({**kw, "_sequential": d.get("_sequential", False)})


def _z(d: dict, n: int, like: str) -> np.ndarray:
    return np.zeros(int(n), d[like].dtype)


def _dims(d: dict) -> tuple[int, ...]:
    """``B, C, H, W, OC, KH, KW, stride, pad, OH, OW, groups`` as ints; ``ValueError`` when
    ``groups`` does not divide ``C`` and ``OC``."""
    dims = tuple(int(d[k]) for k in ("B", "C", "H", "W", "OC", "KH", "KW", "stride", "pad",
                                     "OH", "OW", "groups"))
    C, OC, G = dims[1], dims[4], dims[11]
    if G < 1 or C % G or OC % G:
        raise ValueError(f"groups = {G} must divide C = {C} and OC = {OC}")
    return dims


def _depthwise3x3(dims) -> bool:
    C, OC, KH, KW, G = dims[1], dims[4], dims[5], dims[6], dims[11]
    return G == C == OC and KH == KW == 3


def _split(a: np.ndarray, B: int, C: int, HW: int, G: int) -> list[np.ndarray]:
    """Flat NCHW ``a`` as ``G`` contiguous group copies ``[B, C/G, HW]``."""
    v = a[: B * C * HW].reshape(B, G, C // G, HW)
    return [np.ascontiguousarray(v[:, g]).ravel() for g in range(G)]


def _join(parts: list[np.ndarray], out: np.ndarray, B: int, C: int, HW: int) -> None:
    G = len(parts)
    out[: B * C * HW] = np.stack([p.reshape(B, C // G, HW) for p in parts], 1).ravel()


def _conv1(d, B, C, H, W, OC, K, KW, s, p, OH, OW, X, weight, Y) -> None:
    """``Y`` = the plain (groups = 1) bias-free convolution: im2col + gemm_nn + swap01."""
    ckk, cols = C * K * KW, B * OH * OW
    col, yc = np.zeros(ckk * cols, Y.dtype), np.zeros(OC * cols, Y.dtype)
    conv = dict(B=B, C=C, H=H, W=W, KH=K, KW=KW, stride=s, pad=p, OH=OH, OW=OW)
    _run("im2col", d, **conv, X=X, col=col)
    _run("gemm_nn", d, M=OC, N=cols, K=ckk, alpha=1.0, A=weight, B=col, beta=0.0, C=yc)
    _run("swap01", d, D0=OC, D1=B, D2=OH * OW, X=yc, Y=Y)


def _gconv(d, X, weight, Y) -> None:
    B, C, H, W, OC, KH, KW, s, p, OH, OW, G = dims = _dims(d)
    if _depthwise3x3(dims):
        _run("dwconv3x3_fwd", d, B=B, C=C, H=H, W=W, stride=s, pad=p, OH=OH, OW=OW, X=X,
             Wt=weight, Y=Y)
        return
    wg = weight[: OC * C // G * KH * KW].reshape(G, -1)
    parts = []
    for g, xg in enumerate(_split(X, B, C, H * W, G)):
        yg = np.zeros(B * OC // G * OH * OW, Y.dtype)
        _conv1(d, B, C // G, H, W, OC // G, KH, KW, s, p, OH, OW, xg, wg[g], yg)
        parts.append(yg)
    _join(parts, Y, B, OC, OH * OW)


def _gconv_stats_fwd(d) -> None:
    """``Z`` = the grouped convolution; ``part[OC, T, 2]`` = each tile's mean and sum of
    squared deviations from it (``T = ceil(n/tile)`` tiles of a channel's ``n = B*OH*OW``
    outputs in ``(b, oh, ow)`` order, the last one shorter), two passes over the tile."""
    B, C, H, W, OC, KH, KW, s, p, OH, OW, G = _dims(d)
    tile, n = int(d["tile"]), B * OH * OW
    _gconv(d, d["X"], d["weight"], d["Z"])
    z = d["Z"][: B * OC * OH * OW].reshape(B, OC, OH * OW).transpose(1, 0, 2).reshape(OC, n)
    starts = np.arange(0, n, tile)
    cnt = np.diff(np.append(starts, n))
    m = np.add.reduceat(z, starts, axis=1) / cnt.astype(z.dtype)
    dev = z - np.repeat(m, cnt, axis=1)
    m2 = np.add.reduceat(dev * dev, starts, axis=1)
    d["part"][: OC * starts.size * 2] = np.stack([m, m2], axis=2).ravel()


def _merged_stats(part: np.ndarray, C: int, n: int, tile: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel ``(mean, M2)`` of ``part[C, T, 2]``: the tiles merged in order by the
    pairwise update of Chan, Golub & LeVeque (1979), in ``part``'s dtype."""
    T = -(-n // tile)
    pm = part[: C * T * 2].reshape(C, T, 2)
    na, ma, qa = float(min(tile, n)), pm[:, 0, 0].copy(), pm[:, 0, 1].copy()
    for t in range(1, T):
        nb = float(min(tile, n - t * tile))
        nab = na + nb
        delta, f = pm[:, t, 0] - ma, nb / nab
        ma = ma + delta * f
        qa = qa + pm[:, t, 1] + delta * delta * na * f
        na = nab
    return ma, qa


def _bn_act_fwd(d) -> None:
    """Batch norm of ``Z[B, C, HW]`` from its tile statistics: mean, var = M2/n
    (:func:`_merged_stats`), ``invstd``, the running statistics (``batchnorm_stats``' rule),
    then ``batchnorm_apply``, the activation and the residual ``add``."""
    B, C, HW = int(d["B"]), int(d["C"]), int(d["HW"])
    n, N = B * HW, B * C * HW
    mu, m2 = _merged_stats(d["part"], C, n, int(d["tile"]))
    var = m2 / n
    eps, mom = d["eps"], d["momentum"]
    d["mean"][:C] = mu
    d["invstd"][:C] = 1.0 / np.sqrt(var + d["invstd"].dtype.type(eps))
    unbiased = var * n / (n - 1) if n > 1 else var
    for run, v in (("running_mean", mu), ("running_var", unbiased)):
        d[run][:C] = (1 - mom) * d[run][:C] + mom * v
    _run("batchnorm_apply", d, B=B, C=C, HW=HW, X=d["Z"], mean=d["mean"], invstd=d["invstd"],
         gamma=d["gamma"], beta=d["beta"], Y=d["Y"])
    if int(d["act"]):
        _run(_ACT_FWD[int(d["act"])], d, n=N, X=d["Y"], Y=d["Y"])
    if int(d["res"]):
        _run("add", d, n=N, A=d["Y"], B=d["R"], Y=d["Y"])


def _sgd(d, P: str, V: str, grad: np.ndarray) -> None:
    _run("sgd_update", d, n=grad.size, lr=d["lr"], momentum=d["momentum"],
         weight_decay=d["weight_decay"], W=d[P], dW=grad, V=d[V])


def _bn_bwd_sgd(d) -> None:
    B, C, HW = int(d["B"]), int(d["C"]), int(d["HW"])
    n = B * C * HW
    dy = d["dY"][:n].copy()
    if int(d["act"]):
        _run(_ACT_BWD[int(d["act"])], d, n=n, Y=d["Y"], dY=dy, dX=dy)
    dgamma, dbeta = _z(d, C, "gamma"), _z(d, C, "gamma")
    stats = dict(B=B, C=C, HW=HW, X=d["X"], dY=dy, mean=d["mean"], invstd=d["invstd"])
    _run("batchnorm_bwd_reduce", d, **stats, dgamma=dgamma, dbeta=dbeta)
    _run("batchnorm_bwd_data", d, **stats, gamma=d["gamma"], dgamma=dgamma, dbeta=dbeta,
         dX=d["dX"])
    _sgd(d, "gamma", "Vg", dgamma)
    _sgd(d, "beta", "Vb", dbeta)


def _conv1_bwd_data(d, B, C, H, W, OC, K, KW, s, p, OH, OW, dY, weight, dX) -> None:
    """Plain convolution's input gradient: swap01 + gemm_tn + col2im."""
    ckk, cols = C * K * KW, B * OH * OW
    dyc, dcol = np.zeros(OC * cols, dX.dtype), np.zeros(ckk * cols, dX.dtype)
    _run("swap01", d, D0=B, D1=OC, D2=OH * OW, X=dY, Y=dyc)
    _run("gemm_tn", d, M=ckk, N=cols, K=OC, alpha=1.0, A=weight, B=dyc, beta=0.0, C=dcol)
    _run("col2im", d, B=B, C=C, H=H, W=W, KH=K, KW=KW, stride=s, pad=p, OH=OH, OW=OW,
         col=dcol, dX=dX)


def _gconv_bwd_data(d) -> None:
    B, C, H, W, OC, KH, KW, s, p, OH, OW, G = dims = _dims(d)
    n = B * C * H * W
    dx = _z(d, n, "dX")
    if _depthwise3x3(dims):
        _run("dwconv3x3_bwd_data", d, B=B, C=C, H=H, W=W, stride=s, pad=p, OH=OH, OW=OW,
             dY=d["dY"], Wt=d["weight"], dX=dx)
    else:
        wg = d["weight"][: OC * C // G * KH * KW].reshape(G, -1)
        parts = []
        for g, dyg in enumerate(_split(d["dY"], B, OC, OH * OW, G)):
            part = np.zeros(B * C // G * H * W, dx.dtype)
            _conv1_bwd_data(d, B, C // G, H, W, OC // G, KH, KW, s, p, OH, OW, dyg, wg[g],
                            part)
            parts.append(part)
        _join(parts, dx, B, C, H * W)
    if int(d["res"]):
        _run("add", d, n=n, A=dx, B=d["R"], Y=dx)
    if int(d["act"]):
        _run(_ACT_BWD[int(d["act"])], d, n=n, Y=d["X"], dY=dx, dX=dx)
    d["dX"][:n] = dx


def _conv1_weight_grad(d, B, C, H, W, OC, K, KW, s, p, OH, OW, X, dY, dW) -> None:
    """Plain convolution's weight gradient: im2col + swap01 + gemm_nt."""
    ckk, cols = C * K * KW, B * OH * OW
    col, dyc = np.zeros(ckk * cols, dW.dtype), np.zeros(OC * cols, dW.dtype)
    _run("im2col", d, B=B, C=C, H=H, W=W, KH=K, KW=KW, stride=s, pad=p, OH=OH, OW=OW, X=X,
         col=col)
    _run("swap01", d, D0=B, D1=OC, D2=OH * OW, X=dY, Y=dyc)
    _run("gemm_nt", d, M=OC, N=ckk, K=cols, alpha=1.0, A=dyc, B=col, beta=0.0, C=dW)


def _gconv_sgd(d) -> None:
    B, C, H, W, OC, KH, KW, s, p, OH, OW, G = dims = _dims(d)
    per = OC // G * C // G * KH * KW
    dw = _z(d, G * per, "weight")
    if _depthwise3x3(dims):
        _run("dwconv3x3_bwd_weight", d, B=B, C=C, H=H, W=W, stride=s, pad=p, OH=OH, OW=OW,
             X=d["X"], dY=d["dY"], dWt=dw)
    else:
        xs, dys = _split(d["X"], B, C, H * W, G), _split(d["dY"], B, OC, OH * OW, G)
        for g in range(G):
            _conv1_weight_grad(d, B, C // G, H, W, OC // G, KH, KW, s, p, OH, OW, xs[g], dys[g],
                               dw[g * per:(g + 1) * per])
    _sgd(d, "weight", "V", dw)


def _gconv_wgrad_partial(d) -> None:
    """``part[s, oc, :]``: ``gconv_sgd``'s weight gradient over chunk ``s`` of the
    ``B*OH*OW`` columns (``im2col`` of all channels + ``swap01``; per group ``gemm_nt`` on the
    chunk's columns, or for one output channel per group -- depthwise -- the same products
    summed per channel in numpy)."""
    B, C, H, W, OC, KH, KW, s, p, OH, OW, G = _dims(d)
    S, cg, og = int(d["S"]), C // G, OC // G
    kk, cols = KH * KW, B * OH * OW
    col, dyc = _z(d, C * kk * cols, "part"), _z(d, OC * cols, "part")
    _run("im2col", d, B=B, C=C, H=H, W=W, KH=KH, KW=KW, stride=s, pad=p, OH=OH, OW=OW,
         X=d["X"], col=col)
    _run("swap01", d, D0=B, D1=OC, D2=OH * OW, X=d["dY"], Y=dyc)
    col, dyc = col.reshape(G, cg * kk, cols), dyc.reshape(G, og, cols)
    part = d["part"][:S * OC * cg * kk].reshape(S, G, og, cg * kk)
    kc = -(-cols // S)
    for c in range(S):
        i0, i1 = min(cols, c * kc), min(cols, c * kc + kc)
        part[c] = 0
        if i1 == i0:
            continue
        if og == 1:   # depthwise-like: G independent dot products per weight tap
            part[c, :, 0] = np.einsum("gl,gkl->gk", dyc[:, 0, i0:i1], col[:, :, i0:i1])
            continue
        for g in range(G):
            a = np.ascontiguousarray(dyc[g, :, i0:i1]).ravel()
            b = np.ascontiguousarray(col[g, :, i0:i1]).ravel()
            dw = _z(d, og * cg * kk, "part")
            _run("gemm_nt", d, M=og, N=cg * kk, K=i1 - i0, alpha=1.0, A=a, B=b, beta=0.0,
                 C=dw)
            part[c, g] = dw.reshape(og, cg * kk)


def _gconv_sgd_finish(d) -> None:
    """The ``S`` partial sums of each weight added in chunk order, then ``sgd_update``."""
    C, OC, KH, KW, G, S = (int(d[k]) for k in ("C", "OC", "KH", "KW", "groups", "S"))
    n = OC * C // G * KH * KW
    part = d["part"][:S * n].reshape(S, n)
    g = np.zeros(n, d["weight"].dtype)
    for c in range(S):
        g += part[c]
    _sgd(d, "weight", "V", g)


FUSED_BN_KERNELS = {"gconv_stats_fwd": _gconv_stats_fwd, "bn_act_fwd": _bn_act_fwd,
                    "bn_bwd_sgd": _bn_bwd_sgd,
                    "gconv_bwd_data": _gconv_bwd_data, "gconv_sgd": _gconv_sgd,
                    "gconv_wgrad_partial": _gconv_wgrad_partial,
                    "gconv_sgd_finish": _gconv_sgd_finish}

KERNELS.update(FUSED_BN_KERNELS)


def split_bn_activation(step) -> tuple[object, object] | None:
    """For a ``bn_act_fwd`` step with ``act != 0`` and ``res = 0``: ``(pre, act)``, the same
    step with ``act = 0`` (writes the normalized values to ``Y``) and the ``relu_fwd`` /
    ``relu6_fwd`` step applying the activation in place on ``Y``; together they compute the
    step, and the per-step check follows the runner's near-tie decisions at the activation.
    ``None`` for any other step (with ``res = 1`` the reference decides alone)."""
    if step.op != "kernel" or step.name != "bn_act_fwd":
        return None
    d = bind_args(step.name, step.args)
    act = int(d["act"])
    if not act or int(d["res"]):
        return None
    names = [a.split(":")[1] for a in KERNEL_ARGS[step.name]]
    args = [dict(a) for a in step.args]
    args[names.index("act")] = {"i": 0}
    y, n = int(d["Y"]), int(d["B"]) * int(d["C"]) * int(d["HW"])
    fwd = replace(step, name=_ACT_FWD[act], args=[{"i": n}, {"t": y}, {"t": y}])
    return replace(step, args=args), fwd
