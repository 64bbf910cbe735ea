"""A partial report after a kernel edit that does not compile: the version's kernel build is
listed as failed (not dropped), and its GEMM sweep, measured from the previous source, is not
presented as a measurement (its rows say why), so no guideline quotes it; the other versions
and devices keep their current results."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from helpers.workflow import TINY, clone_workspace, snakemake

WITH_TILED = TINY + ["sweep.kernels=[baseline,tiled]"]


@pytest.fixture(scope="module")
def done(completed_workspace) -> Path:
    return completed_workspace


def test_failed_edit_leaves_no_stale_row_presented_as_current(done: Path, tmp_path: Path):
    ws = clone_workspace(done, tmp_path / "ws")
    R = ws / "results"
    p = snakemake(ws, "all", overrides=WITH_TILED)
    assert p.returncode == 0, p.stderr[-3000:]
    gemm = pd.read_parquet(R / "summary" / "gemm.parquet")
    assert (gemm[gemm["kernel"] == "tiled"]["status"] == "ok").any()

    src = ws / "src" / "kernels" / "tiled" / "gemm.cl"
    src.write_text(src.read_text().replace("{", "{ this is not OpenCL C;", 1))
    p = snakemake(ws, "all", "--keep-going", overrides=WITH_TILED)
    assert p.returncode != 0 and not (R / "summary" / "COMPLETE").exists()
    assert (R / "gemm" / "host" / "tiled.json").exists()  # left from the previous source

    gemm = pd.read_parquet(R / "summary" / "gemm.parquet")
    tiled = gemm[gemm["kernel"] == "tiled"]
    assert len(tiled) == 1 and tiled["status"].iloc[0] == "error", tiled
    assert "not current" in tiled["status_reason"].iloc[0]
    assert gemm[gemm["kernel"].isin(["baseline", "cpu"])]["status"].eq("ok").any()

    builds = pd.read_parquet(R / "summary" / "builds.parquet")
    row = builds[builds["kernel"] == "tiled"]
    assert list(row["status"]) == ["failed"] and "failed to build" in row["log"].iloc[0]
    assert (builds[builds["kernel"] == "baseline"]["status"] == "ok").all()
    assert builds[builds["kernel"] == "baseline"]["cached"].eq(False).all()

    runs = pd.read_parquet(R / "summary" / "runs.parquet").set_index("run_id")
    assert set(runs.loc[[i for i in runs.index if i.endswith(".tiled")], "status"]) == {"failed"}
    assert (runs.loc[[i for i in runs.index if not i.endswith(".tiled")], "status"] == "ok").all()
    md = (R / "report" / "report.md").read_text()
    builds_section = md[md.index("Kernel builds"):]
    assert any("tiled" in ln and "failed" in ln for ln in builds_section.splitlines()), \
        builds_section[:2000]
