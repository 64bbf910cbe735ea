"""The workflow's headline use, end to end with real Snakemake and the runner on PoCL: edit a
kernel, rerun, and the report's "Since the last study" shows the re-measured runs and GEMM
shapes of that version, before and after, with a verdict and the file that changed; the
previous measurements stay in the history table (and their run folders in quarantine/);
`phonetrain compare` sets the results folders of before and after side by side. A change the
compiler sees is measured side by side with the previous build in the same job; an edit it
does not see (a comment) is "no change (identical build)" without measuring."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
from click.testing import CliRunner

from helpers.workflow import clone_workspace, snakemake
from phonetrain.cli import main

EDITED = "src/kernels/baseline/elementwise.cl"
RERUN = {"host/mlp_784_256_128_16.opencl.baseline", "host/mlp_16_16.opencl.baseline"}
LOOP = re.compile(r"(?P<i>[ \t]*)for \(int k = 0; k < K; \+\+k\)\n\s*acc \+= (?P<e>[^;]+);")


def plant_slowdown(gemm_cl, passes: int = 3) -> None:
    """Every GEMM loop of ``gemm_cl`` given ``passes`` extra passes over K whose sum enters C
    times 0.0f (OpenCL C may not fold it away without -cl-fast-relaxed-math): (1 + passes)x
    the GEMM work, the same results."""
    def extra(m: re.Match) -> str:
        i = m.group("i")
        return (f"{m.group(0)}\n{i}{{ float extra = 0.0f;\n"
                f"{i}  for (int p = 0; p < {passes}; ++p) for (int k = 0; k < K; ++k)\n"
                f"{i}    extra += {m.group('e')};\n{i}  acc += 0.0f * extra; }}")
    text, n = LOOP.subn(extra, gemm_cl.read_text())
    assert n == 3, "the planted loops were not found"
    gemm_cl.write_text(text)


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
    f.write_text(f.read_text() + "\n__kernel void unused_probe(__global float *x) "
                 "{ x[0] = 0.0f; }\n")   # compiled, never launched: the same step
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
        word = cells[5].split(" (")[0].split(",")[0]
        assert word in ("faster", "slower", "no change", "cannot tell"), cells[5]
        # measured beside the previous build in the same job, not against the old study
        assert cells[9].startswith("side by side, ") and cells[9].endswith(" pairs"), cells
        assert cells[8] == "host"                                  # the device
        assert cells[6] == EDITED                                  # the file that changed
        assert cells[7] != "not recorded -> not recorded"          # the conditions
    for r in RERUN:   # what each side ran is kept; the previous build's processes too
        rd = R / "runs" / r
        doc = json.loads((rd / "paired.json").read_text())
        assert doc["pairs"] >= 2 and doc["previous_verified"] is True, doc
        assert (rd / "ran" / "kernels" / "elementwise.cl").read_text().count("unused_probe")
        assert len(list((rd / "previous").glob("process_*/run.json"))) == doc["pairs"]
        for f in (rd / "previous").glob("process_*/run.json"):   # a pair: one process, 2 sides
            assert json.loads(f.read_text())["side_by_side"]["side"] == "previous"
    # gemm.cl did not change: the GEMM sweep is the same build, not re-measured
    gemm = [[c.strip() for c in line.strip("|").split("|")] for line in since.splitlines()
            if line.startswith("| gemm | baseline gemm_")]
    assert gemm and all(c[5] == "no change (identical build)" for c in gemm), gemm
    html = (R / "report" / "report.html").read_text()
    assert EDITED in html.split('id="since-last-study"')[1].split("</section>")[0]

    res = CliRunner().invoke(main, ["compare", str(before), str(R)])
    assert res.exit_code == 0, res.output
    lines = {line.split("  ")[1].strip(): line for line in res.output.splitlines()[3:]
             if line.startswith("run ")}
    row = lines["mlp_16_16 resident/copy baseline"]
    assert EDITED in row and "side by side" in row
    assert "none (re-measured)" not in row
    # the CPU run was not re-measured: the same measurement on both sides, not a change
    assert "mlp_16_16 cpu" not in lines and "identical on both sides" in res.output


def test_comment_only_edit_is_no_change_without_measuring(completed_workspace, tmp_path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    R = ws / "results"
    measured = {r: (R / "runs" / r / "run.json").read_bytes() for r in RERUN}
    f = ws / "src/kernels/baseline/gemm.cl"
    f.write_text("// a comment-only edit\n" + f.read_text().replace(
        "float acc = 0.0f;", "float acc = 0.0f;   /* the sum */", 1))
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for r in RERUN:   # the previous measurement stands, nothing re-measured
        rd = R / "runs" / r
        assert (rd / "run.json").read_bytes() == measured[r]
        assert json.loads((rd / "paired.json").read_text())["identical_build"] is True
        assert "comment" in (rd / "ran" / "kernels" / "gemm.cl").read_text()
    md = (R / "report" / "report.md").read_text()
    since = md.split("## Since the last study")[1].split("\n## ")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in since.splitlines()
            if line.startswith("| run |") or line.startswith("| gemm |")]
    assert rows and all(c[5] == "no change (identical build)" for c in rows), rows
    assert {c[1] for c in rows if c[0] == "run"} >= {"mlp_16_16 resident/copy baseline"}
    assert all(c[9] == "not measured: identical build" for c in rows), rows


def test_a_planted_gemm_slowdown_is_measured_side_by_side(completed_workspace, tmp_path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    R = ws / "results"
    plant_slowdown(ws / "src/kernels/baseline/gemm.cl")
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    big = json.loads((R / "runs" / "host/mlp_784_256_128_16.opencl.baseline" /
                      "paired.json").read_text())
    # 4x the GEMM work of a GEMM-bound step: never faster or unchanged, busy host or not
    assert big["verdict"] in ("slower", "cannot tell") and big["ratio"] > 1, big
    assert big["previous_verified"] is True and big["pairs"] >= 2
    hist = pd.read_parquet(R / "summary" / "history.parquet")
    gemm = hist[hist["latest"] & (hist["kind"] == "gemm") & (hist["kernel"] == "baseline")]
    docs = [json.loads(x) for x in gemm["paired"]]
    assert docs and all(d["pairs"] >= 2 for d in docs), docs
    large = [d for d, s in zip(docs, gemm["subject"]) if "784" in s]
    assert large and all(d["verdict"] in ("slower", "cannot tell") and d["ratio"] > 1
                         for d in large), large
