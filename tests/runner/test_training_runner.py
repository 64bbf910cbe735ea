"""Lowered plans through the real runner (C CPU backend and PoCL OpenCL) against the numpy
reference, and real convergence on digits."""

from dataclasses import replace

import numpy as np
import pytest

from phonetrain.config import MeasureConfig
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.models import MODELS
from phonetrain.plan import Plan

# threads=1: OpenMP threads spinning on a shared 2-core CI machine make runs 10x slower.
VERIFY_ATOL = MeasureConfig.verify_atol  # the study's tolerance


BACKENDS = [("cpu", None, None), ("opencl", "resident", "copy"), ("opencl", "resident", "map"),
            ("opencl", "staged", "copy"), ("opencl", "staged", "map")]


def _run(runner, pocl, spec, root):
    plan_path = write_bundle(spec, root)
    out = root / "out" / spec.resolved_plan_id()
    doc = runner_api.run_plan(runner, plan_path, root, out, threads=1,
                              device_selector=pocl if spec.backend == "opencl" else None)
    return Plan.load(plan_path), out, doc


@pytest.mark.parametrize("backend,placement,transfer", BACKENDS,
                         ids=["-".join(filter(None, b)) for b in BACKENDS])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_runner_matches_reference_after_3_iterations(runner, pocl, tmp_path, model, backend,
                                                     placement, transfer):
    spec = LowerSpec(model=model, batch_size=4, backend=backend, placement=placement,
                     transfer=transfer, warmup=1, iterations=2, num_batches=2, momentum=0.9,
                     weight_decay=1e-3, dumps="all", dataset="synthetic" if "16" in model
                     and "784" not in model else None)
    plan, out, doc = _run(runner, pocl, spec, tmp_path)
    assert doc["status"] == "ok" and len(doc["iters"]) == 3
    v = reference.verify_run_dir(plan, tmp_path, out)
    assert v["method"] == "per-step" and v["ok"], (v["worst"], v["max_abs_err"])
    assert [s["iteration"] for s in v["steps"]] == [0, 1, 2]   # checkpoints 0, 1, -2, -1
    traj = v["trajectory"]
    assert set(traj["tensor_errs"]) == {plan.tensor(i).name for i in plan.dumps}
    assert traj["drift_max"] <= VERIFY_ATOL, (traj["worst"], traj["drift_max"])
    assert all(np.isfinite(traj["run_losses"]))


@pytest.mark.parametrize("backend,placement", [("cpu", None), ("opencl", "resident")])
@pytest.mark.parametrize("model", ["lenet5", "mlp_784_256_128_16"])
def test_100_iterations_on_digits_halve_the_loss(runner, pocl, tmp_path, model, backend,
                                                 placement):
    """The config defaults (batch 32, lr 0.05, plain SGD) on real digits: the mean loss of
    the last 10 iterations is at most half the first iteration's."""
    spec = LowerSpec(model=model, batch_size=32, backend=backend, placement=placement,
                     transfer="copy" if placement else None, warmup=0, iterations=100,
                     num_batches=50, lr=0.05, dataset="digits", dumps="none")
    _, _, doc = _run(runner, pocl, spec, tmp_path)
    losses = np.array([it["loss"] for it in doc["iters"]])
    assert losses.size == 100 and np.all(np.isfinite(losses))
    assert losses[-10:].mean() <= 0.5 * losses[0], losses[[0, -1]]


def test_verify_flags_a_wrong_run(runner, pocl, tmp_path):
    """A run whose plan differs from the reference's (another learning rate) is caught."""
    spec = LowerSpec(model="mlp_16_16", batch_size=4, warmup=0, iterations=3, num_batches=2,
                     plan_id="p")
    plan, out, _ = _run(runner, pocl, spec, tmp_path)
    other = _run(runner, pocl, replace(spec, lr=0.5, plan_id="q"), tmp_path)[0]
    good = reference.verify_run_dir(plan, tmp_path, out)
    assert good["ok"] and good["trajectory"]["drift_max"] < 1e-5
    bad = reference.verify_run_dir(other, tmp_path, out)
    assert not bad["ok"] and bad["failed_iterations"] == [0, 1, 2]
    assert bad["max_abs_err"] > bad["tolerance"] and bad["trajectory"]["drift_max"] > VERIFY_ATOL
