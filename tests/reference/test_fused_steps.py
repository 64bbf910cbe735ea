"""Per-step verification of short fused runs (kernel version ``fused``) through the real
runner: on PoCL (resident and staged placements) and on the CPU backend, every checked step
of the MLP 784-256-128-16 and LeNet-5 is within its bound; a planted fault in a fused kernel
fails its steps."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import KERNELS_ROOT
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan


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


@pytest.mark.parametrize("model,placement", [("mlp_784_256_128_16", "resident"),
                                             ("lenet5", "resident"), ("lenet5", "staged")])
def test_fused_run_passes_every_checked_step_on_pocl(runner, pocl, tmp_path, model, placement):
    doc = _run(runner, pocl, tmp_path, _spec(model, placement=placement))
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1, 2]
    assert all(not s["missing"] for s in doc["steps"])


def test_fused_run_passes_every_checked_step_on_cpu_backend(runner, tmp_path):
    doc = _run(runner, None, tmp_path, _spec("lenet5", backend="cpu", placement=None,
                                             transfer=None))
    assert doc["ok"], doc["worst"]


def test_a_planted_fault_in_a_fused_kernel_fails_its_steps(runner, pocl, tmp_path):
    """The bias column of linear_sgd takes the SGD step with twice the gradient."""
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    src = root / "fused" / "fused.cl"
    old = "        SGD_STEP(bias, Vb, o, acc);"
    assert old in src.read_text()
    src.write_text(src.read_text().replace(old, "        SGD_STEP(bias, Vb, o, 2.0f * acc);"))
    doc = _run(runner, pocl, tmp_path / "run", _spec("mlp_784_256_128_16"), kernels_root=root)
    assert not doc["ok"] and doc["failed_iterations"] == [0, 1, 2], doc["worst"]
