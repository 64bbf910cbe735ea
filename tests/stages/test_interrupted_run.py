"""A one-off `phonetrain run` interrupted (SIGINT to it alone) while it measures stops its runner
and leaves the previous measurement beside the settings it was measured with: params.json goes in with the
measurement, and a plan that changed at deploy marks the folder damaged, never a measurement
of the new settings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import REPO, STEADY
from phonetrain.cli import main
from phonetrain.results.check import run_finding
from phonetrain.results.runs import folder_problems, read_run

MODEL = "mlp_784_256_128_16"
BASE = ["run", f"model={MODEL}", "device=host", "backend=cpu", "measure.warmup=1",
        "measure.progress=false", *STEADY]


def _interrupt_when_measuring(args: list[str], rdir: Path, env: dict) -> int:
    """Start ``phonetrain run``, wait until its runner process measures (a ``runner run``
    whose --out is under ``rdir``), then send SIGINT to the CLI alone."""
    # SIGINT at its default in the CLI: a test run started as a background job of a shell
    # without job control inherits it ignored, and Python then installs no KeyboardInterrupt
    p = subprocess.Popen([sys.executable, "-m", "phonetrain.cli", *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while (not [c for c in _processes_naming(rdir) if "runner run" in c]
           and p.poll() is None and time.monotonic() < deadline):
        time.sleep(0.05)
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    return p.returncode


def _processes_naming(path: Path) -> list[str]:
    """Command lines of live processes that name ``path`` (the runner's --out is under it)."""
    out = []
    for f in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = f.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:   # the process ended meanwhile
            continue
        if str(path) in cmd:
            out.append(cmd)
    return out


def test_interrupted_run_keeps_the_measurement_beside_its_own_settings(tmp_path: Path,
                                                                      seeded_results: Path):
    R = seeded_results
    # a private lock folder: never wait on another workflow's measurement of this host
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"),
           "PHONETRAIN_LOCK_DIR": str(tmp_path / "locks")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PHONETRAIN_LOCK_DIR", env["PHONETRAIN_LOCK_DIR"])
        res = CliRunner().invoke(main, [*BASE, f"results_dir={R}", "measure.iterations=3"])
    assert res.exit_code == 0, (res.output, res.exception)
    rdir = R / "runs" / "host" / f"{MODEL}.cpu.none"
    before = json.loads((rdir / "params.json").read_text())
    measured = (rdir / "run.json").read_bytes()

    rc = _interrupt_when_measuring([*BASE, f"results_dir={R}", "measure.iterations=200000",
                                    "measure.max_iterations=200000"], rdir, env)
    assert rc != 0
    assert not _processes_naming(R), "the interrupted run left its runner running"
    assert (rdir / "run.json").read_bytes() == measured
    assert json.loads((rdir / "params.json").read_text()) == before
    assert not list(rdir.glob(".train-*"))
    # the deploy of the interrupted run replaced plan.json: the folder no longer holds a
    # measurement of its plan, so it is not tabulated and the check moves it aside to be re-measured
    problems = folder_problems(rdir)
    assert any("not the plan this run measured" in p for p in problems), problems
    assert run_finding(rdir, before).startswith("damaged")
    row = read_run(rdir)["runs"].iloc[0]
    assert row["status"] == "failed" and row["iterations"] != 200000
