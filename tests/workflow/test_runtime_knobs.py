"""Run-time knobs (measure.timeout_s, measure.progress) reach the jobs through the environment
(phonetrain.stages.job.Runtime), never as rule code or params: changing them reruns nothing,
yet a job obeys them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from phonetrain.config import compose_sweep
from phonetrain.stages.params import job_params
from helpers.workflow import TINY, clone_workspace, env, planned, snakemake

KNOBS = ("timeout_s", "progress")


@pytest.fixture(scope="module")
def done(completed_workspace) -> Path:
    return completed_workspace


@pytest.mark.parametrize("override", ["measure.timeout_s=1234", "measure.progress=true"])
def test_changing_a_runtime_knob_plans_no_job(done: Path, override: str):
    assert planned(done, TINY + [override]) == {}


def test_no_job_params_hold_a_runtime_knob():
    jp = job_params(compose_sweep(TINY))
    text = json.dumps({kind: {str(k): v for k, v in group.items()}
                       for kind, group in jp.items()}, default=str)
    for knob in KNOBS:
        assert f'"{knob}"' not in text, knob


def test_a_job_obeys_the_knob(done: Path, tmp_path: Path):
    """measure.progress=true makes the re-measured run print its per-iteration lines."""
    ws = clone_workspace(done, tmp_path / "ws")
    p = subprocess.run([sys.executable, "-m", "phonetrain.cli", "refresh",
                        "host/mlp_16_16.cpu.none"], cwd=ws, env=env(ws), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    # the re-measured run's train job (what prints them), not the summary and report after it
    s = snakemake(ws, "results/runs/host/mlp_16_16.cpu.none/run.json",
                  overrides=TINY + ["measure.progress=true"])
    assert s.returncode == 0, s.stderr[-3000:]
    assert "iteration 4/4" in s.stderr and "wall_ms=" in s.stderr, s.stderr[-3000:]
