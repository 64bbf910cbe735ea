"""An unstable measurement (a host slower than its quiet figure) is re-measured by its train
job at most ``measure.max_attempts`` times, and not at all while the host stays contended to
the end of an attempt, then kept as such with its reason and figures; an
interval wider than the target is measured again the same way, then kept usable with a note: a
later workflow run plans nothing by itself, a new device plans only its own jobs, and
``phonetrain refresh --unstable`` asks for exactly the unstable runs again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from click.testing import CliRunner

from phonetrain import layout
from phonetrain.cli import main
from phonetrain.results import runs
from phonetrain.results.check import run_finding
from helpers import REPO
from helpers.adb import connect_vdev, disconnect_vdev
from helpers.workflow import TINY, clone_workspace, env, planned, planned_jobs, snakemake

MODEL = "mlp_16_16"


def _plant_quiet_figure(results: Path) -> None:
    """A quiet probe figure no host reaches, for every thread count: every run's probe reads
    the host slower than it."""
    (results / "probe").mkdir(parents=True, exist_ok=True)
    (results / "probe/host.json").write_text(
        json.dumps({"quiet_ms": {str(t): 1e-6 for t in range(1, 257)}}))


RUN = ["run", f"model={MODEL}", "device=host", "backend=cpu", "measure.warmup=1",
       "measure.iterations=3", "measure.max_iterations=5", "measure.max_other_cpu_share=1",
       "measure.max_attempts=2", "measure.progress=false"]


def test_a_contended_run_is_kept_unstable_and_shown(seeded_results: Path):
    R = seeded_results
    _plant_quiet_figure(R)
    res = CliRunner().invoke(main, RUN + [f"results_dir={R}", "measure.ci_target=0"])
    assert res.exit_code == 0, (res.output, res.exception)
    run_dir = R / "runs" / "host" / f"{MODEL}.cpu.none"
    m = json.loads((run_dir / layout.MEASUREMENT).read_text())
    assert m["unstable"] and "slower than its quiet figure" in m["reasons"][0]
    # contended to the end of its first attempt (the planted figure): not measured again
    assert m["attempts"] == 1 and m["max_attempts"] == 2 and m["earlier_reasons"] == []
    assert "still contended" in m["stopped_contended"]
    params = json.loads((run_dir / layout.PARAMS).read_text())
    assert run_finding(run_dir, params) is None   # kept: the workflow never moves it aside
    row = runs.read_run(run_dir)["runs"].iloc[0]
    assert row["status"] == "unstable" and "quiet figure" in row["status_reason"]
    assert row["attempts"] == 1
    assert row["iteration_low_ms"] <= row["iteration_ms"] <= row["iteration_high_ms"]
    assert row["verify_max_abs_err"] <= row["verify_tolerance"]
    # `phonetrain run` prints the unstable run's timing, marked, with its status
    assert "no timings" not in res.output
    assert "status: unstable: the host ran" in res.output, res.output
    assert f"{row['iteration_ms']:.3f} ms [" in res.output
    assert "UNSTABLE: for the record only" in res.output and "attempts 1" in res.output


def test_a_too_wide_interval_is_measured_again_then_kept_usable_with_a_note(
        seeded_results: Path):
    R = seeded_results
    res = CliRunner().invoke(main, RUN + [f"results_dir={R}", "measure.ci_target=1e-9",
                                          "measure.max_probe_slowdown=0"])
    assert res.exit_code == 0, (res.output, res.exception)
    run_dir = R / "runs" / "host" / f"{MODEL}.cpu.none"
    m = json.loads((run_dir / layout.MEASUREMENT).read_text())
    assert not m["unstable"] and m["wide_interval"] and "wider than +-1e-07%" in m["notes"][0]
    assert m["attempts"] == 2 and "wider" in m["earlier_reasons"][0][0]
    assert json.loads((run_dir / layout.RUN).read_text())["iterations"] == 5
    row = runs.read_run(run_dir)["runs"].iloc[0]
    assert row["status"] == "ok" and "wider than" in row["status_reason"]
    assert row["iteration_low_ms"] <= row["iteration_ms"] <= row["iteration_high_ms"]
    assert "status: ok: the estimate's 95% interval" in res.output, res.output
    assert "UNSTABLE" not in res.output


def test_a_stable_run_is_measured_once(seeded_results: Path):
    R = seeded_results
    res = CliRunner().invoke(main, ["run", f"model={MODEL}", "device=host", "backend=cpu",
                                    f"results_dir={R}", "measure.warmup=1",
                                    "measure.iterations=3", "measure.ci_target=0",
                                    "measure.max_other_cpu_share=1",
                                    "measure.max_probe_slowdown=0", "measure.progress=false"])
    assert res.exit_code == 0, (res.output, res.exception)
    m = json.loads((R / "runs/host" / f"{MODEL}.cpu.none" / layout.MEASUREMENT).read_text())
    assert not m["unstable"] and m["attempts"] == 1 and m["earlier_reasons"] == []
    assert "status: ok" in res.output and "UNSTABLE" not in res.output


def _plant_unstable(run_dir: Path) -> None:
    """As if the host had been slower than its quiet figure in every attempt."""
    m = json.loads((run_dir / layout.MEASUREMENT).read_text())
    assert not m["unstable"]
    m.update(unstable=True, attempts=2, other_cpu_share=0.9,
             reasons=["the host ran slower than its quiet figure (planted)"])
    (run_dir / layout.MEASUREMENT).write_text(json.dumps(m))


def _refresh_unstable(ws: Path) -> list[str]:
    p = subprocess.run([sys.executable, "-m", "phonetrain.cli", "refresh", "--unstable"],
                       cwd=ws, env=env(ws), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return sorted(ln.split(":")[0] for ln in p.stdout.splitlines() if "moved aside" in ln)


def test_unstable_runs_plan_nothing_until_refresh_unstable_asks(completed_workspace, tmp_path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    run_dir = ws / "results" / "runs" / "host" / f"{MODEL}.cpu.none"
    _plant_unstable(run_dir)
    assert _stale_moves(ws, TINY) == []
    assert planned(ws) == {}   # snakemake -n all plans nothing for the unstable run
    assert _refresh_unstable(ws) == [f"host/{MODEL}.cpu.none"]
    [note] = (ws / "results" / "quarantine").glob("*/runs/host/*.why.json")
    assert "refresh --unstable" in json.loads(note.read_text())["why"]
    jobs = [(r, w) for r, w in planned_jobs(ws) if w]
    trains = [w for r, w in jobs if r == "train"]
    assert trains == [{"device": "host", "exp": f"{MODEL}.cpu.none"}], jobs
    assert {w.get("exp") for r, w in jobs if "exp" in w} == {f"{MODEL}.cpu.none"}, jobs
    assert _refresh_unstable(ws) == []   # nothing unstable left to ask for


def test_a_new_phone_beside_unstable_runs_plans_only_its_jobs(completed_workspace, tmp_path,
                                                              adb_server):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    for exp in (f"{MODEL}.cpu.none", f"{MODEL}.opencl.baseline"):
        _plant_unstable(ws / "results" / "runs" / "host" / exp)
    vd = connect_vdev(adb_server, tmp_path / "phone")
    try:
        host = yaml.safe_load((REPO / "conf/device/host.yaml").read_text())
        cfg = dict(host, name="vphone", transport="adb", serial=vd.serial, toolchain="host")
        (ws / "conf/device/vphone.yaml").write_text(yaml.safe_dump(cfg))
        over = TINY + ["sweep.devices=[host,vphone]"]
        jobs = [(r, w) for r, w in planned_jobs(ws, over) if w.get("device")]
        assert jobs, "the new phone's jobs are planned"
        assert {w["device"] for _, w in jobs} == {"vphone"}, jobs
    finally:
        disconnect_vdev(adb_server, vd)


def test_a_study_measured_unstable_is_kept_and_refreshed_on_request(completed_workspace,
                                                                    tmp_path):
    """Runs that end unstable within a workflow run (a planted quiet figure no host reaches;
    each measured once: its host contended to the end of the attempt) are listed unstable (not failed, not ok) in that
    run's summary; the next invocation plans nothing; refresh --unstable asks for every one of
    them."""
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    _plant_quiet_figure(ws / "results")
    strict = TINY + ["measure.max_probe_slowdown=1.5", "measure.max_attempts=2"]
    p = snakemake(ws, "all", overrides=strict)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    table = pd.read_parquet(ws / "results" / "summary" / "runs.parquet")
    assert set(table["status"]) == {"unstable"}, table[["run_id", "status", "status_reason"]]
    assert table["status_reason"].str.contains("quiet figure").all()
    assert (table["attempts"] == 1).all()
    assert table["iteration_ms"].notna().all()
    assert _stale_moves(ws, strict) == []
    assert planned(ws, strict) == {}
    moved = _refresh_unstable(ws)
    assert moved == sorted(table["run_id"])
    assert planned(ws, strict)["train"] == len(table)


def _stale_moves(ws: Path, overrides: list[str]) -> list[str]:
    """The run folders `phonetrain stale` says the next workflow run moves aside."""
    p = subprocess.run([sys.executable, "-m", "phonetrain.cli", "stale", *overrides], cwd=ws,
                       env=env(ws), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return [ln.split(": ")[0].removeprefix("move aside ") for ln in p.stdout.splitlines()
            if ln.startswith("move aside ")]
