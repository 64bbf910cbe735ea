"""The fused lowering of batch-norm models (phonetrain.lowering.fused_bn): MobileNetV2 in 59
launches per step instead of 171 (with the opt-in split K, one more per split-K update),
weights updated after their input gradient, the same
training as the layer-by-layer plan in the float64 reference (every placement; MobileNetV2 and
small models with ReLU units, a strided depthwise unit and a Linear layer after Flatten), and
one LowerError naming a layer it cannot fuse."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from helpers.fused_plans import assert_fused_matches
from phonetrain import reference
from phonetrain.lowering import LowerSpec, lower, write_bundle
from phonetrain.lowering.spec import LowerError
from phonetrain.models import MODELS as ZOO
from phonetrain.models import (BatchNorm2d, Conv2d, DepthwiseConv2d, Flatten, GlobalAvgPool2d,
                               Linear, MaxPool2d, Model, ReLU, ReLU6, Residual)
from phonetrain.plan import Plan

MODELS = ["mobilenetv2_small", "mobilenetv2_small_32x32x3"]
PLACEMENTS = [("cpu", None, None), ("opencl", "resident", "copy"), ("opencl", "staged", "map")]


def _kernels(plan: Plan) -> list:
    return [s for s in plan.steps if s.op == "kernel"]


# Split-K updates at batch 32 with splitk_groups = 1024 (conv_sgd_splits): the units of the
# first stage (stem, b1, b2_expand; B*OH*OW = 6272 or 8192 products per sum), and at 32x32x3
# the 1024-position stage's units with fewer than 1024 weights too.
SPLIT_UNITS = {"mobilenetv2_small": {"stem": 6, "b1_expand": 4, "b1_dw": 4, "b1_project": 4,
                                     "b2_expand": 4},
               "mobilenetv2_small_32x32x3": {"stem": 5, "b1_expand": 4, "b1_dw": 4,
                                             "b1_project": 4, "b2_expand": 4, "b2_dw": 2,
                                             "b2_project": 2, "b3_dw": 2, "head": 2}}


@pytest.mark.parametrize("model", MODELS)
def test_fused_mobilenetv2_launches_59_kernels_instead_of_171(model):
    base = LowerSpec(model=model, batch_size=32, backend="opencl", placement="resident",
                     transfer="copy")
    n_base = len(_kernels(lower(base)))
    fused = _kernels(lower(replace(base, kernel="fused")))
    assert (n_base, len(fused)) == (171, 59)
    assert Counter(s.name for s in fused) == {
        "gconv_stats_fwd": 11, "bn_act_fwd": 11, "bn_bwd_sgd": 11, "gconv_sgd": 11,
        "gconv_bwd_data": 10,
        "gap_fwd": 1, "linear_fwd": 1, "softmax_xent_bwd": 1, "linear_sgd": 1, "gap_bwd": 1}
    # both residual adds are fused: into the forward of the blocks' last units, and into the
    # input gradient of the blocks' first units
    assert sum(s.args[5]["i"] for s in fused if s.name == "bn_act_fwd") == 2
    assert sum(s.args[13]["i"] for s in fused if s.name == "gconv_bwd_data") == 2


@pytest.mark.parametrize("model", MODELS)
def test_fused_mobilenetv2_split_k_launch_counts(model):
    """With splitk_groups = 1024: 59 launches plus one per split-K update (its finish), 64 and
    68, with the rule's S per unit."""
    fused = _kernels(lower(LowerSpec(model=model, batch_size=32, backend="opencl",
                                     placement="resident", transfer="copy", kernel="fused",
                                     splitk_groups=1024)))
    splits = SPLIT_UNITS[model]
    assert len(fused) == 59 + len(splits)
    assert Counter(s.name for s in fused) == {
        "gconv_stats_fwd": 11, "bn_act_fwd": 11, "bn_bwd_sgd": 11,
        "gconv_sgd": 11 - len(splits), "gconv_wgrad_partial": len(splits),
        "gconv_sgd_finish": len(splits), "gconv_bwd_data": 10,
        "gap_fwd": 1, "linear_fwd": 1, "softmax_xent_bwd": 1, "linear_sgd": 1, "gap_bwd": 1}
    assert {s.layer: s.args[12]["i"] for s in fused if s.name == "gconv_wgrad_partial"} == \
        splits
    finish = [s.layer for s in fused if s.name == "gconv_sgd_finish"]
    partial = [s.layer for s in fused if s.name == "gconv_wgrad_partial"]
    assert finish == partial


