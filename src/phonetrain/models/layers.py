"""Layer types of the model zoo: shapes and parameters only (the lowering emits the kernels).

Shapes exclude the batch dimension: an image is ``(C, H, W)``, a feature vector ``(F,)``.
Parameters are float32; a layer's parameter tensors are named ``<layer>.weight`` and
``<layer>.bias`` in plans. A layer may also have non-trained state (batch norm's running
statistics, ``state_shapes``) and constant initial values (``constant_init``); a
:class:`Residual` wraps a sub-sequence of layers and adds its input to their output.
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
    weight ``[OC, C, k, k]``, bias ``[OC]`` (none with ``bias=False``, as before a batch
    norm); lowered as im2col + GEMM, or as the direct ``conv2d_fwd`` where the device's
    tuning.json chose it."""

    name: str
    in_channels: int
    out_channels: int
    kernel: int
    stride: int = 1
    pad: int = 0
    bias: bool = True

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
        out: dict[str, Shape] = {"weight": (self.out_channels, self.in_channels, k, k)}
        if self.bias:
            out["bias"] = (self.out_channels,)
        return out

    def fan_in(self) -> int:
        return self.in_channels * self.kernel * self.kernel


@dataclass(frozen=True)
class _Activation:
    """An element-wise activation: output shape = input shape, no parameters. Not a layer
    itself (the lowering tells ReLU and ReLU6 apart by their own classes)."""

    name: str

    def out_shape(self, x: Shape) -> Shape:
        return x

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {}


@dataclass(frozen=True)
class ReLU(_Activation):
    """Elementwise ``max(x, 0)``."""


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


def _image(layer_name: str, x: Shape, channels: int | None = None) -> None:
    if len(x) != 3 or (channels is not None and x[0] != channels):
        want = f"C={channels}" if channels is not None else "C"
        raise ShapeError(f"layer {layer_name}: input {x} is not ({want}, H, W)")


@dataclass(frozen=True)
class DepthwiseConv2d:
    """Depthwise 3x3 convolution (one filter per channel, ``groups = C`` in PyTorch) with
    ``stride`` and zero ``pad``; weight ``[C, 1, 3, 3]``, no bias (a batch norm follows it in
    MobileNetV2); lowered to the ``dwconv3x3_*`` kernels."""

    name: str
    channels: int
    stride: int = 1
    pad: int = 1
    kernel: int = 3

    def __post_init__(self) -> None:
        if self.kernel != 3:
            raise ShapeError(f"layer {self.name}: depthwise kernel {self.kernel}; only 3x3 "
                             "has kernels (dwconv3x3_*)")

    def out_shape(self, x: Shape) -> Shape:
        _image(self.name, x, self.channels)
        oh = (x[1] + 2 * self.pad - 3) // self.stride + 1
        ow = (x[2] + 2 * self.pad - 3) // self.stride + 1
        if x[1] + 2 * self.pad < 3 or x[2] + 2 * self.pad < 3:
            raise ShapeError(f"layer {self.name}: input {x} is smaller than the kernel")
        return (self.channels, oh, ow)

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {"weight": (self.channels, 1, 3, 3)}

    def fan_in(self) -> int:
        return 9


@dataclass(frozen=True)
class BatchNorm2d:
    """Batch normalization in training mode (Ioffe & Szegedy, ICML 2015) over ``(B, H, W)``
    per channel: ``Y = (X - mean) / sqrt(var + eps) * weight + bias`` with the batch's mean and
    biased variance; ``weight`` (gamma) starts at 1, ``bias`` (beta) at 0, both trained by SGD.
    State, not parameters: ``running_mean`` (starts 0) and ``running_var`` (starts 1), updated
    as PyTorch's ``BatchNorm2d``: ``(1 - momentum) * old + momentum * batch value``, the
    variance unbiased (``n/(n-1)``, ``n = B*H*W``). ``eps``/``momentum`` are PyTorch's
    defaults."""

    name: str
    channels: int
    eps: float = 1e-5
    momentum: float = 0.1

    def out_shape(self, x: Shape) -> Shape:
        _image(self.name, x, self.channels)
        return x

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {"weight": (self.channels,), "bias": (self.channels,)}

    def state_shapes(self) -> dict[str, Shape]:
        return {"running_mean": (self.channels,), "running_var": (self.channels,)}

    @property
    def constant_init(self) -> dict[str, float]:
        """Initial value of every parameter and state tensor (PyTorch's)."""
        return {"weight": 1.0, "bias": 0.0, "running_mean": 0.0, "running_var": 1.0}

    def fan_in(self) -> int:
        return 1


@dataclass(frozen=True)
class ReLU6(_Activation):
    """Elementwise ``min(max(x, 0), 6)`` (MobileNetV2's activation)."""


@dataclass(frozen=True)
class GlobalAvgPool2d:
    """``(C, H, W) -> (C,)``: the mean over each channel's ``H*W`` pixels."""

    name: str

    def out_shape(self, x: Shape) -> Shape:
        _image(self.name, x)
        return (x[0],)

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {}


@dataclass(frozen=True)
class Residual:
    """``Y = body(X) + X``: the layers of ``body`` in sequence, plus the skip connection; the
    body must keep the shape. Backward: the skip passes ``dY`` unchanged, so ``dX`` is the
    body's input gradient plus ``dY`` (one ``add``). Parameters belong to the body's layers."""

    name: str
    body: tuple

    def out_shape(self, x: Shape) -> Shape:
        y = x
        for layer in self.body:
            y = layer.out_shape(y)
        if tuple(y) != tuple(x):
            raise ShapeError(f"layer {self.name}: the body maps {x} to {y}; a residual needs "
                             "the same shape")
        return x

    def param_shapes(self, x: Shape) -> dict[str, Shape]:
        return {}


Layer = (Linear | Conv2d | ReLU | MaxPool2d | Flatten | DepthwiseConv2d | BatchNorm2d | ReLU6
         | GlobalAvgPool2d | Residual)


def walk(layers, x: Shape):
    """Every layer with its input shape, depth first: a :class:`Residual` comes before the
    layers of its body. Yields ``(layer, input shape)``."""
    for layer in layers:
        yield layer, x
        if isinstance(layer, Residual):
            yield from walk(layer.body, x)
        x = layer.out_shape(x)
