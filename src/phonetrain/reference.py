"""The numpy reference: executes any plan step by step with the kernel ABI's semantics.

Every measured run is verified against it (:func:`verify`). It keeps a host copy and, for the
opencl backend, a device copy of every tensor, so a plan that forgets a transfer computes on
stale data here exactly as on a real device. Math is float32 by default (numpy's BLAS for
GEMM); ``dtype=np.float64`` gives the float64 oracle used by the gradient checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import layout
from .kernels import bind_args
from .plan import Plan, PlanError, uniform_fill

# Tolerance policy: a run is `wrong` when verify() returns more than the study's tolerance
# (measure.verify_atol). The error of one tensor is max_i |run_i - ref_i| / max(1, |ref_i|):
# absolute for elements of magnitude 1 or less, relative for larger ones. float32 runs that
# differ only in summation order stay near 1e-6 after a few iterations; a wrong index or a
# missed transfer gives errors of order 1e-1.


@dataclass
class ReferenceResult:
    """``losses``: float array, one per iteration (warm-up included); ``dumps``: the plan's
    dump tensors at the end, by tensor name, flat arrays of the tensor's dtype."""

    losses: np.ndarray
    dumps: dict[str, np.ndarray]


# ---------------------------------------------------------------- kernels (ABI semantics)

def _gemm(d, trans_a: bool, trans_b: bool) -> None:
    M, N, K = d["M"], d["N"], d["K"]
    a = d["A"][: M * K].reshape((K, M) if trans_a else (M, K))
    b = d["B"][: K * N].reshape((N, K) if trans_b else (K, N))
    c = d["C"][: M * N].reshape(M, N)
    t = d["C"].dtype.type
    prod = (a.T if trans_a else a) @ (b.T if trans_b else b)
    if d["beta"] == 0:
        c[...] = t(d["alpha"]) * prod
    else:
        c[...] = t(d["alpha"]) * prod + t(d["beta"]) * c


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
    sums = e.sum(axis=1)
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
    d["db"][:C] = d["dY"][: B * C * HW].reshape(B, C, HW).sum(axis=(0, 2))


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
    d["out"][0] = x.sum() / x.dtype.type(d["n"])


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
    "maxpool_fwd": _maxpool_fwd, "maxpool_bwd": _maxpool_bwd, "softmax_xent": _softmax_xent,
    "mean": _mean, "sgd_update": _sgd, "fill": _fill, "copy": _copy,
}


def run_kernel(name: str, args: list[dict], arrays) -> None:
    """Execute one ABI kernel in numpy, in place.

    ``args`` are plan-style (``[{"i": 32}, {"f": 1.0}, {"t": 3}, ...]`` in ABI order);
    ``arrays[tensor_id]`` is a flat, writable numpy array (float32/float64 data, int32 for
    ``labels``/``argmax``). Raises ``ValueError`` naming the kernel for a bad signature or a
    buffer too small for the sizes given.
    """
    bound = bind_args(name, args)
    d = {k: (arrays[v] if "t" in a else v) for (k, v), a in zip(bound.items(), args)}
    try:
        KERNELS[name](d)
    except (ValueError, IndexError) as e:
        raise ValueError(f"kernel {name}: {e}") from None


# ---------------------------------------------------------------- plan interpreter

def _initial(t, root: Path, dtype) -> np.ndarray:
    kind = t.init.get("kind")
    npdt = np.int32 if t.dtype == "i32" else dtype
    if kind == "zeros":
        return np.zeros(t.numel, npdt)
    if kind == "uniform":
        return uniform_fill(int(t.init["seed"]), t.numel, float(t.init["low"]),
                            float(t.init["high"])).astype(npdt)
    if kind == "file":
        path = root / t.init["path"]
        raw = np.fromfile(path, "<i4" if t.dtype == "i32" else "<f4")
        if raw.size != t.numel:
            raise PlanError(f"{path}: {raw.size} elements, tensor {t.name} needs {t.numel}")
        return raw.astype(npdt)
    raise PlanError(f"tensor {t.name}: init kind {kind!r} unknown")


def _batches(plan: Plan, root: Path, dtype) -> dict[int, np.ndarray]:
    out = {}
    for b in plan.batches:
        t = plan.tensor(b.tensor)
        path = root / b.path
        raw = np.fromfile(path, "<i4" if t.dtype == "i32" else "<f4")
        if raw.size < b.count * t.numel:
            raise PlanError(f"{path}: {raw.size} elements, {b.count} batches of tensor "
                            f"{t.name} need {b.count * t.numel}")
        out[b.tensor] = raw[: b.count * t.numel].reshape(b.count, t.numel).astype(
            np.int32 if t.dtype == "i32" else dtype)
    return out


