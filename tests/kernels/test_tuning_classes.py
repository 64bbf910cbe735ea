"""Tuning classes: a class is one GEMM call, named from the call alone; a plan's deploy takes
the class files of its own calls and the choice of the class holding most of its FLOPs; a
run's classes and a class's tune params do not depend on the rest of the sweep."""

from __future__ import annotations

import re

import pytest

from helpers import REPO
from phonetrain.config import compose_sweep
from phonetrain.errors import StageError
from phonetrain.kernels import load_version, tuning
from phonetrain.kernels.gemm import GemmShape
from phonetrain.lowering import LowerSpec, lower, write_bundle
from phonetrain.plan import Plan
from phonetrain.stages.deploy import device_plan
from phonetrain.stages.params import job_params, sweep_tuning_classes, tune_job, tuning_classes


def test_class_names_the_call_and_back():
    g = GemmShape("gemm_nt", 32, 256, 784)
    assert tuning.gemm_class(g) == "gemm_nt_32x256x784"
    assert tuning.class_shape("gemm_nt_32x256x784") == g
    assert re.fullmatch(tuning.CLASS_PATTERN, "gemm_tn_16x16x32")
    assert not re.fullmatch(tuning.CLASS_PATTERN, tuning.SQUARES)
    assert not re.fullmatch(tuning.CLASS_PATTERN, "square64")
    with pytest.raises(ValueError, match="not a GEMM tuning class"):
        tuning.class_shape("square64")
    with pytest.raises(ValueError, match="not a GEMM call"):
        tuning.gemm_class(GemmShape("conv2d_fwd", 1, 2, 3))
    with pytest.raises(ValueError, match="not a GEMM call"):
        tuning.gemm_class(GemmShape("gemm_nn", 0, 2, 3))


def _plan(model="mlp_784_256_128_16", batch=8, version="regblock"):
    return lower(LowerSpec(model=model, batch_size=batch, backend="opencl",
                           placement="resident", transfer="copy", kernel=version))


def test_plan_classes_are_its_gemm_calls():
    assert tuning.plan_classes(_plan("mlp_16_16", 32)) == ["gemm_nt_32x16x16",
                                                           "gemm_tn_16x16x32"]


CANDS = [{"defines": {"RM": 2, "RN": 4, "VK": 4}, "local": [16, 16]},
         {"defines": {"RM": 4, "RN": 8, "VK": 8}, "local": [8, 8]},
         {"defines": {"RM": 8, "RN": 4, "VK": 4}, "local": [16, 16]}]


def _class_files(tmp_path, classes, cand_of):
    out = []
    for cls in classes:
        out.append(tmp_path / "tuning" / f"{cls}.json")
        shape = tuning.class_shape(cls)
        entry = {**cand_of(cls), "shapes": [[shape.kernel, shape.M, shape.N, shape.K]]}
        tuning.write_tuning({"version": "regblock", "classes": {cls: entry},
                             "default": cls, "trials": []}, out[-1])
    return out


def test_plan_takes_the_choice_of_its_dominant_class_and_ignores_others(tmp_path):
    plan = _plan()
    classes = tuning.plan_classes(plan)
    flops = {c: tuning.class_shape(c).flops for c in classes}
    dominant = max(flops, key=flops.get)
    assert dominant == "gemm_nt_8x256x784"
    cand_of = lambda c: CANDS[1] if c == dominant else CANDS[0]  # noqa: E731
    own = _class_files(tmp_path / "own", classes, cand_of)
    tuned, cls = device_plan(write_bundle(LowerSpec(
        model="mlp_784_256_128_16", batch_size=8, backend="opencl", placement="resident",
        transfer="copy", kernel="regblock"), tmp_path), "regblock", own, every_class=True)
    assert cls == dominant
    want = tuning.candidate_version(load_version("regblock"), CANDS[1])
    assert {p.options for p in tuned.programs} == {want.options}
    assert {tuple(s.local_size) for s in tuned.steps
            if s.op == "kernel" and s.name.startswith("gemm")} == {(8, 8)}
    # another model's classes beside them (a larger call among them) change nothing
    other = _class_files(tmp_path / "other", ["gemm_nn_1024x1024x1024"], lambda c: CANDS[2])
    merged = tuning.load_tunings(own + other)
    assert tuning.plan_class(plan, merged) == dominant
    assert tuning.tune_plan(plan, load_version("regblock"), merged)[0].to_json() == \
        tuned.to_json()


