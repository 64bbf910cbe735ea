"""Per-step verification of short fused runs of MobileNetV2 (kernel version ``fused``, the
batch-norm kernels of fused_bn.cl) through the real runner, on PoCL and on the CPU backend:
every checked step is within its bound; a planted fault in a fused batch-norm kernel fails
its steps; the check's split of a fused ReLU6 computes the kernel's step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.planted import planted_kernels
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import KERNELS_ROOT, bind_args
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan
from phonetrain.reference.fused_bn import split_bn_activation
from phonetrain.reference.interpreter import Interpreter


def _spec(**kw) -> LowerSpec:
    return LowerSpec(**{"model": "mobilenetv2_small", "batch_size": 4, "backend": "opencl",
                        "placement": "resident", "transfer": "copy", "kernel": "fused",
                        "dataset": "digits", "num_batches": 2, "warmup": 0, "iterations": 2,
                        "momentum": 0.9, "weight_decay": 5e-4, **kw})


def _run(runner, selector, tmp: Path, spec: LowerSpec, kernels_root: Path = KERNELS_ROOT):
    plan_path = write_bundle(spec, tmp, kernels_root=kernels_root, seed=0)
    runner_api.run_plan(runner, plan_path, tmp, tmp / "out", device_selector=selector,
                        threads=1)
    return reference.verify_run_dir(Plan.load(plan_path), tmp, tmp / "out")


@pytest.mark.parametrize("placement,transfer", [("resident", "copy"), ("staged", "map")])
def test_fused_mobilenetv2_passes_every_checked_step_on_pocl(runner, pocl, tmp_path, placement,
                                                             transfer):
    doc = _run(runner, pocl, tmp_path, _spec(placement=placement, transfer=transfer))
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1]
    assert all(not s["missing"] for s in doc["steps"])
    # the running statistics and the fused residual outputs were compared
    assert all({"stem_bn.running_var", "b1.out", "b3.out"} <= set(s["tensors"])
               for s in doc["steps"])


@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_fused_mobilenetv2_split_k_updates_pass_every_checked_step(request, runner, tmp_path,
                                                                   backend):
    """With splitk_groups = 1024 at batch 16 the first stage's units (B*OH*OW = 3136
    products per weight) update in split-K form (gconv_wgrad_partial + gconv_sgd_finish,
    S = 3); every step verified."""
    spec = _spec(batch_size=16, splitk_groups=1024, **({} if backend == "opencl" else
                                   {"backend": "cpu", "placement": None, "transfer": None}))
    doc = _run(runner, request.getfixturevalue("pocl") if backend == "opencl" else None,
               tmp_path, spec)
    plan_path, = tmp_path.glob("plans/*/plan.json")
    splits = {s.layer: bind_args(s.name, s.args)["S"] for s in Plan.load(plan_path).steps
              if s.name == "gconv_wgrad_partial"}
    assert splits == {"stem": 3, "b1_expand": 3, "b1_dw": 3, "b1_project": 3, "b2_expand": 3}
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]


def test_fused_mobilenetv2_passes_every_checked_step_on_cpu_backend(runner, tmp_path):
    doc = _run(runner, None, tmp_path, _spec(backend="cpu", placement=None, transfer=None,
                                             model="mobilenetv2_small_32x32x3",
                                             dataset="synthetic"))
    assert doc["ok"], doc["worst"]


# (kernel, line of fused_bn.cl, its faulty replacement)
FAULTS = [("bn_bwd_sgd", "    SGD_STEP(beta, Vb, c, sb);",
           "    SGD_STEP(beta, Vb, c, 2.0f * sb);"),
          ("bn_act_fwd", "a.z + (b.z + d * d * a.x * f)", "a.z + b.z")]


@pytest.mark.parametrize("kernel,old,new", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_planted_fault_in_a_fused_batchnorm_kernel_fails_its_steps(runner, pocl, tmp_path,
                                                                      kernel, old, new):
    """bn_bwd_sgd steps beta with twice its gradient; bn_act_fwd's merge of the tiles'
    statistics drops the term of the tiles' mean differences (Chan et al.'s d^2 n_a n_b / n)."""
    root = planted_kernels(tmp_path, "fused/fused_bn.cl", old, new)
    doc = _run(runner, pocl, tmp_path / "run", _spec(), kernels_root=root)
    assert not doc["ok"] and doc["failed_iterations"] == [0, 1], doc["worst"]


def test_the_split_of_a_fused_relu6_computes_the_same_step(tmp_path):
    """The per-step check splits bn_act_fwd with act = 2 into the normalization (act = 0)
    and relu6_fwd in place, to follow the runner's near-tie decisions: the two steps give the
    kernel's outputs, and a residual unit (res = 1) is not split."""
    plan = Plan.load(write_bundle(_spec(backend="cpu", placement=None, transfer=None,
                                        dataset="synthetic", batch_size=2), tmp_path, seed=0))
    it = Interpreter(plan, tmp_path, np.float64)
    split_seen = res_seen = 0
    for step in plan.steps:
        split = split_bn_activation(step)
        if step.op == "kernel" and step.name == "bn_act_fwd":
            d = bind_args(step.name, step.args)
            assert (split is None) == (d["act"] == 0 or d["res"] == 1)
            res_seen += d["res"]
        if split is not None:
            saved = [v.copy() for v in it.dev]
            it.run_step(step, 0)
            want = [v.copy() for v in it.dev]
            for v, old in zip(it.dev, saved):
                v[...] = old
            for s in split:
                it.run_step(s, 0)
            for k, v in enumerate(want):
                np.testing.assert_array_equal(it.dev[k], v, err_msg=plan.tensor(k).name)
            split_seen += 1
            continue
        it.run_step(step, 0)
    assert (split_seen, res_seen) == (8, 2)
