"""Per-step verification (phonetrain.reference.steps): planted kernel faults are caught in the
step they occur in, honest float32 differences and near-tie flips pass, and a long run whose
trajectory drifts far apart still passes every checked step. Real runner on PoCL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.planted import planted_kernels, state32
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import KERNELS_ROOT
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan
from phonetrain.reference.steps import check_step, checked_iterations

# Each fault: (file of the baseline version, text, replacement).
FAULTS = {
    # one index off: the last column of pooling windows never receives its gradient (the
    # window loop of maxpool_bwd is common.cl's maxpool_grad_at)
    "pool_backward_index_off_by_one": (
        "common.cl", "ow1 = min(w / stride, OW - 1)", "ow1 = min(w / stride, OW - 2)"),
    # the bias of the last channel is dropped
    "dropped_bias_term": (
        "baseline/elementwise.cl", "Y[i] += bias[(i / HW) % C];",
        "if ((i / HW) % C != C - 1) Y[i] += bias[(i / HW) % C];"),
    # a 1e-4 relative error in one GEMM (gemm_nt: the Linear forward and the conv weight
    # gradient)
    "gemm_nt_1e-4_relative": (
        "baseline/gemm.cl", "        acc += a[k] * b[k];\n    GEMM_STORE(",
        "        acc += a[k] * b[k];\n    acc *= 1.0001f;\n    GEMM_STORE("),
}


def _run(runner, pocl, tmp: Path, spec: LowerSpec, kernels_root: Path = KERNELS_ROOT):
    plan_path = write_bundle(spec, tmp, kernels_root=kernels_root, seed=0)
    out = tmp / "out"
    runner_api.run_plan(runner, plan_path, tmp, out, device_selector=pocl)
    plan = Plan.load(plan_path)
    return plan, reference.verify_run_dir(plan, tmp, out)


def _lenet(**kw) -> LowerSpec:
    return LowerSpec(**{"model": "lenet5", "batch_size": 8, "backend": "opencl",
                        "placement": "resident", "transfer": "copy", "kernel": "baseline",
                        "dataset": "digits", "num_batches": 2, "warmup": 1, "iterations": 2,
                        **kw})


def test_checked_iterations():
    assert checked_iterations([0, 1, 10, 11]) == [0, 1, 11]
    assert checked_iterations([3, 4, 5]) == [4, 5]
    assert checked_iterations([]) == []


def test_correct_kernels_pass_every_checked_step(runner, pocl, tmp_path):
    plan, doc = _run(runner, pocl, tmp_path, _lenet())
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1, 2]
    assert 0 <= doc["max_abs_err"] <= doc["tolerance"]
    # every float32 checkpoint tensor was compared, none missing
    f32 = {plan.tensor(t).name for t in plan.checkpoints["tensors"]
           if plan.tensor(t).dtype == "f32"}
    assert all(set(s["tensors"]) == f32 and not s["missing"] for s in doc["steps"])


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_planted_fault_fails_its_step(runner, pocl, tmp_path, fault):
    fname, old, new = FAULTS[fault]
    root = planted_kernels(tmp_path, fname, old, new)
    _, doc = _run(runner, pocl, tmp_path / "run", _lenet(), kernels_root=root)
    assert not doc["ok"] and doc["failed_iterations"] == [0, 1, 2], doc["worst"]
    assert doc["max_abs_err"] > 10 * doc["tolerance"]
    if fault == "gemm_nt_1e-4_relative":
        # the whole-trajectory comparison would have let it through (drift ~1e-6 < 1e-3)
        assert doc["trajectory"]["drift_max"] < 1e-3


def test_a_drifting_trajectory_still_passes(runner, pocl, tmp_path):
    """Trajectories that end far apart still pass every checked step, each recomputed from the
    runner's own state. The drift is planted: after the run, input batch 2 (read by iterations
    2 and 6, neither checked nor the start of a checked one) is shifted by +0.5 in the bundle,
    so the reference's replay from the start trains on other data from iteration 2 on."""
    spec = _lenet(warmup=1, iterations=7, num_batches=4)   # iterations 0-7; checked 0, 1, 7
    plan_path, root, out = write_bundle(spec, tmp_path, seed=0), tmp_path, tmp_path / "out"
    runner_api.run_plan(runner, plan_path, root, out, device_selector=pocl)
    plan = Plan.load(plan_path)
    (batch,) = [b for b in plan.batches if plan.tensor(b.tensor).name == "input"]
    data = np.fromfile(root / batch.path, "<f4").reshape(batch.count, -1)
    data[2] += 0.5
    data.astype("<f4").tofile(root / batch.path)
    doc = reference.verify_run_dir(plan, root, out)
    traj = doc["trajectory"]
    assert doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1, 7]
    assert traj["drift_from_iteration"] == 2
    assert traj["drift_max"] >= abs(traj["run_losses"][2] - traj["ref_losses"][2]) > \
        traj["loss_bound"]


def _mlp_plan(tmp_path) -> tuple[Plan, Path]:
    spec = LowerSpec(model="mlp_16_16_16_16", batch_size=16, dataset="synthetic", warmup=0,
                     iterations=2, num_batches=2)
    return Plan.load(write_bundle(spec, tmp_path, seed=0)), tmp_path


def test_check_step_bounds_and_a_one_element_fault(tmp_path):
    plan, root = _mlp_plan(tmp_path)
    before = state32(plan, root, 0)
    after = state32(plan, root, 1, before)
    ok = check_step(plan, root, 1, before, after)
    assert ok.ok and ok.decisions_followed == 0
    g = after["fc2.weight.grad"].copy()
    g[5] *= 1 + 1e-4
    bad = check_step(plan, root, 1, before, {**after, "fc2.weight.grad": g})
    assert not bad.ok and bad.worst == "fc2.weight.grad"
    assert bad.tensors["fc2.weight.grad"].worst_index == 5
    missing = check_step(plan, root, 1, before,
                         {k: v for k, v in after.items() if k != "fc1.out"})
    assert not missing.ok and missing.missing == ["fc1.out"]


def test_a_near_tie_relu_follows_the_runner_and_a_far_one_does_not(tmp_path):
    """A ReLU input at the tie may decide either way in two correct implementations: the check
    takes the runner's decision there (and counts it); for an input clearly away from zero it
    does not. The tie is planted: unit 3 of fc1 gets zero weights and a zero bias, so its
    pre-activation is exactly 0 in every summation order, and the 'runner' decides sample 0's
    ReLU there the other way (the smallest positive float32)."""
    plan, root = _mlp_plan(tmp_path)
    before = state32(plan, root, 0)
    W = before["fc1.weight"].reshape(plan.by_name("fc1.weight").shape).copy()
    b = before["fc1.bias"].copy()
    W[3, :], b[3] = 0.0, 0.0
    before = {**before, "fc1.weight": W.ravel(), "fc1.bias": b}
    after = state32(plan, root, 1, before)
    x, y = after["fc1.out"].reshape(16, -1), after["relu1.out"].reshape(16, -1)
    assert x[0, 3] == 0.0 and y[0, 3] == 0.0
    flipped = state32(plan, root, 1, before,
                      ("relu1.out", 3, float(np.finfo(np.float32).tiny)))
    followed = check_step(plan, root, 1, before, flipped)
    assert followed.ok and followed.decisions_followed == 1
    far = int(np.argmax(np.abs(x)))
    wrong = state32(plan, root, 1, before,
                    ("relu1.out", far, 0.0 if y.ravel()[far] > 0 else abs(x.ravel()[far])))
    res = check_step(plan, root, 1, before, wrong)
    assert not res.ok and res.decisions_followed == 0
