"""The fused kernels of the ABI (``src/kernels/README.md``, "Fused kernels") in numpy.

Each fused kernel is written as the sequence of unfused ABI kernels it replaces (the
layer-by-layer lowering of ``phonetrain.lowering.build``), run on temporary arrays of the
caller's dtype: the reference of a fused plan is then the baseline plan's arithmetic, and a
float64 run of both plans agrees to rounding. Importing this module registers the kernels in
:data:`phonetrain.reference.kernels.KERNELS`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from phonetrain.kernels import KERNEL_ARGS, bind_args

from .kernels import KERNELS


def _run(name: str, d: dict, **kw) -> None:
    """Run unfused kernel ``name`` with named args ``kw`` (arrays and scalars), keeping the
    caller's ``_sequential`` GEMM setting."""
    KERNELS[name]({**kw, "_sequential": d.get("_sequential", False)})


def _tmp(d: dict, n: int, like: str) -> np.ndarray:
    return np.zeros(int(n), d[like].dtype)


_CONV = ("B", "C", "H", "W", "KH", "KW", "stride", "pad", "OH", "OW")


def _conv_dims(d: dict) -> dict:
    return {k: d[k] for k in _CONV}


def _mask(d: dict, out: str, n: int) -> None:
    """``out[i] = X[i] > 0 ? out[i] : 0`` (the ReLU backward of the layer's input)."""
    _run("relu_bwd", d, n=n, Y=d["X"], dY=d[out], dX=d[out])


def _linear_fwd(d) -> None:
    B, O, I = d["B"], d["O"], d["I"]
    _run("gemm_nt", d, M=B, N=O, K=I, alpha=1.0, A=d["X"], B=d["W"], beta=0.0, C=d["Y"])
    _run("bias_add", d, B=B, C=O, HW=1, Y=d["Y"], bias=d["bias"])
    if d["act"]:
        _run("relu_fwd", d, n=B * O, X=d["Y"], Y=d["Y"])


def _conv_fwd(d) -> None:
    B, C, OC, KH, KW, OH, OW = (d[k] for k in ("B", "C", "OC", "KH", "KW", "OH", "OW"))
    ckk, cols = C * KH * KW, B * OH * OW
    col, yc = _tmp(d, ckk * cols, "Y"), _tmp(d, OC * cols, "Y")
    _run("im2col", d, **_conv_dims(d), X=d["X"], col=col)
    _run("gemm_nn", d, M=OC, N=cols, K=ckk, alpha=1.0, A=d["weight"], B=col, beta=0.0, C=yc)
    _run("swap01", d, D0=OC, D1=B, D2=OH * OW, X=yc, Y=d["Y"])
    _run("bias_add", d, B=B, C=OC, HW=OH * OW, Y=d["Y"], bias=d["bias"])
    if d["act"]:
        _run("relu_fwd", d, n=B * OC * OH * OW, X=d["Y"], Y=d["Y"])


def _linear_bwd_data(d) -> None:
    B, O, I = d["B"], d["O"], d["I"]
    _run("gemm_nn", d, M=B, N=I, K=O, alpha=1.0, A=d["dY"], B=d["W"], beta=0.0, C=d["dX"])
    if d["relu"]:
        _mask(d, "dX", B * I)


def _conv_bwd_data(d) -> None:
    B, C, H, W, OC, KH, KW, OH, OW = (d[k] for k in ("B", "C", "H", "W", "OC", "KH", "KW",
                                                      "OH", "OW"))
    ckk, cols = C * KH * KW, B * OH * OW
    dyc, dcol = _tmp(d, OC * cols, "dX"), _tmp(d, ckk * cols, "dX")
    _run("swap01", d, D0=B, D1=OC, D2=OH * OW, X=d["dY"], Y=dyc)
    _run("gemm_tn", d, M=ckk, N=cols, K=OC, alpha=1.0, A=d["weight"], B=dyc, beta=0.0, C=dcol)
    _run("col2im", d, **_conv_dims(d), col=dcol, dX=d["dX"])
    if d["relu"]:
        _mask(d, "dX", B * C * H * W)


