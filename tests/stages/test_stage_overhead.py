"""What a stage job spends outside its measurements: the train stage's numpy reference runs
its small GEMMs on one BLAS thread, the train job converts its run's trace for Perfetto
without pandas, to the same JSON as the pandas analysis gives, and a kernel build whose
compile equals an earlier one (another version's, or this version's before a comment edit)
takes that compile's record instead of compiling again."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_info

from phonetrain import reference
from phonetrain.results import profiling, tracefile
from phonetrain.stages import build, train


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_the_reference_verifies_a_run_on_one_blas_thread(tmp_path, monkeypatch):
    seen = []

    def verify_run_dir(plan, root, out, atol):
        seen.append(_blas_threads())
        return {"ok": True, "max_abs_err": 0.0}

    monkeypatch.setattr(reference, "verify_run_dir", verify_run_dir)
    monkeypatch.setattr(train.Plan, "load", staticmethod(lambda path: None))
    before = _blas_threads()
    doc = train.verify_run(tmp_path / "plan.json", tmp_path, tmp_path, 1e-3)
    assert doc["ok"] is True
    assert seen and seen[0] and all(n == 1 for n in seen[0])
    assert _blas_threads() == before   # the limit ends with the verification


# ------------------------------------------------------------------ the run's Perfetto trace

def _hand_trace_csv(tmp_path):
    """test_profiling's hand-built trace (a measured iteration of h2d, kernel, d2h and host
    rows; a warm-up h2d) with a map row whose device times leave its call, shuffled rows, an
    empty number and a queue column, written as the runner writes trace.csv."""
    from results.test_profiling import _row, hand_trace

    trace, iters = hand_trace()
    stray = _row(1, 5, "map", "map", 800_000, 900_000, q=1, s=1, e=1, bytes_=64)
    stray["queued_ns"] = 0
    trace = pd.concat([trace, pd.DataFrame([stray])], ignore_index=True)
    trace["queue"] = [0, 0, 0, 1, 0, 0, 0]
    trace = trace.iloc[::-1]
    path = tmp_path / "trace.csv"
    trace.to_csv(path, index=False)
    lines = path.read_text().splitlines()
    col = lines[0].split(",").index("queued_ns")
    host = next(i for i, ln in enumerate(lines) if ",host," in ln)
    cells = lines[host].split(",")
    cells[col] = ""   # a number the runner left empty reads as 0
    lines[host] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    return path, iters


def test_the_trace_reads_and_converts_without_pandas_as_the_pandas_analysis_does(tmp_path):
    path, iters = _hand_trace_csv(tmp_path)
    walls = {int(i): (float(w), bool(m)) for i, w, m in
             zip(iters["iteration"], iters["wall_ms"], iters["measured"])}
    got = tracefile.perfetto_trace(tracefile.read_columns(path), walls, device="d", title="t")
    want = profiling.perfetto_trace(profiling.read_trace_csv(path), iters, device="d", title="t")
    assert json.dumps(got) == json.dumps(want)
    assert [e["args"]["seq"] for e in got["traceEvents"] if e.get("cat") not in
            (None, "iteration")] == [0, 0, 1, 2, 3, 4, 5]   # in (iteration, seq) order
    off, unc = profiling.clock_offset(profiling.read_trace_csv(path))
    assert np.array_equal(off.to_numpy(), tracefile.clock_offset(tracefile.read_columns(path))[0])


def test_a_trace_with_an_unknown_kind_or_column_missing_fails_naming_the_file(tmp_path):
    path, _ = _hand_trace_csv(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text(path.read_text().replace("gemm_nt", "gemm_nt").replace(",kernel,", ",warp,"))
    with pytest.raises(tracefile.TraceError, match=r"bad\.csv.*warp"):
        tracefile.read_columns(bad)
    bad.write_text(path.read_text().replace("host_end_ns", "host_stop_ns"))
    with pytest.raises(tracefile.TraceError, match=r"bad\.csv.*host_end_ns"):
        tracefile.read_columns(bad)


def test_iteration_walls_read_both_run_json_forms():
    assert tracefile.iteration_walls({"iters": [
        {"iteration": 0, "warmup": True, "wall_ms": 2.0},
        {"iteration": 1, "warmup": False, "wall_ms": 1.0}]}) == {0: (2.0, False), 1: (1.0, True)}
    assert tracefile.iteration_walls({"wall_ms": [2.0, 1.0], "warmup": 1}) == \
        {0: (2.0, False), 1: (1.0, True)}


def test_the_train_job_writes_the_perfetto_trace_without_loading_pandas():
    code = ("import sys; import phonetrain.stages.train, phonetrain.stages.profile; "
            "from phonetrain.results import folders, tracefile; "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------------ kernel builds by compile key

def test_a_compile_is_kept_by_its_key_and_reused_for_another_version(tmp_path, capsys):
    """A version whose sources (but comments and white space), options, runner and device
    equal another's takes that compile's record, its program sources renamed to its own."""
    kernels = tmp_path / "build" / "host" / "kernels"
    doc = {"status": "ok", "options": "", "programs": [
        {"program": "gemm", "source": "kernels/baseline/gemm.cl", "build_ms": 12.5,
         "binary_size_bytes": 100, "cached": False}]}
    build.keep_build(kernels / "baseline" / "build.json", "k1", doc, "baseline")
    assert build.reused_build(kernels / "clblast" / "build.json", "k2", "clblast") is None
    got = build.reused_build(kernels / "clblast" / "build.json", "k1", "clblast")
    assert got["reused_from"] == "baseline" and got["programs"][0]["build_ms"] == 12.5
    assert got["programs"][0]["source"] == "kernels/clblast/gemm.cl"
    assert "the same compile as baseline" in capsys.readouterr().err


def test_the_compile_key_follows_the_build_key_runner_and_device(tmp_path, monkeypatch):
    runner = tmp_path / "runner"
    runner.write_bytes(b"runner 1")
    keys = {"baseline": "a", "clblast": "a", "tiled": "b"}
    monkeypatch.setattr(build, "build_hash", lambda version: keys[version])
    dev = {"name": "host", "opencl_platform": "Portable Computing Language"}
    base = build.compile_key("baseline", dev, runner)
    assert build.compile_key("clblast", dev, runner) == base   # same sources and options
    assert build.compile_key("tiled", dev, runner) != base
    assert build.compile_key("baseline", dict(dev, name="phone"), runner) != base
    runner.write_bytes(b"runner 2")
    assert build.compile_key("baseline", dev, runner) != base


def test_a_damaged_build_record_is_compiled_again(tmp_path):
    kernels = tmp_path / "build" / "host" / "kernels"
    (kernels / build.BUILDS).mkdir(parents=True)
    (kernels / build.BUILDS / "k1.json").write_text("{not json")
    assert build.reused_build(kernels / "tiled" / "build.json", "k1", "tiled") is None
