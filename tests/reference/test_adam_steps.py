"""Adam and AdamW (``optimizer: adam|adamw``) on the real runner: the MLP and LeNet-5 train on
the CPU backend and on PoCL (baseline kernels, resident and staged placements) and every
checked step -- parameters, gradients, both moment estimates and the on-device step count --
matches the numpy reference (:mod:`phonetrain.reference.steps`). A planted fault in the
AdamW update (its decoupled weight decay dropped) fails every checked step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.planted import planted_kernels
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import KERNELS_ROOT
from phonetrain.lowering import LowerError, LowerSpec, lower, write_bundle
from phonetrain.plan import Plan

HYPER = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}


def _spec(model: str, optimizer: str, backend: str, placement: str | None = None,
          **kw) -> LowerSpec:
    opencl = backend == "opencl"
    return LowerSpec(**{"model": model, "batch_size": 8, "backend": backend,
                        "placement": placement, "transfer": "copy" if opencl else None,
                        "kernel": "baseline", "dataset": "digits", "num_batches": 2,
                        "warmup": 1, "iterations": 2, "optimizer": optimizer,
                        "momentum": 0.0, **{**HYPER, **kw}})


def _run(runner, pocl, tmp: Path, spec: LowerSpec, kernels_root: Path = KERNELS_ROOT):
    plan_path = write_bundle(spec, tmp, kernels_root=kernels_root, seed=0)
    out = tmp / "out"
    runner_api.run_plan(runner, plan_path, tmp, out, threads=2,
                        device_selector=pocl if spec.backend == "opencl" else None)
    plan = Plan.load(plan_path)
    return plan, out, reference.verify_run_dir(plan, tmp, out)


CASES = [("mlp_784_256_128_16", "adamw", "cpu", None),
         ("mlp_784_256_128_16", "adamw", "opencl", "resident"),
         ("mlp_784_256_128_16", "adam", "opencl", "resident"),
         ("lenet5", "adamw", "cpu", None),
         ("lenet5", "adam", "cpu", None),
         ("lenet5", "adamw", "opencl", "staged")]


@pytest.mark.parametrize("model,optimizer,backend,placement", CASES,
                         ids=[f"{m}-{o}-{b}-{p}" for m, o, b, p in CASES])
def test_adam_runs_verify_every_checked_step(runner, pocl, tmp_path, model, optimizer,
                                             backend, placement):
    plan, out, doc = _run(runner, pocl, tmp_path, _spec(model, optimizer, backend, placement))
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1, 2]
    # every parameter's two moments and the step count are checkpointed and checked
    f32 = {plan.tensor(t).name for t in plan.checkpoints["tensors"]
           if plan.tensor(t).dtype == "f32"}
    params = [t.name for t in plan.tensors if t.role == "param"]
    assert {f"{w}.{m}" for w in params for m in ("exp_avg", "exp_avg_sq")} | \
        {"optimizer.step"} <= f32
    assert not any(n.endswith(".momentum") for n in f32)
    assert all(set(s["tensors"]) == f32 and not s["missing"] for s in doc["steps"])
    # the step count the device kept: one per iteration, warm-up included
    steps = reference.read_checkpoint(out, plan, 2)["optimizer.step"]
    assert steps.tolist() == [3.0]


def test_a_fault_in_adamw_weight_decay_fails_its_steps(runner, pocl, tmp_path):
    root = planted_kernels(tmp_path, "baseline/optim.cl", "w *= 1.0f - lr * weight_decay;",
                           "w *= 1.0f;")
    spec = _spec("mlp_784_256_128_16", "adamw", "opencl", "resident", weight_decay=0.1)
    _, _, doc = _run(runner, pocl, tmp_path / "run", spec, kernels_root=root)
    assert not doc["ok"] and doc["failed_iterations"] == [0, 1, 2]
    assert doc["max_abs_err"] > 10 * doc["tolerance"]


def test_adam_lowering_and_refusals():
    plan = lower(_spec("mlp_16_16", "adamw", "cpu", dataset="synthetic"))
    kernels = [s.name for s in plan.steps if s.op == "kernel" and s.phase == "update"]
    assert kernels[0] == "adam_step" and kernels.count("adam_update") == 2
    assert "sgd_update" not in kernels
    update = next(s for s in plan.steps if s.name == "adam_update")
    assert [a.get("f", a.get("i")) for a in update.args[1:7]] == pytest.approx(
        [1e-3, 0.9, 0.999, 1e-8, 0.01, 1])
    sgd = _spec("mlp_16_16", "sgd", "cpu", dataset="synthetic")
    assert sgd.resolved_plan_id() == LowerSpec(**{**sgd.__dict__, "betas": (0.5, 0.5),
                                                 "eps": 1.0}).resolved_plan_id()
    with pytest.raises(LowerError, match="fused_step.*'sgd' only"):
        lower(_spec("mlp_16_16", "adam", "opencl", "resident", kernel="fused",
                    dataset="synthetic"))
    with pytest.raises(LowerError, match="momentum"):
        lower(_spec("mlp_16_16", "adam", "cpu", momentum=0.9, dataset="synthetic"))
    with pytest.raises(LowerError, match="betas"):
        lower(_spec("mlp_16_16", "adam", "cpu", betas=(0.9, 1.0), dataset="synthetic"))


def test_reference_adamw_matches_its_formula_over_steps():
    """Three steps of the reference kernels on one tensor against the formula written out
    (Loshchilov & Hutter 2019, Algorithm 2, with PyTorch's bias correction), in float64."""
    from phonetrain.reference.kernels import run_kernel
    rng = np.random.default_rng(0)
    w0 = rng.uniform(-1, 1, 7)
    arrays = [np.zeros(1), w0.copy(), np.zeros(7), np.zeros(7), np.zeros(7)]
    w, m, v = w0.copy(), np.zeros(7), np.zeros(7)
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    for t in (1, 2, 3):
        g = rng.uniform(-1, 1, 7)
        arrays[2][:] = g
        run_kernel("adam_step", [{"t": 0}], arrays)
        run_kernel("adam_update", [{"i": 7}, {"f": lr}, {"f": b1}, {"f": b2}, {"f": eps},
                                   {"f": wd}, {"i": 1}, {"t": 0}, {"t": 1}, {"t": 2},
                                   {"t": 3}, {"t": 4}], arrays)
        w = w * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
    np.testing.assert_allclose(arrays[1], w, rtol=1e-12)
    assert arrays[0][0] == 3
