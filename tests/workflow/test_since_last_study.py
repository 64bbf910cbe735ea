"""The workflow's headline use, end to end with real Snakemake and the runner on PoCL: edit a
kernel, rerun, and the report's "Since the last study" shows the re-measured runs and GEMM
shapes of that version, before and after, with a verdict and the file that changed; the
previous measurements stay in the history table (and their run folders in quarantine/);
`phonetrain compare` sets the results folders of before and after side by side."""

from __future__ import annotations

import json
import shutil

import pandas as pd
from click.testing import CliRunner

from helpers.workflow import clone_workspace, snakemake
from phonetrain.cli import main

EDITED = "src/kernels/baseline/elementwise.cl"
RERUN = {"host/mlp_784_256_128_16.opencl.baseline", "host/mlp_16_16.opencl.baseline"}


def test_kernel_edit_then_rerun_reports_before_and_after(completed_workspace, tmp_path):
    done = completed_workspace
    before = tmp_path / "before"
    shutil.copytree(done / "results", before, ignore=shutil.ignore_patterns("stage", "build"))
    ws = clone_workspace(done, tmp_path / "ws")
    R = ws / "results"
    first = pd.read_parquet(R / "summary" / "history.parquet")
    assert first["latest"].all() and first["superseded_in"].isna().all()
    md = (R / "report" / "report.md").read_text()
    assert "No measurement has been replaced yet" in md
    f = ws / EDITED
    f.write_text(f.read_text() + "\n/* an edit: the same kernels, re-measured */\n")
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # the workflow's start moved the folders measured from the previous source aside, whole
    notes = {json.loads(n.read_text())["from"]: json.loads(n.read_text())["why"]
             for n in (R / "quarantine").glob("*/runs/*/*.why.json")}
    assert set(notes) == {f"runs/{r}" for r in RERUN}, notes
    assert all("kernel_hash" in why for why in notes.values()), notes

    hist = pd.read_parquet(R / "summary" / "history.parquet")
    old = hist[~hist["latest"]]
    assert set(old.loc[old["kind"] == "run", "subject"]) == RERUN
    assert (old["kernel"] == "baseline").all() and (old["superseded_in"] == 2).all()
    assert set(old["kind"]) == {"run", "gemm"}     # the GEMM sweep of the version, too
    new = hist[hist["latest"] & hist["subject"].isin(RERUN)]
    assert set(new["kernel_hash"]).isdisjoint(set(old["kernel_hash"]))

    md = (R / "report" / "report.md").read_text()
    since = md.split("## Since the last study")[1].split("\n## ")[0]
    rows = [line for line in since.splitlines() if line.startswith("| run |")]
    assert len(rows) == 2
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[2].endswith("]") and cells[3].endswith("]")   # estimates with intervals
        word = cells[5].split(" (")[0]
        assert word in ("faster", "slower", "cannot tell"), cells[5]
        # nothing unchanged was re-measured beside them (the CPU runs keep their measurement),
        # so a stated difference says the host's drift was not gauged
        assert word == "cannot tell" or "host drift not gauged" in cells[5], cells[5]
        assert cells[6] == EDITED                                  # the file that changed
        assert cells[7] != "not recorded -> not recorded"          # the conditions
    gemm = [[c.strip() for c in line.strip("|").split("|")] for line in since.splitlines()
            if line.startswith("| gemm | baseline gemm_")]
    assert gemm and all(c[6].startswith(EDITED) for c in gemm)
    html = (R / "report" / "report.html").read_text()
    assert EDITED in html.split('id="since-last-study"')[1].split("</section>")[0]

    res = CliRunner().invoke(main, ["compare", str(before), str(R)])
    assert res.exit_code == 0, res.output
    lines = {line.split("  ")[1].strip(): line for line in res.output.splitlines()[3:]
             if line.startswith("run ")}
    assert EDITED in lines["mlp_16_16 resident/copy baseline"]
    assert "none (re-measured)" not in lines["mlp_16_16 resident/copy baseline"]
    # the CPU run was not re-measured: the same measurement on both sides, not a change
    assert "mlp_16_16 cpu" not in lines and "identical on both sides" in res.output
