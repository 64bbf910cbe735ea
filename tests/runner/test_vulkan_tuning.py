"""Tuning the Vulkan GEMM shaders on lavapipe: the Vulkan timer (a bench-gemm spec as one
plan, each dispatch timed by timestamps, C checked against numpy) and the tune job of a
(device, vulkan, tiled) picking per class among a tiny candidate set, as on OpenCL."""

from __future__ import annotations

import json

import pytest

from phonetrain import runner as runner_api
from phonetrain.kernels import load_version, tuning
from phonetrain.kernels.gemm import GemmShape, gemm_spec
from phonetrain.kernels.spirv import shader_candidates
from phonetrain.layout import device_spirv
from phonetrain.stages import gemm as gemm_stage
from phonetrain.stages.job import Job, Runtime, files
from phonetrain.stages.specs import TuneVersionSpec, classes_hash, to_params
from phonetrain.stages.stamp import read_stamp
from phonetrain.stages.vk_bench import VkBench

SHAPES = [GemmShape("gemm_nt", 32, 16, 16), GemmShape("gemm_tn", 16, 16, 32),
          GemmShape("gemm_nn", 33, 70, 20)]


def _bench(runner, lavapipe, tmp_path) -> VkBench:
    r = runner_api.Runner.local_binary(runner, tmp_path / "stage", lavapipe, timeout_s=300)
    return VkBench(r, runner, "tiled")


def test_the_vulkan_timer_times_every_case_and_catches_a_wrong_result(runner, lavapipe,
                                                                         tmp_path):
    """Every case of a spec gets device-timed GFLOPS and a max_err under the bound; a planted
    fault (one case launched over half its work-groups along N) reads back as wrong."""
    bench = _bench(runner, lavapipe, tmp_path)
    spec = gemm_spec(load_version("tiled"), SHAPES, source=device_spirv("tiled"),
                     backend="vulkan", repeats=3)
    doc = bench.spec(spec)
    assert [(c["kernel"], c["M"], c["N"], c["K"]) for c in doc["cases"]] == \
        [(g.kernel, g.M, g.N, g.K) for g in SHAPES]
    assert all(c["status"] == "ok" and c["gflops"] > 0 and c["max_err"] <= 1e-5
               and c["iterations"] == 5 for c in doc["cases"]), doc["cases"]
    assert "llvmpipe" in doc["device"]["name"]
    assert bench.device["max_compute_shared_memory_bytes"] >= 16384
    wide = spec["cases"][2]
    assert wide["global"][0] > wide["local"][0]   # more than one work-group along N
    cut = json.loads(json.dumps(spec))
    cut["cases"][2]["global"][0] = wide["local"][0]
    bad = bench.spec(cut)["cases"]
    assert [c["status"] for c in bad] == ["ok", "ok", "wrong"]
    assert "max |C - ref|" in bad[2]["error"]


def test_the_vulkan_tune_job_picks_per_class_and_refuses_what_does_not_fit(
        runner, lavapipe, tmp_path, monkeypatch):
    """The tune job of (host, vulkan, tiled) over a tiny space (the defaults, two candidates
    and one whose shared tiles exceed any device's limit): one file per class and the squares,
    each class's pick a candidate that ran and verified, the oversized one a failed trial that
    never ran, every file recording the job's api."""
    space = shader_candidates("tiled")[:3] + [
        {"defines": {**shader_candidates("tiled")[0]["defines"], "TSM": 128, "TSN": 128,
                     "TSK": 256, "WPTM": 8, "WPTN": 8, "PAD": 4}, "local": None}]
    monkeypatch.setattr(gemm_stage, "shader_candidates", lambda name: space)
    dev = {"name": "host", "transport": "local", "opencl_library": None,
           "opencl_platform": "", "opencl_device": ""}
    classes = [tuning.gemm_class(g) for g in SHAPES]
    spec = TuneVersionSpec(device="host", device_config=dev, stage_root="stage", kernel="tiled",
                           kernel_hash="t", classes_hash=classes_hash(classes), sizes=[32, 64],
                           tune=True, tune_min_time_ms=1.0, tune_max_launch_s=5.0,
                           api="vulkan")
    paths = {c: tmp_path / "tuning" / f"{c}.json" for c in classes + [tuning.SQUARES]}
    out = files({"tuning": [str(paths[c]) for c in classes],
                 "squares": str(paths[tuning.SQUARES])})
    job = Job(files({"runner": str(runner), "sources": []}), out, to_params(spec),
              tmp_path / "tune.log", Runtime(300.0, False, str(tmp_path)))
    docs = gemm_stage.tune_version(job)

    picks = [c["defines"] for c in space[:3]]
    for c in classes:
        doc = json.loads(paths[c].read_text())
        assert doc["api"] == "vulkan" and list(doc["classes"]) == [c]
        assert doc["classes"][c]["defines"] in picks
        assert read_stamp(paths[c])["params"] == to_params(spec.class_spec(c))
        assert read_stamp(paths[c])["params"]["api"] == "vulkan"
        trials = doc["trials"]
        assert [t["defines"] for t in trials] == [s["defines"] for s in space]
        assert all(t["status"] == "ok" for t in trials[:3])
        assert "does not fit device" in trials[3]["status"] and not trials[3]["cases"]
    assert set(docs[tuning.SQUARES]["classes"]) == {"square32", "square64"}
    assert set(tuning.load_tunings([paths[c] for c in classes])["classes"]) == set(classes)


@pytest.mark.parametrize("api", [None, "vulkan"])
def test_the_api_field_stays_out_of_opencl_params(api):
    """An OpenCL tune job's params (and so its files' stamps) are those of a job made before
    the api field existed."""
    spec = TuneVersionSpec(device="host", device_config={}, stage_root="stage", kernel="tiled",
                           kernel_hash="t", classes_hash="h", sizes=[32], tune=True,
                           tune_min_time_ms=1.0, tune_max_launch_s=5.0, api=api)
    assert ("api" in to_params(spec)) == (api is not None)
    assert ("api" in to_params(spec.class_spec("gemm_nn_1x1x1"))) == (api is not None)
    assert ("api" in to_params(spec.squares_spec())) == (api is not None)
