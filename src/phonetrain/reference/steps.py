"""Per-step verification: each checkpointed iteration recomputed from the runner's own state.

The runner keeps, after each checkpointed iteration ``i`` (:mod:`phonetrain.plan`), the
contents of the plan's checkpoint tensors: parameters and momentum buffers (the state the next
step reads), gradients (what the update read), activations, the loss and the max-pool argmax
(the forward's decisions). :func:`check_step` runs iteration ``i`` in numpy from the runner's
state after ``i - 1`` (the plan's initial contents for ``i = 0``), on the same batch and plan,
twice in lockstep -- in float64 (``ref64``: exact up to ~1e-16) and in float32 (``ref32``) --
and compares the runner's tensors after ``i`` with ``ref64``.

A kernel fault changes the result of the step it runs in; an honest float32 difference (a
different summation order, FMA contraction) changes it by rounding only. A trajectory that
drifts after a near-tie flipped (below) is not judged here: each step starts from the runner's
own state, so drift never accumulates into a check.

Tolerance of tensor ``T`` (``src``: float32 rounding of the step's reductions)::

    |run - ref64| <= KAPPA * max|ref32 - ref64| + FLOOR_ULPS * u * max|ref64|,   u = 2**-24

``max|ref32 - ref64|`` is the float32 rounding of this very step, as propagated through it to
``T``: every GEMM inner product, bias and batch sum, softmax and mean, in numpy's order
(OpenBLAS's blocked, FMA-based GEMM). A correct device kernel sums in another order: a
sequential inner product of ``n`` terms has a worst-case error bound ``(n - 1) u`` against
``ceil(log2 n) u`` for pairwise summation and typical errors ``~sqrt(n) u`` for both
(Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., 2002, secs. 3.1 and 4.2).
``KAPPA`` = 16 covers the ratio of two orders' errors (measured on PoCL, the runner's CPU
backend and an NVIDIA H200 over every checked step of the study: docs/notebook/2026-12-01.md);
``FLOOR_ULPS`` = 4 ulps of the tensor's largest value cover tensors whose float32 and float64
results agree exactly. A planted fault of 1e-4 relative in one GEMM exceeds it (tests).

Near-ties: a ReLU (``relu_fwd``, or the ReLU of a fused ``linear_fwd``/``conv_fwd``, checked
on its pre-activation; likewise the ReLU6 of a fused ``bn_act_fwd``) whose input is within
the rounding of zero (a ReLU6's: of 0 or 6), or a max-pool window whose largest values are
within rounding of each other, may decide differently in two correct implementations; the
difference is then a whole gradient contribution, not a rounding error. Where the float64
input is that close to the decision (within ``KAPPA`` times the input's own float32 rounding)
the check follows the runner's decision (its ReLU output, its argmax, if that argmax is one of
the near-maximal elements of its window) and counts it (``decisions_followed``); everywhere
else the reference decides.

Adam's update (``adam_update``) divides by the root of the second moment, so a gradient
element near 0 passes an absolute rounding error ``e`` of its gradient on to the weight
multiplied by up to ``lr * eps / (|g| + eps)**2`` (``lr / eps`` at ``g = 0``): a correct
runner's rounding in one tiny gradient element moves that weight by more than the rounding of
the reference's own step anywhere in the tensor. The gradient is checked as a tensor of its
own; the update then starts from the runner's gradient (both references take it), as the
step as a whole starts from the runner's state, and the weights and moments after it are
compared with the update of that gradient (:func:`_follow_gradient`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from phonetrain.plan import Plan, PlanError

from .fused import split_activation
from .fused_bn import split_bn_activation
from .interpreter import Interpreter

KAPPA = 16.0
FLOOR_ULPS = 4.0
U32 = 2.0 ** -24
TOLERANCE_SOURCE = (f"per tensor: {KAPPA:g} x max|ref32 - ref64| (the float32 rounding of "
                    f"the step's reductions, numpy's order) + {FLOOR_ULPS:g} float32 ulps of "
                    "the tensor's largest value; near-ties follow the runner's decision")


@dataclass
class TensorCheck:
    """One tensor after the step: ``error`` = max|run - ref64|, ``noise`` = max|ref32 -
    ref64|, ``bound`` = the tolerance (module docstring), ``worst_index`` of the error."""

    error: float
    noise: float
    bound: float
    worst_index: int

    @property
    def ratio(self) -> float:
        return self.error / self.bound if self.bound > 0 else (0.0 if self.error == 0
                                                                else float("inf"))


@dataclass
class StepCheck:
    """The verdict on one iteration: ``ok`` when every tensor's error is within its bound."""

    iteration: int
    tensors: dict[str, TensorCheck]
    decisions_followed: int = 0
    missing: list[str] = field(default_factory=list)

    @property
    def worst(self) -> str | None:
        return max(self.tensors, key=lambda k: self.tensors[k].ratio, default=None)

    @property
    def ok(self) -> bool:
        return not self.missing and all(t.ratio <= 1.0 for t in self.tensors.values())

    def to_json(self) -> dict:
        w = self.worst
        return {"iteration": self.iteration, "ok": self.ok, "worst_tensor": w,
                "error": self.tensors[w].error if w else None,
                "bound": self.tensors[w].bound if w else None,
                "ratio": self.tensors[w].ratio if w else None,
                "decisions_followed": self.decisions_followed, "missing": self.missing,
                "tensors": {k: {"error": t.error, "noise": t.noise, "bound": t.bound,
                                "worst_index": t.worst_index}
                            for k, t in self.tensors.items()}}


