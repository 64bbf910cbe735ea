"""A workflow killed hard (SIGKILL) in the middle of a measurement: the next invocation stops
on Snakemake's lock naming `--unlock`, docs/workflow.md's Failures section says so, and after the
unlock the next run finishes the study and leaves no `.train-*` working folder behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers.workflow import (REPO, SNAKEMAKE, TINY, clone_workspace, env,
                           planned, snakemake)

SLOW = TINY + ["measure.cooldown_s=60"]  # each measurement waits a minute inside train


@pytest.fixture(scope="module")
def done(completed_workspace) -> Path:
    return completed_workspace


def _leftovers(R: Path) -> list[Path]:
    return list((R / "runs").glob("*/*/.train-*"))


def test_after_sigkill_unlock_and_rerun_leave_nothing_behind(done: Path, tmp_path: Path):
    ws = clone_workspace(done, tmp_path / "ws")
    R = ws / "results"
    cmd = [str(SNAKEMAKE), "--cores", "1", "all", "--config", f"overrides={json.dumps(SLOW)}"]
    proc = subprocess.Popen(cmd, cwd=ws, env=env(ws), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while not _leftovers(R) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _leftovers(R), "the workflow ended before a measurement began"

    locked = snakemake(ws, "all")
    assert locked.returncode != 0 and "--unlock" in locked.stdout + locked.stderr
    unlock = snakemake(ws, "--unlock")
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stderr[-3000:]
    assert _leftovers(R) == []
    assert (R / "report" / "COMPLETE").exists() and planned(ws) == {}


def test_failures_docs_say_how_to_recover():
    text = (REPO / "docs" / "workflow.md").read_text()
    failures = text[text.index("## Failures"):]
    for needle in ("--unlock", "phonetrain refresh", "phonetrain stale", "snakemake -n"):
        assert needle in failures, needle
