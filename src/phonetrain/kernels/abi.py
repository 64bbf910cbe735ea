"""The kernel ABI as data: every kernel's argument names and kinds, which buffers it reads and
writes, its FLOPs and its baseline launch size.

The ABI itself (names, argument order, semantics, edge rules) is ``src/kernels/README.md``;
this module mirrors its table. It depends on nothing else of the package.
"""

from __future__ import annotations

import re
from pathlib import Path

# The leading size arguments of the grouped convolutions (fused batch-norm kernels).
_GCONV = ("i:B", "i:C", "i:H", "i:W", "i:OC", "i:KH", "i:KW", "i:stride", "i:pad", "i:OH",
          "i:OW", "i:groups")

# Argument names in ABI order. Prefix i: int, f: float, r: buffer read, w: buffer written,
# rw: buffer read and written. The C of gemm_* is "w" when beta == 0 (see buffer_access).
KERNEL_ARGS: dict[str, tuple[str, ...]] = {
    "gemm_nn": ("i:M", "i:N", "i:K", "f:alpha", "r:A", "r:B", "f:beta", "rw:C"),
    "gemm_nt": ("i:M", "i:N", "i:K", "f:alpha", "r:A", "r:B", "f:beta", "rw:C"),
    "gemm_tn": ("i:M", "i:N", "i:K", "f:alpha", "r:A", "r:B", "f:beta", "rw:C"),
    "bias_add": ("i:B", "i:C", "i:HW", "rw:Y", "r:bias"),
    "bias_grad": ("i:B", "i:C", "i:HW", "r:dY", "w:db"),
    "relu_fwd": ("i:n", "r:X", "w:Y"),
    "relu_bwd": ("i:n", "r:Y", "r:dY", "w:dX"),
    "im2col": ("i:B", "i:C", "i:H", "i:W", "i:KH", "i:KW", "i:stride", "i:pad", "i:OH",
               "i:OW", "r:X", "w:col"),
    "col2im": ("i:B", "i:C", "i:H", "i:W", "i:KH", "i:KW", "i:stride", "i:pad", "i:OH",
               "i:OW", "r:col", "w:dX"),
    "swap01": ("i:D0", "i:D1", "i:D2", "r:X", "w:Y"),
    "conv2d_fwd": ("i:B", "i:C", "i:H", "i:W", "i:OC", "i:KH", "i:KW", "i:stride", "i:pad",
                   "i:OH", "i:OW", "r:X", "r:Wt", "w:Y"),
    "maxpool_fwd": ("i:B", "i:C", "i:H", "i:W", "i:K", "i:stride", "i:OH", "i:OW", "r:X",
                    "w:Y", "w:argmax"),
    "maxpool_bwd": ("i:B", "i:C", "i:H", "i:W", "i:K", "i:stride", "i:OH", "i:OW", "r:dY",
                    "r:argmax", "w:dX"),
    "softmax_xent": ("i:B", "i:C", "r:logits", "r:labels", "w:dlogits", "w:row_loss"),
    "mean": ("i:n", "r:X", "w:out"),
    "sgd_update": ("i:n", "f:lr", "f:momentum", "f:weight_decay", "rw:W", "r:dW", "rw:V"),
    "fill": ("i:n", "f:value", "w:X"),
    "copy": ("i:n", "r:X", "w:Y"),
    # Adam and AdamW (README section "Optimizers"): the step count is a one-element tensor
    # that adam_step increments on the device; adam_update reads it for the bias correction.
    "adam_step": ("rw:step",),
    "adam_update": ("i:n", "f:lr", "f:beta1", "f:beta2", "f:eps", "f:weight_decay",
                    "i:decoupled", "r:step", "rw:W", "r:dW", "rw:M", "rw:V"),
    # Mobile CNN operators (README section "Mobile CNN operators").
    "dwconv3x3_fwd": ("i:B", "i:C", "i:H", "i:W", "i:stride", "i:pad", "i:OH", "i:OW",
                      "r:X", "r:Wt", "w:Y"),
    "dwconv3x3_bwd_data": ("i:B", "i:C", "i:H", "i:W", "i:stride", "i:pad", "i:OH", "i:OW",
                           "r:dY", "r:Wt", "w:dX"),
    "dwconv3x3_bwd_weight": ("i:B", "i:C", "i:H", "i:W", "i:stride", "i:pad", "i:OH", "i:OW",
                             "r:X", "r:dY", "w:dWt"),
    "batchnorm_stats": ("i:B", "i:C", "i:HW", "f:eps", "f:momentum", "r:X", "w:mean",
                        "w:invstd", "rw:running_mean", "rw:running_var"),
    "batchnorm_apply": ("i:B", "i:C", "i:HW", "r:X", "r:mean", "r:invstd", "r:gamma",
                        "r:beta", "w:Y"),
    "batchnorm_bwd_reduce": ("i:B", "i:C", "i:HW", "r:X", "r:dY", "r:mean", "r:invstd",
                             "w:dgamma", "w:dbeta"),
    "batchnorm_bwd_data": ("i:B", "i:C", "i:HW", "r:X", "r:dY", "r:mean", "r:invstd",
                           "r:gamma", "r:dgamma", "r:dbeta", "w:dX"),
    "relu6_fwd": ("i:n", "r:X", "w:Y"),
    "relu6_bwd": ("i:n", "r:Y", "r:dY", "w:dX"),
    "add": ("i:n", "r:A", "r:B", "w:Y"),
    "gap_fwd": ("i:B", "i:C", "i:HW", "r:X", "w:Y"),
    "gap_bwd": ("i:B", "i:C", "i:HW", "r:dY", "w:dX"),
    # Fused kernels (src/kernels/README.md, "Fused kernels"): one launch for what the layer
    # sequence above takes several for; `weight` is the conv weight (W is the image width).
    "linear_fwd": ("i:B", "i:O", "i:I", "i:act", "r:X", "r:W", "r:bias", "w:Y"),
    "conv_fwd": ("i:B", "i:C", "i:H", "i:W", "i:OC", "i:KH", "i:KW", "i:stride", "i:pad",
                 "i:OH", "i:OW", "i:act", "r:X", "r:weight", "r:bias", "w:Y"),
    "linear_bwd_data": ("i:B", "i:O", "i:I", "i:relu", "r:dY", "r:W", "r:X", "w:dX"),
    "conv_bwd_data": ("i:B", "i:C", "i:H", "i:W", "i:OC", "i:KH", "i:KW", "i:stride", "i:pad",
                      "i:OH", "i:OW", "i:relu", "r:dY", "r:weight", "r:X", "w:dX"),
    "maxpool_bwd_relu": ("i:B", "i:C", "i:H", "i:W", "i:K", "i:stride", "i:OH", "i:OW",
                         "r:dY", "r:argmax", "r:X", "w:dX"),
    "softmax_xent_bwd": ("i:B", "i:C", "i:I", "i:relu", "r:logits", "r:labels", "r:W", "r:X",
                         "w:dlogits", "w:dX", "w:loss"),
    "linear_sgd": ("i:B", "i:O", "i:I", "f:lr", "f:momentum", "f:weight_decay", "r:X", "r:dY",
                   "rw:W", "rw:V", "rw:bias", "rw:Vb"),
    "conv_sgd": ("i:B", "i:C", "i:H", "i:W", "i:OC", "i:KH", "i:KW", "i:stride", "i:pad",
                 "i:OH", "i:OW", "f:lr", "f:momentum", "f:weight_decay", "r:X", "r:dY",
                 "rw:weight", "rw:V", "rw:bias", "rw:Vb"),
    # conv_sgd split along K = B*OH*OW (README "Fused kernels", split-K): S partial sums per
    # output into part[S, OC, C*KH*KW+1], then their sum in chunk order and the SGD step.
    "conv_wgrad_partial": ("i:B", "i:C", "i:H", "i:W", "i:OC", "i:KH", "i:KW", "i:stride",
                           "i:pad", "i:OH", "i:OW", "i:S", "r:X", "r:dY", "w:part"),
    "conv_sgd_finish": ("i:C", "i:OC", "i:KH", "i:KW", "i:S", "f:lr", "f:momentum",
                        "f:weight_decay", "r:part", "rw:weight", "rw:V", "rw:bias", "rw:Vb"),
    # Fused batch-norm kernels (README "Fused batch-norm kernels"): bias-free grouped
    # convolutions with batch normalization, the MobileNetV2 unit.
    "gconv_stats_fwd": _GCONV + ("i:tile", "r:X", "r:weight", "w:Z", "w:part"),
    "bn_act_fwd": ("i:B", "i:C", "i:HW", "i:tile", "i:act", "i:res", "f:eps", "f:momentum",
                   "r:Z", "r:part", "r:gamma", "r:beta", "r:R", "w:Y", "w:mean", "w:invstd",
                   "rw:running_mean", "rw:running_var"),
    "bn_bwd_sgd": ("i:B", "i:C", "i:HW", "i:act", "f:lr", "f:momentum", "f:weight_decay",
                   "r:X", "r:Y", "r:dY", "r:mean", "r:invstd", "rw:gamma", "rw:beta", "rw:Vg",
                   "rw:Vb", "w:dX"),
    "gconv_bwd_data": _GCONV + ("i:act", "i:res", "r:dY", "r:weight", "r:X", "r:R", "w:dX"),
    "gconv_sgd": _GCONV + ("f:lr", "f:momentum", "f:weight_decay", "r:X", "r:dY", "rw:weight",
                           "rw:V"),
    # gconv_sgd split along K = B*OH*OW, as conv_wgrad_partial / conv_sgd_finish
    "gconv_wgrad_partial": _GCONV + ("i:S", "r:X", "r:dY", "w:part"),
    "gconv_sgd_finish": ("i:C", "i:OC", "i:KH", "i:KW", "i:groups", "i:S", "f:lr", "f:momentum",
                         "f:weight_decay", "r:part", "rw:weight", "rw:V"),
}

