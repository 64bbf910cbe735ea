"""Fixture of the whole-workflow tests: one completed run of the tiny sweep, shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.shared import once_per_run
from helpers.workflow import make_workspace, snakemake


def _complete(folder: Path, runner: Path) -> str:
    ws = make_workspace(folder / "ws", runner)
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-5000:]
    return str(ws)


@pytest.fixture(scope="session")
def completed_workspace(tmp_path_factory, worker_id, runner) -> Path:
    """A workspace where ``snakemake all`` on the tiny sweep has run (once per test run, for
    every worker; the session's runner build seeds its compile cache); read-only: tests that
    change it work on a :func:`helpers.workflow.clone_workspace` copy."""
    return Path(once_per_run(tmp_path_factory, worker_id, "completed-workspace",
                             lambda folder: _complete(folder, runner)))
