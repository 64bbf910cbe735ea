"""The fused lowering of one training step (kernel versions whose ``version.yaml`` sets
``lowering: fused_step``): the fused kernels of ``src/kernels/README.md`` ("Fused kernels").

Forward: a Linear or Conv2d followed by a ReLU is one ``linear_fwd``/``conv_fwd`` with
``act = 1`` (bias, ReLU and, for a convolution, the NCHW layout in the kernel; no im2col);
the ReLU's output is that kernel's output tensor (``<layer>.out``). Max pooling stays
``maxpool_fwd``. Loss: ``softmax_xent_bwd`` computes the loss, ``dlogits`` and the input
gradient of the last Linear layer. Backward: the ReLU backward is folded into the consumer of
the ReLU's output (``linear_bwd_data``/``conv_bwd_data`` with ``relu = 1``,
``maxpool_bwd_relu``), since ``d pre = d out * (out > 0)``; each parameterized layer's
input gradient is computed from its weights *before* its ``linear_sgd``/``conv_sgd``
(weight and bias gradient + SGD update, no gradient buffers) overwrites them.

Split K (opt-in: ``LowerSpec.splitk_groups`` > 0): a convolution whose weight-gradient sums
are long and few (:func:`conv_sgd_splits`) updates through ``conv_wgrad_partial`` (``S``
chunks of each sum into the scratch tensor ``<layer>.wgrad_part``, ``[S, OC, C*KH*KW+1]``)
and ``conv_sgd_finish`` (the ``S`` partial sums in chunk order, then the step) instead of one
``conv_sgd``.

Requires the model's last layer to be a Linear layer (the loss kernel computes its input
gradient); :class:`~phonetrain.lowering.spec.LowerError` otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..models import Conv2d, Flatten, Linear, MaxPool2d, Model, ReLU
from .spec import LowerError


# The split-K rule of a convolution's update (conv_sgd_splits): conv_sgd runs one work-group
# per output (OC*(C*KH*KW+1) of them), each summing K = B*OH*OW products. On a large GPU
# fewer work-groups than it holds at once leave it idle (an H200's 132 SMs hold 8
# work-groups of 256 each: ~1056, LowerSpec.splitk_groups = 1024); the split raises the
# count to at least ``groups`` while every chunk keeps SPLITK_CHUNK_MIN products (4 per
# work-item of a 256 work-group), so the extra launch and the S partial sums per output stay
# small next to the sums. CPUs and phone GPUs run the extra work-groups slower: groups = 0.
SPLITK_CHUNK_MIN = 1024


def conv_sgd_splits(outputs: int, k: int, groups: int) -> int:
    """The chunk count S of a convolution update with ``outputs`` weight-gradient sums (bias
    column included) of ``k`` products each, split to reach ``groups`` work-groups
    (``LowerSpec.splitk_groups``): ``min(ceil(groups / outputs), k // SPLITK_CHUNK_MIN)``,
    or 1 (no split: ``conv_sgd``) when that is below 2, in particular when ``groups`` is 0,
    ``outputs >= groups`` or ``k < 2 * SPLITK_CHUNK_MIN``."""
    if groups == 0:
        return 1
    s = min(-(-groups // outputs), k // SPLITK_CHUNK_MIN)
    return s if s >= 2 else 1


@dataclass
class _Unit:
    """One forward launch group: ``layer`` (with ``relu`` folded in when ``relu``), its input
    and output tensor ids."""

    layer: object
    x: int
    y: int
    relu: bool = False


def _conv_dims(b, layer: Conv2d, x: int, batch: int) -> list[int]:
    _, c, h, w = b.tensors[x].shape
    oc, oh, ow = layer.out_shape((c, h, w))
    return [batch, c, h, w, oc, layer.kernel, layer.kernel, layer.stride, layer.pad, oh, ow]


def _forward(b, model: Model, x: int, batch: int) -> tuple[list[_Unit], set[int]]:
    """Emit the forward kernels; return the units and the ids of tensors a ReLU produced."""
    units: list[_Unit] = []
    relu_out: set[int] = set()
    layers = model.layers
    i = 0
    while i < len(layers):
        layer = layers[i]
        xs = b.tensors[x].shape
        fuse = i + 1 < len(layers) and isinstance(layers[i + 1], ReLU) and \
            isinstance(layer, (Linear, Conv2d))
        if isinstance(layer, Flatten):
            units.append(_Unit(layer, x, x))
        elif isinstance(layer, ReLU):
            y = b.tensor(f"{layer.name}.out", xs, "activation")
            b.kernel("relu_fwd", [math.prod(xs), x, y], layer.name, "forward")
            units.append(_Unit(layer, x, y))
            relu_out.add(y)
        elif isinstance(layer, MaxPool2d):
            _, c, h, w = xs
            oh, ow = layer.out_shape((c, h, w))[1:]
            y = b.tensor(f"{layer.name}.out", [batch, c, oh, ow], "activation")
            am = b.saved[f"{layer.name}.argmax"] = b.tensor(
                f"{layer.name}.argmax", [batch, c, oh, ow], "scratch", dtype="i32")
            b.kernel("maxpool_fwd", [batch, c, h, w, layer.kernel, layer.stride, oh, ow, x, y,
                                     am], layer.name, "forward")
            units.append(_Unit(layer, x, y))
        elif isinstance(layer, Linear):
            W, bias = b.params[layer.name]
            y = b.tensor(f"{layer.name}.out", [batch, layer.out_features], "activation")
            b.kernel("linear_fwd", [batch, layer.out_features, layer.in_features, int(fuse),
                                    x, W, bias, y], layer.name, "forward")
            units.append(_Unit(layer, x, y, fuse))
        elif isinstance(layer, Conv2d):
            if len(b.params[layer.name]) != 2:   # conv_fwd/conv_sgd carry a bias
                raise LowerError(f"layer {layer.name}: a Conv2d without bias has no fused "
                                 "lowering (use a per_layer kernel version)")
            W, bias = b.params[layer.name]
            dims = _conv_dims(b, layer, x, batch)
            y = b.tensor(f"{layer.name}.out", [batch, *dims[4:5], *dims[9:11]], "activation")
            b.kernel("conv_fwd", dims + [int(fuse), x, W, bias, y], layer.name, "forward")
            units.append(_Unit(layer, x, y, fuse))
        else:
            raise LowerError(f"layer {layer.name}: type {type(layer).__name__} has no fused "
                             "lowering")
        if fuse:
            relu_out.add(y)
            i += 1          # the ReLU is part of this launch
        x = units[-1].y
        i += 1
    return units, relu_out


def lower_fused(b, model: Model, spec, x: int, labels: int) -> int:
    """Emit the fused forward, loss, backward and update kernels of one SGD step on builder
    ``b`` (parameters declared without gradient buffers); return the loss tensor id."""
    batch = spec.batch_size
    hyper = [spec.lr, spec.momentum, spec.weight_decay]
    units, relu_out = _forward(b, model, x, batch)
    last = units[-1]
    if not isinstance(last.layer, Linear) or last.relu:
        raise LowerError(f"model {model.name}: the fused lowering needs a Linear last layer "
                         "without ReLU (the loss kernel computes its input gradient); use a "
                         "kernel version with 'lowering: per_layer'")
    param_units = [k for k, u in enumerate(units) if isinstance(u.layer, (Linear, Conv2d))]
    first = param_units[0]
    logits = last.y
    dlogits = b.tensor(f"{b.tensors[logits].name}.grad", [batch, model.classes], "grad")
    loss = b.tensor("loss", [1], "loss")

    def dx_tensor(u: _Unit) -> int:
        return b.tensor(f"{b.tensors[u.x].name}.grad", b.tensors[u.x].shape, "grad")

    k_last = len(units) - 1
    W, _ = b.params[last.layer.name]
    if k_last > first:
        dy_in = dx_tensor(last)
        b.kernel("softmax_xent_bwd", [batch, model.classes, last.layer.in_features,
                                      int(last.x in relu_out), logits, labels, W, last.x,
                                      dlogits, dy_in, loss], "loss", "loss")
    else:   # a single-layer model: no input gradient; the unfused loss kernels
        dy_in = None
        rows = b.tensor("loss.rows", [batch], "scratch")
        b.kernel("softmax_xent", [batch, model.classes, logits, labels, dlogits, rows],
                 "loss", "loss")
        b.kernel("mean", [batch, rows, loss], "loss", "loss")
    dy = dlogits
    for k in range(k_last, first - 1, -1):
        u = units[k]
        layer = u.layer
        need_dx = k > first
        relu = int(u.x in relu_out)
        if isinstance(layer, Flatten):
            continue                       # same tensor: the gradient passes through
        if isinstance(layer, ReLU):
            continue                       # its consumer applied the mask (module docstring)
        if isinstance(layer, MaxPool2d):
            if need_dx:
                _, c, h, w = b.tensors[u.x].shape
                oh, ow = b.tensors[u.y].shape[2:]
                dx = dx_tensor(u)
                dims = [batch, c, h, w, layer.kernel, layer.stride, oh, ow]
                am = b.saved[f"{layer.name}.argmax"]
                if relu:
                    b.kernel("maxpool_bwd_relu", dims + [dy, am, u.x, dx], layer.name,
                             "backward")
                else:
                    b.kernel("maxpool_bwd", dims + [dy, am, dx], layer.name, "backward")
                dy = dx
            continue
        W, bias = b.params[layer.name]
        V, Vb = b.momenta[layer.name]
        dx = None
        if need_dx:      # from the weights before this layer's update
            if k == k_last:
                dx = dy_in
            elif isinstance(layer, Linear):
                dx = dx_tensor(u)
                b.kernel("linear_bwd_data", [batch, layer.out_features, layer.in_features,
                                             relu, dy, W, u.x, dx], layer.name, "backward")
            else:
                dx = dx_tensor(u)
                b.kernel("conv_bwd_data", _conv_dims(b, layer, u.x, batch) +
                         [relu, dy, W, u.x, dx], layer.name, "backward")
        if isinstance(layer, Linear):
            b.kernel("linear_sgd", [batch, layer.out_features, layer.in_features, *hyper,
                                    u.x, dy, W, V, bias, Vb], layer.name, "update")
        else:
            _conv_update(b, layer, _conv_dims(b, layer, u.x, batch), hyper,
                         [u.x, dy, W, V, bias, Vb], spec.splitk_groups)
        dy = dx
    return loss


def _conv_update(b, layer: Conv2d, dims: list[int], hyper: list[float], bufs: list[int],
                 groups: int) -> None:
    """Emit a convolution's weight/bias gradient and SGD step: ``conv_sgd``, or its split-K
    pair when :func:`conv_sgd_splits` (``groups``: ``LowerSpec.splitk_groups``) gives
    ``S >= 2``. ``dims`` as :func:`_conv_dims`, ``bufs`` = ``[X, dY, weight, V, bias, Vb]``."""
    batch, c, _, _, oc, kh, kw, _, _, oh, ow = dims
    outputs = oc * (c * kh * kw + 1)
    s = conv_sgd_splits(outputs, batch * oh * ow, groups)
    if s == 1:
        b.kernel("conv_sgd", dims + hyper + bufs, layer.name, "update")
        return
    x, dy, W, V, bias, Vb = bufs
    part = b.tensor(f"{layer.name}.wgrad_part", [s, oc, c * kh * kw + 1], "scratch")
    b.kernel("conv_wgrad_partial", dims + [s, x, dy, part], layer.name, "update")
    b.kernel("conv_sgd_finish", [c, oc, kh, kw, s] + hyper + [part, W, V, bias, Vb],
             layer.name, "update")
