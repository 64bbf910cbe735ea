"""bench-gemm with a previous build (``src/runner/bench_gemm.c``): one process builds both
programs and measures every case on both, their repeats alternating, each build checked
against the float64 reference on its own; the previous build's case may carry its own launch
sizes. Bad previous specs are refused naming the spec, the case and what to fix. PoCL."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.runner_plans import bench_gemm_here
from phonetrain import runner as rt

NAIVE = """__kernel void gemm_nn(int M, int N, int K, float alpha, __global const float *A,
                      __global const float *B, float beta, __global float *C) {
    int n = get_global_id(0), m = get_global_id(1);
    if (m >= M || n >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
    C[m * N + n] = alpha * acc + beta * C[m * N + n]%s;
}
"""
RIGHT, WRONG = NAIVE % "", NAIVE % " + 0.25f"       # WRONG: off by 0.25 in every element


def _write(tmp_path: Path, **sources: str) -> dict[str, str]:
    paths = {}
    for name, text in sources.items():
        p = tmp_path / "k" / f"{name}.cl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        paths[name] = str(p)
    return paths


def _spec(new: str, previous: dict | None, case_previous: dict | None = None,
          backend: str = "opencl") -> dict:
    case = {"kernel": "gemm_nn", "M": 16, "N": 32, "K": 8, "global": [32, 16], "local": None}
    if case_previous is not None:
        case["previous"] = dict(case, **case_previous)
    spec = {"backend": backend, "source": new, "options": "", "min_time_ms": 1.0,
            "repeats": 3, "cases": [case]}
    if previous is not None:
        spec["previous"] = previous
    return spec


_bench = bench_gemm_here


def test_both_builds_are_measured_and_checked_in_one_process(runner, pocl, tmp_path):
    src = _write(tmp_path, new=RIGHT, old=WRONG)
    doc = _bench(runner, pocl, tmp_path,
                 _spec(src["new"], {"source": src["old"], "options": "-DUNUSED=1", "first": 0}))
    assert doc["status"] == "ok"
    assert doc["previous"]["source"] == src["old"] and doc["previous"]["first"] == 0
    assert doc["previous"]["options"] == "-DUNUSED=1" and doc["previous"]["build_ms"] > 0
    case = doc["cases"][0]
    assert case["status"] == "ok" and case["max_err"] <= 1e-5       # the new build: right
    prev = case["previous"]
    assert prev["status"] == "wrong" and prev["max_err"] > 1e-3     # the planted error, found
    assert len(case["repeat_ms"]) == len(prev["repeat_ms"]) == 3
    assert all(ms > 0 for ms in case["repeat_ms"] + prev["repeat_ms"])


def test_the_previous_case_keeps_its_own_local_size(runner, pocl, tmp_path):
    src = _write(tmp_path, new=RIGHT, old=RIGHT)
    doc = _bench(runner, pocl, tmp_path, _spec(src["new"], {"source": src["old"]},
                                                case_previous={"local": [8, 4]}))
    case = doc["cases"][0]
    assert case["local"] is None and case["status"] == "ok"
    assert case["previous"]["status"] == "ok"


@pytest.mark.parametrize("what, previous, case_previous, backend, err, match", [
    ("another shape", {}, {"M": 32}, "opencl", rt.BadInputError,
     r"cases\[0\]: previous must be the same kernel and M, N, K"),
    ("the cpu backend", {}, None, "cpu", rt.BadInputError,
     "previous needs an OpenCL kernel source, not the cpu backend"),
    ("not an object", None, None, "opencl", rt.BadInputError, "previous must be an object"),
    ("a previous source that does not compile", {"bad": True}, None, "opencl",
     rt.KernelBuildError, r"building .*bad\.cl"),
])
def test_a_bad_previous_is_refused_naming_it(runner, pocl, tmp_path, what, previous,
                                             case_previous, backend, err, match):
    src = _write(tmp_path, new=RIGHT, old=RIGHT, bad="__kernel void gemm_nn( {")
    if previous is None:
        prev = "kernels/old.cl"                       # a string, not an object
    else:
        prev = {"source": src["bad"] if previous.get("bad") else src["old"]}
    spec = _spec(src["new"], prev, case_previous, backend)
    with pytest.raises(err, match=match):
        _bench(runner, pocl, tmp_path, spec)
    assert not (tmp_path / "out" / "gemm.json").exists()