FUSED_KERNELS = ("linear_fwd", "conv_fwd", "linear_bwd_data", "conv_bwd_data",
                 "maxpool_bwd_relu", "softmax_xent_bwd", "linear_sgd", "conv_sgd",
                 "conv_wgrad_partial", "conv_sgd_finish")
FUSED_BN_KERNELS = ("gconv_stats_fwd", "bn_act_fwd", "bn_bwd_sgd", "gconv_bwd_data",
                    "gconv_sgd", "gconv_wgrad_partial", "gconv_sgd_finish")

GEMM_KERNELS = ("gemm_nn", "gemm_nt", "gemm_tn")

# Buffer arguments holding int32 elements (every other buffer holds float32): class labels
# and the flat input index of a pooling window's maximum.
INT_BUFFER_ARGS = frozenset({"labels", "argmax"})


def arg_position(name: str, arg: str) -> int:
    """0-based position of argument ``arg`` in kernel ``name``'s ABI order
    (``arg_position("gemm_nn", "B") == 5``); ``KeyError`` for an unknown kernel,
    ``ValueError`` for an argument the kernel does not have."""
    names = [s.split(":")[1] for s in KERNEL_ARGS[name]]
    if arg not in names:
        raise ValueError(f"kernel {name} has no argument {arg!r} (ABI: {', '.join(names)})")
    return names.index(arg)


