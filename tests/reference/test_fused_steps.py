"""Per-step verification of short fused runs (kernel version ``fused``) through the real
runner: on PoCL (resident and staged placements) and on the CPU backend, every checked step
of the MLP 784-256-128-16 and LeNet-5 (and on PoCL vgg_small) is within its bound, by
default and, with ``splitk_groups`` = 1024, with the convolutions with long weight-gradient
sums updating in their split-K form; a planted fault in a fused kernel fails its steps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.planted import planted_kernels, state32
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import KERNELS_ROOT, bind_args
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan
from phonetrain.reference.interpreter import Interpreter
from phonetrain.reference.steps import check_step


def _spec(model: str, **kw) -> LowerSpec:
    return LowerSpec(**{"model": model, "batch_size": 8, "backend": "opencl",
                        "placement": "resident", "transfer": "copy", "kernel": "fused",
                        "dataset": "digits" if model == "lenet5" else "synthetic",
                        "num_batches": 2, "warmup": 1, "iterations": 2, "momentum": 0.9,
                        "weight_decay": 5e-4, **kw})


def _run(runner, selector, tmp: Path, spec: LowerSpec, kernels_root: Path = KERNELS_ROOT):
    plan_path = write_bundle(spec, tmp, kernels_root=kernels_root, seed=0)
    runner_api.run_plan(runner, plan_path, tmp, tmp / "out", device_selector=selector,
                        threads=2 if spec.backend == "cpu" else 0)
    return reference.verify_run_dir(Plan.load(plan_path), tmp, tmp / "out")


# The split-K updates (chunk counts S, src/kernels/README.md "Fused kernels") each model's
# plan has at batch 8 with splitk_groups = 1024: LeNet-5's conv1, vgg_small's conv1a and
# conv1b; with the default (0) none.
SPLITS = {"mlp_784_256_128_16": {}, "lenet5": {"conv1": 6, "conv2": 1},
          "vgg_small": {"conv1a": 6, "conv1b": 2, "conv2a": 1}}


@pytest.mark.parametrize("model,placement,groups", [("mlp_784_256_128_16", "resident", 0),
                                                    ("lenet5", "staged", 0),
                                                    ("lenet5", "staged", 1024),
                                                    ("vgg_small", "resident", 1024)])
def test_fused_run_passes_every_checked_step_on_pocl(runner, pocl, tmp_path, model, placement,
                                                     groups):
    doc = _run(runner, pocl, tmp_path, _spec(model, placement=placement, splitk_groups=groups))
    assert {layer: _splits(tmp_path, layer) for layer in SPLITS[model]} == (
        SPLITS[model] if groups else dict.fromkeys(SPLITS[model], 1))
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1, 2]
    assert all(not s["missing"] for s in doc["steps"])


@pytest.mark.parametrize("groups,splits", [(0, 1), (1024, 6)])
def test_fused_run_passes_every_checked_step_on_cpu_backend(runner, tmp_path, groups, splits):
    doc = _run(runner, None, tmp_path, _spec("lenet5", backend="cpu", placement=None,
                                             transfer=None, splitk_groups=groups))
    assert _splits(tmp_path, "conv1") == splits
    assert doc["ok"], doc["worst"]


def _splits(tmp: Path, layer: str) -> int:
    """The chunk count S of ``layer``'s split-K update in the plan written to ``tmp`` (1:
    conv_sgd)."""
    plan_path, = tmp.glob("plans/*/plan.json")
    steps = [s for s in Plan.load(plan_path).steps
             if s.layer == layer and s.name == "conv_wgrad_partial"]
    return bind_args("conv_wgrad_partial", steps[0].args)["S"] if steps else 1


def test_a_planted_fault_in_a_fused_kernel_fails_its_steps(runner, pocl, tmp_path):
    """The bias column of linear_sgd takes the SGD step with twice the gradient."""
    root = planted_kernels(tmp_path, "fused/fused.cl", "        SGD_STEP(bias, Vb, o, acc);",
                           "        SGD_STEP(bias, Vb, o, 2.0f * acc);")
    doc = _run(runner, pocl, tmp_path / "run", _spec("mlp_784_256_128_16"), kernels_root=root)
    assert not doc["ok"] and doc["failed_iterations"] == [0, 1, 2], doc["worst"]


def _state32(plan: Plan, root: Path, iteration: int, before=None, decide=None) -> dict:
    """:func:`helpers.planted.state32` with the tie planted in a fused ``linear_fwd``
    (its output is argument 7: a ReLU decided inside the kernel)."""
    return state32(plan, root, iteration, before, decide, kernel="linear_fwd", out_arg=7)


def test_a_near_tie_in_a_fused_relu_follows_the_runner_and_a_far_one_does_not(tmp_path):
    """linear_fwd with act = 1 decides a ReLU inside the kernel: the per-step check splits it
    into the pre-activation and the ReLU, so a decision at the tie follows the runner (counted)
    and one clearly away from zero fails. The tie is planted: output unit 3 of fc1 gets zero
    weights and a zero bias, so its pre-activation is exactly 0 in every summation order, and
    the 'runner' decides sample 0's ReLU there the other way (the smallest positive float32)."""
    spec = LowerSpec(model="mlp_16_16_16_16", batch_size=16, dataset="synthetic", warmup=0,
                     iterations=2, num_batches=2, kernel="fused")
    plan = Plan.load(write_bundle(spec, tmp_path, seed=0))
    before = _state32(plan, tmp_path, 0)
    shape = plan.by_name("fc1.weight").shape
    W = before["fc1.weight"].reshape(shape).copy()
    b = before["fc1.bias"].copy()
    W[3, :], b[3] = 0.0, 0.0
    before = {**before, "fc1.weight": W.ravel(), "fc1.bias": b}
    after = _state32(plan, tmp_path, 1, before)
    assert after["fc1.out"][3] == 0.0                  # the reference's own decision at the tie
    tiny = float(np.finfo(np.float32).tiny)
    followed = check_step(plan, tmp_path, 1, before,
                          _state32(plan, tmp_path, 1, before, ("fc1.out", 3, tiny)))
    assert followed.ok and followed.decisions_followed == 1, followed.worst
    x = Interpreter(plan, tmp_path).batches[plan.by_name("input").id][1].astype(np.float64)
    pre = x.reshape(16, -1) @ W.astype(np.float64).T + b
    far = int(np.argmax(np.abs(pre.ravel())))
    y = after["fc1.out"]
    wrong = _state32(plan, tmp_path, 1, before,
                     ("fc1.out", far, 0.0 if y[far] > 0 else abs(pre.ravel()[far])))
    res = check_step(plan, tmp_path, 1, before, wrong)
    assert not res.ok and res.decisions_followed == 0
