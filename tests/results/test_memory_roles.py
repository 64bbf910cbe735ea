"""Memory by role (phonetrain.results.memory) on real lowered plans: the roles partition the
plan's tensors, each role holds what the model says it must (parameters, their gradients,
the optimizer's state, the batch), a planted tensor moves exactly its bytes into its role,
and on PoCL the runner allocates exactly the plan's bytes as OpenCL buffers."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from click.testing import CliRunner

from helpers.results import write_run
from phonetrain import runner as runner_api
from phonetrain.cli import main
from phonetrain.lowering import LowerSpec, lower, write_bundle
from phonetrain.models import get_model
from phonetrain.plan import Plan, Tensor
from phonetrain.results import memory
from phonetrain.results.runs import read_run

CASES = [  # model, kernel version, optimizer
    ("mlp_784_256_128_16", "baseline", "sgd"), ("mlp_784_256_128_16", "baseline", "adamw"),
    ("mlp_784_256_128_16", "fused", "sgd"), ("lenet5", "baseline", "sgd"),
    ("lenet5", "baseline", "adam"), ("lenet5", "fused", "sgd"),
    ("mobilenetv2_small", "baseline", "sgd"), ("mobilenetv2_small", "baseline", "adamw"),
    ("mobilenetv2_small", "fused", "sgd")]
BATCH = 4


def _plan(model: str, kernel: str, optimizer: str, backend: str = "opencl") -> Plan:
    cl = backend == "opencl"
    return lower(LowerSpec(model=model, batch_size=BATCH, backend=backend,
                           placement="resident" if cl else None,
                           transfer="copy" if cl else None, kernel=kernel,
                           optimizer=optimizer))


def _numel(shapes) -> int:
    return sum(math.prod(s) for s in shapes.values())


@pytest.mark.parametrize("model,kernel,optimizer", CASES)
def test_roles_partition_the_plan_and_hold_what_the_model_says(model, kernel, optimizer):
    plan = _plan(model, kernel, optimizer)
    got = memory.role_bytes(plan)
    total = sum(t.size_bytes for t in plan.tensors)
    assert got["plan_tensor_bytes"] == total
    assert sum(got[f"{r}_bytes"] for r in memory.ROLES) == total
    assert len(memory.tensor_roles(plan)) == len(plan.tensors)
    m = get_model(model)
    weights, buffers = 4 * _numel(m.param_shapes()), 4 * _numel(m.state_shapes())
    per_param = 1 if optimizer == "sgd" else 2
    assert got["param_bytes"] == weights + buffers
    assert got["grad_bytes"] == (0 if kernel == "fused" else weights)
    assert got["optimizer_state_bytes"] == per_param * weights + (0 if optimizer == "sgd" else 4)
    assert got["staging_bytes"] == 4 * BATCH * math.prod(m.input_shape) + 4 * BATCH + 4
    assert got["activation_bytes"] > 0 and got["scratch_bytes"] > 0


def test_roles_do_not_depend_on_the_backend():
    for model, kernel, optimizer in CASES[:4]:
        assert memory.role_bytes(_plan(model, kernel, optimizer, "cpu")) == \
            memory.role_bytes(_plan(model, kernel, optimizer))


def test_coarse_roles_split_by_the_lowerings_names():
    roles = dict((n, r) for n, r, _ in memory.tensor_roles(_plan("lenet5", "baseline", "adam")))
    assert roles["conv1.weight.grad"] == "grad"
    assert roles["conv1.weight.exp_avg_sq"] == roles["optimizer.step"] == "optimizer_state"
    assert roles["conv1.col"] == roles["loss.rows"] == "scratch"
    assert roles["pool1.argmax"] == roles["conv1.out"] == "activation"
    grads_of_activations = [n for n, r in roles.items()
                            if n.endswith(".grad") and r == "scratch"]
    assert grads_of_activations and all(".weight." not in n and ".bias." not in n
                                        for n in grads_of_activations)
    bn = dict((n, r) for n, r, _ in memory.tensor_roles(
        _plan("mobilenetv2_small", "baseline", "sgd")))
    assert bn["stem_bn.running_var"] == "param"
    assert bn["stem_bn.mean"] == bn["stem_bn.invstd"] == "activation"


@pytest.mark.parametrize("name,role,shape,moves_to", [
    ("planted.col", "scratch", [10, 25], "scratch"),
    ("planted.out", "activation", [3, 7], "activation"),
    ("planted.out.grad", "grad", [3, 7], "scratch"),
    ("fc1.weight.planted", "state", [5], "optimizer_state"),
    ("planted.running_mean", "state", [6], "param"),
    ("input2", "input", [9], "staging")])
def test_planted_tensor_moves_exactly_its_bytes_into_its_role(name, role, shape, moves_to):
    plan = _plan("mlp_784_256_128_16", "baseline", "sgd")
    before = memory.role_bytes(plan)
    plan.tensors.append(Tensor(id=len(plan.tensors), name=name, shape=shape, role=role))
    after = memory.role_bytes(plan)
    added = 4 * math.prod(shape)
    for col in memory.COLUMNS:
        want = before[col] + (added if col in (f"{moves_to}_bytes", "plan_tensor_bytes",
                                             "plan_buffer_bytes") else 0)
        assert after[col] == want, col


def test_a_run_row_carries_the_plans_memory_and_a_folder_without_plan_none(tmp_path):
    plan = _plan("lenet5", "baseline", "sgd")
    with_plan = write_run(tmp_path, model="lenet5")
    plan.save(with_plan / "plan.json")
    row = read_run(with_plan)["runs"].iloc[0]
    assert {c: row[c] for c in memory.COLUMNS} == memory.role_bytes(plan)
    oom = write_run(tmp_path, model="lenet5", kernel="baseline", backend="opencl")
    plan.save(oom / "plan.json")
    (oom / "run.json").write_text(json.dumps({"status": "oom", "reason": "does not fit"}))
    row = read_run(oom)["runs"].iloc[0]
    assert row["status"] == "oom" and row["plan_tensor_bytes"] == memory.role_bytes(plan)[
        "plan_tensor_bytes"]
    bare = read_run(write_run(tmp_path, model="mlp_16_16"))["runs"].iloc[0]
    assert all(bare[c] is None or bare[c] != bare[c] for c in memory.COLUMNS)


@pytest.mark.parametrize("model,kernel,optimizer", [
    ("mlp_784_256_128_16", "baseline", "adamw"), ("lenet5", "fused", "sgd")])
def test_runner_allocates_the_plans_bytes_as_opencl_buffers(runner, pocl, tmp_path, model,
                                                           kernel, optimizer):
    spec = LowerSpec(model=model, batch_size=BATCH, backend="opencl", placement="resident",
                     transfer="copy", kernel=kernel, optimizer=optimizer, dataset="digits",
                     num_batches=1, warmup=0, iterations=1, dumps="none", checkpoints=())
    plan_path = write_bundle(spec, tmp_path, seed=0)
    doc = runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out", threads=1,
                              device_selector=pocl)
    got = memory.role_bytes(Plan.load(plan_path))
    assert doc["device_bytes_allocated"] == got["plan_tensor_bytes"]


@pytest.mark.parametrize("text", [
    b"[1, 2]", b"null", b"\xff\xfe not UTF-8",
    b'{"plan_version": 1, "programs": {"a": 1}, "tensors": [{"id": 0, "name": "x", '
    b'"shape": ["32"], "role": "input"}], "name": "p", "backend": "cpu", "steps": [], '
    b'"iterations": 1}'])
def test_a_damaged_plan_leaves_options_and_memory_empty_and_keeps_the_run(tmp_path, text):
    """`phonetrain aggregate` over a run whose plan.json is damaged (not an object, not
    UTF-8, sizes that are not numbers): the run keeps its measurement, ``options`` and the
    ``*_bytes`` columns are empty, and the summary is written."""
    R = tmp_path / "results"
    (write_run(R / "runs", model="mlp_16_16") / "plan.json").write_bytes(text)
    res = CliRunner().invoke(main, ["aggregate", "--results", str(R), "--found"])
    assert res.exit_code == 0 and "Traceback" not in res.output, (res.output, res.exception)
    row = pd.read_parquet(R / "summary/runs.parquet").iloc[0]
    assert row["status"] == "ok" and row["iteration_ms"] > 0
    assert all(pd.isna(row[c]) for c in ("options", *memory.COLUMNS))
