"""The study's step time without profiling overhead: an OpenCL run on one queue measures its
step in runner processes that record no per-command event, and its breakdown in one more
process of the same job that records them (``events/``); the breakdown is fitted into the
step. Real runner on PoCL through the one-off ``phonetrain run``; the fit is checked on
planted medians (a breakdown process slower than the step, one whose busy time alone
exceeds it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from phonetrain import layout
from phonetrain.cli import main
from phonetrain.report.build import step_time_notes
from phonetrain.results import runs

MODEL = "mlp_16_16"
BASE = ["run", f"model={MODEL}", "device=host", "measure.warmup=1", "measure.iterations=4",
        "measure.max_iterations=4", "measure.ci_target=0", "measure.max_probe_slowdown=0",
        "measure.max_other_cpu_share=1", "measure.progress=false"]


def _run(runner, R: Path, monkeypatch, *extra: str) -> Path:
    shutil.copytree(runner.parent, R / "build" / ".runner-cache" / runner.parent.name,
                    dirs_exist_ok=True)
    monkeypatch.setenv("PHONETRAIN_LOCK_DIR", str(R.parent / "locks"))
    res = CliRunner().invoke(main, BASE + [f"results_dir={R}", *extra])
    assert res.exit_code == 0, (res.output, res.exception)
    run_dir, = (R / "runs" / "host").iterdir()
    return run_dir


def _device_timed(d: Path) -> bool:
    t = pd.read_csv(d / layout.TRACE)
    return bool((t.loc[t["kind"] == "kernel", "end_ns"] > 0).all())


@pytest.fixture(scope="module")
def apart(runner, pocl, tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        return _run(runner, tmp_path_factory.mktemp("apart") / "results", mp,
                    "backend=opencl", "kernel=baseline")


def test_step_processes_record_no_events_and_one_more_does(apart):
    params = json.loads((apart / layout.PARAMS).read_text())
    assert params["events_apart"] is True
    m = json.loads((apart / layout.MEASUREMENT).read_text())
    assert m["events_apart"] is True and m["processes"] == 2
    for d in (apart, apart / "repeat_1"):            # the step's processes: no event
        assert json.loads((d / layout.RUN).read_text())["profiling"] is False
        assert not _device_timed(d)
    ev = apart / layout.EVENTS                        # the breakdown's: an event per command
    assert json.loads((ev / layout.RUN).read_text())["profiling"] is True and _device_timed(ev)
    assert runs.traced_process(apart) == ev and runs.folder_problems(apart) == []
    # only the verified process keeps the plan's checkpoints
    kept = {d.name: json.loads((d / layout.RUN).read_text())["checkpoints"]
            for d in (apart, apart / "repeat_1", ev)}
    assert kept[apart.name] and kept["repeat_1"] == kept[layout.EVENTS] == []
    # and no verdict judges the events process: it runs no calibration probe
    assert json.loads((ev / layout.RUN).read_text())["probe"] is None
    assert json.loads((apart / layout.RUN).read_text())["probe"]["after_ms"] > 0


def test_tables_take_the_step_from_its_processes_and_the_breakdown_from_events(apart):
    t = runs.read_run(apart)
    row, it, cmds = t["runs"].iloc[0], t["iterations"], t["commands"]
    assert row["status"] == "ok" and row["repeats"] == 2
    assert sorted(it.groupby("role")["repeat"].unique().map(tuple).items()) == \
        [("breakdown", (2,)), ("step", (0, 1))]
    step = it[it["measured"] & (it["role"] == "step")]
    assert step["kernel_ms"].isna().all() and row["iteration_median_ms"] == \
        pytest.approx(step["wall_ms"].median())
    events = it[it["measured"] & (it["role"] == "breakdown")]
    assert row["events_iteration_ms"] == pytest.approx(events["wall_ms"].median())
    assert row["kernel_ms"] > 0 and 0 < row["breakdown_scale"] <= 1
    assert set(cmds["kind"]) >= {"kernel", "h2d", "d2h"}   # from the events process alone
    assert row["loss_last"] == pytest.approx(step.loc[step["repeat"] == 1, "loss"].iloc[-1])
    assert step_time_notes(t["runs"])[0].startswith("Step times of 1 of 1 measured runs")


def test_cpu_pipelined_and_switched_off_runs_keep_events_in_every_process(runner, pocl,
                                                                          tmp_path,
                                                                          monkeypatch):
    for n, extra in enumerate((["backend=cpu", "measure.threads=1"],
                               ["backend=opencl_pipelined", "kernel=baseline"],
                               ["backend=opencl", "kernel=baseline",
                                "measure.events_apart=false"])):
        run_dir = _run(runner, tmp_path / f"r{n}" / "results", monkeypatch, *extra)
        assert "events_apart" not in json.loads((run_dir / layout.PARAMS).read_text())
        assert json.loads((run_dir / layout.MEASUREMENT).read_text())["events_apart"] is False
        assert not (run_dir / layout.EVENTS).exists()
        it = runs.read_run(run_dir)["iterations"]
        assert set(it["role"]) == {"both"} and it["kernel_ms"].notna().all()
        if n:
            assert _device_timed(run_dir)


def _med(busy: float, gap: float, kernel: float) -> pd.Series:
    parts = {f"{k}_ms": 0.0 for k in runs.BREAKDOWN_MS}
    return pd.Series(parts | {"busy_ms": busy, "gap_ms": gap, "kernel_ms": kernel,
                              "transfer_overhead_ms": gap / 2})


def _traced(ms: float) -> pd.DataFrame:
    return pd.DataFrame({"role": "breakdown", "measured": True, "wall_ms": [ms] * 5})


def test_fit_takes_the_events_cost_off_the_gaps_first():
    """The breakdown process ran 0.05 ms slower per step than the step: its gap loses that,
    device times stay as measured, no scaling is needed."""
    parts, ev, scale = runs.fit_breakdown(_med(0.10, 0.08, 0.09), pd.Series([0.15] * 5),
                                          _traced(0.20))
    assert ev == pytest.approx(0.20) and scale == 1.0
    assert parts["gap_ms"] == pytest.approx(0.03) and parts["kernel_ms"] == pytest.approx(0.09)
    assert parts["transfer_overhead_ms"] == pytest.approx(0.03)    # capped by the gap


def test_fit_scales_a_breakdown_whose_busy_time_exceeds_the_step():
    parts, _, scale = runs.fit_breakdown(_med(0.18, 0.04, 0.16), pd.Series([0.15] * 5),
                                         _traced(0.22))
    assert scale == pytest.approx(0.15 / 0.18) and parts["gap_ms"] == 0.0
    assert parts["kernel_ms"] == pytest.approx(0.16 * 0.15 / 0.18)
    # a run whose every process recorded events is left as measured
    both = _traced(0.22).assign(role="both")
    parts, ev, scale = runs.fit_breakdown(_med(0.18, 0.04, 0.16), pd.Series([0.22] * 5), both)
    assert ev is None and scale == 1.0 and parts["gap_ms"] == pytest.approx(0.04)
