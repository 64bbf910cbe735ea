"""A kernel version whose library is absent on the device is *skipped*, not failed.

The real runner on PoCL runs the ``clblast`` version with ``PHONETRAIN_CLBLAST=/nonexistent``
(src/runner/clblast.c: that path alone is tried), so CLBlast cannot be loaded and the runner
exits 8. ``phonetrain run`` must succeed and say so; the run folder holds the train rule's
outputs marked skipped (its Perfetto trace without events); aggregate and report treat it as
skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import STEADY
from helpers.workflow import seed_runner_cache
from phonetrain import report
from phonetrain.report import build
from phonetrain.runner import TRACE_HEADER
from phonetrain.results import schema
from phonetrain.cli import main

MODEL = "mlp_16_16"
SKIPPED = f"{MODEL}.opencl.clblast"
OK = f"{MODEL}.cpu.none"


def _run(R: Path, *overrides: str) -> str:
    args = ["run", f"model={MODEL}", "device=host", f"results_dir={R}", "measure.warmup=1",
            "measure.iterations=2", "measure.progress=false", *STEADY, *overrides]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, (args, res.output, res.exception)
    return res.output


@pytest.fixture(scope="module")
def study(tmp_path_factory, runner, pocl) -> tuple[Path, str]:
    R = tmp_path_factory.mktemp("skipped") / "results"
    seed_runner_cache(R, runner)   # the runner's compile is not what these tests watch
    _run(R, "backend=cpu")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PHONETRAIN_CLBLAST", "/nonexistent/libclblast.so")
        out = _run(R, "backend=opencl", "kernel=clblast")
    return R, out


def test_run_is_recorded_as_skipped(study):
    R, out = study
    rdir = R / "runs" / "host" / SKIPPED
    assert "skipped" in out and "CLBlast" in out, out
    run = json.loads((rdir / "run.json").read_text())
    assert run["status"] == "skipped"
    assert "libclblast not found" in run["reason"] and "/nonexistent" in run["reason"]
    header = (rdir / "trace.csv").read_text()
    assert header == TRACE_HEADER and header.count("\n") == 1
    assert json.loads((rdir / "verify.json").read_text())["skipped"] is True
    assert not (rdir / "failed.json").exists()
    trace = json.loads((rdir / "trace.perfetto.json").read_text())   # the train stage's
    assert trace["traceEvents"] == [] and trace["otherData"]["title"] == SKIPPED
    assert "libclblast not found" in trace["otherData"]["skipped"]


def test_aggregate_and_report_list_the_skipped_run_without_a_speed(study):
    R, _ = study
    cli = CliRunner()
    res = cli.invoke(main, ["aggregate", "--found", "--results", str(R)])
    assert res.exit_code == 0, res.output
    runs = schema.read_table(R / "summary" / "runs.parquet", "runs").set_index("run_id")
    row = runs.loc[f"host/{SKIPPED}"]
    assert row["status"] == "skipped" and "libclblast not found" in row["status_reason"]
    assert row[["iteration_median_ms", "kernel_ms", "kernel_gflops"]].isna().all()
    assert runs.loc[f"host/{OK}", "status"] == "ok"
    for table in ("iterations", "commands"):
        df = schema.read_table(R / "summary" / f"{table}.parquet", table)
        assert f"host/{SKIPPED}" not in set(df["run_id"]) and f"host/{OK}" in set(df["run_id"])
    res = cli.invoke(main, ["report", "--results", str(R)])
    assert res.exit_code == 0, res.output
    md = (R / "report" / "report.md").read_text()
    assert "1 skipped (device lacks a library)" in md
    skipped_md = md.split("### Skipped runs")[1]
    assert f"| host/{SKIPPED} | " in skipped_md and "libclblast not found" in skipped_md
    runs_md = md.split("## Runs\n")[1].split("\n## ")[0]
    assert "clblast" not in runs_md  # no speed anywhere: not among the measured runs
    html = (R / "report" / "report.html").read_text()
    assert "<h3>Skipped runs</h3>" in html and f"<td>host/{SKIPPED}</td>" in html
    ctx = build.context(report.load_tables(R / "summary"), title="t")
    assert [r["run_id"] for r in ctx["skipped"]] == [f"host/{SKIPPED}"]
    assert not ctx["missing"] and ctx["n_skipped"] == 1