def read_only_buffers(name: str) -> tuple[str, ...]:
    """Names of the buffers kernel ``name`` only reads (kind ``r``), in ABI order."""
    return tuple(s.split(":")[1] for s in KERNEL_ARGS[name] if s.split(":")[0] == "r")


def bind_args(name: str, args: list[dict]) -> dict[str, object]:
    """Map a plan's positional kernel args to ABI names: ``{"M": 32, ..., "A": tensor_id}``.

    Raises ``ValueError`` naming the kernel on an unknown name or a wrong count/kind.
    """
    if name not in KERNEL_ARGS:
        raise ValueError(f"kernel {name!r} is not in the kernel ABI (src/kernels/README.md)")
    spec = KERNEL_ARGS[name]
    if len(args) != len(spec):
        raise ValueError(f"kernel {name}: {len(args)} args, the ABI has {len(spec)}")
    out: dict[str, object] = {}
    for a, s in zip(args, spec):
        kind, aname = s.split(":")
        key = kind if kind in ("i", "f") else "t"
        if key not in a:
            raise ValueError(f"kernel {name}: argument {aname} must be {{{key!r}: ...}}, got {a}")
        out[aname] = a[key]
    return out


def buffer_access(name: str, bound: dict[str, object]) -> dict[str, str]:
    """``{arg name: "r"|"w"|"rw"}`` for the buffer args of a bound kernel call (``bound``
    from :func:`bind_args`); a GEMM's C is ``"w"`` when ``beta == 0`` (C is then not read)."""
    out = {}
    for s in KERNEL_ARGS[name]:
        kind, aname = s.split(":")
        if kind in ("r", "w", "rw"):
            if aname == "C" and name in GEMM_KERNELS and bound["beta"] == 0:
                kind = "w"
            out[aname] = kind
    return out


