"""The fused lowering of models with batch normalization (MobileNetV2-style networks) for
kernel versions whose ``version.yaml`` sets ``lowering: fused_step``: the fused batch-norm
kernels of ``src/kernels/README.md`` ("Fused batch-norm kernels").

A *unit* is a bias-free ``Conv2d`` or a ``DepthwiseConv2d`` (a grouped convolution with
``groups = C``), the ``BatchNorm2d`` after it and an optional ``ReLU6``/``ReLU``. Forward: two
launches per unit, ``gconv_stats_fwd`` (the convolution and the statistics of each tile of
:func:`stats_tile` outputs of a channel) and ``bn_act_fwd`` (the channel statistics merged
from the tiles', normalization, activation); a ``Residual`` whose body is units ending in one
without activation adds its input in that last unit's ``bn_act_fwd`` (``res = 1``, output
``<block>.out``). ``GlobalAvgPool2d`` is
``gap_fwd``, the last layer a ``Linear`` (``linear_fwd``). Loss: ``softmax_xent_bwd`` (the
Linear layer's input gradient too), then ``linear_sgd``.

Backward, per unit from the last: ``bn_bwd_sgd`` (the gradient through the batch
statistics, and the SGD step of gamma and beta; it applies the unit's activation mask
itself only where its output gradient comes unmasked, from ``gap_bwd``), then
``gconv_bwd_data`` (the input gradient from the weights before their update, with the
activation mask of the unit's input and, for the first unit of a residual body, the skip's
gradient added: ``res = 1``), then ``gconv_sgd`` (the weight gradient and its SGD step), or
(opt-in: ``LowerSpec.splitk_groups`` > 0) where its sums are long and few its split-K pair
``gconv_wgrad_partial`` (into the scratch tensor ``<conv>.wgrad_part``,
``[S, OC, C/groups*KH*KW]``) + ``gconv_sgd_finish``, ``S`` by the rule of ``conv_sgd``
(:func:`phonetrain.lowering.fused.conv_sgd_splits`). The first unit computes no input
gradient.

Tensors: ``<conv>.out`` the convolution's output (batch norm's input), ``<bn>.part`` (the
tiles' statistics), ``<bn>.mean`` / ``.invstd`` scratch, the unit's output named after its
last layer (``<relu6>.out``, ``<bn>.out``, or ``<block>.out``), gradients ``<tensor>.grad``.
Any other layer raises :class:`~phonetrain.lowering.spec.LowerError` naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import (BatchNorm2d, Conv2d, DepthwiseConv2d, Flatten, GlobalAvgPool2d, Linear,
                      Model, ReLU, ReLU6, Residual, walk)
from ..kernels.abi import REDUCE_LOCAL
from .fused import conv_sgd_splits
from .spec import LowerError

_ACT = {ReLU: 1, ReLU6: 2}

# The most tiles per channel of the forward statistics: bn_act_fwd's work-groups each merge
# all of their channel's tiles, so the tile grows with the channel's size beyond
# STATS_TILES_MAX * REDUCE_LOCAL outputs.
STATS_TILES_MAX = 128


def stats_tile(n: int) -> int:
    """Outputs per tile of a channel of ``n`` outputs (``B*OH*OW``): a multiple of the
    reductions' local size ``REDUCE_LOCAL`` (one output per work-item while ``n`` is at most
    ``STATS_TILES_MAX * REDUCE_LOCAL``), so that a channel has at most ``STATS_TILES_MAX``
    tiles."""
    return REDUCE_LOCAL * max(1, -(-n // (REDUCE_LOCAL * STATS_TILES_MAX)))


@dataclass
class _Unit:
    """One unit's forward (``gconv_stats_fwd`` + ``bn_act_fwd``): convolution ``conv`` +
    ``bn`` with activation code ``act`` (0 none, 1 ReLU, 2 ReLU6); tensors ``x`` (input),
    ``z`` (convolution output), ``y`` (output), ``mean``/``invstd``; ``dims`` the 12
    grouped-convolution sizes; ``skip``: the index of its block's last unit when this unit is
    a residual body's first (its input gradient adds that unit's output gradient)."""

    conv: object
    bn: BatchNorm2d
    act: int
    x: int
    z: int = -1
    y: int = -1
    mean: int = -1
    invstd: int = -1
    dims: tuple = ()
    res: int = 0
    skip: int | None = None


def uses_batchnorm(model: Model) -> bool:
    """Whether ``model`` has a ``BatchNorm2d`` layer (inside residual blocks too): the models
    this module lowers."""
    return any(isinstance(layer, BatchNorm2d) for layer, _ in walk(model.layers,
                                                                    tuple(model.input_shape)))


def _gconv_dims(b, conv, x: int, batch: int) -> tuple:
    _, c, h, w = b.tensors[x].shape
    oc, oh, ow = conv.out_shape((c, h, w))
    groups = c if isinstance(conv, DepthwiseConv2d) else 1
    return (batch, c, h, w, oc, conv.kernel, conv.kernel, conv.stride, conv.pad, oh, ow, groups)


def _units_of(layers, where: str) -> list[tuple]:
    """Group ``layers`` into ``("unit", conv, bn, act layer or None)`` and single layers
    ``("layer", layer)``; a convolution needs a ``BatchNorm2d`` right after it."""
    out, i = [], 0
    while i < len(layers):
        layer = layers[i]
        if isinstance(layer, (Conv2d, DepthwiseConv2d)):
            if isinstance(layer, Conv2d) and layer.bias:
                raise LowerError(f"layer {layer.name}: a Conv2d with bias in a batch-norm "
                                 "model has no fused lowering (use a per_layer kernel version)")
            bn = layers[i + 1] if i + 1 < len(layers) else None
            if not isinstance(bn, BatchNorm2d):
                raise LowerError(f"layer {layer.name}: the fused lowering of {where} needs a "
                                 "BatchNorm2d after each convolution")
            act = layers[i + 2] if i + 2 < len(layers) and \
                type(layers[i + 2]) in _ACT else None
            out.append(("unit", layer, bn, act))
            i += 3 if act is not None else 2
        else:
            out.append(("layer", layer))
            i += 1
    return out


def _emit_unit(b, u: _Unit, out_name: str, batch: int, residual: int | None = None) -> None:
    """Declare the unit's tensors and emit its ``gconv_stats_fwd`` and ``bn_act_fwd``
    (``residual``: the skip connection's tensor, added in the second launch)."""
    u.dims = _gconv_dims(b, u.conv, u.x, batch)
    B, _, _, _, OC, *_, OH, OW, _ = u.dims
    shape, tile = [B, OC, OH, OW], stats_tile(B * OH * OW)
    u.z = b.tensor(f"{u.conv.name}.out", shape, "activation")
    u.y = b.tensor(f"{out_name}.out", shape, "activation")
    part = b.tensor(f"{u.bn.name}.part", [OC, -(-B * OH * OW // tile), 2], "scratch")
    u.mean = b.tensor(f"{u.bn.name}.mean", [OC], "scratch")
    u.invstd = b.tensor(f"{u.bn.name}.invstd", [OC], "scratch")
    u.res = int(residual is not None)
    gamma, beta = b.params[u.bn.name]
    rmean, rvar = b.bn_state[u.bn.name]
    b.kernel("gconv_stats_fwd", [*u.dims, tile, u.x, b.params[u.conv.name][0], u.z, part],
             u.conv.name, "forward")
    b.kernel("bn_act_fwd", [B, OC, OH * OW, tile, u.act, u.res, u.bn.eps, u.bn.momentum, u.z,
                            part, gamma, beta, u.x if residual is None else residual, u.y,
                            u.mean, u.invstd, rmean, rvar], u.bn.name, "forward")


def _forward(b, layers, x: int, batch: int, units: list, entries: list, where: str) -> int:
    """Emit the forward of ``layers`` from tensor ``x``; append units to ``units`` and
    ``("unit", index)`` / ``("gap", layer, x, y)`` / ``("linear", layer, x, y)`` to
    ``entries``; return the output tensor id."""
    for item in _units_of(layers, where):
        if item[0] == "unit":
            _, conv, bn, act = item
            u = _Unit(conv, bn, _ACT[type(act)] if act is not None else 0, x)
            _emit_unit(b, u, (act or bn).name, batch)
            units.append(u)
            entries.append(("unit", len(units) - 1))
            x = u.y
            continue
        layer = item[1]
        if isinstance(layer, Residual):
            x = _residual(b, layer, x, batch, units, entries)
        elif isinstance(layer, GlobalAvgPool2d):
            _, c, h, w = b.tensors[x].shape
            y = b.tensor(f"{layer.name}.out", [batch, c], "activation")
            b.kernel("gap_fwd", [batch, c, h * w, x, y], layer.name, "forward")
            entries.append(("gap", layer, x, y))
            x = y
        elif isinstance(layer, Flatten):
            continue
        elif isinstance(layer, Linear):
            W, bias = b.params[layer.name]
            y = b.tensor(f"{layer.name}.out", [batch, layer.out_features], "activation")
            b.kernel("linear_fwd", [batch, layer.out_features, layer.in_features, 0, x, W, bias,
                                    y], layer.name, "forward")
            entries.append(("linear", layer, x, y))
            x = y
        else:
            raise LowerError(f"layer {layer.name}: type {type(layer).__name__} has no fused "
                             f"lowering in {where} (use a per_layer kernel version)")
    return x


def _residual(b, block: Residual, x: int, batch: int, units: list, entries: list) -> int:
    """A residual block whose body is units, the last without activation: the skip's add
    goes into that unit's launch."""
    items = _units_of(list(block.body), f"residual block {block.name}")
    if any(it[0] != "unit" for it in items) or items[-1][3] is not None:
        raise LowerError(f"layer {block.name}: the fused lowering needs a residual body of "
                         "convolution + batch norm units, the last without activation")
    first = len(units)
    for k, (_, conv, bn, act) in enumerate(items):
        u = _Unit(conv, bn, _ACT[type(act)] if act is not None else 0, x)
        last = k == len(items) - 1
        _emit_unit(b, u, block.name if last else (act or bn).name, batch,
                   residual=units[first].x if last else None)
        units.append(u)
        entries.append(("unit", len(units) - 1))
        x = u.y
    units[first].skip = len(units) - 1
    return x


def lower_fused_bn(b, model: Model, spec, x: int, labels: int) -> int:
    """Emit the fused forward, loss, backward and update kernels of one SGD step of a
    batch-norm model on builder ``b`` (parameters declared without gradient buffers); return
    the loss tensor id. :class:`LowerError` for a layer outside the module docstring's set."""
    batch = spec.batch_size
    units: list[_Unit] = []
    entries: list[tuple] = []
    _forward(b, model.layers, x, batch, units, entries, f"model {model.name}")
    if not units or entries[-1][0] != "linear" or \
            any(e[0] == "linear" for e in entries[:-1]):
        raise LowerError(f"model {model.name}: the fused batch-norm lowering needs "
                         "convolution units and one Linear last layer")
    acts = {u.y: u.act for u in units if not u.res}   # tensor -> activation that wrote it
    _, fc, fx, logits = entries[-1]
    if acts.get(fx, 0) == 2:
        raise LowerError(f"layer {fc.name}: a Linear layer reading a ReLU6 output has no "
                         "fused lowering")
    dlogits = b.tensor(f"{b.tensors[logits].name}.grad", [batch, model.classes], "grad")
    loss = b.tensor("loss", [1], "loss")
    dy = b.tensor(f"{b.tensors[fx].name}.grad", b.tensors[fx].shape, "grad")
    W, bias = b.params[fc.name]
    b.kernel("softmax_xent_bwd", [batch, model.classes, fc.in_features, acts.get(fx, 0),
                                  logits, labels, W, fx, dlogits, dy, loss], "loss", "loss")
    hyper = [spec.lr, spec.momentum, spec.weight_decay]
    V, Vb = b.momenta[fc.name]
    b.kernel("linear_sgd", [batch, fc.out_features, fc.in_features, *hyper, fx, dlogits, W, V,
                            bias, Vb], fc.name, "update")
    _backward(b, units, entries[:-1], dy, acts.get(fx, 0) != 0, hyper, spec.splitk_groups)
    return loss


def _backward(b, units: list[_Unit], entries: list, dy: int, masked: bool, hyper: list,
              splitk_groups: int) -> None:
    """Emit the backward and update of ``entries`` in reverse from output gradient ``dy``
    (``masked``: already through the activation of the tensor it belongs to;
    ``splitk_groups``: ``LowerSpec.splitk_groups``)."""
    acts = {u.y: u.act for u in units if not u.res}
    out_grad: dict[int, int] = {}
    for e in reversed(entries):
        if e[0] == "gap":
            _, layer, gx, gy = e
            B, C = b.tensors[gy].shape
            dx = b.tensor(f"{b.tensors[gx].name}.grad", b.tensors[gx].shape, "grad")
            b.kernel("gap_bwd", [B, C, b.tensors[gx].numel // (B * C), dy, dx], layer.name,
                     "backward")
            dy, masked = dx, False
            continue
        k = e[1]
        u = units[k]
        out_grad[k] = dy
        dz = b.tensor(f"{b.tensors[u.z].name}.grad", b.tensors[u.z].shape, "grad")
        gamma, beta = b.params[u.bn.name]
        Vg, Vb = b.momenta[u.bn.name]
        B, _, _, _, OC, *_, OH, OW, _ = u.dims
        b.kernel("bn_bwd_sgd", [B, OC, OH * OW, 0 if masked else u.act, *hyper, u.z, u.y, dy,
                                u.mean, u.invstd, gamma, beta, Vg, Vb, dz], u.bn.name, "backward")
        weight, = b.params[u.conv.name]
        if k > 0:   # from the weights before this unit's update
            res = u.skip is not None
            dx = b.tensor(f"{b.tensors[u.x].name}.grad", b.tensors[u.x].shape, "grad")
            b.kernel("gconv_bwd_data", [*u.dims, acts.get(u.x, 0), int(res), dz, weight, u.x,
                                        out_grad[u.skip] if res else u.x, dx], u.conv.name,
                     "backward")
            dy, masked = dx, True
        V, = b.momenta[u.conv.name]
        _gconv_update(b, u, hyper, [u.x, dz, weight, V], splitk_groups)


def _gconv_update(b, u, hyper: list[float], bufs: list[int], splitk_groups: int) -> None:
    """Emit a unit's weight gradient and SGD step: ``gconv_sgd``, or its split-K pair when
    :func:`~phonetrain.lowering.fused.conv_sgd_splits` (``splitk_groups``:
    ``LowerSpec.splitk_groups``) gives ``S >= 2``. ``bufs`` = ``[X, dY, weight, V]``."""
    B, C, _, _, OC, KH, KW, *_, OH, OW, groups = u.dims
    ckk = C // groups * KH * KW
    s = conv_sgd_splits(OC * ckk, B * OH * OW, splitk_groups)
    if s == 1:
        b.kernel("gconv_sgd", [*u.dims, *hyper, *bufs], u.conv.name, "update")
        return
    x, dy, weight, V = bufs
    part = b.tensor(f"{u.conv.name}.wgrad_part", [s, OC, ckk], "scratch")
    b.kernel("gconv_wgrad_partial", [*u.dims, s, x, dy, part], u.conv.name, "update")
    b.kernel("gconv_sgd_finish", [C, OC, KH, KW, groups, s, *hyper, part, weight, V],
             u.conv.name, "update")
