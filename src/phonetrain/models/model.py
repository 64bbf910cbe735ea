"""A model: a chain of layers from an input shape to class logits, trained with softmax
cross-entropy and SGD."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .layers import Layer, Shape


@dataclass(frozen=True)
class Model:
    """A sequential layer graph.

    ``input_shape`` excludes the batch (``(1, 28, 28)`` or ``(16,)``); ``classes`` is the width
    of the logits; ``default_dataset`` is what a config without a dataset uses.
    """

    name: str
    input_shape: Shape
    classes: int
    layers: tuple[Layer, ...]
    default_dataset: str = "synthetic"

    def __post_init__(self) -> None:
        out = self.shapes()[-1]
        if out != (self.classes,):
            raise ValueError(f"model {self.name}: output shape {out} != ({self.classes},)")

    def shapes(self) -> list[Shape]:
        """Activation shapes without batch: ``[input, after layer 0, after layer 1, ...]``."""
        shapes = [tuple(self.input_shape)]
        for layer in self.layers:
            shapes.append(layer.out_shape(shapes[-1]))
        return shapes

    def param_shapes(self) -> dict[str, Shape]:
        """``{"<layer>.weight": shape, "<layer>.bias": shape, ...}`` in layer order."""
        out: dict[str, Shape] = {}
        for layer, x in zip(self.layers, self.shapes()):
            for pname, shape in layer.param_shapes(x).items():
                out[f"{layer.name}.{pname}"] = shape
        return out

    def param_count(self) -> int:
        """Number of trainable float32 parameters (weights and biases)."""
        return sum(math.prod(s) for s in self.param_shapes().values())

    def flops_per_step(self, batch_size: int, momentum: float = 0.0) -> dict[str, int]:
        """FLOPs of one training step at ``batch_size``: ``{"forward", "backward", "update"}``.

        Summed from the kernels the lowering emits (:mod:`phonetrain.lowering`), with the
        per-kernel FLOP rules of :func:`phonetrain.kernels.kernel_flops` (2 x MACs for GEMM;
        ``forward`` includes the softmax cross-entropy loss). The first parameterized layer
        computes no input gradient. ``update`` is ``2*n`` per parameter for plain SGD and
        ``4*n`` with momentum.
        """
        from ..lowering import LowerSpec, lower  # the kernels the step really runs

        plan = lower(LowerSpec(model=self.name, batch_size=batch_size, backend="cpu",
                               momentum=momentum, dumps="none"), model=self)
        out = {"forward": 0, "backward": 0, "update": 0}
        for s in plan.steps:
            if s.op == "kernel":
                out["forward" if s.phase == "loss" else s.phase] += s.flops
        return out
