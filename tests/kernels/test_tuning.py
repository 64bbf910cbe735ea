"""The tuner on PoCL: it returns a configuration that compiles and passes the float64 check,
never one that failed anything, and runs consume its tuning files (plan options and launch
geometry), still matching the numpy reference. Plus: the optimized versions (and CLBlast)
inside real training plans."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from phonetrain.stages.gemm import bench_here
from phonetrain.runner import run_mode
from phonetrain.config import MeasureConfig
from phonetrain import reference
from phonetrain.kernels import gemm
from phonetrain.kernels import tuning
from phonetrain import runner as runner_api
from phonetrain.stages.deploy import device_plan
from phonetrain.kernels import KERNELS_ROOT, load_version
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan
from phonetrain.errors import ResultsFileError

VERIFY_ATOL = MeasureConfig.verify_atol  # the study's tolerance


SHAPES = [gemm.GemmShape("gemm_nt", 32, 16, 128), gemm.GemmShape("gemm_tn", 16, 128, 32),
          gemm.GemmShape("gemm_nn", 70, 130, 40)]
SPACE = [{"defines": {"RM": 4, "RN": 8, "VK": 8}, "local": [8, 8]},
         {"defines": {"RM": 2, "RN": 4, "VK": 4}, "local": [4, 4]},
         {"defines": {"RM": 4, "RN": 5, "VK": 8}, "local": [4, 4]}]   # float5: does not compile


def _regblock_with_space(space: list[dict]):
    """regblock whose tuning space is ``space``: defaults ``space[0]``, candidates the rest
    (built in memory: load_version would reject the RN=5 candidate)."""
    v = tuning.candidate_version(load_version("regblock"), space[0])
    v.tuning_candidates = [dict(c) for c in space[1:]]
    configs = lambda cands: [(tuning.candidate_version(v, c).options,  # noqa: E731
                              tuning.candidate_version(v, c).local_sizes) for c in cands]
    assert configs(v.candidates) == configs(space)
    return v


def _local_run_spec(runner, pocl, corrupt=None):
    """run_spec for tuning.tune on this host; ``corrupt`` (a defines dict) gets its cases
    marked "wrong" with an absurd speed, as a kernel computing garbage fast would be."""
    def run(spec):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "spec.json").write_text(json.dumps(spec))
            run_mode(runner, "bench-gemm", ["--spec", "spec.json", "--out", "o",
                                            *pocl.to_args()], cwd=Path(tmp))
            doc = json.loads((Path(tmp) / "o" / "gemm.json").read_text())
        if corrupt and all(f"-D{k}={v}" in spec["options"] for k, v in corrupt.items()):
            for c in doc["cases"]:
                c.update(status="wrong", gflops=1e6)
        return doc
    return run


def test_tuner_picks_the_best_correct_candidate(runner, pocl):
    fast_but_wrong = SPACE[0]["defines"]
    doc = tuning.tune(_regblock_with_space(SPACE), SHAPES,
                      _local_run_spec(runner, pocl, corrupt=fast_but_wrong),
                      source=str(KERNELS_ROOT / "regblock" / "gemm.cl"), min_time_ms=1,
                      repeats=1)
    statuses = [t["status"] for t in doc["trials"]]
    assert statuses[0] == "ok" and statuses[1] == "ok" and statuses[2].startswith("error")
    classes = [tuning.gemm_class(g) for g in SHAPES]   # each call its own class
    assert list(doc["classes"]) == classes and doc["default"] == "gemm_nn_70x130x40"
    for cls in classes:
        best = doc["classes"][cls]
        assert best["defines"] == SPACE[1]["defines"] and best["local"] == SPACE[1]["local"]
    # the chosen configuration, rerun on its own, is correct on every shape
    v = tuning.candidate_version(load_version("regblock"), best)
    df = bench_here(runner, v, SHAPES, selector=pocl, min_time_ms=1, repeats=1)
    assert (df.status == "ok").all() and (df.max_err < 1e-5).all()


def test_tuner_fails_when_nothing_is_correct(runner, pocl):
    # the message says why each candidate failed (here: its error), not "see the trials"
    with pytest.raises(tuning.TuningError,
                       match=r"no candidate passed .*: \d+ of \d+ candidate\(s\): error: "):
        tuning.tune(_regblock_with_space(SPACE[2:]), SHAPES[:1], _local_run_spec(runner, pocl),
                    source=str(KERNELS_ROOT / "regblock" / "gemm.cl"), min_time_ms=1,
                    repeats=1)


@pytest.mark.parametrize("version,cand", [
    ("regblock", {"defines": {"RM": 2, "RN": 4, "VK": 4}, "local": [2, 8]}),
    ("tiled", {"defines": {"TSM": 16, "TSN": 32, "TSK": 4, "WPTM": 2, "WPTN": 4}, "local": None}),
])
def test_tuned_plan_takes_options_and_local_size_from_tuning_json(runner, pocl, tmp_path,
                                                                   version, cand):
    spec = LowerSpec(model="mlp_784_256_128_16", batch_size=8, backend="opencl",
                     placement="resident", transfer="copy", kernel=version, warmup=0,
                     iterations=2, num_batches=2, dumps="params")
    plan_path = write_bundle(spec, tmp_path)
    files = []   # one tuning file per class of the plan, as the deploy stage is given them
    for cls in tuning.plan_classes(Plan.load(plan_path)):
        files.append(tmp_path / "tuning" / f"{cls}.json")
        tuning.write_tuning({"version": version, "default": cls, "classes": {cls: cand},
                             "trials": []}, files[-1])
    tuned_path = tmp_path / "tuned.json"
    device_plan(plan_path, version, files, every_class=True)[0].save(tuned_path)
    plan = Plan.load(tuned_path)
    options = {p.options for p in plan.programs}
    assert options == {tuning.candidate_version(load_version(version), cand).options}
    assert all(f"-D{k}={v}" in next(iter(options)) for k, v in cand["defines"].items())
    gemm_steps = [s for s in plan.steps if s.op == "kernel" and s.name.startswith("gemm")]
    assert gemm_steps
    want_local = cand["local"] or [cand["defines"]["TSN"] // cand["defines"]["WPTN"],
                                   cand["defines"]["TSM"] // cand["defines"]["WPTM"]]
    assert all(s.local_size == want_local for s in gemm_steps)
    # the tuned plan runs (the bundle's relative paths resolve under tmp_path) and is correct
    tuned_path.replace(plan_path)
    out = tmp_path / "out"
    doc = runner_api.run_plan(runner, plan_path, tmp_path, out, device_selector=pocl)
    assert doc["status"] == "ok"
    v = reference.verify_run_dir(Plan.load(plan_path), tmp_path, out)
    assert v["max_abs_err"] <= VERIFY_ATOL


@pytest.mark.parametrize("version", ["tiled", "regblock", "clblast"])
def test_training_plan_on_each_version_matches_reference(runner, pocl, tmp_path, version):
    spec = LowerSpec(model="lenet5", batch_size=4, backend="opencl", placement="resident",
                     transfer="copy", kernel=version, warmup=0, iterations=2, num_batches=2,
                     dumps="all")
    plan_path = write_bundle(spec, tmp_path)
    plan = Plan.load(plan_path)
    if version == "clblast":
        assert {"name": "gemm", "source": "clblast", "options": ""} in \
            [vars(p) for p in plan.programs]
    out = tmp_path / "out"
    try:
        doc = runner_api.run_plan(runner, plan_path, tmp_path, out, device_selector=pocl)
    except runner_api.MissingLibraryError as e:
        pytest.skip(f"CLBlast is not installed here: {e}")
    assert doc["status"] == "ok"
    v = reference.verify_run_dir(plan, tmp_path, out)
    assert v["max_abs_err"] <= VERIFY_ATOL, (v["worst"], v["max_abs_err"])


def test_a_file_that_is_not_a_tuning_is_named_with_what_is_wrong(tmp_path):
    good = {"classes": {"c": {"defines": {"TSM": 16}}}, "default": "c"}
    cases = {"[]": "a JSON list, not an object",
             json.dumps({"classes": {}}): "no key 'default'",
             json.dumps({"classes": 5, "default": None}): "'classes' is not an object",
             json.dumps({"classes": {"c": 5}, "default": "c"}): "class 'c' has no 'defines'",
             json.dumps(good | {"default": "d"}): "default 'd' is not one of its classes",
             # each was a TypeError or ValueError traceback in the deploy
             json.dumps(good | {"default": []}): "default [] is not one of its classes",
             json.dumps({"classes": {"c": {"defines": {"TSM": "abc"}}}, "default": "c"}):
                 "class 'c' has defines that are not integers: {'TSM': 'abc'}",
             json.dumps({"classes": {"c": {"defines": {}, "local": "ab"}}, "default": "c"}):
                 "class 'c' has local 'ab', not null or [LX, LY]",
             json.dumps(good | {"conv": [1]}): "'conv' is not an object"}
    for text, problem in cases.items():
        f = tmp_path / "t.json"
        f.write_text(text)
        with pytest.raises(ResultsFileError) as e:
            tuning.load_tuning(f)
        assert str(f) in e.value.message and problem in e.value.message
    f.write_text(json.dumps(good))
    assert tuning.load_tuning(f) == good
