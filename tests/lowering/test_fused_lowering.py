"""The fused lowering (kernel versions with ``lowering: fused_step``): at least 3x fewer kernel
launches per iteration than the layer-by-layer plan for the MLP 784-256-128-16 and LeNet-5,
the same training (float64 reference, every placement) as the baseline plan, and the
version.yaml key's validation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from phonetrain import reference
from phonetrain.kernels import KernelVersionError, load_version
from phonetrain.lowering import LowerSpec, lower, write_bundle
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
    base = LowerSpec(model=model, batch_size=32, backend="opencl", placement="resident",
                     transfer="copy")
    n_base = _launches(lower(base))
    n_fused = _launches(lower(replace(base, kernel="fused")))
    assert n_base >= 3 * n_fused, (n_base, n_fused)
    assert {"mlp_784_256_128_16": (26, 8), "lenet5": (55, 18)}[model] == (n_base, n_fused)


def test_fused_plan_updates_weights_after_their_input_gradient():
    """Each layer's input gradient reads its weights before the layer's SGD kernel writes
    them, and no weight-gradient buffer exists."""
    plan = lower(LowerSpec(model="lenet5", batch_size=4, kernel="fused", backend="opencl",
                           placement="resident", transfer="copy"))
    steps = [s for s in plan.steps if s.op == "kernel"]
    for i, s in enumerate(steps):
        if s.name in ("linear_sgd", "conv_sgd"):
            w = s.args[-4]["t"]
            later = [t for t in steps[i + 1:] if any(a.get("t") == w for a in t.args)]
            assert not later, f"{s.layer}: {[t.name for t in later]} read W after its update"
    assert not any(t.name.endswith(("weight.grad", "bias.grad")) for t in plan.tensors)


@pytest.mark.parametrize("model", MODELS)
def test_fused_plan_trains_like_the_baseline_float64(tmp_path, model):
    """Two SGD steps with momentum and weight decay in the float64 reference: the fused plan
    (every placement) gives the baseline plan's losses, parameters and momenta."""
    base = LowerSpec(model=model, batch_size=8, num_batches=2, warmup=0, iterations=2,
                     momentum=0.9, weight_decay=5e-4, lr=0.05, dataset="synthetic",
                     dumps="all")
    want = reference.run_plan(write_bundle(base, tmp_path / "base", seed=0), tmp_path / "base",
                              dtype=np.float64)
    kept = [k for k in want.dumps if k.endswith((".weight", ".bias", ".momentum"))]
    assert kept
    for backend, placement, transfer in PLACEMENTS:
        spec = replace(base, kernel="fused", backend=backend, placement=placement,
                       transfer=transfer)
        root = tmp_path / f"{backend}-{placement}-{transfer}"
        got = reference.run_plan(write_bundle(spec, root, seed=0), root, dtype=np.float64)
        np.testing.assert_allclose(got.losses, want.losses, rtol=1e-12, atol=0)
        for k in kept:
            np.testing.assert_allclose(got.dumps[k], want.dumps[k], rtol=1e-10, atol=1e-13,
                                       err_msg=f"{placement}: {k}")


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
