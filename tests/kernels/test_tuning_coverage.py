"""Tuning covers every shape the GEMM study reports: the sweep's square sizes are tuned as
their own classes (up to a launch-time limit), a larger square reuses the largest tuned one
below it, the models' calls keep their own classes (synthetic measurements), and on PoCL
the gemm stage runs each square with the configuration tuned for it."""

from __future__ import annotations

import json

from phonetrain.kernels import load_version, tuning
from phonetrain.kernels.gemm import GemmShape

TUNED = {"classes": {"gemm_nt_32x256x784": {}, "gemm_nn_128x128x128": {}, "square128": {},
                     "square512": {}},
         "default": "gemm_nt_32x256x784"}


def test_class_for_each_reported_shape():
    model = GemmShape("gemm_nt", 32, 256, 784)
    assert tuning.class_for(model, "model:mlp", TUNED) == "gemm_nt_32x256x784"
    assert tuning.class_for(GemmShape("gemm_nn", 512, 512, 512), "square", TUNED) == "square512"
    # untuned squares: the largest tuned square below, else the default
    assert tuning.class_for(GemmShape("gemm_nn", 4096, 4096, 4096), "square", TUNED) == \
        "square512"
    assert tuning.class_for(GemmShape("gemm_nn", 64, 64, 64), "square", TUNED) == \
        "gemm_nt_32x256x784"
    # a square size that is also a model shape keeps the model's class for the model
    assert tuning.class_for(GemmShape("gemm_nn", 128, 128, 128), "model:x", TUNED) == \
        "gemm_nn_128x128x128"
    # a model call without a class file of its own takes the default
    assert tuning.class_for(GemmShape("gemm_tn", 3, 4, 5), "model:x", TUNED) == \
        "gemm_nt_32x256x784"
    assert tuning.class_for(model, "model:mlp", {"classes": {}, "default": None}) is None


def test_tunable_squares_stop_at_the_launch_limit():
    gflops = {128: 10.0, 256: 20.0, 512: 40.0, 1024: 40.0, 2048: 40.0}
    seen = []

    def measure(n):
        seen.append(n)
        return gflops[n]
    # 1024: 2.1 GFLOP at 40 GFLOPS = 54 ms <= 0.1 s; 2048: 0.43 s > 0.1 s
    assert tuning.tunable_squares([2048, 128, 1024, 256, 512], measure, 0.1) == \
        [128, 256, 512, 1024]
    assert seen == [128, 256, 512, 1024]                  # 2048 is never launched
    assert tuning.tunable_squares([128, 256], lambda n: None, 1.0) == []


def _fake_run_spec(best_for_square: str):
    """bench-gemm results without a device: candidate TSK=16 is fastest on the models'
    shapes, ``best_for_square`` (a -D option) on the square sizes."""
    def run(spec):
        cases = []
        for c in spec["cases"]:
            square = c["M"] == c["N"] == c["K"] and c["M"] >= 256
            fast = best_for_square in spec["options"] if square else "-DTSK=16" in spec["options"]
            cases.append({**c, "status": "ok", "gflops": 100.0 if fast else 10.0, "max_err": 0})
        return {"status": "ok", "cases": cases}
    return run


def test_tune_gives_squares_their_own_best_configuration():
    v = load_version("tiled")
    shapes = [GemmShape("gemm_nt", 32, 256, 784), GemmShape("gemm_tn", 256, 784, 32)]
    doc = tuning.tune(v, shapes, _fake_run_spec("-DTSM=128"), source="gemm.cl",
                      squares=[256, 512])
    assert set(doc["classes"]) == {"gemm_nt_32x256x784", "gemm_tn_256x784x32", "square256",
                                   "square512"}
    assert doc["default"] == "gemm_nt_32x256x784"   # equal FLOPs: the first
    assert doc["classes"]["gemm_nt_32x256x784"]["defines"]["TSK"] == 16
    assert doc["classes"]["square512"]["defines"]["TSM"] == 128
    assert doc["classes"]["square512"]["shapes"] == [["gemm_nn", 512, 512, 512]]


