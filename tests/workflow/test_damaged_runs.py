"""A run folder damaged after it was measured (a trace cut to its header or to half its rows,
a dump deleted) is never tabulated as a measurement; `phonetrain stale` lists it, a dry run
moves nothing, and the next `snakemake all` moves exactly those folders aside (each with its
note) and re-measures them, then writes a complete summary and report; a further run is a
no-op."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from phonetrain.config import compose_sweep
from phonetrain.errors import StageError
from phonetrain.layout import Layout
from phonetrain.results.runs import folder_problems, read_run
from phonetrain.stages.aggregate import aggregate_study
from phonetrain.stages.params import expected_files, job_params, summary_outputs
from helpers.workflow import TINY, clone_workspace, env, planned, planned_jobs, snakemake

DAMAGED = {
    "mlp_16_16.cpu.none": "trace cut to its header",
    "mlp_16_16.opencl.baseline": "trace cut to half its rows",
    "mlp_784_256_128_16.opencl.baseline": "a dump deleted",
}
WHOLE = "mlp_784_256_128_16.cpu.none"


@pytest.fixture(scope="module")
def done(completed_workspace) -> Path:
    return completed_workspace


def _damage(rdir: Path, how: str) -> None:
    trace = rdir / "trace.csv"
    lines = trace.read_text().splitlines(keepends=True)
    if how == "trace cut to its header":
        trace.write_text(lines[0])
    elif how == "trace cut to half its rows":
        trace.write_text("".join(lines[: 1 + (len(lines) - 1) // 2]))
    else:
        sorted((rdir / "dumps").glob("*.f32"))[0].unlink()


def test_damaged_runs_are_never_tabulated_and_are_remeasured(done: Path, tmp_path: Path):
    ws = clone_workspace(done, tmp_path / "ws")
    R = ws / "results"
    for exp, how in DAMAGED.items():
        _damage(R / "runs" / "host" / exp, how)
    for exp in DAMAGED:
        row = read_run(R / "runs" / "host" / exp)["runs"].iloc[0]
        assert row["status"] == "failed" and "damaged" in row["status_reason"], row
    assert read_run(R / "runs" / "host" / WHOLE)["runs"].iloc[0]["status"] == "ok"

    st = subprocess.run([sys.executable, "-m", "phonetrain.cli", "stale", *TINY], cwd=ws,
                        env=env(ws), capture_output=True, text=True, timeout=300)
    assert st.returncode == 0, st.stderr
    moved = sorted(ln.split(":")[0] for ln in st.stdout.splitlines()
                   if ln.startswith("move aside "))
    assert moved == sorted(f"move aside results/runs/host/{e}" for e in DAMAGED), st.stdout
    assert all("damaged" in ln for ln in st.stdout.splitlines() if ln.startswith("move"))
    # Snakemake's own plan besides: the traces' trace.perfetto.json (an input changed)
    others = {ln.split(" ")[0] for ln in st.stdout.splitlines() if not ln.startswith("move")}
    assert others <= {"perfetto", "aggregate", "report"}, st.stdout

    jobs = planned_jobs(ws)  # a dry run reports, and moves nothing
    assert not [w for r, w in jobs if r == "train"]
    assert not (R / "quarantine").exists()
    assert all((R / "runs" / "host" / e / "run.json").exists() for e in DAMAGED)

    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stderr[-3000:]
    notes = {json.loads(n.read_text())["from"]: json.loads(n.read_text())
             for n in (R / "quarantine").glob("*/runs/host/*.why.json")}
    assert set(notes) == {f"runs/host/{e}" for e in DAMAGED}
    assert all(n["why"].startswith("damaged") for n in notes.values())
    trains = [ln for ln in p.stderr.splitlines() if ln.strip() in ("rule train:",
                                                                   "localrule train:")]
    assert len(trains) == len(DAMAGED), p.stderr[-3000:]
    assert (R / "summary" / "COMPLETE").exists() and (R / "report" / "COMPLETE").exists()
    runs = pd.read_parquet(R / "summary" / "runs.parquet").set_index("run_id")
    assert (runs["status"] == "ok").all(), runs[["status", "status_reason"]]
    assert (runs["kernel_ms"].fillna(1) > 0).all() and (runs["iteration_median_ms"] > 0).all()
    for exp in DAMAGED:
        assert folder_problems(R / "runs" / "host" / exp) == []
    assert planned(ws) == {}  # the re-measurement left a consistent workflow


def test_a_damaged_run_keeps_the_summary_from_being_complete(done: Path, tmp_path: Path,
                                                            monkeypatch):
    """The aggregate rule refuses the COMPLETE marker when a run has no valid measurement."""
    ws = clone_workspace(done, tmp_path / "ws")
    monkeypatch.chdir(ws)  # the workflow's results folder, spelled as the workflow spells it
    sweep = compose_sweep(TINY, ws / "conf")
    _damage(ws / "results" / "runs" / "host" / WHOLE, "a dump deleted")
    L = Layout(sweep.results_dir)
    complete, report_complete = Path(L.summary_complete()), Path(L.report_complete())
    assert complete.exists() and report_complete.exists()  # from the complete study
    with pytest.raises(StageError, match=f"host/{WHOLE}: damaged") as e:
        aggregate_study(job_params(sweep), L, expected_files(sweep), summary_outputs(sweep),
                        str(complete))
    assert "mlp_16_16" not in str(e.value)  # only the damaged run is named
    # neither the old summary's marker nor the report's survives a failed aggregation
    assert not complete.exists() and not report_complete.exists()
