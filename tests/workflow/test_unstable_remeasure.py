"""An unstable measurement (interval too wide, or other processes on the CPU) is recorded as
such, kept apart from ok runs in the runs table, and moved aside and re-measured by the next
workflow run -- only that run -- after which the workflow is a no-op again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from phonetrain import layout
from phonetrain.cli import main
from phonetrain.results import runs
from phonetrain.results.check import run_finding
from helpers.workflow import TINY, clone_workspace, env, planned, snakemake

MODEL = "mlp_16_16"


def test_a_too_wide_interval_makes_the_run_unstable(tmp_path: Path):
    R = tmp_path / "results"
    args = ["run", f"model={MODEL}", "device=host", "backend=cpu", f"results_dir={R}",
            "measure.warmup=1", "measure.iterations=3", "measure.max_iterations=5",
            "measure.ci_target=1e-9", "measure.max_other_cpu_share=1",
            "measure.progress=false"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, (res.output, res.exception)
    run_dir = R / "runs" / "host" / f"{MODEL}.cpu.none"
    m = json.loads((run_dir / layout.MEASUREMENT).read_text())
    assert m["unstable"] and "wider than +-1e-07%" in m["reasons"][0]
    assert json.loads((run_dir / layout.RUN).read_text())["iterations"] == 5
    params = json.loads((run_dir / layout.PARAMS).read_text())
    assert run_finding(run_dir, params).startswith("unstable: the median's 95% interval")
    row = runs.read_run(run_dir)["runs"].iloc[0]
    assert row["status"] == "unstable" and "interval" in row["status_reason"]
    assert row["iteration_ci_low_ms"] <= row["iteration_median_ms"] <= row["iteration_ci_high_ms"]
    assert row["iterations"] == 5 and row["verify_max_abs_err"] <= row["verify_tolerance"]


def test_the_next_workflow_run_remeasures_only_the_unstable_run(completed_workspace, tmp_path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    run_dir = ws / "results" / "runs" / "host" / f"{MODEL}.cpu.none"
    m = json.loads((run_dir / layout.MEASUREMENT).read_text())
    assert not m["unstable"]
    # as if other processes had taken the CPU during that measurement
    m.update(unstable=True, other_cpu_share=0.9,
             reasons=["other processes used 90% of the CPU during the measurement"])
    (run_dir / layout.MEASUREMENT).write_text(json.dumps(m))
    assert _stale_moves(ws, TINY) == [f"results/runs/host/{MODEL}.cpu.none"]
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert not json.loads((run_dir / layout.MEASUREMENT).read_text())["unstable"]
    [note] = (ws / "results" / "quarantine").glob("*/runs/host/*.why.json")
    assert json.loads(note.read_text())["why"].startswith("unstable: other processes used 90%")
    assert planned(ws) == {}
    table = pd.read_parquet(ws / "results" / "summary" / "runs.parquet")
    assert set(table["status"]) == {"ok"}


def test_a_study_measured_unstable_is_tabulated_so_and_remeasured_next_time(completed_workspace,
                                                                            tmp_path):
    """Runs that end unstable within a workflow run are listed unstable (not failed, not ok)
    in that run's summary, and the next invocation moves them aside to measure them again."""
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    strict = TINY + ["measure.ci_target=1e-9", "measure.max_iterations=4"]
    p = snakemake(ws, "all", overrides=strict)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    table = pd.read_parquet(ws / "results" / "summary" / "runs.parquet")
    assert set(table["status"]) == {"unstable"}, table[["run_id", "status", "status_reason"]]
    assert table["status_reason"].str.contains("interval").all()
    assert len(_stale_moves(ws, strict)) == len(table)


def _stale_moves(ws: Path, overrides: list[str]) -> list[str]:
    """The run folders `phonetrain stale` says the next workflow run moves aside."""
    p = subprocess.run([sys.executable, "-m", "phonetrain.cli", "stale", *overrides], cwd=ws,
                       env=env(ws), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return [ln.split(": ")[0].removeprefix("move aside ") for ln in p.stdout.splitlines()
            if ln.startswith("move aside ")]
