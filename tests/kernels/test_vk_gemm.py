"""The Vulkan GEMM timer's pieces without a device: a Vulkan bench-gemm spec as one plan (the
version's launch geometry and specialization constants, one dispatch per case), the check
against numpy that flags a wrong C, and the device times read from a trace."""

from __future__ import annotations

import numpy as np

from phonetrain.kernels import load_version, tuning, vk_gemm
from phonetrain.kernels.gemm import GemmShape, gemm_spec
from phonetrain.plan import Plan, uniform_fill

# The runner's trace.csv header (src/runner/trace.c; phonetrain.runner.TRACE_HEADER, not
# imported: that module drives processes, and this file starts none)
TRACE_HEADER = ("iteration,warmup,seq,step,op,kind,name,layer,phase,bytes,flops,queued_ns,"
                "submit_ns,start_ns,end_ns,host_begin_ns,host_end_ns,queue\n")

DEFINES = {"TSM": 32, "TSN": 32, "TSK": 8, "WPTM": 2, "WPTN": 2, "PAD": 1}


def _spec(shapes, repeats=3):
    kv = tuning.candidate_version(load_version("tiled"), {"defines": DEFINES})
    return gemm_spec(kv, shapes, source="spirv/tiled", backend="vulkan", repeats=repeats)


def test_a_spec_is_one_plan_with_a_dispatch_per_case(tmp_path):
    spec = _spec([GemmShape("gemm_nn", 100, 100, 100), GemmShape("gemm_tn", 7, 40, 9)])
    assert spec["backend"] == "vulkan" and "-DTSM=32" in spec["options"]
    vk_gemm.gemm_plan(spec).save(tmp_path / "plan.json")
    plan = Plan.load(tmp_path / "plan.json")              # the contract's checks pass
    nn, tn = plan.steps
    assert nn.name == "gemm_nn" and nn.local_size == [16, 16]
    assert nn.global_size == [4 * 16, 4 * 16]             # ceil(100 / 32) tiles each way
    assert [a.get("i", a.get("f", a.get("t"))) for a in nn.args] == \
        [100, 100, 100, 1.0, 0, 1, 0.0, 2]
    assert [a.get("t") for a in tn.args if "t" in a] == [3, 4, 5]
    assert [(p.name, p.source, p.options) for p in plan.programs] == \
        [("gemm_nn", "spirv/tiled/gemm_nn.spv", spec["options"]),
         ("gemm_tn", "spirv/tiled/gemm_tn.spv", spec["options"])]
    assert plan.dumps == [2, 5] and plan.backend == "vulkan"
    assert plan.iterations == vk_gemm.MIN_ITERATIONS and plan.warmup == vk_gemm.WARMUP
    assert vk_gemm.gemm_plan(_spec([GemmShape("gemm_nn", 8, 8, 8)], 9)).iterations == 9


def test_a_wrong_product_is_flagged():
    """max_err against float64 numpy from the plan's own fills, all three transposes: a
    correct C passes, one planted wrong element or a NaN fails."""
    shapes = [GemmShape("gemm_nn", 48, 40, 24), GemmShape("gemm_nt", 5, 300, 7),
              GemmShape("gemm_tn", 300, 6, 11)]
    spec = _spec(shapes)
    plan = vk_gemm.gemm_plan(spec)
    for i, g in enumerate(shapes):
        a_t, b_t = (plan.by_name(f"{x}{i}") for x in "AB")
        a = uniform_fill(a_t.init["seed"], g.M * g.K, -1.0, 1.0).astype(np.float64)
        b = uniform_fill(b_t.init["seed"], g.K * g.N, -1.0, 1.0).astype(np.float64)
        op_a = a.reshape(g.K, g.M).T if g.kernel == "gemm_tn" else a.reshape(g.M, g.K)
        op_b = b.reshape(g.N, g.K).T if g.kernel == "gemm_nt" else b.reshape(g.K, g.N)
        c = (op_a @ op_b).astype(np.float32).ravel()
        assert vk_gemm.max_err(spec, i, c) <= vk_gemm.ERR_TOL
        rows = vk_gemm.checked_rows(g.M)
        c[rows[-1] * g.N + g.N - 1] += 0.01               # on a checked row
        assert vk_gemm.max_err(spec, i, c) > vk_gemm.ERR_TOL
        c[rows[0] * g.N] = np.nan
        assert vk_gemm.max_err(spec, i, c) == float("inf")
        assert vk_gemm.max_err(spec, i, c[:-1]) == float("inf")
    assert len(vk_gemm.checked_rows(300)) == vk_gemm.CHECK_ROWS
    assert list(vk_gemm.checked_rows(300)[[0, -1]]) == [0, 299]


def test_the_document_takes_timed_dispatches_only(tmp_path):
    """gemm_document: per case the median of its timed dispatches' device intervals (warm-up
    rows and rows without device times left out), GFLOPS from it; no times is an error."""
    spec = _spec([GemmShape("gemm_nn", 4, 4, 4), GemmShape("gemm_nn", 8, 8, 8)])
    trace = tmp_path / "trace.csv"
    rows = [(0, 1, 0, 1000, 5000), (1, 0, 0, 1000, 2000), (1, 0, 0, 1000, 4000),
            (2, 0, 0, 1000, 3000), (2, 0, 0, "", "")]
    with open(trace, "w") as f:
        f.write(TRACE_HEADER)
        for it, warm, step, start, end in rows:
            f.write(f"{it},{warm},0,{step},kernel,kernel,gemm_nn,,forward,0,0,,,{start},{end},"
                    "1,2,0\n")
    assert vk_gemm.device_ns(trace) == {0: [1000.0, 3000.0, 2000.0]}

    def dump(name):
        n = {"C0": 4, "C1": 8}[name]
        return np.full(n * n, np.nan, np.float32)
    doc = vk_gemm.gemm_document(spec, {"device": {"name": "gpu"}}, trace, dump)
    first, second = doc["cases"]
    assert first["median_ms"] == 2000 / 1e6 and first["gflops"] == 2 * 4 ** 3 / 2000
    assert first["status"] == "wrong" and first["max_err"] is None   # C is NaN: never "ok"
    assert second["status"] == "error" and "no device times" in second["error"]
    assert doc["device"] == {"name": "gpu"} and doc["options"] == spec["options"]
