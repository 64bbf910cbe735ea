"""A one-off `phonetrain run` after a complete study (the README's example, with its own
settings) disturbs none of the workflow's files; the next `snakemake all` moves that run folder
aside and re-measures exactly that run under the study's settings, and then is a no-op.
`phonetrain stale` says what the next run does and why; `phonetrain refresh` moves one run
aside, so it is measured again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers.workflow import REPO, TINY, clone_workspace, env, planned, planned_jobs, snakemake

EXP = "mlp_16_16.opencl.baseline"
STUDY = [o for o in TINY if not o.startswith("sweep=")]


@pytest.fixture(scope="module")
def done(completed_workspace) -> Path:
    return completed_workspace


def _cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phonetrain.cli", *args], cwd=ws, env=env(ws),
                          capture_output=True, text=True, timeout=300)


def _mtimes(R: Path) -> dict[str, int]:
    """The workflow's shared products (everything but run folders, logs and one-off files)."""
    keep = ("build", "data", "plans", "deploy", "gemm", "peaks", "bandwidth", "summary")
    return {str(p): p.stat().st_mtime_ns for k in keep for p in (R / k).rglob("*")
            if p.is_file()}


def test_one_off_run_disturbs_nothing_and_the_workflow_picks_it_up(done: Path, tmp_path: Path):
    ws = clone_workspace(done, tmp_path / "ws")
    R = ws / "results"
    before = _mtimes(R)
    p = _cli(ws, "run", "model=mlp_16_16", "device=host", "backend=opencl", "kernel=baseline",
             *STUDY, "measure.iterations=5")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verify max_abs_err" in p.stdout and "(ok)" in p.stdout
    assert "iteration: median" in p.stdout and "p25-p75" in p.stdout, p.stdout
    assert "data movement:" in p.stdout and "% of the iteration time" in p.stdout, p.stdout
    assert _mtimes(R) == before  # no runner, build, data, plan or manifest was rewritten
    rdir = R / "runs" / "host" / EXP
    assert json.loads((rdir / "params.json").read_text())["measure"]["iterations"] == 5

    st = _cli(ws, "stale", *TINY)
    assert st.returncode == 0, st.stderr
    assert st.stdout.splitlines()[0].startswith(
        f"move aside results/runs/host/{EXP}: measured under other settings"), st.stdout
    assert "iterations" in st.stdout and "cpu.none" not in st.stdout, st.stdout
    # Snakemake's own plan besides: only what reads the new trace (no build, plan or data)
    others = {ln.split(" ")[0] for ln in st.stdout.splitlines()[1:]}
    assert others <= {"perfetto", "aggregate", "report"}, st.stdout

    s = snakemake(ws, "all")
    assert s.returncode == 0, s.stderr[-3000:]
    ran = {ln.strip().removeprefix("local") for ln in s.stderr.splitlines()
           if ln.strip().removeprefix("local").startswith("rule ")}
    assert ran <= {"rule deploy:", "rule train:", "rule perfetto:", "rule aggregate:",
                   "rule report:", "rule all:"}, ran
    assert "rule train:" in ran, ran
    [kept] = (R / "quarantine").glob(f"*/runs/host/{EXP}")  # the one-off measurement, kept
    assert json.loads((kept / "params.json").read_text())["measure"]["iterations"] == 5
    runs = pd.read_parquet(R / "summary" / "runs.parquet").set_index("run_id")
    assert (runs["status"] == "ok").all(), runs[["status", "status_reason"]]
    assert runs.loc[f"host/{EXP}", "iterations"] == 3
    assert json.loads((rdir / "params.json").read_text())["measure"]["iterations"] == 3
    assert planned(ws) == {}
    assert _cli(ws, "stale", *TINY).stdout == ""  # nothing stale left


def test_refresh_remeasures_one_run(done: Path, tmp_path: Path):
    ws = clone_workspace(done, tmp_path / "ws")
    p = _cli(ws, "refresh", "host/mlp_16_16.cpu.none")
    assert p.returncode == 0, p.stderr
    assert "the next snakemake all measures it again" in p.stdout, p.stdout
    [note] = (ws / "results" / "quarantine").glob("*/runs/host/mlp_16_16.cpu.none.why.json")
    assert json.loads(note.read_text())["why"] == "asked by phonetrain refresh"
    st = _cli(ws, "stale", *TINY).stdout
    assert "train results/runs/host/mlp_16_16.cpu.none/run.json" in st, st
    jobs = planned_jobs(ws)
    assert [w["exp"] for r, w in jobs if r == "train"] == ["mlp_16_16.cpu.none"]
    bad = _cli(ws, "refresh", "host/nosuch.cpu.none")
    assert bad.returncode == 1 and "DEVICE/EXPERIMENT" in bad.stderr, bad.stderr


def test_documented_results_folders_are_ignored_by_git():
    """docs/workflow.md keeps studies apart with results_dir=results-test: git ignores it."""
    for path in ("results-test/summary/runs.parquet", "results/runs/host/x/run.json"):
        p = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
        assert p.returncode == 0, path
