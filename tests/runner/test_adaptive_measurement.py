"""The runner's measurement: checkpoints (counted from the start and from the end), adaptive
iteration counts to a bootstrap interval of the median (the same interval Python computes),
and the conditions around the measured iterations (/proc/stat, OpenMP policy). Real runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from phonetrain import runner as runner_api
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.results import stats


def _bundle(tmp_path, **kw):
    spec = LowerSpec(**{"model": "mlp_16_16", "batch_size": 8, "dataset": "synthetic",
                        "warmup": 1, "iterations": 5, "num_batches": 2, **kw})
    return write_bundle(spec, tmp_path, seed=0)


def _run(runner, tmp_path, plan, adaptive=None, out="out", checkpoints=True, probe=True):
    r = runner_api.Runner.local_binary(runner, tmp_path)
    return r.run(plan.resolve(), tmp_path / out, adaptive=adaptive, checkpoints=checkpoints,
                 probe=probe)


def _measured(doc):
    return [i["wall_ms"] for i in doc["iters"] if not i["warmup"]]


def test_fixed_count_checkpoints_and_interval(runner, tmp_path):
    doc = _run(runner, tmp_path, _bundle(tmp_path))
    assert doc["measurement"]["mode"] == "fixed" and doc["iterations"] == 5
    assert [c["iteration"] for c in doc["checkpoints"]] == [0, 1, 4, 5]
    for c in doc["checkpoints"]:
        files = sorted(p.name for p in (tmp_path / "out" / c["dir"]).iterdir())
        assert "fc1.weight.f32" in files and "fc1.weight.grad.f32" in files
    listed = [d for d in doc["dumps"] if d.startswith("checkpoints/")]
    assert all((tmp_path / "out" / d).stat().st_size > 0 for d in listed) and listed
    m = doc["measurement"]
    assert (m["median_ms"], m["ci_low_ms"], m["ci_high_ms"]) == \
        pytest.approx(stats.median_ci(_measured(doc), m["resamples"]), rel=1e-12)
    # the location estimate the stop rule judges: the same low quantile and interval as Python
    assert m["estimate_quantile"] == stats.ESTIMATE_QUANTILE
    assert (m["estimate_ms"], m["low_ms"], m["high_ms"]) == pytest.approx(
        stats.quantile_ci(_measured(doc), stats.ESTIMATE_QUANTILE, m["resamples"]), rel=1e-12)
    # the calibration probe ran before and after the measured iterations, on the run's threads
    probe = doc["probe"]
    assert probe["threads"] == doc["threads"] and probe["samples"] == 5
    assert probe["before_ms"] > 0 and probe["after_ms"] > 0


def test_adaptive_stops_at_the_interval_or_a_limit(runner, tmp_path):
    plan = _bundle(tmp_path)
    # a target no interval misses stops at the first check; one the interval is never judged
    # against (min_seconds beyond the run) leaves the limits to stop it
    wide = _run(runner, tmp_path, plan, runner_api.Adaptive(ci_target=1e9, max_iterations=50))
    assert wide["measurement"]["stopped"] == "ci" and wide["iterations"] == 5
    narrow = _run(runner, tmp_path, plan,
                  runner_api.Adaptive(ci_target=1e-12, max_iterations=9, min_seconds=600,
                                      max_seconds=600))
    assert narrow["measurement"]["stopped"] == "max_iterations" and narrow["iterations"] == 9
    total = 1 + 9
    # the counted-from-the-end checkpoints are the last two iterations run
    assert [c["iteration"] for c in narrow["checkpoints"]] == [0, 1, total - 2, total - 1]
    timed = _run(runner, tmp_path, plan,
                 runner_api.Adaptive(ci_target=1e-12, max_iterations=1000, max_seconds=0))
    assert timed["measurement"]["stopped"] == "max_seconds" and timed["iterations"] == 5
    m = narrow["measurement"]
    med, lo, hi = stats.median_ci(_measured(narrow), m["resamples"])
    assert (m["ci_low_ms"], m["ci_high_ms"]) == pytest.approx((lo, hi), rel=1e-12)


def test_a_process_without_checkpoints_stops_at_its_decision(runner, tmp_path):
    """``--no-checkpoints`` (the train job's processes that are not verified): no state kept,
    and an interval reached at the first check ends the process there, where a process with
    the plan's checkpoints measures the two counted from the end after its decision."""
    plan = _bundle(tmp_path, iterations=3)
    first_check = runner_api.Adaptive(ci_target=1e9, max_iterations=50)
    kept = _run(runner, tmp_path, plan, first_check, out="kept")
    bare = _run(runner, tmp_path, plan, first_check, out="bare", checkpoints=False)
    assert kept["measurement"]["stopped"] == bare["measurement"]["stopped"] == "ci"
    assert kept["iterations"] == 3 + 2 and bare["iterations"] == 3
    assert [c["iteration"] for c in kept["checkpoints"]] == [0, 1, 4, 5]
    assert bare["checkpoints"] == [] and not (tmp_path / "bare" / "checkpoints").exists()
    assert not any(d.startswith("checkpoints/") for d in bare["dumps"])
    assert sorted(bare["dumps"]) == sorted(d for d in kept["dumps"]
                                          if not d.startswith("checkpoints/"))
    # a fixed count measures the plan's iterations either way; --no-probe (the events
    # process, which no verdict judges) records no probe, where the others read it
    fixed = _run(runner, tmp_path, plan, out="fixed", checkpoints=False, probe=False)
    assert fixed["iterations"] == 3 and fixed["checkpoints"] == []
    assert fixed["probe"] is None and bare["probe"]["before_ms"] > 0


def test_a_rerun_leaves_no_stale_checkpoints(runner, tmp_path):
    plan = _bundle(tmp_path)
    _run(runner, tmp_path, plan, runner_api.Adaptive(ci_target=1e-12, max_iterations=12))
    doc = _run(runner, tmp_path, plan)
    dirs = sorted(int(p.name) for p in (tmp_path / "out" / "checkpoints").iterdir())
    assert dirs == [c["iteration"] for c in doc["checkpoints"]] == [0, 1, 4, 5]


def test_conditions_are_recorded_and_see_other_processes(runner, tmp_path):
    """The conditions of a run (20 iterations: what they record needs no long run), then of
    a run long enough (400 iterations) to be measured beside one busy process per CPU."""
    shape = {"model": "mlp_784_256_128_16", "dataset": "digits", "batch_size": 32}
    quiet = _run(runner, tmp_path / "quiet", _bundle(tmp_path / "quiet", **shape,
                                                      iterations=20))["conditions"]
    plan = _bundle(tmp_path, **shape, iterations=400)
    assert quiet["omp_wait_policy"] == runner_api.OMP_WAIT_POLICY == "ACTIVE"
    assert quiet["cpus"] == os.cpu_count() and 0 <= quiet["other_cpu_share"] <= 1
    assert quiet["load_avg_1m_end"] >= 0 and quiet["wall_s"] > 0
    hogs = [subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\n"
                              "while time.time() - t < 60: pass"])
            for _ in range(len(os.sched_getaffinity(0)))]
    try:
        busy = _run(runner, tmp_path, plan, out="busy")["conditions"]
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    assert busy["other_cpu_share"] > 0.25, busy
    run = json.loads((tmp_path / "busy" / "run.json").read_text())
    verdict = stats.judge(_measured(run), [busy], ci_target=0, max_other_cpu_share=0.25)
    assert verdict["unstable"] and "other processes" in verdict["reasons"][0]
