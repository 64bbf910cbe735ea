"""Plans that reuse memory (LowerSpec.reuse_buffers) through the real runner: short runs of
vgg_small and mobilenetv2_small pass the per-step verification on the CPU backend and on
PoCL in every placement (resident, staged, pipelined) with fewer device bytes allocated; two
tensors with overlapping lifetimes forced into one buffer fail it; the runner refuses a
shared buffer a tensor does not fit, an unknown one, and a batch tensor in one."""

from __future__ import annotations

import json

import pytest

from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.lowering import LowerSpec, reuse, write_bundle
from phonetrain.plan import Plan


def _spec(model: str, backend: str, placement=None, transfer=None, **kw) -> LowerSpec:
    return LowerSpec(**{"model": model, "batch_size": 2, "backend": backend,
                        "placement": placement, "transfer": transfer, "dataset": "digits",
                        "num_batches": 2, "warmup": 0, "iterations": 2,
                        "reuse_buffers": True, **kw})


def _run(runner, selector, tmp, plan_path) -> tuple[dict, dict]:
    run = runner_api.run_plan(runner, plan_path, tmp, tmp / "out", threads=1,
                              device_selector=selector)
    return run, reference.verify_run_dir(Plan.load(plan_path), tmp, tmp / "out")


@pytest.mark.parametrize("model,backend,placement,transfer", [
    ("vgg_small", "cpu", None, None), ("vgg_small", "opencl", "resident", "copy"),
    ("vgg_small", "opencl", "staged", "map"), ("vgg_small", "opencl", "pipelined", "copy"),
    ("mobilenetv2_small", "cpu", None, None), ("mobilenetv2_small", "opencl", "staged", "map"),
    ("mobilenetv2_small", "opencl", "resident", "copy"),
    ("mobilenetv2_small", "opencl", "pipelined", "copy")])
def test_reuse_run_verifies_per_step(runner, request, tmp_path, model, backend, placement,
                                     transfer):
    plan_path = write_bundle(_spec(model, backend, placement, transfer), tmp_path, seed=0)
    plan = Plan.load(plan_path)
    assert plan.buffers
    selector = request.getfixturevalue("pocl") if backend == "opencl" else None
    run, doc = _run(runner, selector, tmp_path, plan_path)
    assert doc["method"] == "per-step" and doc["ok"], doc["worst"]
    assert [s["iteration"] for s in doc["steps"]] == [0, 1]
    if backend == "opencl":   # one device buffer per shared buffer, one per other tensor used
        assert run["device_bytes_allocated"] == plan.allocated_bytes


def test_overlapping_tensors_in_one_buffer_fail_the_per_step_check(runner, tmp_path):
    """The longest-lived sharable tensor and one written during its lifetime, forced into one
    buffer: the second overwrites the first before its last read."""
    spec = _spec("vgg_small", "cpu", reuse_buffers=False)
    plan_path = write_bundle(spec, tmp_path, seed=0)
    plan = Plan.load(plan_path)
    life = reuse.lifetimes(plan.steps)
    excluded = reuse.exclusions(plan.tensors, plan.steps, set(plan.dumps), life)
    ok = [life[t.id] for t in plan.tensors if t.id not in excluded and t.dtype == "f32"]
    long = max(ok, key=lambda lt: lt.last - lt.first)
    inner = next(lt for lt in ok if long.first < lt.first < long.last)
    doc = plan.to_json()
    size = max(plan.tensors[lt.tid].size_bytes for lt in (long, inner))
    for lt in (long, inner):
        doc["tensors"][lt.tid]["buffer"] = "forced"
    doc["buffers"] = [{"name": "forced", "size_bytes": size}]
    doc["checkpoints"]["tensors"] = [t for t in doc["checkpoints"]["tensors"]
                                     if t not in (long.tid, inner.tid)]
    plan_path.write_text(json.dumps(doc))
    _, verdict = _run(runner, None, tmp_path, plan_path)
    assert not verdict["ok"] and verdict["failed_iterations"] == [0, 1], verdict["worst"]


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["buffers"][0].update(size_bytes=4), "does not fit buffer"),
    (lambda d: d["tensors"][-1].update(buffer="nowhere"), "is not in buffers"),
    (lambda d: (d["buffers"][0].update(size_bytes=1 << 24),
                d["tensors"][0].update(buffer=d["buffers"][0]["name"])),
     "a batch needs its own")], ids=["too-small", "unknown", "batch"])
def test_the_runner_refuses_a_bad_shared_buffer(runner, tmp_path, edit, message):
    plan_path = write_bundle(_spec("lenet5", "cpu"), tmp_path, seed=0)
    doc = json.loads(plan_path.read_text())
    edit(doc)
    plan_path.write_text(json.dumps(doc))
    with pytest.raises(runner_api.RunnerError) as ei:
        runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out", threads=1)
    assert ei.value.exit_code == runner_api.ExitCode.BAD_INPUT and message in ei.value.message
