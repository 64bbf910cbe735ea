"""A model: a chain of layers from an input shape to class logits, trained with softmax
cross-entropy and SGD."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .layers import Layer, Shape, walk


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
        """``{"<layer>.weight": shape, "<layer>.bias": shape, ...}`` in layer order (the layers
        inside a residual block included)."""
        out: dict[str, Shape] = {}
        for layer, x in walk(self.layers, tuple(self.input_shape)):
            for pname, shape in layer.param_shapes(x).items():
                out[f"{layer.name}.{pname}"] = shape
        return out

    def state_shapes(self) -> dict[str, Shape]:
        """Non-trained state (batch norm's running statistics): ``{"<layer>.running_mean":
        shape, ...}`` in layer order."""
        out: dict[str, Shape] = {}
        for layer, _ in walk(self.layers, tuple(self.input_shape)):
            for sname, shape in getattr(layer, "state_shapes", dict)().items():
                out[f"{layer.name}.{sname}"] = shape
        return out

    def param_count(self) -> int:
        """Number of trainable float32 parameters (weights and biases)."""
        return sum(math.prod(s) for s in self.param_shapes().values())