def run_plan(plan: Plan | str | Path, root: str | Path, *, dtype=np.float32,
             overrides: dict[str, np.ndarray] | None = None,
             max_iterations: int | None = None) -> ReferenceResult:
    """Execute ``plan`` (a Plan or a plan.json path) with files under staging ``root``.

    Runs ``warmup + iterations`` iterations (or ``max_iterations``), reading the loss from the
    loss tensor's host copy after each. ``overrides`` replaces tensors' initial contents by
    name (gradient checks). Raises :class:`~phonetrain.plan.PlanError` naming a missing or
    short file, ``ValueError`` naming a kernel that fails.
    """
    if not isinstance(plan, Plan):
        plan = Plan.load(plan)
    root = Path(root)
    host = [_initial(t, root, dtype) for t in plan.tensors]
    for name, arr in (overrides or {}).items():
        t = plan.by_name(name)
        host[t.id] = np.asarray(arr, host[t.id].dtype).ravel().copy()
    on_device = plan.backend == "opencl"
    dev = [h.copy() for h in host] if on_device else host
    batches = _batches(plan, root, dtype)
    counts = {b.tensor: b.count for b in plan.batches}
    n_iter = plan.warmup + plan.iterations if max_iterations is None else max_iterations
    losses = np.empty(n_iter, np.float64)
    for it in range(n_iter):
        for s in plan.steps:
            if s.op == "kernel":
                run_kernel(s.name, s.args, dev)
            elif s.op == "load":
                host[s.tensor][:] = batches[s.tensor][it % counts[s.tensor]]
            elif s.op == "h2d" or (s.op == "map" and s.access == "write"):
                dev[s.tensor][:] = host[s.tensor]
            elif s.op == "d2h" or (s.op == "map" and s.access == "read"):
                host[s.tensor][:] = dev[s.tensor]
        losses[it] = host[plan.loss_tensor][0] if plan.loss_tensor >= 0 else math.nan
    dumps = {}
    for tid in plan.dumps:
        t = plan.tensor(tid)
        dumps[t.name] = (dev if t.home == "device" else host)[tid].copy()
    return ReferenceResult(losses=losses, dumps=dumps)


# ---------------------------------------------------------------- verification

def tensor_error(run: np.ndarray, ref: np.ndarray) -> float:
    """``max_i |run_i - ref_i| / max(1, |ref_i|)``; ``inf`` for a shape mismatch or a non-finite
    value in ``run`` where ``ref`` is finite."""
    run = np.asarray(run, np.float64).ravel()
    ref = np.asarray(ref, np.float64).ravel()
    if run.shape != ref.shape:
        return math.inf
    if ref.size == 0:
        return 0.0
    diff = np.abs(run - ref)
    if not np.all(np.isfinite(diff)):
        return math.inf
    return float((diff / np.maximum(1.0, np.abs(ref))).max())


def verify(run_dumps, ref_dumps, run_losses=None, ref_losses=None):
    """Largest :func:`tensor_error` over every reference dump (a dump missing from the run
    counts as ``inf``) and over the loss sequence. Above the study's tolerance
    (``measure.verify_atol``) the workflow marks the run ``wrong``.

    Called as ``verify(plan, root, out_dir)`` (a :class:`~phonetrain.plan.Plan` first), it is
    :func:`verify_run_dir` and returns that dict.
    """
    if isinstance(run_dumps, Plan):
        return verify_run_dir(run_dumps, ref_dumps, run_losses)
    errs = [tensor_error(run_dumps[k], v) if k in run_dumps else math.inf
            for k, v in ref_dumps.items()]
    if ref_losses is not None:
        errs.append(math.inf if run_losses is None else tensor_error(run_losses, ref_losses))
    return max(errs, default=0.0)


def read_dumps(dump_dir: str | Path, plan: Plan) -> dict[str, np.ndarray]:
    """The runner's ``dumps/<name>.f32`` files of ``plan``'s dump tensors (missing ones are
    left out, so :func:`verify` reports them as ``inf``)."""
    out = {}
    for tid in plan.dumps:
        t = plan.tensor(tid)
        p = Path(dump_dir) / f"{t.name}.f32"
        if p.exists():
            out[t.name] = np.fromfile(p, "<i4" if t.dtype == "i32" else "<f4")
    return out


def verify_run_dir(plan: Plan, root: str | Path, out_dir: str | Path) -> dict:
    """Verify one runner output folder (``run.json`` + ``dumps/``) against the reference run
    of ``plan`` on the files under staging ``root``.

    Returns ``{"max_abs_err", "loss_err", "tensor_errs": {name: err}, "worst",
    "ref_losses", "run_losses"}`` (errors as :func:`tensor_error`; ``inf`` for
    a missing dump or loss). Raises :class:`~phonetrain.plan.PlanError` if ``run.json`` is
    missing or unreadable.
    """
    import json

    out_dir = Path(out_dir)
    try:
        run = json.loads((out_dir / layout.RUN).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PlanError(f"{out_dir / 'run.json'}: cannot read the runner's output ({e})") from None
    run_losses = [math.nan if it.get("loss") is None else it["loss"] for it in run.get("iters", [])]
    ref = run_plan(plan, root)
    run_dumps = read_dumps(out_dir / layout.DUMPS, plan)
    errs = {k: (tensor_error(run_dumps[k], v) if k in run_dumps else math.inf)
            for k, v in ref.dumps.items()}
    loss_err = tensor_error(np.asarray(run_losses, np.float64), ref.losses)
    worst = max(errs, key=errs.get, default="loss")
    if not errs or loss_err >= errs[worst]:
        worst = "loss"
    max_err = max([loss_err, *errs.values()])
    return {"max_abs_err": max_err, "loss_err": loss_err, "tensor_errs": errs, "worst": worst,
            "ref_losses": ref.losses.tolist(),
            "run_losses": run_losses}
