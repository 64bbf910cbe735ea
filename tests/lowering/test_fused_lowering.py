"""The fused lowering (kernel versions with ``lowering: fused_step``): at least 3x fewer kernel
launches per iteration than the layer-by-layer plan for the MLP 784-256-128-16 and LeNet-5,
the opt-in split-K rule and its plan (none by default; ``LowerSpec.splitk_groups``
validated), the same training (float64 reference, every placement) as the baseline plan, and
the version.yaml key's validation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from helpers.fused_plans import assert_fused_matches
from phonetrain import reference
from phonetrain.kernels import KernelVersionError, bind_args, load_version
from phonetrain.lowering import LowerSpec, lower, write_bundle
from phonetrain.lowering.fused import conv_sgd_splits
from phonetrain.lowering.spec import LowerError
from phonetrain.models import Conv2d, Flatten, Linear, Model, ReLU
from phonetrain.plan import Plan

MODELS = ["mlp_784_256_128_16", "lenet5"]
PLACEMENTS = [("cpu", None, None), ("opencl", "resident", "copy"), ("opencl", "staged", "copy"),
              ("opencl", "staged", "map")]


def _launches(plan: Plan) -> int:
    return sum(1 for s in plan.steps if s.op == "kernel")


@pytest.mark.parametrize("model", MODELS)
def test_fused_plan_launches_at_least_3x_fewer_kernels(model):
    """At least 3x fewer launches; with the split K on (splitk_groups = 1024) LeNet-5's conv1
    update at batch 32 takes a second launch (conv_sgd_finish): 55 -> 19."""
    base = LowerSpec(model=model, batch_size=32, backend="opencl", placement="resident",
                     transfer="copy")
    n_base = _launches(lower(base))
    n_fused = _launches(lower(replace(base, kernel="fused")))
    assert n_base >= 3 * n_fused, (n_base, n_fused)
    assert {"mlp_784_256_128_16": (26, 8), "lenet5": (55, 18)}[model] == (n_base, n_fused)
    split = lower(replace(base, kernel="fused", splitk_groups=1024))
    n_finish = sum(1 for s in split.steps if s.name == "conv_sgd_finish")
    assert {"mlp_784_256_128_16": (8, 0), "lenet5": (19, 1)}[model] == (_launches(split),
                                                                         n_finish)


@pytest.mark.parametrize("model", ["mlp_784_256_128_16", "lenet5", "vgg_small",
                                   "vgg_small_32x32x3", "mobilenetv2_small",
                                   "mobilenetv2_small_32x32x3"])
@pytest.mark.parametrize("batch", [16, 32, 128])
def test_default_fused_lowering_never_splits_k(model, batch):
    """splitk_groups = 0 (the default): one conv_sgd/gconv_sgd per convolution, no split-K
    kernel or scratch tensor, even where splitk_groups = 1024 splits (every convolution model
    here from batch 16)."""
    spec = LowerSpec(model=model, batch_size=batch, kernel="fused", backend="opencl",
                     placement="resident", transfer="copy")
    split_kernels = ("conv_wgrad_partial", "conv_sgd_finish", "gconv_wgrad_partial",
                     "gconv_sgd_finish")
    plan = lower(spec)
    assert not [s.name for s in plan.steps if s.name in split_kernels]
    assert not [t.name for t in plan.tensors if t.name.endswith(".wgrad_part")]
    split = lower(replace(spec, splitk_groups=1024))
    assert any(s.name in split_kernels for s in split.steps) == (model != "mlp_784_256_128_16")


@pytest.mark.parametrize("groups", [-1, 1.5, "1024", True, None])
def test_splitk_groups_must_be_a_non_negative_int(groups):
    with pytest.raises(LowerError, match=r"splitk_groups=.*an int >= 0.*0 never splits"):
        lower(LowerSpec(model="lenet5", kernel="fused", backend="opencl",
                        placement="resident", transfer="copy", splitk_groups=groups))


def test_splitk_groups_names_the_plan_only_when_set():
    """The default spec's plan id and name are main's (no splitk_groups in the hash); a
    split plan gets its own."""
    spec = LowerSpec(model="lenet5", kernel="fused", backend="opencl", placement="resident",
                     transfer="copy")
    split = replace(spec, splitk_groups=1024)
    assert spec.resolved_plan_id() == "lenet5-b32-opencl-resident-copy-fused-bcd727c9"
    assert split.resolved_plan_id() != spec.resolved_plan_id()
    assert lower(spec).name == "lenet5/b32/opencl-resident-copy/fused"
    assert lower(split).name == "lenet5/b32/opencl-resident-copy/fused/splitk1024"


@pytest.mark.parametrize("groups", [0, 1024])
def test_fused_plan_updates_weights_after_their_input_gradient(groups):
    """Each layer's input gradient reads its weights before the layer's SGD kernel writes
    them (split K: conv_sgd_finish), and no weight-gradient buffer exists."""
    plan = lower(LowerSpec(model="lenet5", batch_size=4, kernel="fused", backend="opencl",
                           placement="resident", transfer="copy", splitk_groups=groups))
    assert any(s.name == "conv_sgd_finish" for s in plan.steps) == bool(groups)
    steps = [s for s in plan.steps if s.op == "kernel"]
    for i, s in enumerate(steps):
        if s.name in ("linear_sgd", "conv_sgd", "conv_sgd_finish"):
            w = s.args[-4]["t"]
            later = [t for t in steps[i + 1:] if any(a.get("t") == w for a in t.args)]
            assert not later, f"{s.layer}: {[t.name for t in later]} read W after its update"
    assert not any(t.name.endswith(("weight.grad", "bias.grad")) for t in plan.tensors)


@pytest.mark.parametrize("model,groups", [("mlp_784_256_128_16", 0), ("lenet5", 0),
                                          ("lenet5", 1024)])
def test_fused_plan_trains_like_the_baseline_float64(tmp_path, model, groups):
    """Two SGD steps with momentum and weight decay in the float64 reference: the fused plan
    (every placement; LeNet-5 also with conv1's update split, S = 6) gives the baseline plan's
    losses, parameters and momenta."""
    base = LowerSpec(model=model, batch_size=8, num_batches=2, warmup=0, iterations=2,
                     momentum=0.9, weight_decay=5e-4, lr=0.05, dataset="synthetic",
                     dumps="all")
    want = reference.run_plan(write_bundle(base, tmp_path / "base", seed=0), tmp_path / "base",
                              dtype=np.float64)
    kept = [k for k in want.dumps if k.endswith((".weight", ".bias", ".momentum"))]
    assert kept
    assert_fused_matches(base, want, kept, PLACEMENTS, tmp_path, rtol=1e-10, atol=1e-13,
                         splitk_groups=groups)


def test_split_k_rule():
    """S = min(ceil(groups / outputs), K // 1024), no split (1) below 2 or at groups = 0; at
    groups = 1024: LeNet-5's conv1 (156 sums of B*784) splits from batch 3, its conv2 (2416
    sums) never; vgg_small's conv1a (80 sums) into 13 at batch 32."""
    assert conv_sgd_splits(156, 32 * 784, 1024) == 7
    assert conv_sgd_splits(156, 8 * 784, 1024) == 6
    assert conv_sgd_splits(156, 3 * 784, 1024) == 2
    assert conv_sgd_splits(156, 2 * 784, 1024) == 1    # 1568 < 2 x 1024: chunks too short
    assert conv_sgd_splits(80, 32 * 784, 1024) == 13
    assert conv_sgd_splits(584, 32 * 784, 1024) == 2   # ceil(1024 / 584)
    assert conv_sgd_splits(1024, 10 ** 6, 1024) == 1   # enough work-groups already
    assert conv_sgd_splits(2416, 32 * 100, 1024) == 1
    assert conv_sgd_splits(1, 2048, 1024) == 2 and conv_sgd_splits(1, 2047, 1024) == 1
    assert conv_sgd_splits(156, 32 * 784, 4096) == 24  # more groups: S = K // 1024 caps it
    assert conv_sgd_splits(156, 32 * 784, 512) == 4
    assert conv_sgd_splits(156, 32 * 784, 0) == 1      # off
    assert conv_sgd_splits(1, 10 ** 6, 0) == 1


@pytest.mark.parametrize("batch,splits", [(32, 7), (2, 1)])
def test_lenet5_conv1_update_splits_k_when_long(batch, splits):
    """With splitk_groups = 1024 the plan carries the rule's S: conv_wgrad_partial into a
    [S, OC, C*KH*KW+1] scratch tensor, then conv_sgd_finish reading it, in that order; conv2
    (enough sums) and a short K keep conv_sgd."""
    plan = lower(LowerSpec(model="lenet5", batch_size=batch, kernel="fused", backend="opencl",
                           placement="resident", transfer="copy", splitk_groups=1024))
    upd = [(s.layer, s.name) for s in plan.steps if s.op == "kernel" and s.phase == "update"
           and s.layer.startswith("conv")]
    if splits == 1:
        assert upd == [("conv2", "conv_sgd"), ("conv1", "conv_sgd")]
        assert not [t for t in plan.tensors if t.name.endswith("wgrad_part")]
        return
    assert upd == [("conv2", "conv_sgd"), ("conv1", "conv_wgrad_partial"),
                   ("conv1", "conv_sgd_finish")]
    part, = [t for t in plan.tensors if t.name == "conv1.wgrad_part"]
    assert part.role == "scratch" and part.shape == [splits, 6, 26]
    steps = {s.name: s for s in plan.steps if s.layer == "conv1" and s.phase == "update"}
    p, f = (bind_args(n, steps[n].args) for n in ("conv_wgrad_partial", "conv_sgd_finish"))
    assert p["S"] == f["S"] == splits and p["part"] == f["part"] == part.id
    assert steps["conv_wgrad_partial"].global_size == [26 * 256, 6 * splits]
    assert steps["conv_wgrad_partial"].local_size == [256, 1]
    assert steps["conv_sgd_finish"].global_size == [26, 6]


def test_lowering_key_is_validated(tmp_path):
    (tmp_path / "baseline").mkdir()
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "version.yaml").write_text("inherits: baseline\nlowering: fusd\n")
    with pytest.raises(KernelVersionError, match=r"v/version.yaml: key .lowering.*fused_step"):
        load_version("v", tmp_path)
    (tmp_path / "v" / "version.yaml").write_text("inherits: baseline\nlowering: fused_step\n")
    assert load_version("v", tmp_path).lowering == "fused_step"
    assert load_version("baseline", tmp_path).lowering == "per_layer"


def test_fused_lowering_refuses_layers_it_cannot_fuse():
    """A bias-free convolution without a batch norm after it has no fused kernel (conv_fwd and
    conv_sgd carry a bias; the batch-norm kernels need the batch norm): one LowerError naming
    the layer, not a crash inside the lowering."""
    model = Model("conv_nobias", (1, 6, 6), 3, (
        Conv2d("c1", 1, 2, 3, 1, 1, bias=False), ReLU("r1"), Flatten("flat"),
        Linear("fc", 72, 3)))
    with pytest.raises(LowerError, match="layer c1: a Conv2d without bias"):
        lower(LowerSpec(model="conv_nobias", batch_size=4, kernel="fused", backend="opencl",
                        placement="resident", transfer="copy"), model=model)
