"""The study's jobs do not depend on how its results folder is spelled or where it lies: job
params hold paths relative to the results folder (:mod:`phonetrain.stages.specs`); nor on
where the virtual environment lives: job commands name the interpreter by a variable
(:mod:`phonetrain.stages.job`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd

from helpers.workflow import TINY, clone_workspace, env, planned
from phonetrain.results import schema


def test_a_moved_study_or_the_other_spelling_of_its_results_folder_plans_nothing(
        completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "moved")  # the study, moved
    assert planned(ws) == {}
    assert planned(ws, TINY + [f"results_dir={ws / 'results'}"]) == {}
    st = cli(ws, "stale")  # the check's findings and Snakemake's plan: both empty
    assert st.returncode == 0 and st.stdout == "", st.stdout + st.stderr


def test_a_recreated_venv_in_a_moved_checkout_plans_nothing(completed_workspace: Path,
                                                            tmp_path: Path):
    """The checkout copied elsewhere with its results and Snakemake's records, and a new
    virtual environment there (the packages of this one, found through a .pth file as an
    install would): Snakemake's dry run plans no job (no "Code has changed")."""
    ws = clone_workspace(completed_workspace, tmp_path / "elsewhere")
    venv = ws / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ours = sysconfig.get_path("purelib")
    Path(site, "phonetrain-test.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    assert str(py) != sys.executable
    p = subprocess.run([str(py), "-m", "snakemake", "--cores", "2", "--dry-run", "--quiet",
                        "rules", "--config", f"overrides={json.dumps(TINY)}"],
                       cwd=ws, env=env(ws), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Nothing to be done" in p.stdout + p.stderr, p.stdout + p.stderr


def test_a_copied_results_folder_aggregates_to_the_same_tables(completed_workspace: Path,
                                                               tmp_path: Path):
    """`phonetrain aggregate --results COPY` on the results folder copied elsewhere, named
    absolutely and relatively: the same rows in every summary table."""
    R = completed_workspace / "results"
    want = {t: len(pd.read_parquet(R / "summary" / f"{t}.parquet")) for t in schema.TABLES}
    assert want["runs"] and want["gemm"] and want["bandwidth"]
    for i, spelled in enumerate(["absolute", "relative"]):
        copy = tmp_path / f"archive{i}" / "study"
        shutil.copytree(R, copy, symlinks=True)
        shutil.rmtree(copy / "summary")
        name = str(copy) if spelled == "absolute" else os.path.relpath(copy, completed_workspace)
        p = cli(completed_workspace, "aggregate", "--results", name)
        assert p.returncode == 0, p.stdout + p.stderr
        got = {t: len(pd.read_parquet(copy / "summary" / f"{t}.parquet")) for t in schema.TABLES}
        assert got == want, spelled
        runs = pd.read_parquet(copy / "summary" / "runs.parquet")
        assert set(runs["status"]) == set(pd.read_parquet(R / "summary" / "runs.parquet")["status"])


def cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phonetrain.cli", *args, *TINY], cwd=ws,
                          env=env(ws), capture_output=True, text=True, timeout=600)
