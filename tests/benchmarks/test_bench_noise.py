"""benchmarks/bench_noise.py's planted slowdown: every GEMM loop of the chosen version gains an
extra pass over part of K whose sum enters C times 0, and the planted source still builds on
the real PoCL device."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from phonetrain import runner as rt

REPO = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_noise", REPO / "benchmarks/bench_noise.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_planted_baseline_does_more_work_and_builds(runner, pocl, tmp_path: Path):
    ws = tmp_path / "ws"
    shutil.copytree(REPO / "src/kernels", ws / "src/kernels")
    original = (ws / "src/kernels/baseline/gemm.cl").read_text()
    n = _bench().plant(ws, "baseline", 0.3)
    planted = (ws / "src/kernels/baseline/gemm.cl").read_text()
    assert n == original.count("for (int k = 0; k < K; ++k)") >= 3
    assert planted.count("for (int k = 0; k < (30 * K) / 100; ++k)") == n
    assert planted.count("acc += 0.0f * extra;") == n
    common = ws / "src/kernels/common.cl"
    src = tmp_path / "gemm.cl"
    src.write_text((common.read_text() if common.exists() else "") + planted)
    doc = rt.build_kernels(runner, [src], tmp_path / "out", device_selector=pocl)
    assert doc["status"] == "ok"
