"""bench-gemm's square sweep (``src/runner/bench_gemm.c``, spec key ``sweep``) and cases with
their own build options, on PoCL: one process measures a version's squares in order and skips
the rest once the plateau or the launch-time limit says so, with the stage's own rules
(phonetrain.stages.gemm's ``plateaued`` and ``sweep_repeats``, checked here against the
runner's decisions on the measured GFLOPS); each distinct configuration is built once; the
GEMM stage runs an OpenCL version's squares in one such process. Bad sweep specs are refused
naming the spec and what to fix. PoCL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.runner_plans import bench_gemm_here
from phonetrain import runner as rt
from phonetrain.stages import gemm as gemm_stage
from phonetrain.stages.job import Job, Runtime, files
from phonetrain.stages.specs import shapes_hash

NAIVE = """__kernel void gemm_nn(int M, int N, int K, float alpha, __global const float *A,
                      __global const float *B, float beta, __global float *C) {
    int n = get_global_id(0), m = get_global_id(1);
    if (m >= M || n >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
    C[m * N + n] = alpha * acc + beta * C[m * N + n];
}
"""
SIZES = [16, 32, 48, 64, 80]


def _spec(tmp_path: Path, sweep: dict | None, options: list[str | None] | None = None,
          repeats: int = 3) -> dict:
    src = tmp_path / "k" / "gemm.cl"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(NAIVE)
    cases = []
    for i, n in enumerate(SIZES):
        case = {"kernel": "gemm_nn", "M": n, "N": n, "K": n, "global": [n, n], "local": None}
        if options is not None and options[i] is not None:
            case["options"] = options[i]
        cases.append(case)
    spec = {"backend": "opencl", "source": str(src), "options": "", "min_time_ms": 1.0,
            "repeats": repeats, "cases": cases}
    if sweep is not None:
        spec["sweep"] = sweep
    return spec


_bench = bench_gemm_here


def _agrees_with_the_stage(doc: dict, sweep: dict, repeats: int) -> None:
    """Each case's skip and repeats as phonetrain.stages.gemm decides them from the GFLOPS of
    the cases that passed before it."""
    passed: list[float] = []
    for c in doc["cases"]:
        g = gemm_stage.GemmShape(c["kernel"], c["M"], c["N"], c["K"])
        last = passed[-1] if passed else None
        if last and g.flops / (last * 1e9) > sweep["max_launch_s"]:
            assert c == {"kernel": "gemm_nn", "M": g.M, "N": g.N, "K": g.K,
                         "status": "skipped", "skipped_by": "max_launch_s"}
        elif gemm_stage.plateaued(passed, sweep.get("plateau_gain")):
            assert c["status"] == "skipped" and c["skipped_by"] == "plateau"
        else:
            assert c["status"] == "ok", c
            want = gemm_stage.sweep_repeats(g, "square", last, sweep.get("max_case_s"))
            assert c["repeats"] == min(want, repeats) and len(c["repeat_ms"]) == c["repeats"]
            passed.append(c["gflops"])


def test_a_planted_plateau_stops_the_sweep_inside_one_process(runner, pocl, tmp_path):
    # a gain of 100x: no square on PoCL reaches 101 x the best before it, so the curve has
    # plateaued once two squares follow the first, whatever the host's GFLOPS
    sweep = {"max_launch_s": 1e6, "plateau_gain": 100.0, "plateau_cases": 2,
             "max_case_s": 0, "min_repeats": 1}
    doc = _bench(runner, pocl, tmp_path, _spec(tmp_path, sweep))
    assert [c["status"] for c in doc["cases"]] == ["ok", "ok", "ok", "skipped", "skipped"]
    assert {c.get("skipped_by") for c in doc["cases"][3:]} == {"plateau"}
    _agrees_with_the_stage(doc, sweep, 3)


def test_the_launch_limit_skips_every_square_after_the_first(runner, pocl, tmp_path):
    sweep = {"max_launch_s": 1e-12, "plateau_gain": 0}
    doc = _bench(runner, pocl, tmp_path, _spec(tmp_path, sweep))
    assert [c["status"] for c in doc["cases"]] == ["ok"] + ["skipped"] * (len(SIZES) - 1)
    _agrees_with_the_stage(doc, sweep, 3)


def test_a_long_square_gets_fewer_repeats(runner, pocl, tmp_path):
    # max_case_s of a nanosecond: every square after the first is "long", at min_repeats
    sweep = {"max_launch_s": 1e6, "max_case_s": 1e-9, "min_repeats": 2}
    doc = _bench(runner, pocl, tmp_path, _spec(tmp_path, sweep, repeats=5))
    assert [c["repeats"] for c in doc["cases"]] == [5] + [2] * (len(SIZES) - 1)
    assert all(c["status"] == "ok" for c in doc["cases"])
    passed = []
    for c in doc["cases"]:   # the stage's rule, with its own minimum of 3
        g = gemm_stage.GemmShape("gemm_nn", c["M"], c["N"], c["K"])
        want = gemm_stage.sweep_repeats(g, "square", passed[-1] if passed else None, 1e-9)
        assert want == (5 if not passed else gemm_stage.GEMM_MIN_REPEATS)
        passed.append(c["gflops"])


def test_each_configuration_is_built_once_and_named_by_its_cases(runner, pocl, tmp_path):
    opts = ["", "-DUNUSED_TILE=1", "", "-DUNUSED_TILE=1", None]
    doc = _bench(runner, pocl, tmp_path, _spec(tmp_path, None, opts))
    assert doc["build_ms"] > 0   # the spec's options ("")
    cases = doc["cases"]
    assert all(c["status"] == "ok" for c in cases)
    assert [c.get("options") for c in cases] == opts
    assert ["build_ms" in c for c in cases] == [False, True, False, False, False]
    assert "repeats" not in cases[0]   # no sweep: the spec's repeats, not echoed


@pytest.mark.parametrize("change, match", [
    ({"sweep": {"plateau_gain": 0.05}}, r"sweep\.max_launch_s must be a number > 0"),
    ({"sweep": [1]}, "sweep must be an object"),
    ({"previous": {"source": "k/gemm.cl"}, "case_options": "-DUNUSED_TILE=1"},
     r"cases\[0\]: a case's own options need an OpenCL kernel source and no previous build"),
    ({"backend": "cpu", "case_options": "-DUNUSED_TILE=1"},
     r"cases\[0\]: a case's own options need an OpenCL kernel source"),
])
def test_a_bad_sweep_or_case_options_are_refused_naming_them(runner, pocl, tmp_path,
                                                             change, match):
    spec = _spec(tmp_path, None)
    change = dict(change)
    if "case_options" in change:
        spec["cases"][0]["options"] = change.pop("case_options")
    if "previous" in change:
        change["previous"] = {"source": str(tmp_path / change["previous"]["source"])}
    spec.update(change)
    with pytest.raises(rt.BadInputError, match=match):
        _bench(runner, pocl, tmp_path, spec)
    assert not (tmp_path / "out" / "gemm.json").exists()


def test_the_stage_runs_a_versions_squares_in_one_process_to_a_planted_plateau(
        runner, pocl, tmp_path, monkeypatch):
    # the gemm stage on PoCL, baseline untuned, no models' calls: its five squares in one
    # bench-gemm process that stops at the planted plateau (a gain of 100x, as above)
    dev = {"name": "host", "transport": "local", "opencl_library": None,
           "opencl_platform": pocl.platform, "opencl_device": ""}
    sf = tmp_path / "shapes.json"
    sf.write_text(json.dumps({"shapes": []}))
    p = {"device": "host", "device_config": dev, "stage_root": "stage", "version": "baseline",
         "kernel_hash": "planted", "shapes_hash": shapes_hash([]), "sizes": SIZES,
         "min_time_ms": 1.0, "max_launch_s": 5.0, "tune": False, "tune_min_time_ms": 1.0,
         "tune_max_launch_s": 1.0, "threads": 0, "plateau_gain": 100.0, "max_shape_s": 2.0}
    specs = []
    real = rt.Runner.bench_gemm

    def counted(self, spec, out, **kw):
        specs.append(spec)
        return real(self, spec, out, **kw)
    monkeypatch.setattr(rt.Runner, "bench_gemm", counted)
    doc = gemm_stage.gemm(Job(files({"runner": str(runner), "sources": [], "shapes": str(sf)}),
                              files({"gemm": str(tmp_path / "results" / "gemm" / "host"
                                                 / "baseline.json")}),
                              p, tmp_path / "gemm.log", Runtime(120.0, False, str(tmp_path))))
    assert len(specs) == 1 and [c["M"] for c in specs[0]["cases"]] == SIZES
    rows = doc["rows"]
    assert [(r["M"], r["status"]) for r in rows] == \
        [(16, "ok"), (32, "ok"), (48, "ok"), (64, "skipped"), (80, "skipped")]
    assert all(r["error"] == gemm_stage.SKIPPED_BY["plateau"] for r in rows[3:])
    assert all(r["repeats"] == gemm_stage.GEMM_REPEATS and r["max_err"] <= 1e-5
               for r in rows[:3])


def test_a_case_whose_own_options_do_not_build_fails_alone(runner, pocl, tmp_path):
    spec = _spec(tmp_path, None, ["-DBROKEN=1", "", "-DBROKEN=1", "", ""])
    Path(spec["source"]).write_text("#ifdef BROKEN\n#error planted\n#endif\n" + NAIVE)
    spec["options"] = "-DBROKEN=1"   # the spec's own options: no case uses them, not built
    for c in spec["cases"]:
        c.setdefault("options", "")
    doc = _bench(runner, pocl, tmp_path, spec)
    assert doc["status"] == "ok" and "build_ms" not in doc
    cases = doc["cases"]
    assert [c["status"] for c in cases] == ["error", "ok", "error", "ok", "ok"]
    assert cases[0]["build_failed"] is True and "-DBROKEN=1" in cases[0]["error"]
    assert cases[2]["error"] == cases[0]["error"] and "build_ms" not in cases[2]
    assert ["build_ms" in c for c in cases] == [False, True, False, False, False]
