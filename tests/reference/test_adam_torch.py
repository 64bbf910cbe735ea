"""AdamW of the lowered plan against PyTorch's ``torch.optim.AdamW`` (skipped without torch):
a few steps of the MLP from the same initial parameters and batches give the same losses and
parameters in the numpy reference (float32) as in PyTorch, through
``benchmarks/torch_crosscheck.py``'s network builder."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from phonetrain import reference
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.models import get_model
from phonetrain.plan import Plan

torch = pytest.importorskip("torch")

CROSSCHECK = Path(__file__).resolve().parents[2] / "benchmarks" / "torch_crosscheck.py"


def _crosscheck():
    spec = importlib.util.spec_from_file_location("torch_crosscheck", CROSSCHECK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("optimizer", ["adamw", "adam"])
def test_mlp_steps_match_torch(tmp_path, optimizer):
    hyper = {"lr": 1e-3, "momentum": 0.0, "weight_decay": 0.01}
    spec = LowerSpec(model="mlp_784_256_128_16", batch_size=16, backend="cpu", warmup=0,
                     iterations=4, num_batches=4, dataset="digits", dumps="params",
                     optimizer=optimizer, **hyper)
    plan = Plan.load(write_bundle(spec, tmp_path))
    ref = reference.run_plan(plan, tmp_path)
    torch.manual_seed(0)
    losses, params = _crosscheck().torch_train(
        get_model(spec.model), plan, tmp_path, hyper["lr"], 0.0, hyper["weight_decay"],
        spec.iterations, optimizer, spec.betas, spec.eps)
    np.testing.assert_allclose(ref.losses, losses, rtol=1e-5, atol=1e-6)
    for name, want in params.items():
        assert reference.tensor_error(ref.dumps[name], want) < 1e-4, name