def test_gemm_stage_squares_use_their_tuned_class(runner, pocl, tmp_path, capsys, monkeypatch):
    """The tune and gemm stage functions on PoCL: every square of the sweep is measured with
    its own tuned configuration (the same one ``bench_gemm.py --tune`` would pick for it);
    the models' calls share one bench-gemm process and the squares another, whatever
    configurations they were tuned to.
    The version's one tune job writes each class's file with that class's own settings, and
    a second job that gains a class leaves the files it already made untouched."""
    from phonetrain.stages import gemm as gemm_stage
    from phonetrain.stages.job import Job, Runtime, files
    from phonetrain.stages.stamp import read_stamp

    dev = {"name": "host", "transport": "local", "opencl_library": None,
           "opencl_platform": pocl.platform, "opencl_device": ""}
    from phonetrain.stages.params import shapes_hash
    from phonetrain.stages.specs import TuneVersionSpec, classes_hash, to_params

    shapes = [{"kernel": "gemm_nt", "M": 32, "N": 16, "K": 16, "source": "model:mlp_16_16"},
              {"kernel": "gemm_tn", "M": 16, "N": 16, "K": 32, "source": "model:mlp_16_16"}]
    sf = tmp_path / "shapes.json"
    sf.write_text(json.dumps({"shapes": shapes}))
    base = {"device": "host", "device_config": dev, "stage_root": "stage", "kernel_hash": "t",
            "tune": True, "tune_min_time_ms": 1.0}
    p = {**{k: v for k, v in base.items()}, "version": "tiled", "threads": 0,
         "shapes_hash": shapes_hash(shapes), "sizes": [32, 64, 128], "min_time_ms": 1.0,
         "max_launch_s": 5.0, "tune_max_launch_s": 5.0}
    rt = Runtime(300.0, False, str(tmp_path))
    inputs = files({"runner": str(runner), "sources": []})
    classes = ["gemm_nt_32x16x16", "gemm_tn_16x16x32"]
    tj = [tmp_path / "tuning" / f"{c}.json" for c in classes + [tuning.SQUARES]]

    def tune_version(cls: list[str]) -> TuneVersionSpec:
        spec = TuneVersionSpec(**{k: base[k] for k in ("device", "device_config", "stage_root",
                                                         "kernel_hash", "tune",
                                                         "tune_min_time_ms")},
                               kernel="tiled", classes_hash=classes_hash(cls),
                               sizes=[32, 64, 128],
                               tune_max_launch_s=5.0)
        out = files({"tuning": [str(tmp_path / "tuning" / f"{c}.json") for c in cls],
                     "squares": str(tj[-1])})
        gemm_stage.tune_version(Job(inputs, out, to_params(spec), tmp_path / "tune.log", rt))
        return spec

    spec = tune_version(classes)
    for c, f in zip(classes, tj):   # each file records its own class's settings
        assert read_stamp(f)["params"] == to_params(spec.class_spec(c))
    assert read_stamp(tj[-1])["params"] == to_params(spec.squares_spec())
    squares_doc = json.loads(tj[-1].read_text())
    assert set(squares_doc["classes"]) == {"square32", "square64", "square128"}
    tuned = tuning.load_tunings(tj)
    from phonetrain import runner as runner_api
    specs, real = [], runner_api.Runner.bench_gemm

    def counted(self, spec, out, **kw):
        specs.append(spec)
        return real(self, spec, out, **kw)
    monkeypatch.setattr(runner_api.Runner, "bench_gemm", counted)
    doc = gemm_stage.gemm(Job(files({"runner": str(runner), "sources": [],
                                     "tuning": [str(t) for t in tj], "shapes": str(sf)}),
                              files({"gemm": str(tmp_path / "gemm.json")}), p,
                              tmp_path / "gemm.log", rt))
    models = [r for r in doc["rows"] if r["source"] != "square"]
    assert [r["tuned_class"] for r in models] == ["gemm_nt_32x16x16", "gemm_tn_16x16x32"]
    squares = [r for r in doc["rows"] if r["source"] == "square"]
    assert [r["tuned_class"] for r in squares] == ["square32", "square64", "square128"]
    for r in doc["rows"]:
        want = tuning.candidate_version(load_version("tiled"),
                                        tuned["classes"][r["tuned_class"]]).options
        assert r["options"] == want and r["status"] == "ok"
    assert [len(s["cases"]) for s in specs] == [2, 3]   # the models' calls, the squares

    made = {f: (f.stat().st_mtime_ns, f.read_bytes()) for f in tj}
    capsys.readouterr()
    tune_version(classes + ["gemm_nn_32x16x16"])   # a model that brings one more class
    assert "kept 3 of 4 tuning files" in capsys.readouterr().err
    assert {f: (f.stat().st_mtime_ns, f.read_bytes()) for f in tj} == made
    assert "gemm_nn_32x16x16" in json.loads(
        (tmp_path / "tuning" / "gemm_nn_32x16x16.json").read_text())["classes"]


def _planted_scores(gflops: list[float]):
    """run_spec for tuning.tune: candidate i of the tuning space (in the order tune runs
    them) gets ``gflops[i]`` on every case."""
    calls = iter(gflops)

    def run(spec):
        g = next(calls)
        return {"status": "ok", "cases": [{**c, "status": "ok", "gflops": g, "max_err": 0}
                                          for c in spec["cases"]]}
    return run


def test_a_near_tie_goes_to_the_earlier_candidate():
    v = load_version("tiled")
    n = len(v.candidates)
    shape = [GemmShape("gemm_nt", 32, 256, 784)]
    near = [10.0] + [10.0 * (1 + tuning.TIE_MARGIN / 2)] + [1.0] * (n - 2)
    doc = tuning.tune(v, shape, _planted_scores(near), source="gemm.cl")
    assert doc["classes"]["gemm_nt_32x256x784"]["defines"] == doc["trials"][0]["defines"]
    clear = [10.0] + [10.0 * (1 + 2 * tuning.TIE_MARGIN)] + [1.0] * (n - 2)
    doc = tuning.tune(v, shape, _planted_scores(clear), source="gemm.cl")
    assert doc["classes"]["gemm_nt_32x256x784"]["defines"] == doc["trials"][1]["defines"]
    assert doc["trials"][0]["defines"] != doc["trials"][1]["defines"]
