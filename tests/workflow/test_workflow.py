"""The whole workflow on a tiny sweep: real Snakemake, the real runner on PoCL, real data."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from helpers.workflow import TINY, clone_workspace, env, make_workspace, snakemake
from phonetrain.report import build
from phonetrain.results import memory, schema

IDS = ["mlp_784_256_128_16.cpu.none", "mlp_784_256_128_16.opencl.baseline",
       "mlp_16_16.cpu.none", "mlp_16_16.opencl.baseline"]


def test_tables_have_the_schema_and_every_run_is_verified(completed_workspace: Path):
    R = completed_workspace / "results"
    for t in schema.TABLES:
        got = pq.read_schema(R / "summary" / f"{t}.parquet")
        assert got.names == schema.schema(t).names, t
    runs = pd.read_parquet(R / "summary" / "runs.parquet")
    assert sorted(runs["run_id"]) == sorted(f"host/{i}" for i in IDS)  # <device>/<experiment>
    assert (runs["status"] == "ok").all(), runs[["run_id", "status", "status_reason"]]
    assert (runs["iteration_median_ms"] > 0).all()
    # the location estimate with its interval, over every process of the run
    assert (runs["iteration_low_ms"] <= runs["iteration_ms"]).all()
    assert (runs["iteration_ms"] <= runs["iteration_high_ms"]).all()
    assert (runs["repeats"] == 2).all() and (runs["attempts"] == 1).all()
    gemm = pd.read_parquet(R / "summary" / "gemm.parquet")
    ok = gemm[gemm["status"] == "ok"]
    assert len(ok) and (ok["low_ms"] <= ok["median_ms"]).all()
    assert (ok["median_ms"] <= ok["high_ms"]).all()
    bw = pd.read_parquet(R / "summary" / "bandwidth.parquet")
    assert bw["host_gbps_low"].notna().all() and bw["host_gbps_high"].notna().all()
    assert (runs["loss_last"] < runs["loss_first"]).any()  # training, not a constant
    # memory by role partitions each plan; a resident run's OpenCL buffers are its tensors
    roles = runs[[f"{r}_bytes" for r in memory.ROLES]].sum(axis=1)
    assert (roles == runs["plan_tensor_bytes"]).all() and (roles > 0).all()
    resident = runs[runs["placement"] == "resident"]
    assert len(resident) and (resident["device_buffer_bytes"] ==
                              resident["plan_tensor_bytes"]).all()
    for rid in IDS:
        rdir = R / "runs" / "host" / rid
        params = json.loads((rdir / "params.json").read_text())
        assert params["measure"]["iterations"] == 3 and params["measure"]["warmup"] == 1
        assert json.loads((rdir / "verify.json").read_text())["ok"] is True
        assert json.loads((rdir / "trace.perfetto.json").read_text())["traceEvents"]
    assert pd.read_csv(R / "bandwidth" / "host" / "bandwidth.csv")["size_bytes"].max() <= 262144
    build = json.loads((R / "build" / "host" / "kernels" / "baseline" / "build.json").read_text())
    assert build["kernel"] == "baseline"


def test_report_has_every_section_and_figure(completed_workspace: Path, tmp_path: Path):
    out = completed_workspace / "results" / "report"
    html = (out / "report.html").read_text()
    md = (out / "report.md").read_text()
    assert html.count("<h2") >= len(build.SECTIONS)
    # the tiny study evaluates no held-out split, sweeps no batch and reads no battery: those
    # figures are one line saying so; every other figure is a picture, SVG beside PNG
    no_data = {"accuracy", "batch_sweep", "energy"}
    for name, fig in build.FIGURES.items():
        assert (out / "figures" / f"{name}.png").stat().st_size > 0, name
        assert (out / "figures" / f"{name}.svg").stat().st_size > 0, name  # SVG beside PNG
        pictured = f"figures/{name}.png" in md and f"figures/{name}.svg" in md
        assert pictured == (name not in no_data), name
        assert (f"*{fig.title}*: no data: " in md) == (name in no_data), name
    assert "data:image/png;base64," in html  # self-contained
    for rid in IDS:
        assert rid.split(".")[0] in md
    ws = clone_workspace(completed_workspace, tmp_path / "ws")   # --report writes .snakemake/
    bundle = tmp_path / "report.zip"  # figures are declared with report(): --report works
    p = snakemake(ws, "--report", str(bundle))
    assert p.returncode == 0, p.stderr[-3000:]
    with zipfile.ZipFile(bundle) as z:
        names = " ".join(z.namelist())
    assert all(f"{n}.png" in names for n in build.FIGURES)


def _bad_yaml(ws: Path) -> None:
    f = ws / "conf" / "model" / "mlp_16_16.yaml"
    f.write_text(f.read_text().replace("batch_size: 32", "batch_size: thirty-two"))


@pytest.mark.parametrize("overrides, edit, needles", [
    (TINY + ["sweep.models=[mlp_16_16,resnet9]"], None, ["model/resnet9.yaml", "sweep.models"]),
    (TINY, _bad_yaml, ["model/mlp_16_16.yaml", "model.batch_size", "thirty-two"]),
    (TINY + ["sweep.devices=[host,pixel7]"], None, ["device/pixel7.yaml", "sweep.devices"]),
    (TINY + ["measure.iterations=[3"], None, ["malformed override"]),
], ids=["unknown-model", "wrong-type", "missing-device-file", "malformed-override"])
def test_bad_config_fails_before_any_job(tmp_path: Path, overrides, edit, needles):
    ws = make_workspace(tmp_path / "ws")
    if edit:
        edit(ws)
    p = snakemake(ws, "all", overrides=overrides)
    assert p.returncode != 0
    msg = p.stdout + p.stderr
    assert "configuration error" in msg
    for n in needles:
        assert n in msg, msg[-3000:]
    assert not (ws / "results").exists()  # nothing ran, nothing written


def test_kernels_that_do_not_compile_fail_only_their_jobs_and_tuning_waits(
        completed_workspace: Path, tmp_path: Path):
    """Two versions that do not compile, in one workflow run: ``broken`` (an elementwise
    kernel) and ``broken_tiled`` (a tunable version whose gemm.cl does not compile). Each
    fails only its own jobs (its build, no run of it, its runs ``failed`` in the summary and
    listed in the report); the compiler's message, located in the kernel source (not a staged
    or temporary file), is on the terminal and in the build job's log, which the message
    names; no tune job runs for the tunable one; the baseline's runs stay."""
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    broken = ws / "src" / "kernels" / "broken"
    broken.mkdir()
    (broken / "version.yaml").write_text("inherits: baseline\n")
    (broken / "elementwise.cl").write_text(
        "__kernel void relu_fwd(int n, __global const float *X, __global float *Y) {\n"
        "  int i = get_global_id(0) if (i < n) Y[i] = X[i];\n}\n")
    (ws / "conf" / "kernel" / "broken.yaml").write_text("name: broken\n")
    kdir = ws / "src" / "kernels" / "broken_tiled"
    shutil.copytree(ws / "src" / "kernels" / "tiled", kdir)
    lines = (kdir / "gemm.cl").read_text().splitlines(keepends=True)
    bad = next(i for i, ln in enumerate(lines) if ln.startswith("inline void gemm_tiled"))
    lines.insert(bad, "this is broken;\n")
    (kdir / "gemm.cl").write_text("".join(lines))
    (ws / "conf" / "kernel" / "broken_tiled.yaml").write_text("name: broken_tiled\n")
    p = snakemake(ws, "all", "--keep-going",
                  overrides=TINY + ["sweep.kernels=[baseline,broken,broken_tiled]"])
    msg = p.stdout + p.stderr
    assert p.returncode != 0
    assert "kernel version 'broken' failed to build" in msg
    assert "error" in msg.lower() and "elementwise" in msg  # the compiler log is shown
    where = f"src/kernels/broken_tiled/gemm.cl:{bad + 1}:"
    assert f"{where}1: error: unknown type name 'this'" in msg or \
        re.search(re.escape(where) + r"\d+: .*unknown type name 'this'", msg), msg[-4000:]
    log = ws / "results" / "logs" / "build_kernels" / "host" / "broken_tiled.log"
    text = log.read_text()
    assert "unknown type name 'this'" in text and where in text, text
    assert "phonetrain-kernels-" not in text   # no staged temp path
    assert str(log.relative_to(ws)) in msg      # the terminal names the log
    assert not list((ws / "results" / "logs").glob("tune*/host/broken_tiled*")), \
        "tune ran for a version that does not compile"
    assert "no candidate passed" not in msg
    R = ws / "results"
    for k in ("broken", "broken_tiled"):
        assert not (R / "build" / "host" / "kernels" / k / "build.json").exists(), k
    for m in ("mlp_16_16", "mlp_784_256_128_16"):
        for k in ("broken", "broken_tiled"):
            assert not (R / "runs" / "host" / f"{m}.opencl.{k}" / "run.json").exists(), k
        assert (R / "runs" / "host" / f"{m}.opencl.baseline" / "run.json").exists()
    runs = pd.read_parquet(R / "summary" / "runs.parquet").set_index("run_id")
    assert set(runs.loc[[i for i in runs.index if ".broken" in i], "status"]) == {"failed"}
    assert len([i for i in runs.index if ".broken" in i]) == 4, runs.index
    assert (runs.loc[[f"host/{i}" for i in IDS], "status"] == "ok").all()
    md = (R / "report" / "report.md").read_text()
    assert "mlp_16_16.opencl.broken" in md and "mlp_16_16.opencl.broken_tiled" in md
    # the partial report's line: where it is and how many runs are usable
    assert re.search(r"phonetrain: partial report: results/report/report\.html \(and "
                     r"results/report/report\.md\); 8 runs: 4 ok \(verified: usable\), "
                     r"0 unstable .*, 0 wrong .*, 4 failed \(missing\)", msg), msg[-3000:]


