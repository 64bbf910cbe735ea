"""Layer types of the model zoo: shapes and parameters only (the lowering emits the kernels).

Shapes exclude the batch dimension: an image is ``(C, H, W)``, a feature vector ``(F,)``.
Parameters are float32; a layer's parameter tensors are named ``<layer>.weight`` and
``<layer>.bias`` in plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Shape = tuple[int, ...]


class ShapeError(ValueError):
    """A layer received an input shape it cannot take; the message names the layer."""


@dataclass(frozen=True)
class Linear:
    """Fully connected layer ``Y[B,out] = X[B,in] @ W[out,in]^T + b[out]`` (PyTorch layout)."""

    name: str
    in_features: int
    out_features: int

    def out_shape(self, x: Shape) -> Shape:
        if math.prod(x) != self.in_features:
            raise ShapeError(f"layer {self.name}: input {x} has {math.prod(x)} features, "
                             f"expected {self.in_features}")
        return (self.out_features,)

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {"weight": (self.out_features, self.in_features), "bias": (self.out_features,)}

    def fan_in(self) -> int:
        return self.in_features


@dataclass(frozen=True)
class Conv2d:
    """2-D convolution ``C -> OC`` with a square ``k x k`` kernel, ``stride`` and zero ``pad``;
    weight ``[OC, C, k, k]``, bias ``[OC]``; lowered as im2col + GEMM, or as the direct
    ``conv2d_fwd`` where the device's tuning.json chose it."""

    name: str
    in_channels: int
    out_channels: int
    kernel: int
    stride: int = 1
    pad: int = 0

    def out_shape(self, x: Shape) -> Shape:
        if len(x) != 3 or x[0] != self.in_channels:
            raise ShapeError(f"layer {self.name}: input {x} is not (C={self.in_channels}, H, W)")
        oh = (x[1] + 2 * self.pad - self.kernel) // self.stride + 1
        ow = (x[2] + 2 * self.pad - self.kernel) // self.stride + 1
        if oh < 1 or ow < 1:
            raise ShapeError(f"layer {self.name}: input {x} is smaller than the kernel")
        return (self.out_channels, oh, ow)

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        k = self.kernel
        return {"weight": (self.out_channels, self.in_channels, k, k),
                "bias": (self.out_channels,)}

    def fan_in(self) -> int:
        return self.in_channels * self.kernel * self.kernel


@dataclass(frozen=True)
class ReLU:
    """Elementwise ``max(x, 0)``."""

    name: str

    def out_shape(self, x: Shape) -> Shape:
        return x

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {}


@dataclass(frozen=True)
class MaxPool2d:
    """Max pooling over ``kernel x kernel`` windows with ``stride`` (no padding; a partial
    window at the edge is dropped, as PyTorch's default ``ceil_mode=False``)."""

    name: str
    kernel: int = 2
    stride: int = 2

    def out_shape(self, x: Shape) -> Shape:
        if len(x) != 3:
            raise ShapeError(f"layer {self.name}: input {x} is not (C, H, W)")
        oh = (x[1] - self.kernel) // self.stride + 1
        ow = (x[2] - self.kernel) // self.stride + 1
        if oh < 1 or ow < 1:
            raise ShapeError(f"layer {self.name}: input {x} is smaller than the window")
        return (x[0], oh, ow)

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {}


@dataclass(frozen=True)
class Flatten:
    """``(C, H, W) -> (C*H*W,)``; free (the same buffer, read row-major)."""

    name: str

    def out_shape(self, x: Shape) -> Shape:
        return (math.prod(x),)

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {}


Layer = Linear | Conv2d | ReLU | MaxPool2d | Flatten
