"""benchmarks/bench_vk_gemm.py: the configurations it times (tuning.yaml's candidates, or the
--config ones checked against its constraints), the table row of the best verified
configuration; on lavapipe, both versions measured and verified at a size that is no multiple
of the tiles. The plan and the check against numpy are phonetrain.kernels.vk_gemm's
(tests/kernels/test_vk_gemm.py)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("bench_vk_gemm",
                                                  REPO / "benchmarks" / "bench_vk_gemm.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def test_explicit_configurations_replace_the_candidates_and_are_checked():
    vk = _module()
    from phonetrain.kernels.spirv import ShaderError, shader_candidates
    every = vk.configurations("tiled", True, [])
    assert every == [c["defines"] for c in shader_candidates("tiled")]
    got = vk.configurations("tiled", True, ["TSM=128 TSN=128 WPTM=8 WPTN=8 VW=4 PAD=4"])
    assert got[0] == every[0] and len(got) == 2
    assert got[1] == {**every[0], "TSM": 128, "TSN": 128, "WPTM": 8, "WPTN": 8, "VW": 4,
                      "PAD": 4}
    assert vk.configurations("tiled", False, ["TSM=128"]) == every[:1]
    assert vk.configurations("baseline", True, ["TSM=128"]) == [{}]
    with pytest.raises(ShaderError, match="breaks the constraint"):
        vk.configurations("tiled", True, ["VW=4 WPTN=2"])


def test_the_row_reports_the_best_verified():
    vk = _module()
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
    got = [vk.measure(r, root, v, vk.configurations(v, False, [])[0], 70, a)   # no multiple
           for v in ("baseline", "tiled")]                                    # of any tile
    got.append(vk.measure(r, root, "tiled", vk.configurations(
        "tiled", True, ["TSM=32 TSN=32 TSK=8 WPTM=4 WPTN=4 PAD=4 VW=4 PREFETCH=1 DBUF=1 "
                        "GVW=4"])[1], 72, a))
    for res in got:
        assert res.status == "ok" and len(res.gflops) == 3, res
        assert res.max_err <= 1e-5 and "llvmpipe" in res.device
