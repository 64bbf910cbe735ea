"""The ``image`` kernel version end to end: lowering emits image arguments only for its GEMMs,
the runner reads them as image2d_t views on PoCL (a traced d2d image copy where the device
cannot view a buffer as an image) and trains like the numpy reference; the CPU backend treats
them as buffers; bad image arguments are one clear error."""

from __future__ import annotations

import json

import pytest

from phonetrain.config import MeasureConfig
from phonetrain import reference
from phonetrain.kernels import tuning
from phonetrain import runner as runner_api
from phonetrain.kernels.gemm import GemmShape
from phonetrain.kernels.launch import IMAGE_MAX_WIDTH4, image_width4
from phonetrain.kernels import load_version
from phonetrain.lowering import LowerSpec, lower, write_bundle
from phonetrain.plan import Plan, PlanError

VERIFY_ATOL = MeasureConfig.verify_atol  # the study's tolerance


GEMMS = ("gemm_nn", "gemm_nt", "gemm_tn")


def _spec(backend: str, kernel: str = "image", placement: str = "resident",
          transfer: str = "copy", **kw) -> LowerSpec:
    return LowerSpec(model="lenet5", batch_size=4, backend=backend,
                     placement=placement if backend == "opencl" else None,
                     transfer=transfer if backend == "opencl" else None, kernel=kernel, warmup=1,
                     iterations=2, num_batches=2, momentum=0.9, dumps="all", **kw)


def _image_args(plan: Plan) -> list[tuple[str, int, dict]]:
    return [(s.name, i, a) for s in plan.steps if s.op == "kernel"
            for i, a in enumerate(s.args) if "image_width4" in a]


def test_lowering_marks_operand_b_of_every_gemm_only_for_image():
    plan = lower(_spec("opencl"))
    marked = _image_args(plan)
    n_gemm = sum(s.op == "kernel" and s.name in GEMMS for s in plan.steps)
    assert len(marked) == n_gemm > 0
    for name, pos, a in marked:
        assert name in GEMMS and pos == 5
        assert a["image_width4"] == image_width4(plan.tensor(a["t"]).numel) <= IMAGE_MAX_WIDTH4
    assert not _image_args(lower(_spec("opencl", kernel="regblock")))
    assert image_width4(1) == 1 and image_width4(10) == 3 and image_width4(10**7) == 1024


@pytest.mark.parametrize("backend,placement,transfer", [
    ("opencl", "resident", "copy"), ("opencl", "staged", "map"), ("cpu", None, None)],
    ids=["opencl-resident-copy", "opencl-staged-map", "cpu"])
def test_image_run_matches_reference(runner, pocl, tmp_path, backend, placement, transfer):
    """LeNet-5 (conv GEMMs of every transpose, odd widths) trains as the reference does; where
    the device cannot view a buffer as an image (no cl_khr_image2d_from_buffer, not OpenCL 2.x:
    cl_image.c) each GEMM's B is copied into its image first, as a d2d trace row with device
    times right before the GEMM (staged: after B's upload). A device that can view buffers
    still copies a view whose width or address it refuses, so there copies are optional."""
    spec = _spec(backend, placement=placement, transfer=transfer)
    plan_path = write_bundle(spec, tmp_path)
    out = tmp_path / "out"
    doc = runner_api.run_plan(runner, plan_path, tmp_path, out, threads=1,
                              device_selector=pocl if backend == "opencl" else None)
    plan = Plan.load(plan_path)
    assert doc["status"] == "ok" and len(doc["iters"]) == 3
    v = reference.verify_run_dir(plan, tmp_path, out)
    assert v["max_abs_err"] <= VERIFY_ATOL, (v["worst"], v["max_abs_err"])
    tr = runner_api.read_trace(out)
    copies = tr[tr["op"] == "image_copy"]
    if backend == "cpu":
        assert copies.empty
        return
    first = tr[tr["iteration"] == 0].reset_index(drop=True)
    marked = [(k, s) for k, s in enumerate(plan.steps)
              if s.op == "kernel" and any("image_width4" in a for a in s.args)]
    dev = doc["device"]
    views_buffers = ("cl_khr_image2d_from_buffer" in dev["extensions"]
                     or dev["version"].startswith("OpenCL 2."))
    copied = 0
    for k, s in marked:
        i = first.index[(first["step"] == k) & (first["op"] == "kernel")][0]
        row = first.loc[i - 1]
        if row["op"] != "image_copy":
            assert views_buffers, (k, s.name, dev["version"])
            continue
        copied += 1
        assert row["kind"] == "d2d" and row["step"] == k
        assert row["name"] == plan.tensor(s.args[5]["t"]).name
        assert row["bytes"] >= plan.tensor(s.args[5]["t"]).size_bytes
        assert row["start_ns"] <= row["end_ns"]
    assert (first["op"] == "image_copy").sum() == copied
    assert first["seq"].tolist() == list(range(len(first)))


def _first_image_arg(doc: dict) -> dict:
    return next(a for s in doc["steps"] if s["op"] == "kernel" for a in s["args"]
                if "image_width4" in a)


@pytest.mark.parametrize("mutate,message", [
    (lambda a: a.update(image_width4=a["image_width4"] + 1), "one image_width4 per tensor"),
    (lambda a: a.update(image_width4=0), "image_width4 must be a positive integer"),
    (lambda a: a.update(f=1.0) or a.pop("t"), "needs \"t\""),
], ids=["two-widths", "zero-width", "no-tensor"])
def test_bad_image_argument_is_one_clear_error(runner, pocl, tmp_path, mutate, message):
    plan_path = write_bundle(_spec("opencl"), tmp_path)
    doc = json.loads(plan_path.read_text())
    mutate(_first_image_arg(doc))
    plan_path.write_text(json.dumps(doc))
    with pytest.raises(runner_api.BadInputError, match="image_width4|needs") as e:
        runner_api.run_plan(runner, plan_path, tmp_path, tmp_path / "out",
                            device_selector=pocl)
    assert message in str(e.value) and "plan.json" in str(e.value)


def test_plan_validate_rejects_a_bad_image_width():
    plan = lower(_spec("opencl"))
    plan.validate()
    _image_args(plan)[0][2]["image_width4"] = 0
    with pytest.raises(PlanError, match="image_width4 0"):
        plan.validate()


def test_tuning_on_a_device_without_images_is_skipped_and_leaves_runs_untouched():
    """bench-gemm answers "skipped" where the device has no image support: the tuning
    document records the reason with no classes, and tune_plan keeps the plan as lowered."""
    reason = "the device has no image support (CL_DEVICE_IMAGE_SUPPORT is false)"
    doc = tuning.tune(load_version("image"), [GemmShape("gemm_nn", 32, 64, 16)],
                      lambda spec: {"status": "skipped", "reason": reason}, source="g.cl")
    assert doc["classes"] == {} and doc["skipped"] == reason
    plan = lower(_spec("opencl"))
    tuned, cls = tuning.tune_plan(plan, load_version("image"), doc)
    assert cls is None and tuned.to_json() == plan.to_json()
