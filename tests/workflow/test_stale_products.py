"""A partial report after a kernel edit that does not compile: the version's kernel build is
listed as failed with the compiler's reason (not dropped), its runs as failed with that
reason, the GEMM sweep measured from the previous source is moved aside (it records the
previous kernel hash), and `phonetrain stale` lists what the next `snakemake all` reruns: the
build and that GEMM sweep (both missing); the other versions and devices keep their results. Nothing is written into run
folders by the aggregate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers.workflow import TINY, clone_workspace, env, snakemake

# tiled on its default settings (measure.tune=false: its tune job writes them, measuring
# nothing): what fails here is the version's build, not its tuning
WITH_TILED = TINY + ["sweep.kernels=[baseline,tiled]", "measure.tune=false"]


@pytest.fixture(scope="module")
def done(completed_workspace) -> Path:
    return completed_workspace


def test_failed_edit_leaves_no_stale_row_presented_as_current(done: Path, tmp_path: Path):
    ws = clone_workspace(done, tmp_path / "ws")
    R = ws / "results"
    # the version's GEMM sweep measured from its source as it is (with its build): what the
    # failed edit must move aside; its runs need not be measured first (after the edit they
    # are failed with the build's reason whether they were or not)
    p = snakemake(ws, "results/gemm/host/tiled.json", overrides=WITH_TILED)
    assert p.returncode == 0, p.stderr[-3000:]
    measured = json.loads((R / "gemm" / "host" / "tiled.json").read_text())
    assert measured["status"] == "ok" and any(r["status"] == "ok" for r in measured["rows"])

    src = ws / "src" / "kernels" / "tiled" / "gemm.cl"
    src.write_text(src.read_text().replace("{", "{ this is not OpenCL C;", 1))
    p = snakemake(ws, "all", "--keep-going", overrides=WITH_TILED)
    assert p.returncode != 0 and not (R / "summary" / "COMPLETE").exists()
    # the GEMM sweep measured from the previous source was moved aside at the start (its
    # settings record the old kernel hash), not left where the summary would read it
    assert not (R / "gemm" / "host" / "tiled.json").exists()
    moved = list((R / "quarantine").glob("*/gemm/host/tiled.json"))
    assert len(moved) == 1, list((R / "quarantine").rglob("*"))
    assert "kernel_hash" in moved[0].with_name("tiled.json.why.json").read_text()

    gemm = pd.read_parquet(R / "summary" / "gemm.parquet")
    assert gemm[gemm["kernel"].isin(["baseline", "cpu"])]["status"].eq("ok").any()

    builds = pd.read_parquet(R / "summary" / "builds.parquet")
    row = builds[builds["kernel"] == "tiled"]
    assert list(row["status"]) == ["failed"] and "failed to build" in row["log"].iloc[0]
    assert (builds[builds["kernel"] == "baseline"]["status"] == "ok").all()
    assert builds[builds["kernel"] == "baseline"]["cached"].eq(False).all()

    runs = pd.read_parquet(R / "summary" / "runs.parquet").set_index("run_id")
    tiled_runs = runs.loc[[i for i in runs.index if i.endswith(".tiled")]]
    assert set(tiled_runs["status"]) == {"failed"}
    assert tiled_runs["status_reason"].str.contains("failed to build").all(), tiled_runs
    for rid in tiled_runs.index:  # the aggregate wrote nothing into the run folders
        assert not (R / "runs" / rid / "failed.json").exists()
    assert (runs.loc[[i for i in runs.index if not i.endswith(".tiled")], "status"] == "ok").all()
    md = (R / "report" / "report.md").read_text()
    builds_section = md[md.index("Kernel builds"):]
    assert any("tiled" in ln and "failed" in ln for ln in builds_section.splitlines()), \
        builds_section[:2000]

    st = subprocess.run([sys.executable, "-m", "phonetrain.cli", "stale", *WITH_TILED], cwd=ws,
                        env=env(ws), capture_output=True, text=True, timeout=300)
    assert st.returncode == 0, st.stderr
    planned = {ln.split(":")[0] for ln in st.stdout.splitlines()}
    assert "build_kernels results/build/host/kernels/tiled/build.json" in planned, st.stdout
    assert "gemm results/gemm/host/tiled.json" in planned, st.stdout
    assert not any(ln.startswith("move aside") for ln in st.stdout.splitlines())
