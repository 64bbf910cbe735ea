"""The small VGG- and MobileNetV2-style models (phonetrain.models.zoo): shapes and parameter
counts, their lowering to every placement, the residual blocks' gradient sum, batch norm's
running statistics as state, and the layer errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from phonetrain.lowering import LowerSpec, lower, write_plan_dir
from phonetrain.lowering.init import init_params, init_state
from phonetrain.models import (BatchNorm2d, Conv2d, DepthwiseConv2d, Residual, ShapeError,
                               get_model)
from phonetrain.plan import Plan

CNNS = ["vgg_small", "vgg_small_32x32x3", "mobilenetv2_small", "mobilenetv2_small_32x32x3"]
PLACEMENTS = [("cpu", None, None), ("opencl", "resident", "copy"),
              ("opencl", "staged", "copy"), ("opencl", "staged", "map")]


@pytest.mark.parametrize("model", CNNS)
@pytest.mark.parametrize("backend,placement,transfer", PLACEMENTS,
                         ids=["cpu", "resident", "staged-copy", "staged-map"])
def test_cnns_lower_to_every_placement(model, backend, placement, transfer):
    plan = lower(LowerSpec(model=model, batch_size=3, backend=backend, placement=placement,
                           transfer=transfer))
    plan.validate()
    kernels = [s for s in plan.steps if s.op == "kernel"]
    m = get_model(model)
    assert sum(s.name == "sgd_update" for s in kernels) == len(m.param_shapes())
    if backend == "opencl":   # every launched kernel is in a program the plan builds
        assert "kernels/baseline/mobile.cl" in {p.source for p in plan.programs}
    if placement == "staged":  # the running statistics go up before and down after the stats
        for s in kernels:
            if s.name == "batchnorm_stats":
                i = plan.steps.index(s)
                rv = s.args[9]["t"]
                assert any(t.tensor == rv for t in plan.steps[i - 10:i] if t.op != "kernel")
                assert any(t.tensor == rv for t in plan.steps[i + 1:i + 12] if t.op != "kernel")


def test_cnn_shapes_and_parameter_counts():
    assert get_model("vgg_small").shapes()[-4] == (784,)
    assert get_model("vgg_small_32x32x3").shapes()[-4] == (1024,)
    assert get_model("vgg_small").param_count() == 80 + 584 + 1168 + 2320 + 50240 + 650
    mb = get_model("mobilenetv2_small")
    assert mb.param_count() == 6066 and mb.input_shape == (1, 28, 28)
    assert get_model("mobilenetv2_small_32x32x3").param_count() == 6066 - 72 + 216
    # 11 batch norms, 2 running statistics per channel, none of them parameters
    assert sum(math.prod(s) for s in mb.state_shapes().values()) == 672
    assert not set(mb.state_shapes()) & set(mb.param_shapes())
    residuals = [layer for layer in mb.layers if isinstance(layer, Residual)]
    assert [r.name for r in residuals] == ["b1", "b3"]   # b2 changes shape: no skip


def test_residual_backward_sums_the_body_and_skip_gradients():
    plan = lower(LowerSpec(model="mobilenetv2_small", batch_size=2))
    steps = [s for s in plan.steps if s.op == "kernel" and s.name == "add"]
    by_phase = {p: [s for s in steps if s.phase == p] for p in ("forward", "backward")}
    assert [s.layer for s in by_phase["forward"]] == ["b1", "b3"]
    assert [s.layer for s in by_phase["backward"]] == ["b3", "b1"]
    for s in by_phase["backward"]:
        a, b, y = (plan.tensor(s.args[i]["t"]).name for i in (1, 2, 3))
        assert a == f"{s.layer}.body.grad"           # the gradient through the body
        assert b == f"{s.layer}.out.grad"            # the skip passes dY unchanged
        fwd = next(f for f in by_phase["forward"] if f.layer == s.layer)
        assert y == plan.tensor(fwd.args[2]["t"]).name + ".grad"   # the block input's grad
    names = [t.name for t in plan.tensors]
    assert len(names) == len(set(names))


def test_batchnorm_state_is_not_trained_and_starts_as_pytorch():
    plan = lower(LowerSpec(model="mobilenetv2_small", batch_size=2, momentum=0.9))
    rv = plan.by_name("stem_bn.running_var")
    assert rv.role == "state" and rv.init["path"].endswith("stem_bn.running_var.f32")
    updated = {plan.tensor(s.args[4]["t"]).name for s in plan.steps if s.name == "sgd_update"}
    assert "stem_bn.weight" in updated and "stem_bn.bias" in updated
    assert not any("running" in n for n in updated)
    m = get_model("mobilenetv2_small")
    params, state = init_params(m, 0), init_state(m)
    assert (params["stem_bn.weight"] == 1).all() and (params["stem_bn.bias"] == 0).all()
    assert (state["stem_bn.running_mean"] == 0).all() and (state["stem_bn.running_var"] == 1).all()
    assert "stem.bias" not in params                       # bias-free convolutions
    assert np.abs(params["b1_dw.weight"]).max() <= 1 / 3    # depthwise fan_in 9


def test_plan_dir_holds_running_statistics(tmp_path):
    d = write_plan_dir(LowerSpec(model="mobilenetv2_small", batch_size=2, plan_id="p"), tmp_path)
    plan = Plan.load(d / "plan.json")
    rv = plan.by_name("b3_dw_bn.running_var")
    np.testing.assert_array_equal(np.fromfile(tmp_path / rv.init["path"], "<f4"), np.ones(64))


def test_mobile_layer_errors_name_the_layer():
    with pytest.raises(ShapeError, match="layer r: the body maps .* a residual needs"):
        Residual("r", (Conv2d("c", 2, 3, 1),)).out_shape((2, 4, 4))
    with pytest.raises(ShapeError, match="layer dw: input .* is not"):
        DepthwiseConv2d("dw", 4).out_shape((3, 5, 5))
    with pytest.raises(ShapeError, match="layer bn: input"):
        BatchNorm2d("bn", 4).out_shape((16,))
    with pytest.raises(ShapeError, match="only 3x3"):
        DepthwiseConv2d("dw", 4, kernel=5)


def test_32x32x3_models_take_cifar10_or_synthetic_and_refuse_digits():
    for ds in ("cifar10", "synthetic"):
        lower(LowerSpec(model="mobilenetv2_small_32x32x3", batch_size=2, dataset=ds))
    with pytest.raises(ValueError, match="dataset digits has"):
        lower(LowerSpec(model="vgg_small_32x32x3", batch_size=2, dataset="digits"))