def _maxpool_bwd_relu(d) -> None:
    B, C, H, W = d["B"], d["C"], d["H"], d["W"]
    _run("maxpool_bwd", d, **{k: d[k] for k in ("B", "C", "H", "W", "K", "stride", "OH", "OW")},
         dY=d["dY"], argmax=d["argmax"], dX=d["dX"])
    _mask(d, "dX", B * C * H * W)


def _softmax_xent_bwd(d) -> None:
    B, C = d["B"], d["C"]
    rows = _tmp(d, B, "dlogits")
    _run("softmax_xent", d, B=B, C=C, logits=d["logits"], labels=d["labels"],
         dlogits=d["dlogits"], row_loss=rows)
    _run("mean", d, n=B, X=rows, out=d["loss"])
    _linear_bwd_data({**d, "O": C, "dY": d["dlogits"]})


def _sgd_pair(d, wname: str, dW: np.ndarray, db: np.ndarray) -> None:
    hyper = {k: d[k] for k in ("lr", "momentum", "weight_decay")}
    _run("sgd_update", d, n=dW.size, **hyper, W=d[wname], dW=dW, V=d["V"])
    _run("sgd_update", d, n=db.size, **hyper, W=d["bias"], dW=db, V=d["Vb"])


def _linear_sgd(d) -> None:
    B, O, I = d["B"], d["O"], d["I"]
    dW, db = _tmp(d, O * I, "W"), _tmp(d, O, "W")
    _run("gemm_tn", d, M=O, N=I, K=B, alpha=1.0, A=d["dY"], B=d["X"], beta=0.0, C=dW)
    _run("bias_grad", d, B=B, C=O, HW=1, dY=d["dY"], db=db)
    _sgd_pair(d, "W", dW, db)


def _conv_sgd(d) -> None:
    B, C, OC, KH, KW, OH, OW = (d[k] for k in ("B", "C", "OC", "KH", "KW", "OH", "OW"))
    ckk, cols = C * KH * KW, B * OH * OW
    col, dyc = _tmp(d, ckk * cols, "weight"), _tmp(d, OC * cols, "weight")
    dW, db = _tmp(d, OC * ckk, "weight"), _tmp(d, OC, "weight")
    _run("im2col", d, **_conv_dims(d), X=d["X"], col=col)
    _run("swap01", d, D0=B, D1=OC, D2=OH * OW, X=d["dY"], Y=dyc)
    _run("gemm_nt", d, M=OC, N=ckk, K=cols, alpha=1.0, A=dyc, B=col, beta=0.0, C=dW)
    _run("bias_grad", d, B=B, C=OC, HW=OH * OW, dY=d["dY"], db=db)
    _sgd_pair(d, "weight", dW, db)


