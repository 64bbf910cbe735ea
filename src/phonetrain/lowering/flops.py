"""FLOPs of one training step, counted from the kernels the lowering emits."""

from __future__ import annotations

from ..models import Model
from .build import lower
from .spec import LowerSpec


def flops_per_step(model: Model, batch_size: int, momentum: float = 0.0) -> dict[str, int]:
    """FLOPs of one training step of ``model`` at ``batch_size``: ``{"forward", "backward",
    "update"}``.

    Summed from the kernels the lowering emits, with the per-kernel FLOP rules of
    :func:`phonetrain.kernels.kernel_flops` (2 x MACs for GEMM; ``forward`` includes the
    softmax cross-entropy loss). The first parameterized layer computes no input gradient.
    ``update`` is ``2*n`` per parameter for plain SGD and ``4*n`` with momentum.
    """
    plan = lower(LowerSpec(model=model.name, batch_size=batch_size, backend="cpu",
                           momentum=momentum, dumps="none"), model=model)
    out = {"forward": 0, "backward": 0, "update": 0}
    for s in plan.steps:
        if s.op == "kernel":
            out["forward" if s.phase == "loss" else s.phase] += s.flops
    return out


def launches_per_step(model: Model, batch_size: int, kernel: str = "baseline") -> int:
    """Kernel launches of one training step (forward, loss, backward, update), as the
    lowering emits them for kernel version ``kernel``; the same on every placement
    (transfers are not launches). Raises :class:`~phonetrain.lowering.spec.LowerError` where
    that version's lowering has no sequence for the model."""
    plan = lower(LowerSpec(model=model.name, batch_size=batch_size, backend="cpu",
                           kernel=kernel, dumps="none"), model=model)
    return sum(1 for s in plan.steps if s.op == "kernel")