def kernel_flops(name: str, d: dict[str, object]) -> int:
    """FLOPs of one launch (``d`` from :func:`bind_args`), the rules of the ABI's "FLOPs and
    bytes" section (``src/kernels/README.md``).

    GEMM ``2*M*N*K`` (2 x MACs), ``conv2d_fwd`` ``2*B*OC*OH*OW*C*KH*KW`` (the GEMM it
    replaces, padding taps included); one FLOP per output for ``bias_add``, ``relu_fwd``,
    ``relu_bwd``, one per summed input for ``bias_grad``, ``mean`` and ``col2im`` (its
    ``C*KH*KW*B*OH*OW`` column entries), ``K*K`` comparisons per ``maxpool_fwd`` output, one add
    per ``maxpool_bwd`` input gradient, ``5*B*C`` for ``softmax_xent``, ``sgd_update``
    ``4*n`` with momentum else ``2*n``, ``adam_update`` ``12*n`` with weight decay else
    ``10*n``, ``adam_step`` 1. Pure data movement (``im2col``, ``swap01``, ``copy``,
    ``fill``) is 0.
    """
    g = lambda k: int(d[k])  # noqa: E731
    if name in GEMM_KERNELS:
        return 2 * g("M") * g("N") * g("K")
    if name in ("bias_add", "bias_grad"):
        return g("B") * g("C") * g("HW")
    if name in ("relu_fwd", "relu_bwd", "mean"):
        return g("n")
    if name == "col2im":
        return g("C") * g("KH") * g("KW") * g("B") * g("OH") * g("OW")
    if name == "conv2d_fwd":
        return 2 * g("B") * g("OC") * g("OH") * g("OW") * g("C") * g("KH") * g("KW")
    if name == "maxpool_fwd":
        return g("B") * g("C") * g("OH") * g("OW") * g("K") * g("K")
    if name == "maxpool_bwd":
        return g("B") * g("C") * g("OH") * g("OW")
    if name == "softmax_xent":
        return 5 * g("B") * g("C")
    if name == "sgd_update":
        return (4 if float(d["momentum"]) != 0 else 2) * g("n")
    if name in ("adam_step", "adam_update"):
        return _adam_flops(name, d)
    if name in FUSED_KERNELS:
        return _fused_flops(name, d)
    if name in FUSED_BN_KERNELS:
        return _fused_bn_flops(name, d)
    return _mobile_flops(name, g)


def _adam_flops(name: str, d: dict[str, object]) -> int:
    """``adam_step`` 1 (the increment); ``adam_update`` ``12*n`` with weight decay (its
    multiply-add 2; the two moments' 3 + 4; the update's square root, division, add of
    ``eps``, multiply and subtract 5; the step-size scalars are not counted), else
    ``10*n``."""
    if name == "adam_step":
        return 1
    return (12 if float(d["weight_decay"]) != 0 else 10) * int(d["n"])  # type: ignore[arg-type]