def checked_iterations(checkpointed: list[int]) -> list[int]:
    """The iterations a run with these checkpoints lets the check recompute: 0 (from the
    plan's initial contents) and every ``i`` whose predecessor ``i - 1`` is checkpointed."""
    have = set(checkpointed)
    return sorted(i for i in have if i == 0 or i - 1 in have)


def _eps(x32: np.ndarray, x64: np.ndarray) -> float:
    """How close to a decision the float64 input may be and still flip in float32."""
    if x64.size == 0:
        return 0.0
    return KAPPA * float(np.max(np.abs(x32 - x64))) + FLOOR_ULPS * U32 * float(np.max(np.abs(x64)))


def _follow_relu(s, a32: Interpreter, a64: Interpreter, x32, x64, runner: np.ndarray) -> int:
    n = int(s.args[0]["i"])
    y = int(s.args[2]["t"])
    eps = _eps(x32[:n], x64[:n])
    run = runner[:n].astype(np.float64)
    near = (np.abs(x64[:n]) <= eps) & (np.abs(run) <= eps)
    flip = near & ((run > 0) != (a64.dev[y][:n] > 0))
    a64.dev[y][:n][flip] = run[flip]
    a32.dev[y][:n][flip] = run[flip].astype(np.float32)
    return int(flip.sum())


def _follow_relu6(s, a32: Interpreter, a64: Interpreter, x32, x64, runner: np.ndarray) -> int:
    """ReLU6 decides twice: at 0 (as ReLU) and at 6 (the clip); follow the runner at either."""
    n = int(s.args[0]["i"])
    y = int(s.args[2]["t"])
    eps = _eps(x32[:n], x64[:n])
    run = runner[:n].astype(np.float64)
    ref = a64.dev[y][:n]
    flip = np.zeros(n, bool)
    for edge in (0.0, 6.0):
        near = (np.abs(x64[:n] - edge) <= eps) & (np.abs(run - edge) <= eps)
        flip |= near & ((run > edge) != (ref > edge))
    a64.dev[y][:n][flip] = run[flip]
    a32.dev[y][:n][flip] = run[flip].astype(np.float32)
    return int(flip.sum())


_FOLLOW_ELEMENTWISE = {"relu_fwd": _follow_relu, "relu6_fwd": _follow_relu6}


def _follow_maxpool(s, a32: Interpreter, a64: Interpreter, x32, x64, run_am) -> int:
    B, C, H, W, K, st, OH, OW = (int(a["i"]) for a in s.args[:8])
    y, am = int(s.args[9]["t"]), int(s.args[10]["t"])
    m = B * C * OH * OW
    x = x64[: B * C * H * W].reshape(B * C, H * W)
    xs = x32[: B * C * H * W].reshape(B * C, H * W)
    eps = _eps(x32[: B * C * H * W], x64[: B * C * H * W])
    vals = np.stack([x.reshape(B * C, H, W)[:, kh:kh + st * (OH - 1) + 1:st,
                                            kw:kw + st * (OW - 1) + 1:st].reshape(B * C, -1)
                     for kh in range(K) for kw in range(K)])           # [K*K, B*C, OH*OW]
    top = vals.max(axis=0)
    near = (vals >= top - eps).sum(axis=0) > 1
    r = run_am[:m].astype(np.int64).reshape(B * C, OH * OW)
    oh, ow = np.divmod(np.arange(OH * OW), OW)
    rh, rw = np.divmod(r, W)
    inside = (rh >= oh * st) & (rh < oh * st + K) & (rw >= ow * st) & (rw < ow * st + K) & \
        (r >= 0) & (r < H * W)
    rc = np.clip(r, 0, H * W - 1)
    rv = np.take_along_axis(x, rc, axis=1)
    ref = a64.dev[am][:m].reshape(B * C, OH * OW)
    adopt = near & inside & (rv >= top - eps) & (r != ref)
    rows = np.nonzero(adopt)
    a64.dev[am][:m].reshape(B * C, -1)[rows] = r[rows]
    a32.dev[am][:m].reshape(B * C, -1)[rows] = r[rows]
    a64.dev[y][:m].reshape(B * C, -1)[rows] = rv[rows]
    a32.dev[y][:m].reshape(B * C, -1)[rows] = np.take_along_axis(xs, rc, axis=1)[rows]
    return int(adopt.sum())


