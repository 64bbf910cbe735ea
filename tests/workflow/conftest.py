"""Fixture of the whole-workflow tests: one completed run of the tiny sweep, shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.workflow import make_workspace, snakemake


@pytest.fixture(scope="session")
def completed_workspace(tmp_path_factory) -> Path:
    """A workspace where ``snakemake all`` on the tiny sweep has run (once per session);
    tests that change it work on a :func:`helpers.workflow.clone_workspace` copy."""
    ws = make_workspace(tmp_path_factory.mktemp("workflow") / "ws")
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-5000:]
    return ws
