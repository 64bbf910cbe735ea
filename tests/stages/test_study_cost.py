"""The study's cost read back from job logs (phonetrain.stages.cost): a stage job's log lists
its waits and runner processes, the closing line sums the measuring ones of the jobs of one
invocation, and the measuring bounds line states the settings' limits."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from phonetrain import spans
from phonetrain.stages import cost, job


def _log(path: Path, text: str, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def _ok(name: str, a: float, b: float) -> str:
    return f"{name}: ok in {b - a:.2f} s (from {a:.3f} to {b:.3f} s, Unix time)\n"


def test_a_stage_job_log_lists_its_waits_and_runner_processes(tmp_path, monkeypatch):
    """A stage that waits for a cool-down and starts a measuring and a building runner
    process: its log, written by phonetrain.stages.job.run, reads back with each span."""
    monkeypatch.setattr(spans, "SPANS", [spans.Span(spans.MEASURE, "run", 1.0, 2.0)])  # earlier

    def stage(j):
        spans.wait("cool-down", 0.01)
        with spans.span(spans.MEASURE, "bench-gemm"):
            time.sleep(0.02)
        with spans.span(spans.RUNNER, "build"):
            pass

    log = tmp_path / "logs" / "gemm" / "host" / "tiled.log"
    j = job.Job(SimpleNamespace(), SimpleNamespace(), {}, log,
                job.Runtime(60.0, False, str(tmp_path)))
    job.run(stage, j, "gemm")
    got = cost.read_job(log, tmp_path / "logs")
    assert got.rule == "gemm" and got.to_s >= got.from_s
    recorded = spans.SPANS[1:]   # the job's own, the earlier one left out
    assert [(s.kind, s.what) for s in got.spans] == [(s.kind, s.what) for s in recorded] == [
        (spans.WAIT, "cool-down"), (spans.MEASURE, "bench-gemm"), (spans.RUNNER, "build")]
    for a, b in zip(got.spans, recorded):
        assert abs(a.from_s - b.from_s) <= 1e-3 and abs(a.to_s - b.to_s) <= 1e-3
    assert got.from_s - 1e-3 <= recorded[0].from_s and recorded[-1].to_s <= got.to_s + 1e-3
    assert set(got.measuring_s()) == {"bench-gemm"}


def test_the_closing_line_counts_the_jobs_of_this_invocation_only(tmp_path):
    logs, now = tmp_path / "logs", time.time()
    since = now - 100
    m = spans.Span(spans.MEASURE, "run", now - 50, now - 40).line()
    w = spans.Span(spans.WAIT, "device 'host' lock", now - 60, now - 55).line()
    _log(logs / "train" / "host" / "a.log", _ok("train", now - 60, now - 39) + w + "\n" + m + "\n")
    _log(logs / "gemm" / "host" / "cpu.log", _ok("gemm", now - 30, now - 10) +
         spans.Span(spans.MEASURE, "bench-gemm", now - 29, now - 11).line() + "\n")
    _log(logs / "lower" / "a.log", _ok("lower", now - 70, now - 69))
    _log(logs / "gemm_shapes.log", _ok("gemm-shapes", now - 80, now - 79))
    _log(logs / "train" / "host" / "failed.log", "train: FAILED\nno device\n")
    _log(logs / "train" / "host" / "old.log", _ok("train", since - 500, since - 400) +
         spans.Span(spans.MEASURE, "run", since - 450, since - 410).line() + "\n",
         mtime=since - 400)
    jobs = cost.jobs_since(logs, since)
    assert sorted(j.rule for j in jobs) == ["gemm", "gemm_shapes", "lower", "train"]
    train = next(j for j in jobs if j.rule == "train")
    assert abs(train.wait_s - 5) < 0.01
    by = cost.measuring_s(jobs)
    assert list(by) == ["bench-gemm", "run"] and abs(by["run"] - 10) < 0.01
    line = cost.closing_line(200.0, 5, jobs)
    assert line.startswith("phonetrain: study: wall 200 s, 5 jobs run, measuring 28 s")
    assert "bench-gemm 18 s, run 10 s; 14% of wall" in line
    assert "nothing measured" in cost.closing_line(10.0, 1, [])


def test_snakemake_log_gives_the_jobs_run_by_rule(tmp_path):
    log = _log(tmp_path / "x.snakemake.log",
               "[Sun Dec  6 18:46:40 2026]\nFinished jobid: 3 (Rule: train)\n"
               "Finished jobid: 4 (Rule: train)\nFinished jobid: 7 (Rule: report)\n"
               "Finished jobid: 0 (Rule: all)\n")
    assert cost.finished_rules([log, tmp_path / "missing.log"]) == {"train": 2, "report": 1}


def test_the_process_start_is_before_now():
    assert time.time() - 3600 < cost.process_start_s() <= time.time()


MEASURE = {"ci_target": 0.05, "iterations": 10, "max_iterations": 60, "max_seconds": 1.5,
           "events_apart": True, "gemm_sizes": [128, 4096], "gemm_min_time_ms": 30.0,
           "gemm_max_launch_s": 5.0, "tune": True, "tune_min_time_ms": 20.0, "repeats": 2,
           "max_attempts": 3, "warmup": 2, "bandwidth_max_bytes": 2**30, "cooldown_s": 0.0}


def test_the_bounds_line_states_each_limit():
    line = cost.bounds_line(MEASURE)
    for part in ("2 runner processes per attempt, <= 3 attempts (none after one that ends "
                 "with the host contended) (+1 recording events",
                 "warm-up 2 + 10..60 iterations, stopping at +-5% or after 1.5 s",
                 "GEMM sizes 128..4096, 30 ms per timed repeat, launches <= 5 s",
                 "tuning 20 ms per trial", "bandwidth <= 1024 MiB", "cool-down 0 s"):
        assert part in line
    fixed = cost.bounds_line(MEASURE | {"ci_target": 0, "tune": False, "events_apart": False,
                                        "gemm_sizes": []})
    assert "warm-up 2 + 10 iterations;" in fixed and "no tuning" in fixed
    assert "no GEMM sizes" in fixed and "recording events" not in fixed


def test_the_bounds_line_states_the_budgets_of_shapes_tuning_and_the_events_process():
    line = cost.bounds_line(MEASURE | {"gemm_max_shape_s": 2.0, "tune_finalists": 3,
                                       "tune_screen_min_time_ms": 5.0})
    for part in ("(+1 recording events, OpenCL, 10 iterations)",
                 "(<= 9 s of timed iterations per run",
                 "3-5 repeats in ~2 s per shape",
                 "tuning 20 ms per trial x 3 for each class's 3 finalists after a 5 ms screen"):
        assert part in line
    adaptive = cost.bounds_line(MEASURE | {"events_adaptive": True})
    assert "(+1 recording events, OpenCL)" in adaptive and "finalists" not in adaptive


def test_a_long_square_gets_fewer_timed_repeats_a_model_call_never():
    from phonetrain.kernels.gemm import GemmShape
    from phonetrain.stages.gemm import GEMM_REPEATS, sweep_repeats

    big = GemmShape("gemm_nn", 2048, 2048, 2048)      # 17.2 GFLOP
    assert sweep_repeats(big, "square", 100.0, 2.0) == GEMM_REPEATS   # 0.17 s a launch
    assert sweep_repeats(big, "square", 38.0, 2.0) == 4                # 0.45 s
    assert sweep_repeats(big, "square", 20.0, 2.0) == 3                # 0.86 s
    assert sweep_repeats(big, "square", 1.0, 2.0) == 3                 # 17 s: never fewer
    assert sweep_repeats(big, "model:lenet5", 1.0, 2.0) == GEMM_REPEATS
    assert sweep_repeats(big, "square", None, 2.0) == GEMM_REPEATS     # no square before
    assert sweep_repeats(big, "square", 1.0, 0.0) == GEMM_REPEATS      # the bound off
    assert sweep_repeats(big, "square", 1.0, None) == GEMM_REPEATS     # params before it