# FLOPs per element of the mobile operators (README "Mobile CNN operators"): batchnorm_stats
# 3 per input (mean's add; variance's subtract, multiply-add), batchnorm_apply 4 (subtract,
# two multiplies, add), batchnorm_bwd_reduce 5 (x-hat 2, multiply-add 2, dbeta's add 1),
# batchnorm_bwd_data 7; relu6_*, add, gap_* 1 per input element.
_MOBILE_PER_ELEMENT = {"batchnorm_stats": 3, "batchnorm_apply": 4, "batchnorm_bwd_reduce": 5,
                       "batchnorm_bwd_data": 7, "gap_fwd": 1, "gap_bwd": 1}


def _mobile_flops(name: str, g) -> int:
    """FLOPs of the mobile operators: depthwise 3x3 ``2*9*B*C*OH*OW`` (2 x MACs) in each of
    its three kernels; per-element rules above."""
    if name.startswith("dwconv3x3_"):
        return 2 * 9 * g("B") * g("C") * g("OH") * g("OW")
    if name in _MOBILE_PER_ELEMENT:
        return _MOBILE_PER_ELEMENT[name] * g("B") * g("C") * g("HW")
    if name in ("relu6_fwd", "relu6_bwd", "add"):
        return g("n")
    return 0


def _fused_flops(name: str, d: dict[str, object]) -> int:
    """FLOPs of the fused kernels: the sum of what the kernels they replace count (GEMM
    ``2*M*N*K``, one per bias add, ReLU, mask and summed bias-gradient input, ``5*B*C`` +
    ``B`` for the loss, the SGD update's ``4*n`` or ``2*n``); a direct convolution counts the
    MACs of the GEMM it replaces."""
    g = lambda k: int(d[k])  # noqa: E731
    sgd = 4 if name in ("linear_sgd", "conv_sgd", "conv_sgd_finish") and \
        float(d["momentum"]) != 0 else 2
    if name == "conv_sgd_finish":   # S - 1 adds of the partial sums per output, the step
        n = g("OC") * (g("C") * g("KH") * g("KW") + 1)
        return (g("S") - 1) * n + sgd * n
    if name == "linear_fwd":
        return 2 * g("B") * g("O") * g("I") + g("B") * g("O") * (1 + g("act"))
    if name == "linear_bwd_data":
        return 2 * g("B") * g("O") * g("I") + g("relu") * g("B") * g("I")
    if name == "linear_sgd":
        n = g("O") * g("I") + g("O")
        return 2 * g("B") * g("O") * g("I") + g("B") * g("O") + sgd * n
    if name in ("conv_fwd", "conv_bwd_data", "conv_sgd", "conv_wgrad_partial"):
        macs = g("B") * g("OC") * g("OH") * g("OW") * g("C") * g("KH") * g("KW")
        outs = g("B") * g("OC") * g("OH") * g("OW")
        if name == "conv_fwd":
            return 2 * macs + outs * (1 + g("act"))
        if name == "conv_bwd_data":
            return 2 * macs + g("relu") * g("B") * g("C") * g("H") * g("W")
        if name == "conv_wgrad_partial":   # conv_sgd's sums, without the step
            return 2 * macs + outs
        return 2 * macs + outs + sgd * (g("OC") * g("C") * g("KH") * g("KW") + g("OC"))
    if name == "maxpool_bwd_relu":
        return g("B") * g("C") * g("OH") * g("OW") + g("B") * g("C") * g("H") * g("W")
    if name == "softmax_xent_bwd":
        return 5 * g("B") * g("C") + g("B") + 2 * g("B") * g("C") * g("I") + \
            g("relu") * g("B") * g("I")
    return 0