@pytest.mark.parametrize("batch,groups", [(4, 0), (16, 1024)])
def test_fused_bn_plan_updates_parameters_after_their_last_read(batch, groups):
    """No step reads a convolution weight or a batch norm's gamma after the kernel that
    updates it (split K at batch 16: gconv_sgd_finish), and no parameter-gradient buffer
    exists."""
    plan = lower(LowerSpec(model="mobilenetv2_small", batch_size=batch, kernel="fused",
                           backend="opencl", placement="resident", transfer="copy",
                           splitk_groups=groups))
    steps = _kernels(plan)
    assert any(s.name == "gconv_sgd_finish" for s in steps) == bool(groups)
    for i, s in enumerate(steps):
        if s.name in ("gconv_sgd", "gconv_sgd_finish", "bn_bwd_sgd"):
            w = s.args[12]["t"] if s.name == "bn_bwd_sgd" else s.args[-2]["t"]
            later = [t.name for t in steps[i + 1:] if any(a.get("t") == w for a in t.args)]
            assert not later, f"{s.layer}: {later} read {plan.tensor(w).name} after its update"
    assert not any(t.name.endswith(("weight.grad", "bias.grad")) for t in plan.tensors)


def _relu_models() -> list[Model]:
    """Units with ReLU, a depthwise convolution at stride 2, a residual block of three units,
    and a Linear layer reading a ReLU output through Flatten (its mask in the loss kernel)."""
    c = lambda n, i, o, k=1, s=1, p=0: Conv2d(n, i, o, k, s, p, bias=False)  # noqa: E731
    body = (c("e", 4, 8), BatchNorm2d("e_bn", 8), ReLU6("e_a"), DepthwiseConv2d("d", 8),
            BatchNorm2d("d_bn", 8), ReLU("d_a"), c("p", 8, 4), BatchNorm2d("p_bn", 4))
    gap = Model("bn_relu_gap", (2, 7, 7), 3, (
        c("c1", 2, 4, 3, 1, 1), BatchNorm2d("bn1", 4), ReLU("a1"), Residual("blk", body),
        DepthwiseConv2d("dw", 4, stride=2), BatchNorm2d("dw_bn", 4), ReLU6("dw_a"),
        GlobalAvgPool2d("gap"), Linear("fc", 4, 3)))
    flat = Model("bn_relu_flat", (1, 5, 5), 3, (
        c("c1", 1, 2, 3, 2, 1), BatchNorm2d("bn1", 2), ReLU("a1"), Flatten("flat"),
        Linear("fc", 18, 3)))
    return [gap, flat]


@pytest.mark.parametrize("model", [None, *_relu_models()],
                         ids=["mobilenetv2_small", "bn_relu_gap", "bn_relu_flat"])
def test_fused_bn_plan_trains_like_the_baseline_float64(tmp_path, monkeypatch, model):
    """Two SGD steps with momentum and weight decay in the float64 reference: the fused plan
    (every placement) gives the baseline plan's losses, parameters, momenta and running
    statistics."""
    if model is not None:
        monkeypatch.setitem(ZOO, model.name, model)   # the bundle looks models up by name
    base = LowerSpec(model=model.name if model else "mobilenetv2_small", batch_size=4,
                     num_batches=2, warmup=0, iterations=2, momentum=0.9, weight_decay=5e-4,
                     lr=0.05, dataset="synthetic", dumps="all")
    want = reference.run_plan(write_bundle(base, tmp_path / "base", seed=0),
                              tmp_path / "base", dtype=np.float64)
    kept = [k for k in want.dumps if k.endswith((".weight", ".bias", ".momentum",
                                                 ".running_mean", ".running_var"))]
    assert len(kept) >= 12   # every parameter, its momentum and the running statistics
    assert_fused_matches(base, want, kept, PLACEMENTS, tmp_path, rtol=1e-9, atol=1e-12)


def _lower(model: Model):
    return lower(LowerSpec(model=model.name, batch_size=2, kernel="fused", backend="opencl",
                           placement="resident", transfer="copy"), model=model)


def test_fused_bn_lowering_refuses_layers_it_cannot_fuse():
    """A max pool in a batch-norm model, and a residual body ending in an activation: one
    LowerError naming the layer."""
    stem = (Conv2d("c1", 1, 4, 3, 1, 1, bias=False), BatchNorm2d("bn1", 4), ReLU6("a1"))
    pooled = Model("bn_pool", (1, 6, 6), 3, stem + (MaxPool2d("pool", 2, 2),
                                                   GlobalAvgPool2d("gap"), Linear("fc", 4, 3)))
    with pytest.raises(LowerError, match="layer pool: type MaxPool2d has no fused lowering"):
        _lower(pooled)
    body = (Conv2d("c2", 4, 4, 1, bias=False), BatchNorm2d("bn2", 4), ReLU6("a2"))
    res = Model("bn_res", (1, 6, 6), 3, stem + (Residual("blk", body), GlobalAvgPool2d("gap"),
                                               Linear("fc", 4, 3)))
    with pytest.raises(LowerError, match="layer blk: the fused lowering needs a residual body"):
        _lower(res)
