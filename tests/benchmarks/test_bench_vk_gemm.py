"""benchmarks/bench_vk_gemm.py: the one-GEMM Vulkan plan of a configuration (the version's
launch geometry and specialization constants), the check against numpy that flags a wrong C,
the table row of the best verified configuration; on lavapipe, both versions measured and
verified at a size that is no multiple of the tiles."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("bench_vk_gemm",
                                                  REPO / "benchmarks" / "bench_vk_gemm.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_plan_specializes_the_tiled_shader_and_launches_by_its_rule(tmp_path):
    vk = _module()
    from phonetrain.plan import Plan
    defines = {"TSM": 32, "TSN": 32, "TSK": 8, "WPTM": 2, "WPTN": 2, "PAD": 1}
    plan = vk.gemm_plan("tiled", defines, 100, warmup=1, iterations=2)
    plan.save(tmp_path / "plan.json")
    again = Plan.load(tmp_path / "plan.json")             # the contract's checks pass
    (step,) = again.steps
    assert step.name == "gemm_nn" and step.local_size == [16, 16]
    assert step.global_size == [4 * 16, 4 * 16]           # ceil(100 / 32) tiles each way
    assert [a.get("i", a.get("f", a.get("t"))) for a in step.args] == \
        [100, 100, 100, 1.0, 0, 1, 0.0, 2]
    (prog,) = again.programs
    assert prog.source == "spirv/tiled/gemm_nn.spv"
    assert prog.options == "-DPAD=1 -DTSK=8 -DTSM=32 -DTSN=32 -DWPTM=2 -DWPTN=2"
    assert again.dumps == [2] and again.backend == "vulkan"


def test_a_wrong_product_is_flagged_and_the_row_reports_the_best_verified():
    vk = _module()
    ref = vk.Reference(48)
    from phonetrain.plan import uniform_fill
    a = uniform_fill(vk.SEED_A, 48 * 48, -1.0, 1.0).reshape(48, 48)
    b = uniform_fill(vk.SEED_B, 48 * 48, -1.0, 1.0).reshape(48, 48)
    c = (a @ b).astype(np.float32)
    assert ref.max_err(c) <= vk.ERR_TOL
    c[47, 3] += 0.01                                      # one planted wrong element
    assert ref.max_err(c) > vk.ERR_TOL
    c[0, 0] = np.nan
    assert ref.max_err(c) == float("inf")
    R = vk.Result
    rs = [R(512, "tiled", "TSM=64", "ok", [10.0, 12.0, 11.0], 1e-7),
          R(512, "tiled", "TSM=128", "wrong", [50.0, 50.0], 0.3),
          R(512, "tiled", "TSM=32", "ok", [20.0, 18.0, 30.0], 2e-7),
          R(512, "tiled", "TSM=16", "error", [], error="pipeline failed")]
    assert vk.best(rs).config == "TSM=32"
    row = vk.table_row(512, "tiled", rs, cublas=40.0)
    assert row == "| 512 | tiled | TSM=32 | 20.0 | 18.0-30.0 | 2.0e-07 | 2/4 | 50% |"
    assert row.count("|") == vk.TABLE_HEAD.splitlines()[0].count("|")
    none = vk.table_row(512, "tiled", rs[1:2] + rs[3:], cublas=None)
    assert "none verified" in none and "1/2" not in none and "0/2" in none
    assert json.dumps(rs[3].to_json(), allow_nan=False)   # no NaN in the JSON


def test_both_versions_verify_on_lavapipe(lavapipe, runner, tmp_path):
    vk = _module()
    from phonetrain.runner import Runner
    root = tmp_path / "root"
    vk.stage(["baseline", "tiled"], root, None)
    r = Runner.local_binary(runner, root, lavapipe, timeout_s=120)
    a = argparse.Namespace(warmup=1, iterations=3)
    ref = vk.Reference(70)                                # no multiple of any tile
    got = [vk.measure(r, root, v, vk.configurations(v, False)[0], 70, ref, a)
           for v in ("baseline", "tiled")]
    for res in got:
        assert res.status == "ok" and len(res.gflops) == 3, res
        assert res.max_err <= vk.ERR_TOL and "llvmpipe" in res.device
