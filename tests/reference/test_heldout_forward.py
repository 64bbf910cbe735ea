"""The held-out forward (phonetrain.reference.heldout) gives the same loss and accuracy from the
same parameters whatever the lowering: CPU plan, OpenCL staged, OpenCL fused kernels."""

from __future__ import annotations

import pytest

from phonetrain import data, reference
from phonetrain.lowering import LowerSpec, write_plan_dir
from phonetrain.plan import Plan, PlanError


def _plan(root, model, backend="cpu", placement=None, transfer=None, kernel="baseline"):
    spec = LowerSpec(model=model, batch_size=32, backend=backend, placement=placement,
                     transfer=transfer, kernel=kernel, dataset="digits", num_batches=2,
                     warmup=1, iterations=2, seed=0, lr=0.05, momentum=0.0, weight_decay=0.0,
                     plan_id=f"{model}.{backend}.{placement}.{kernel}")
    return Plan.load(write_plan_dir(spec, root) / "plan.json")


def _initial_params(plan, root):
    it = reference.Interpreter(plan, root)
    return {t.name: it.home(t.id).copy() for t in plan.tensors if t.role in ("param", "state")}


@pytest.mark.parametrize("model", ["mlp_784_256_128_16", "lenet5"])
def test_same_result_for_every_lowering(tmp_path, model):
    data.write_batches("digits", 32, 2, tmp_path, seed=0)
    x, y = data.load("digits", split="heldout")
    x, y = x[:100], y[:100]          # 3 full batches and a partial one
    cpu = _plan(tmp_path, model)
    params = _initial_params(cpu, tmp_path)
    want = reference.evaluate(cpu, tmp_path, params, x, y)
    assert want.n == 100 and 0 <= want.accuracy <= 1 and want.loss > 0
    for other in (_plan(tmp_path, model, "opencl", "staged", "copy"),
                  _plan(tmp_path, model, "opencl", "resident", "copy", "fused")):
        got = reference.evaluate(other, tmp_path, params, x, y)
        assert got.accuracy == want.accuracy and got.loss == pytest.approx(want.loss, rel=1e-6)
    # padding rows of a partial batch are not counted: two full batches plus a split of 36
    # (padded to 32 + 32) weigh in as their own samples only
    a = reference.evaluate(cpu, tmp_path, params, x[:64], y[:64])
    b = reference.evaluate(cpu, tmp_path, params, x[64:], y[64:])
    assert (a.n, b.n) == (64, 36)
    assert want.accuracy == pytest.approx((64 * a.accuracy + 36 * b.accuracy) / 100)
    assert want.loss == pytest.approx((64 * a.loss + 36 * b.loss) / 100, rel=1e-6)
    with pytest.raises(PlanError, match="fc1.weight|conv1.weight"):
        reference.evaluate(cpu, tmp_path, {k: v for k, v in params.items()
                                          if not k.endswith("1.weight")}, x, y)
    with pytest.raises(ValueError, match="at least 1"):
        reference.evaluate(cpu, tmp_path, params, x[:0], y[:0])
