"""Held-out loss and accuracy of a plan's model from given parameters: the plan's own forward
kernels, in numpy, over a held-out split.

:func:`evaluate` sets the plan's parameter and state tensors (roles ``param``, ``state``) to
the given values -- the runner's checkpoint after an iteration -- then, for each held-out batch
of the plan's batch size, sets the input and label tensors and runs every ``forward``-phase
kernel step of the plan with the ABI's numpy semantics (:mod:`.kernels`, float32). The logits
are the ``logits`` argument of the plan's loss kernel (``softmax_xent`` or the fused
``softmax_xent_bwd``). Per sample::

    loss_i = logsumexp(z_i) - z_i[y_i]        (float64 on the float32 logits z_i)
    correct_i = argmax(z_i) == y_i             (the first maximum on a tie, numpy's argmax)

and the result is their means over the ``n`` held-out samples. The last, partial batch is
filled up with samples from the start of the split, whose rows are not counted.

Batch normalization runs in inference mode, as PyTorch's ``nn.BatchNorm2d`` after
``model.eval()``: each ``batchnorm_stats`` step of the plan is replaced by
:func:`batchnorm_inference`, which sets the step's ``mean``/``invstd`` from the layer's running
statistics (``mean = running_mean``, ``invstd = 1 / sqrt(running_var + eps)``) and leaves the
running statistics unchanged; the following ``batchnorm_apply`` then normalizes with them. A
held-out sample's logits thus depend on that sample alone, not on the batch it is evaluated in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from phonetrain.kernels import bind_args
from phonetrain.plan import Plan, PlanError

from .interpreter import Interpreter
from .kernels import run_kernel

LOSS_KERNELS = ("softmax_xent", "softmax_xent_bwd")


@dataclass(frozen=True)
class HeldoutResult:
    """``loss``: mean cross-entropy (nats); ``accuracy``: share of samples whose largest
    logit is their label, 0..1; ``n``: samples evaluated."""

    loss: float
    accuracy: float
    n: int


def _tensor_of_role(plan: Plan, role: str) -> int:
    ids = [t.id for t in plan.tensors if t.role == role]
    if len(ids) != 1:
        raise PlanError(f"plan {plan.name}: {len(ids)} tensors of role {role!r}, the held-out "
                        "forward needs exactly one")
    return ids[0]


def logits_tensor(plan: Plan) -> int:
    """Id of the tensor the plan's loss kernel reads as ``logits``; :class:`PlanError` when
    the plan has no loss kernel."""
    for s in plan.steps:
        if s.op == "kernel" and s.name in LOSS_KERNELS:
            return int(bind_args(s.name, s.args)["logits"])
    raise PlanError(f"plan {plan.name}: no loss kernel ({' or '.join(LOSS_KERNELS)}), so no "
                    "logits to evaluate")


def batchnorm_inference(args: list[dict], arrays) -> None:
    """Inference-mode statistics for one plan-style ``batchnorm_stats`` launch (ABI order
    ``B, C, HW, eps, momentum, X, mean, invstd, running_mean, running_var``): writes
    ``mean[c] = running_mean[c]`` and ``invstd[c] = 1 / sqrt(running_var[c] + eps)``
    (``[C]``, the arrays' dtype) in place; ``X`` and the running statistics are only read."""
    d = bind_args("batchnorm_stats", args)
    C = int(d["C"])
    rm, rv = arrays[d["running_mean"]][:C], arrays[d["running_var"]][:C]
    t = rv.dtype.type
    arrays[d["mean"]][:C] = rm
    arrays[d["invstd"]][:C] = t(1) / np.sqrt(rv + t(d["eps"]))


def evaluate(plan: Plan, root: str | Path, params: Mapping[str, np.ndarray],
             images: np.ndarray, labels: np.ndarray) -> HeldoutResult:
    """Held-out loss and accuracy (module docstring) of ``plan``'s model with ``params``.

    ``root``: the staging folder the plan's files resolve under (:class:`Interpreter`).
    ``params``: flat arrays by tensor name (e.g. :func:`~.verify.read_checkpoint`); every
    ``param`` and ``state`` tensor of the plan must be there. ``images``: float32
    ``[n, *input shape]``; ``labels``: int ``[n]``. Raises :class:`PlanError` naming a missing
    parameter or a shape that does not fit the plan, ``ValueError`` when ``n`` is 0.
    """
    n = len(labels)
    if n == 0 or len(images) != n:
        raise ValueError(f"held-out split: {len(images)} images and {n} labels; need the same "
                         "number, at least 1")
    interp = Interpreter(plan, root, np.float32)
    for t in plan.tensors:
        if t.role in ("param", "state"):
            if t.name not in params:
                raise PlanError(f"plan {plan.name}: no values for {t.role} tensor {t.name} "
                                "(not in the checkpoint)")
            interp.set_tensor(t.id, params[t.name])
    x_id, y_id = _tensor_of_role(plan, "input"), _tensor_of_role(plan, "label")
    z_id = logits_tensor(plan)
    batch = plan.tensor(y_id).numel
    per_sample = plan.tensor(x_id).numel // batch
    x = np.ascontiguousarray(images, np.float32).reshape(n, -1)
    if x.shape[1] != per_sample:
        raise PlanError(f"plan {plan.name}: held-out samples have {x.shape[1]} values, the "
                        f"plan's input takes {per_sample}")
    y = np.asarray(labels, np.int64)
    classes = plan.tensor(z_id).numel // batch
    forward = [s for s in plan.steps if s.op == "kernel" and s.phase == "forward"]
    losses, correct = np.empty(n), np.empty(n, bool)
    for start in range(0, n, batch):
        rows = np.arange(start, start + batch) % n
        interp.set_tensor(x_id, x[rows])
        interp.set_tensor(y_id, y[rows])
        for s in forward:
            if s.name == "batchnorm_stats":
                batchnorm_inference(s.args, interp.dev)
            else:
                run_kernel(s.name, s.args, interp.dev)
        z = interp.dev[z_id].reshape(batch, classes).astype(np.float64)
        k = min(batch, n - start)
        z, lab = z[:k], y[start:start + k]
        zmax = z.max(axis=1)
        lse = zmax + np.log(np.exp(z - zmax[:, None]).sum(axis=1))
        losses[start:start + k] = lse - z[np.arange(k), lab]
        correct[start:start + k] = z.argmax(axis=1) == lab
    return HeldoutResult(loss=float(losses.mean()), accuracy=float(correct.mean()), n=n)