def _fused_bn_flops(name: str, d: dict[str, object]) -> int:
    """FLOPs of the fused batch-norm kernels: what the kernels they replace count. A grouped
    convolution's MACs are ``B*OC*OH*OW*(C/groups)*KH*KW`` (2 FLOPs each, in the forward, the
    input gradient and the weight gradient alike); batch norm 3 + 4 per element forward
    (``gconv_stats_fwd`` the statistics' 3, ``bn_act_fwd`` the normalization's 4), 5 + 7
    backward; one per element for an activation, its mask and the residual add; the SGD step
    ``4*n`` with momentum, else ``2*n``."""
    g = lambda k: int(d[k])  # noqa: E731
    sgd = 4 if name in ("bn_bwd_sgd", "gconv_sgd", "gconv_sgd_finish") and \
        float(d["momentum"]) != 0 else 2
    if name == "gconv_sgd_finish":   # S - 1 adds of the partial sums per weight, the step
        n = g("OC") * (g("C") // g("groups")) * g("KH") * g("KW")
        return (g("S") - 1) * n + sgd * n
    if name == "bn_bwd_sgd":
        n = g("B") * g("C") * g("HW")
        return 12 * n + (g("act") != 0) * n + sgd * 2 * g("C")
    if name == "bn_act_fwd":
        n = g("B") * g("C") * g("HW")
        return 4 * n + ((g("act") != 0) + g("res")) * n
    macs = g("B") * g("OC") * g("OH") * g("OW") * (g("C") // g("groups")) * g("KH") * g("KW")
    outs = g("B") * g("OC") * g("OH") * g("OW")
    if name == "gconv_stats_fwd":
        return 2 * macs + 3 * outs
    if name == "gconv_bwd_data":
        ins = g("B") * g("C") * g("H") * g("W")
        return 2 * macs + ((g("act") != 0) + g("res")) * ins
    if name == "gconv_wgrad_partial":   # gconv_sgd's sums, without the step
        return 2 * macs
    return 2 * macs + sgd * g("OC") * (g("C") // g("groups")) * g("KH") * g("KW")


# Reductions over B x spatial values that the OpenCL kernels run as one work-group per output
# (the forward batch-norm kernels gconv_stats_fwd / bn_act_fwd: per tile of a channel's outputs)
# (src/kernels/baseline/mobile.cl, fused/fused.cl, fused/fused_bn.cl: strided partial sums,
# then a tree in local memory, wg_sum of src/kernels/common.cl): their ABI global size is
# outputs x REDUCE_LOCAL in dimension 0, their local size REDUCE_LOCAL there (1 in a second
# dimension).
# 64: a power of two that every OpenCL GPU's work-group limit admits (Adreno and Mali allow
# 256 or more) and that fills a subgroup (32 on NVIDIA, 64 on Adreno/AMD).
REDUCE_LOCAL = 64
REDUCTION_KERNELS = frozenset({"batchnorm_stats", "batchnorm_bwd_reduce", "dwconv3x3_bwd_weight",
                               "conv_sgd", "conv_wgrad_partial", "gconv_stats_fwd",
                               "bn_act_fwd", "bn_bwd_sgd", "gconv_sgd",
                               "gconv_wgrad_partial"})


def baseline_global(name: str, d: dict[str, object]) -> list[int]:
    """The ABI's baseline global size (``d`` from :func:`bind_args`): one work-item per output,
    the last column of the ABI table; ``global[0]`` is the fastest-varying index."""
    g = lambda k: int(d[k])  # noqa: E731
    if name in GEMM_KERNELS:
        return [g("N"), g("M")]
    table = {
        "bias_add": lambda: [g("B") * g("C") * g("HW")], "bias_grad": lambda: [g("C")],
        "relu_fwd": lambda: [g("n")], "relu_bwd": lambda: [g("n")],
        "im2col": lambda: [g("B") * g("OH") * g("OW"), g("C") * g("KH") * g("KW")],
        "col2im": lambda: [g("B") * g("C") * g("H") * g("W")],
        "swap01": lambda: [g("D0") * g("D1") * g("D2")],
        "conv2d_fwd": lambda: [g("B") * g("OH") * g("OW")],
        "maxpool_fwd": lambda: [g("B") * g("C") * g("OH") * g("OW")],
        "maxpool_bwd": lambda: [g("B") * g("C") * g("H") * g("W")],
        "softmax_xent": lambda: [g("B")], "mean": lambda: [1],
        "sgd_update": lambda: [g("n")], "fill": lambda: [g("n")], "copy": lambda: [g("n")],
        "adam_step": lambda: [1], "adam_update": lambda: [g("n")],
        # mobile operators: one work-item per output element; the long reductions one
        # work-group of REDUCE_LOCAL per output (REDUCTION_KERNELS)
        "dwconv3x3_fwd": lambda: [g("B") * g("C") * g("OH") * g("OW")],
        "dwconv3x3_bwd_data": lambda: [g("B") * g("C") * g("H") * g("W")],
        "dwconv3x3_bwd_weight": lambda: [g("C") * 9 * REDUCE_LOCAL],
        "batchnorm_stats": lambda: [g("C") * REDUCE_LOCAL],
        "batchnorm_apply": lambda: [g("B") * g("C") * g("HW")],
        "batchnorm_bwd_reduce": lambda: [g("C") * REDUCE_LOCAL],
        "batchnorm_bwd_data": lambda: [g("B") * g("C") * g("HW")],
        "relu6_fwd": lambda: [g("n")], "relu6_bwd": lambda: [g("n")], "add": lambda: [g("n")],
        "gap_fwd": lambda: [g("B") * g("C")], "gap_bwd": lambda: [g("B") * g("C") * g("HW")],
        "linear_fwd": lambda: [g("O"), g("B")],
        "conv_fwd": lambda: [g("OH") * g("OW"), g("B") * g("OC")],
        "linear_bwd_data": lambda: [g("I"), g("B")],
        "conv_bwd_data": lambda: [g("H") * g("W"), g("B") * g("C")],
        "maxpool_bwd_relu": lambda: [g("B") * g("C") * g("H") * g("W")],
        "softmax_xent_bwd": lambda: [1],
        "linear_sgd": lambda: [g("I") + 1, g("O")],
        "conv_sgd": lambda: [(g("C") * g("KH") * g("KW") + 1) * REDUCE_LOCAL, g("OC")],
        "conv_wgrad_partial": lambda: [(g("C") * g("KH") * g("KW") + 1) * REDUCE_LOCAL,
                                       g("OC") * g("S")],
        "conv_sgd_finish": lambda: [g("C") * g("KH") * g("KW") + 1, g("OC")],
        "gconv_stats_fwd": lambda: [_tiles(d, g("B") * g("OH") * g("OW")) * REDUCE_LOCAL,
                                    g("OC")],
        "bn_act_fwd": lambda: [_tiles(d, g("B") * g("HW")) * REDUCE_LOCAL, g("C")],
        "bn_bwd_sgd": lambda: [g("C") * REDUCE_LOCAL],
        "gconv_bwd_data": lambda: [g("H") * g("W"), g("B") * g("C")],
        "gconv_sgd": lambda: [g("C") // g("groups") * g("KH") * g("KW") * REDUCE_LOCAL, g("OC")],
        "gconv_wgrad_partial": lambda: [g("C") // g("groups") * g("KH") * g("KW") * REDUCE_LOCAL,
                                        g("OC") * g("S")],
        "gconv_sgd_finish": lambda: [g("C") // g("groups") * g("KH") * g("KW"), g("OC")],
    }
    return table[name]()


def _tiles(d: dict[str, object], n: int) -> int:
    """``ceil(n / tile)``: the tiles of a channel's ``n`` outputs in the forward batch-norm
    kernels (one work-group each)."""
    return -(-n // int(d["tile"]))  # type: ignore[call-overload]


def kernels_mentioned(path: Path, names=None) -> set[str]:
    """ABI kernel names (or ``names``) that occur as whole words in the code of one ``.cl``
    file (comments removed, so a banner naming the kernels a file replaces does not count): a
    superset of what it defines, robust to macro-generated kernels."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", " ", Path(path).read_text(), flags=re.S)
    words = set(re.findall(r"\w+", code))
    return words & set(names if names is not None else KERNEL_ARGS)