def _splitk_chunks(n: int, S: int) -> list[tuple[int, int]]:
    """The ``S`` chunks ``[s*Kc, min((s+1)*Kc, n))``, ``Kc = ceil(n/S)``, of a split-K sum of
    ``n`` products (the last ones shorter or empty)."""
    kc = -(-n // S)
    return [(min(n, s * kc), min(n, (s + 1) * kc)) for s in range(S)]


def _conv_wgrad_partial(d) -> None:
    """``part[s, oc, :]``: ``conv_sgd``'s weight and bias gradients over chunk ``s`` of the
    ``B*OH*OW`` columns (``im2col`` + ``swap01``, then ``gemm_nt`` + ``bias_grad`` on the
    chunk's columns)."""
    B, C, OC, KH, KW, OH, OW, S = (d[k] for k in ("B", "C", "OC", "KH", "KW", "OH", "OW", "S"))
    ckk, cols = C * KH * KW, B * OH * OW
    col, dyc = _tmp(d, ckk * cols, "part"), _tmp(d, OC * cols, "part")
    _run("im2col", d, **_conv_dims(d), X=d["X"], col=col)
    _run("swap01", d, D0=B, D1=OC, D2=OH * OW, X=d["dY"], Y=dyc)
    col, dyc = col.reshape(ckk, cols), dyc.reshape(OC, cols)
    part = d["part"][:S * OC * (ckk + 1)].reshape(S, OC, ckk + 1)
    for s, (i0, i1) in enumerate(_splitk_chunks(cols, S)):
        part[s] = 0
        if i1 == i0:
            continue
        a, bt = np.ascontiguousarray(dyc[:, i0:i1]), np.ascontiguousarray(col[:, i0:i1])
        dW, db = _tmp(d, OC * ckk, "part"), _tmp(d, OC, "part")
        _run("gemm_nt", d, M=OC, N=ckk, K=i1 - i0, alpha=1.0, A=a.ravel(), B=bt.ravel(),
             beta=0.0, C=dW)
        _run("bias_grad", d, B=1, C=OC, HW=i1 - i0, dY=a.ravel(), db=db)
        part[s, :, :ckk] = dW.reshape(OC, ckk)
        part[s, :, ckk] = db


def _conv_sgd_finish(d) -> None:
    """The ``S`` partial sums of each output added in chunk order, then ``conv_sgd``'s two
    ``sgd_update`` steps."""
    C, OC, KH, KW, S = (d[k] for k in ("C", "OC", "KH", "KW", "S"))
    ckk = C * KH * KW
    part = d["part"][:S * OC * (ckk + 1)].reshape(S, OC, ckk + 1)
    g = np.zeros((OC, ckk + 1), d["weight"].dtype)
    for s in range(S):
        g += part[s]
    _sgd_pair(d, "weight", np.ascontiguousarray(g[:, :ckk]).ravel(),
              np.ascontiguousarray(g[:, ckk]))


FUSED_KERNELS = {
    "linear_fwd": _linear_fwd, "conv_fwd": _conv_fwd, "linear_bwd_data": _linear_bwd_data,
    "conv_bwd_data": _conv_bwd_data, "maxpool_bwd_relu": _maxpool_bwd_relu,
    "softmax_xent_bwd": _softmax_xent_bwd, "linear_sgd": _linear_sgd, "conv_sgd": _conv_sgd,
    "conv_wgrad_partial": _conv_wgrad_partial, "conv_sgd_finish": _conv_sgd_finish,
}

KERNELS.update(FUSED_KERNELS)


# Fused kernels that decide a ReLU: kernel -> (its act argument, its output argument, the
# output's element count). The per-step check (phonetrain.reference.steps) splits them into
# the pre-activation and a relu_fwd so it can follow the runner's near-tie decisions.
_ACT_KERNELS = {
    "linear_fwd": ("act", "Y", lambda d: d["B"] * d["O"]),
    "conv_fwd": ("act", "Y", lambda d: d["B"] * d["OC"] * d["OH"] * d["OW"]),
}


def split_activation(step) -> tuple[object, object] | None:
    """For a fused forward kernel step with ``act = 1``: ``(pre, relu)``, the same step with
    ``act = 0`` (writes the pre-activation to the output) and the ``relu_fwd`` step applying
    the ReLU in place on that output; together they compute the step. ``None`` for any
    other step."""
    if step.op != "kernel" or step.name not in _ACT_KERNELS:
        return None
    act, out, numel = _ACT_KERNELS[step.name]
    d = bind_args(step.name, step.args)
    if not d[act]:
        return None
    names = [a.split(":")[1] for a in KERNEL_ARGS[step.name]]
    args = [dict(a) for a in step.args]
    args[names.index(act)] = {"i": 0}
    y = int(d[out])
    relu = replace(step, name="relu_fwd", args=[{"i": int(numel(d))}, {"t": y}, {"t": y}])
    return replace(step, args=args), relu