def test_end_of_study_says_where_the_report_is(completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    (ws / "results" / "report" / "report.html").unlink()      # the report job runs again
    p = snakemake(ws, "all")
    assert p.returncode == 0, p.stderr[-3000:]
    assert ("phonetrain: report: results/report/report.html (and results/report/report.md); "
            "4 runs: 4 ok (verified: usable), 0 unstable (kept out of guidelines), 0 wrong "
            "(failed verification), 0 failed (missing)") in p.stderr, p.stderr[-3000:]
    # the measuring bounds first, the study's cost last: only the report job ran, measuring nothing
    assert "phonetrain: measuring bounds: per run " in p.stderr, p.stderr[-3000:]
    assert re.search(r"phonetrain: study: wall \d+ s, 1 jobs run, measuring 0 s "
                     r"\(nothing measured; 0% of wall\)", p.stderr), p.stderr[-3000:]
    assert (ws / "results" / "logs" / "report" / "report.log").read_text().startswith(
        "report: ok in ")


def test_phonetrain_run_writes_what_the_workflow_writes(completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    rdir = ws / "results" / "runs" / "host" / "mlp_16_16.opencl.baseline"
    workflow_params = json.loads((rdir / "params.json").read_text())
    for f in ("run.json", "verify.json", "params.json"):
        (rdir / f).unlink()
    cmd = [sys.executable, "-m", "phonetrain.cli", "run", "model=mlp_16_16", "backend=opencl",
           "kernel=baseline", "device=host", *[o for o in TINY if not o.startswith("sweep=")],
           "--conf", str(ws / "conf")]
    p = subprocess.run(cmd, cwd=ws, env=env(ws), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ok" in p.stdout
    assert json.loads((rdir / "params.json").read_text()) == workflow_params
    assert json.loads((rdir / "verify.json").read_text())["ok"] is True
    run = json.loads((rdir / "run.json").read_text())
    assert len(run["iters"]) == 1 + 3


def test_hand_run_aggregate_and_report_rebuild_the_workflows(completed_workspace: Path,
                                                             tmp_path: Path):
    """`phonetrain aggregate` and `phonetrain report` with the study's overrides give the same
    tables and the same report as the workflow's aggregate and report rules."""
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    R = ws / "results"
    want = {t: pd.read_parquet(R / "summary" / f"{t}.parquet") for t in schema.TABLES}
    want_md = (R / "report" / "report.md").read_text()
    for folder in ("summary", "report"):
        subprocess.run(["rm", "-rf", str(R / folder)], check=True)
    for command in ("aggregate", "report"):
        p = subprocess.run([sys.executable, "-m", "phonetrain.cli", command, *TINY], cwd=ws,
                           env=env(ws), capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
    for t, df in want.items():
        pd.testing.assert_frame_equal(pd.read_parquet(R / "summary" / f"{t}.parquet"), df,
                                      obj=t)
    assert (R / "report" / "report.md").read_text() == want_md
    assert {p.name for p in (R / "report" / "figures").iterdir()} == \
        {f"{n}.{ext}" for n in build.FIGURES for ext in ("png", "svg")}
