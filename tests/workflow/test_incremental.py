"""Incremental reruns, checked with Snakemake dry runs on a completed tiny-sweep workspace:
a no-op plans nothing, a kernel edit plans only that version's jobs, a model edit only that
model's, a new device file + override only the new device's; a dry run changes no file."""

from __future__ import annotations

from pathlib import Path

from helpers.workflow import TINY, clone_workspace, planned, planned_jobs

# Jobs that depend on every run: they rerun whenever any run does.
SUMMARY_JOBS = {"aggregate", "report", "all"}


def _touched(jobs, key: str) -> set[str]:
    """Values of one wildcard over the planned jobs that have it."""
    return {w[key] for _, w in jobs if key in w}


def test_noop_rerun_plans_nothing(completed_workspace: Path):
    assert planned(completed_workspace) == {}


def test_dry_run_with_other_overrides_changes_nothing(completed_workspace: Path):
    other = planned(completed_workspace, TINY + ["measure.iterations=7", "model.lr=0.01"])
    assert other["train"] == 4 and other["lower"] == 4
    # the dry run above wrote nothing that triggers a rerun, and moved no run folder aside
    # (measured under other settings than those overrides, each would be at a real run)
    assert not (completed_workspace / "results" / "quarantine").exists()
    assert planned(completed_workspace) == {}


def test_kernel_edit_plans_only_that_versions_jobs(completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    f = ws / "src" / "kernels" / "baseline" / "elementwise.cl"
    f.write_text(f.read_text() + "\n// an edit\n")
    jobs = planned_jobs(ws)
    rules = {r for r, _ in jobs}
    assert {"build_kernels", "train", "aggregate", "report"} <= rules
    assert not rules & {"build_runner", "lower", "data", "bandwidth"}
    assert _touched(jobs, "exp") == {"mlp_784_256_128_16.opencl.baseline",
                                     "mlp_16_16.opencl.baseline"}
    assert _touched(jobs, "kernel") | _touched(jobs, "version") <= {"baseline"}
    assert sum(r == "train" for r, _ in jobs) == 2


def test_runner_source_edit_plans_the_runner_and_everything_it_runs(completed_workspace: Path,
                                                                   tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    f = ws / "src" / "runner" / "util.h"
    f.write_text(f.read_text() + "\n/* an edit */\n")
    counts = planned(ws)
    assert counts["build_runner"] == 1 and counts["train"] == 4
    assert "lower" not in counts and "data" not in counts


def test_summary_schema_change_rewrites_the_summary_and_nothing_else(completed_workspace: Path,
                                                                     tmp_path: Path):
    """A phonetrain whose tables differ (here: one more run status) rewrites the summary
    tables it finds, instead of leaving files its report stage would refuse; no run reruns."""
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    f = ws / "src" / "phonetrain" / "results" / "schema.py"
    f.write_text(f.read_text().replace('"unstable", "oom")', '"unstable", "oom", "new")', 1))
    assert planned(ws) == {"aggregate": 1, "report": 1, "all": 1}


def test_model_edit_plans_only_that_models_jobs(completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    f = ws / "conf" / "model" / "mlp_16_16.yaml"
    f.write_text(f.read_text().replace("lr: 0.05", "lr: 0.02"))
    jobs = planned_jobs(ws)
    assert _touched(jobs, "exp") == {"mlp_16_16.cpu.none", "mlp_16_16.opencl.baseline"}
    rules = {r for r, _ in jobs}
    assert not rules & {"build_runner", "build_kernels", "bandwidth", "data"}
    assert sum(r == "train" for r, _ in jobs) == 2


def test_new_device_plans_only_its_jobs(completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    host = (ws / "conf" / "device" / "host.yaml").read_text()
    (ws / "conf" / "device" / "bench2.yaml").write_text(host.replace("name: host", "name: bench2"))
    jobs = planned_jobs(ws, TINY + ["sweep.devices=[host,bench2]"])
    assert _touched(jobs, "device") == {"bench2"}
    rules = {r for r, _ in jobs}
    assert {"build_runner", "build_kernels", "bandwidth", "train"} <= rules
    assert not rules & {"lower", "data"}  # plans and data do not depend on the device
    assert {r for r, w in jobs if "device" not in w} <= SUMMARY_JOBS
    assert sum(r == "train" for r, _ in jobs) == 4


def test_threads_rerun_the_runs_but_never_relower_the_plans(completed_workspace: Path):
    """measure.threads is a measurement setting of a run, not part of what a plan computes."""
    counts = planned(completed_workspace, TINY + ["measure.threads=1"])
    assert counts["train"] == 4 and "lower" not in counts and "data" not in counts