def test_deploy_refuses_tuning_files_lacking_a_class_of_its_plan(tmp_path):
    plan_json = write_bundle(LowerSpec(model="mlp_16_16", batch_size=32, backend="opencl",
                                       placement="resident", transfer="copy",
                                       kernel="regblock"), tmp_path)
    files = _class_files(tmp_path, ["gemm_nt_32x16x16"], lambda c: CANDS[0])
    with pytest.raises(StageError, match="gemm_tn_16x16x32"):
        device_plan(plan_json, "regblock", files, every_class=True)
    assert device_plan(plan_json, "regblock", files)[1] == "gemm_nt_32x16x16"


def test_a_skipped_class_file_leaves_the_plan_as_lowered(tmp_path):
    plan = _plan("mlp_16_16", 32)
    skipped = {"version": "image", "classes": {}, "default": None, "skipped": "no images"}
    ok = {"version": "image", "classes": {"gemm_nt_32x16x16": CANDS[0]},
          "default": "gemm_nt_32x16x16"}
    merged = tuning.merge_tunings([ok, skipped])
    assert merged["classes"] == {} and merged["skipped"] == "no images"
    tuned, cls = tuning.tune_plan(plan, load_version("regblock"), merged)
    assert cls is None and tuned.to_json() == plan.to_json()
    assert tuning.merge_tunings([]) == {"classes": {}, "default": None}


def _sweep(models):
    return compose_sweep(["sweep=test", "sweep.kernels=[baseline,regblock]",
                          f"sweep.models=[{','.join(models)}]"], conf_dir=REPO / "conf")


def test_runs_classes_and_class_params_do_not_depend_on_the_other_models():
    small, grown = _sweep(["mlp_16_16"]), _sweep(["mlp_16_16", "lenet5"])
    before, after = tuning_classes(small), tuning_classes(grown)
    assert before == {"mlp_16_16.opencl.regblock": ["gemm_nt_32x16x16", "gemm_tn_16x16x32"]}
    assert {k: after[k] for k in before} == before
    assert set(sweep_tuning_classes(grown)) > set(sweep_tuning_classes(small))
    jp_small, jp_grown = job_params(small), job_params(grown)
    for cls in before["mlp_16_16.opencl.regblock"]:
        p = tune_job(jp_small, "host", "regblock", cls)
        assert p == tune_job(jp_grown, "host", "regblock", cls)
        assert "shapes" not in p and "models" not in p


def test_deploy_refuses_a_class_that_breaks_the_version_constraints(tmp_path):
    """A hand-edited class file (RM 0: the launch geometry divides by it; RN 3: no OpenCL
    vector type) is named with the constraint it breaks, before anything builds."""
    plan_json = write_bundle(LowerSpec(model="mlp_16_16", batch_size=32, backend="opencl",
                                       placement="resident", transfer="copy",
                                       kernel="regblock"), tmp_path)
    classes = tuning.plan_classes(Plan.load(plan_json))
    for key, value in (("RM", 0), ("RN", 3)):
        bad = {"defines": {**CANDS[0]["defines"], key: value}, "local": [16, 16]}
        files = _class_files(tmp_path / key, classes, lambda c: bad)
        with pytest.raises(StageError, match=rf"class gemm_\w+: .* breaks \['{key} ") as e:
            device_plan(plan_json, "regblock", files, every_class=True)
        assert str(files[0]) in str(e.value) and "rerun the tune job" in str(e.value)