def _follow_gradient(s, a32: Interpreter, a64: Interpreter, after: Mapping[str, np.ndarray],
                     own: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
    """Before an ``adam_update`` step: keep the references' own gradient in ``own`` (tensor
    id -> float32 and float64 copies, what the gradient's check compares) and give both
    references the runner's gradient (module docstring), when the runner kept it."""
    tid = int(s.args[9]["t"])
    name = a64.plan.tensor(tid).name
    if name not in after or tid in own:
        return
    own[tid] = (a32.home(tid).copy(), np.asarray(a64.home(tid), np.float64).copy())
    a32.set_tensor(tid, after[name])
    a64.set_tensor(tid, after[name])


def _compare(run: np.ndarray, r32: np.ndarray, r64: np.ndarray) -> TensorCheck:
    run = np.asarray(run, np.float64).ravel()
    r32 = np.asarray(r32, np.float64).ravel()
    if run.shape != r64.shape:
        return TensorCheck(float("inf"), 0.0, 0.0, -1)
    diff = np.abs(run - r64)
    diff[~np.isfinite(diff)] = np.inf
    noise = float(np.max(np.abs(r32 - r64))) if r64.size else 0.0
    scale = float(np.max(np.abs(r64))) if r64.size else 0.0
    worst = int(np.argmax(diff)) if diff.size else -1
    return TensorCheck(float(diff[worst]) if diff.size else 0.0, noise,
                       KAPPA * noise + FLOOR_ULPS * U32 * scale, worst)


def check_step(plan: Plan, root, iteration: int, before: Mapping[str, np.ndarray] | None,
               after: Mapping[str, np.ndarray]) -> StepCheck:
    """Recompute iteration ``iteration`` of ``plan`` (files under staging ``root``) from the
    runner's checkpoint ``before`` (tensor name -> flat array; None: the plan's initial
    contents, for iteration 0) and compare the runner's checkpoint ``after`` with it.

    Every float32 checkpoint tensor is compared (a tensor missing from ``after`` is listed
    in ``missing`` and fails the step). Raises :class:`~phonetrain.plan.PlanError` when the
    plan has no checkpoint tensors or ``before`` lacks one.
    """
    if not plan.checkpoints or not plan.checkpoints["tensors"]:
        raise PlanError(f"plan {plan.name}: no checkpoint tensors; lower it with checkpoints")
    tids = plan.checkpoints["tensors"]
    a32 = Interpreter(plan, root, np.float32, sequential_gemm=True)
    a64 = Interpreter(plan, root, np.float64)
    if before is not None:
        for tid in tids:
            name = plan.tensor(tid).name
            if name not in before:
                raise PlanError(f"checkpoint before iteration {iteration} lacks tensor {name}")
            a32.set_tensor(tid, before[name])
            a64.set_tensor(tid, before[name])
    followed = 0
    own: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # gradients the update took over
    for step in plan.steps:
        if step.op == "kernel" and step.name == "adam_update":
            _follow_gradient(step, a32, a64, after, own)
        # a fused GEMM or batch norm + activation: the activation is a decision too
        split = split_activation(step) or split_bn_activation(step)
        if split is not None:
            a32.run_step(split[0], iteration)
            a64.run_step(split[0], iteration)
        s = split[1] if split is not None else step
        decision = s.op == "kernel" and s.name in ("relu_fwd", "relu6_fwd", "maxpool_fwd")
        if decision:
            xt = int(s.args[8 if s.name == "maxpool_fwd" else 1]["t"])
            x32, x64 = a32.dev[xt].copy(), a64.dev[xt].copy()
        a32.run_step(s, iteration)
        a64.run_step(s, iteration)
        if not decision:
            continue
        if s.name in _FOLLOW_ELEMENTWISE:
            y = plan.tensor(int(s.args[2]["t"])).name
            if y in after:
                followed += _FOLLOW_ELEMENTWISE[s.name](s, a32, a64, x32, x64, after[y])
        else:
            y, am = (plan.tensor(int(s.args[i]["t"])).name for i in (9, 10))
            if y in after and am in after:
                followed += _follow_maxpool(s, a32, a64, x32, x64, after[am])
    checks, missing = {}, []
    for tid in tids:
        t = plan.tensor(tid)
        if t.dtype != "f32":
            continue
        if t.name not in after:
            missing.append(t.name)
            continue
        r32, r64 = own.get(tid, (a32.home(tid), a64.home(tid)))
        checks[t.name] = _compare(after[t.name], r32, np.asarray(r64, np.float64).ravel())
    return StepCheck(iteration, checks, followed, missing)
