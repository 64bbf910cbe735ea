"""The GEMM sweep's measuring bounds (phonetrain.stages.gemm.gemm) with a planted device: a
square sweep whose GFLOPS curve has plateaued stops (the larger squares are rows `skipped`,
the peak still measured), one whose curve still rises goes on, and the models' calls that
share a configuration share one runner process on OpenCL (the CPU backend: one each), as do
an OpenCL version's squares (the planted device applies the spec's ``sweep`` rules as the
runner does, with the stage's own :func:`plateaued` and :func:`sweep_repeats`; the runner's
own rules on PoCL: tests/runner/test_bench_gemm_sweep.py)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from phonetrain.stages import gemm as gemm_stage
from phonetrain.stages.job import Job, Runtime, files
from phonetrain.stages.specs import CPU_VERSION, shapes_hash

SIZES = [128, 256, 512, 1024, 2048, 4096]


class _PlantedBench:
    """Stands in for the device's runner: each case of a bench-gemm spec reaches
    ``gflops[n]`` at square size ``n`` (a model call: 1 GFLOPS); every spec is kept."""

    def __init__(self, gflops: dict[int, float]):
        self.gflops, self.specs = gflops, []
        self.r = self

    def lock(self):
        return contextlib.nullcontext()

    def spec(self, spec: dict) -> dict:
        self.specs.append(spec)
        cases, passed = [], []
        sweep = spec.get("sweep")
        for c in spec["cases"]:
            shape = gemm_stage.GemmShape(c["kernel"], c["M"], c["N"], c["K"])
            last = passed[-1] if passed else None
            if sweep and last and shape.flops / (last * 1e9) > sweep["max_launch_s"]:
                cases.append({**c, "status": "skipped", "skipped_by": "max_launch_s"})
                continue
            if sweep and gemm_stage.plateaued(passed, sweep["plateau_gain"]):
                cases.append({**c, "status": "skipped", "skipped_by": "plateau"})
                continue
            g = self.gflops.get(c["M"], 1.0) if c["M"] == c["N"] == c["K"] else 1.0
            extra = {"repeats": gemm_stage.sweep_repeats(shape, "square", last,
                                                         sweep["max_case_s"])} if sweep else {}
            cases.append({**c, **extra, "status": "ok", "gflops": g,
                          "median_ms": 2e-6 * c["M"] * c["N"] * c["K"] / g, "max_err": 0.0})
            passed.append(g)
        return {"status": "ok", "options": "", "cases": cases}


def _sweep(tmp_path: Path, monkeypatch, gflops: dict[int, float], plateau_gain: float,
           shapes: list[dict] | None = None, version: str = CPU_VERSION,
           max_launch_s: float = 1e6, bench: _PlantedBench | None = None,
           min_time_ms: float = 1.0) -> tuple[dict, _PlantedBench]:
    shapes = shapes or []
    sf = tmp_path / "shapes.json"
    sf.write_text(json.dumps({"shapes": shapes}))
    bench = bench or _PlantedBench(gflops)
    monkeypatch.setattr(gemm_stage, "_Bench", lambda job, p, version: bench)
    p = {"device": "host", "device_config": {"name": "host", "transport": "local"},
         "stage_root": "stage", "version": version,
         "kernel_hash": None if version == CPU_VERSION else "planted",
         "shapes_hash": shapes_hash(shapes), "sizes": SIZES, "min_time_ms": min_time_ms,
         "max_launch_s": max_launch_s, "tune": False, "tune_min_time_ms": 1.0,
         "tune_max_launch_s": 1.0, "threads": 0, "plateau_gain": plateau_gain}
    runner = tmp_path / "runner"
    runner.write_bytes(b"a runner binary")   # the stamp records its hash
    job = Job(files({"runner": str(runner), "shapes": str(sf)}),
              files({"gemm": str(tmp_path / "results" / "gemm" / "host" / f"{version}.json")}),
              p, tmp_path / "gemm.log",
              Runtime(60.0, False, str(tmp_path)))
    return gemm_stage.gemm(job), bench


def _squares(doc: dict) -> dict[int, str]:
    return {r["M"]: r["status"] for r in doc["rows"] if r["source"] == "square"}


@pytest.mark.parametrize("version", [CPU_VERSION, "baseline"])
def test_a_square_sweep_whose_gflops_plateaued_stops_with_its_peak_measured(
        tmp_path, monkeypatch, version):
    # the curve of regblock on PoCL (quiet study, 1a2b8e6): peak at 512^3, then falling
    doc, bench = _sweep(tmp_path, monkeypatch,
                        {128: 61.0, 256: 87.7, 512: 90.1, 1024: 83.7, 2048: 56.1, 4096: 53.5},
                        0.05, version=version)
    assert _squares(doc) == {128: "ok", 256: "ok", 512: "ok", 1024: "ok",
                             2048: "skipped", 4096: "skipped"}
    if version == CPU_VERSION:   # a process per square, up to the plateau
        assert [s["cases"][0]["M"] for s in bench.specs] == [128, 256, 512, 1024]
    else:   # one process for every square; the plateau stops it inside
        assert [[c["M"] for c in s["cases"]] for s in bench.specs] == [SIZES]
        assert bench.specs[0]["sweep"]["plateau_gain"] == 0.05
    ok = [r for r in doc["rows"] if r["status"] == "ok"]
    assert max(r["gflops"] for r in ok) == 90.1   # the peak is still the peak
    skipped = [r for r in doc["rows"] if r["status"] == "skipped"]
    assert all("plateaued" in r["error"] and "gemm_plateau_gain" in r["error"]
               for r in skipped)


@pytest.mark.parametrize("version", [CPU_VERSION, "baseline"])
def test_a_square_sweep_whose_gflops_still_rise_goes_on(tmp_path, monkeypatch, version):
    # one flat step is not the plateau (CLBlast on PoCL: 512^3 2% over 256^3, then +55%),
    # and a curve that gains 6-10% per doubling is measured to the end
    doc, _ = _sweep(tmp_path, monkeypatch,
                    {128: 10.5, 256: 14.9, 512: 15.2, 1024: 23.5, 2048: 25.0, 4096: 26.6},
                    0.05, version=version)
    assert set(_squares(doc).values()) == {"ok"}


def test_the_plateau_stop_off_measures_every_square(tmp_path, monkeypatch):
    doc, _ = _sweep(tmp_path, monkeypatch, {n: 10.0 for n in SIZES}, 0.0)
    assert set(_squares(doc).values()) == {"ok"}


@pytest.mark.parametrize("gflops, stops", [
    ([2.7, 2.1, 1.3], True),            # baseline: best at the first square, then falling
    ([10.9, 11.5, 12.0, 11.3], True),   # image: +6%, then +4% and -6%: two under 5%
    ([6.2, 10.9, 11.9, 13.1, 14.1], False),   # tiled: +77%, +9%, +10%, +8%
    ([93.6, 145.4, 148.7, 174.2, 181.9], False),   # the CPU backend: 2%, then 17%
    ([5.0, 5.0], False),                # too few squares to tell
])
def test_plateaued_needs_two_squares_in_a_row_under_the_gain(gflops, stops):
    assert gemm_stage.plateaued(gflops, 0.05) is stops
    assert gemm_stage.plateaued(gflops, None) is False


@pytest.mark.parametrize("version, processes", [("baseline", 1), (CPU_VERSION, 3)])
def test_the_models_calls_of_one_configuration_share_one_opencl_process(
        tmp_path, monkeypatch, version, processes):
    # an untuned OpenCL version: its three calls in one process; the CPU backend: one each
    shapes = [{"kernel": k, "M": m, "N": n, "K": kk, "source": "model:mlp_16_16"}
              for k, m, n, kk in (("gemm_nt", 32, 16, 16), ("gemm_tn", 16, 16, 32),
                                  ("gemm_nn", 32, 16, 16))]
    doc, bench = _sweep(tmp_path, monkeypatch, {n: 10.0 for n in SIZES}, 0.0, shapes, version)
    models = [r for r in doc["rows"] if r["source"] != "square"]
    assert [(r["kernel"], r["M"], r["N"], r["K"]) for r in models] == \
        [(s["kernel"], s["M"], s["N"], s["K"]) for s in shapes]
    assert all(r["status"] == "ok" and r["repeats"] == gemm_stage.GEMM_REPEATS for r in models)
    calls = [s for s in bench.specs if any(c["M"] != c["K"] or c["M"] != c["N"]
                                           for c in s["cases"])]
    assert len(calls) == processes and sum(len(s["cases"]) for s in calls) == 3
    squares = [s for s in bench.specs if s not in calls]
    if version == CPU_VERSION:   # the CPU backend: a process per square
        assert all(len(s["cases"]) == 1 for s in squares) and len(squares) == len(SIZES)
    else:   # OpenCL: the squares in one process, each case with its configuration
        assert len(squares) == 1 and [c["M"] for c in squares[0]["cases"]] == SIZES
        assert all("options" in c for c in squares[0]["cases"])


@pytest.mark.parametrize("version", [CPU_VERSION, "baseline"])
def test_a_square_over_the_launch_limit_is_skipped_naming_it(tmp_path, monkeypatch, version):
    # 1 GFLOPS at 128^3 and a 0.01 s limit: 256^3 (0.034 s a launch) and larger are skipped
    doc, _ = _sweep(tmp_path, monkeypatch, {n: 1.0 for n in SIZES}, 0.0, version=version,
                    max_launch_s=0.01)
    assert _squares(doc) == {128: "ok", **{n: "skipped" for n in SIZES[1:]}}
    assert all(r["error"] == gemm_stage.SKIPPED_BY["max_launch_s"]
               for r in doc["rows"] if r["status"] == "skipped")



def test_a_configuration_that_does_not_build_fails_the_sweep(tmp_path, monkeypatch):
    # the runner answers a case whose own options do not build with build_failed and goes
    # on; the stage fails as it does when a process of one configuration does not build
    broken = _PlantedBench({n: 10.0 for n in SIZES})
    real = broken.spec

    def spec(sp: dict) -> dict:
        doc = real(sp)
        doc["cases"][-1] = {**sp["cases"][-1], "status": "error", "build_failed": True,
                            "error": 'building gemm.cl with options "-DTSM=7" failed'}
        return doc
    broken.spec = spec
    with pytest.raises(gemm_stage.StageError, match='options "-DTSM=7" failed; fix the kernel'):
        _sweep(tmp_path, monkeypatch, {n: 10.0 for n in SIZES}, 0.0, version="baseline",
               bench=broken)


def test_a_clblast_sweep_rerun_after_a_settings_change_is_measured_alone(tmp_path, monkeypatch):
    # another measure.gemm_min_time_ms changes the sweep's build key, which makes an OpenCL
    # kernel version's rerun a side-by-side one; clblast's calls run the library, not its
    # gemm.cl, and the runner pairs kernel sources only: measured alone, as a first sweep
    shapes = [{"kernel": "gemm_nt", "M": 32, "N": 16, "K": 16, "source": "model:mlp_16_16"}]
    gflops = {n: 10.0 for n in SIZES}
    first, _ = _sweep(tmp_path, monkeypatch, gflops, 0.0, shapes, "clblast")
    again, bench = _sweep(tmp_path, monkeypatch, gflops, 0.0, shapes, "clblast",
                          min_time_ms=2.0)
    assert first["ran"]["build_key"] != again["ran"]["build_key"]
    assert bench.specs and all("previous" not in s and s["source"] == "clblast"
                               for s in bench.specs)
    assert all(r["status"] == "ok" and "paired" not in r for r in again["rows"])
