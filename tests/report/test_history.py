"""What changed: the history keeps the measurements that re-measurements replace (keyed by the
kernel, runner and config hashes), the report's "Since the last study" sets them beside the new
ones with a verdict and the source files that changed, and `phonetrain compare` does the same
for two results folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from helpers.results import report_paths, summary_paths, write_gemm_versions, write_run
from phonetrain import report
from phonetrain.cli import main
from phonetrain.report import changes
from phonetrain.results import aggregate, schema

CL = dict(backend="opencl", placement="resident", transfer="copy", kernel="tiled")


def _aggregate(raw: Path, out: Path, dirs, gemm=(), sources=None) -> dict[str, pd.DataFrame]:
    aggregate.aggregate(dirs, summary_paths(out / "summary"), gemm_jsons=gemm,
                        ledger=out / "history" / "measurements.parquet", sources=sources)
    return report.load_tables(out / "summary")


def _sources(gemm_cl: str):
    """A sources function: the tiled version's gemm.cl has content ``gemm_cl``."""
    def sources(kind, device, kernel, khash, rhash):
        files = {"src/runner/run.c": "r1"}
        if kernel == "tiled":
            files |= {"src/kernels/tiled/gemm.cl": gemm_cl,
                      "src/kernels/baseline/elementwise.cl": "e1"}
        return files
    return sources


def _set_kernel_hash(run_dir: Path, khash: str) -> None:
    p = run_dir / "params.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "kernel_hash": khash}))


def test_a_re_measured_run_keeps_its_previous_measurement(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    cpu = write_run(raw, backend="cpu")
    cl = write_run(raw, **CL, kernel_ns=400_000)
    t1 = _aggregate(raw, out, [cpu, cl], sources=_sources("g1"))
    h1 = t1["history"]
    assert len(h1) == 2 and h1["latest"].all() and (h1["recorded_in"] == 1).all()
    assert changes.since_last_study(h1) == (None, [])
    # aggregating the same folders again changes nothing
    assert _aggregate(raw, out, [cpu, cl], sources=_sources("g1"))["history"].equals(h1)
    # the kernel is edited and the run re-measured: faster
    shutil.rmtree(cl)
    cl = write_run(raw, **CL, kernel_ns=100_000)
    _set_kernel_hash(cl, "k-tiled-2")
    t2 = _aggregate(raw, out, [cpu, cl], sources=_sources("g2"))
    h2 = t2["history"].set_index(["subject", "recorded_in"])
    subject = "host/mlp_784_256_128_16.opencl.tiled"
    old, new = h2.loc[(subject, 1)], h2.loc[(subject, 2)]
    assert not old["latest"] and old["superseded_in"] == 2 and new["latest"]
    assert (old["kernel_hash"], new["kernel_hash"]) == ("k-tiled", "k-tiled-2")
    assert old["median_ms"] > new["median_ms"]
    n, rows = changes.since_last_study(t2["history"])
    assert n == 2 and [r.subject for r in rows] == [subject]
    c = rows[0]
    assert c.verdict == "faster" and c.changed == "src/kernels/tiled/gemm.cl"
    assert c.before.startswith(f"{old['median_ms']:.3g} ms [")
    assert c.after.startswith(f"{new['median_ms']:.3g} ms [")
    # the report shows it
    md = report.build_report(out / "summary", report_paths(out / "report"))["md"].read_text()
    since = md.split("## Since the last study")[1].split("\n## ")[0]
    assert "mlp_784_256_128_16 resident/copy tiled" in since and "| faster |" in since
    assert "src/kernels/tiled/gemm.cl" in since
    # a later aggregation that re-measures nothing keeps showing the last change
    t3 = _aggregate(raw, out, [cpu, cl], sources=_sources("g2"))
    assert changes.since_last_study(t3["history"])[0] == 2


def test_without_file_lists_the_changed_hashes_are_named(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    cl = write_run(raw, **CL)
    _aggregate(raw, out, [cl])
    shutil.rmtree(cl)
    cl = write_run(raw, **CL, kernel_ns=110_000)
    _set_kernel_hash(cl, "k2")
    rows = changes.since_last_study(_aggregate(raw, out, [cl])["history"])[1]
    assert rows[0].changed == "kernel sources k-tiled -> k2"
    assert rows[0].verdict in ("slower", "no difference")


def test_gemm_shapes_are_kept_and_compared(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    g = write_gemm_versions(raw, "host", ["tiled"])
    t1 = _aggregate(raw, out, [], gemm=g)
    assert set(t1["history"]["kind"]) == {"gemm"} and len(t1["history"]) == 6
    doc = json.loads(g[0].read_text())
    for r in doc["rows"]:
        r["gflops"] *= 2
        r["median_ms"] /= 2
    g[0].write_text(json.dumps({**doc, "kernel_hash": "k-tiled-2"}))
    rows = changes.since_last_study(_aggregate(raw, out, [], gemm=g)["history"])[1]
    assert len(rows) == 3 and {r.verdict for r in rows} == {"faster"}
    assert all(r.label.startswith("tiled gemm_nn ") and "GFLOPS" in r.after for r in rows)


def test_a_damaged_ledger_is_named(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    ledger = out / "history" / "measurements.parquet"
    ledger.parent.mkdir(parents=True)
    ledger.write_text("not parquet")
    try:
        _aggregate(raw, out, [write_run(raw, backend="cpu")])
    except schema.SchemaError as e:
        assert str(ledger) in str(e) and "move" in e.hint
    else:
        raise AssertionError("a damaged ledger must be refused")


def test_compare_two_results_folders(tmp_path):
    """Two phones: the same experiments on two devices, matched without the device."""
    folders = []
    for dev, kernel_ns in (("phoneA", 400_000), ("phoneB", 100_000)):
        raw, out = tmp_path / dev / "raw", tmp_path / dev / "results"
        dirs = [write_run(raw, device=dev, backend="cpu"),
                write_run(raw, device=dev, **CL, kernel_ns=kernel_ns)]
        _aggregate(raw, out, dirs)
        folders.append(out)
    res = CliRunner().invoke(main, ["compare", str(folders[0]), str(folders[1])])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    cl = next(line for line in lines if "resident/copy tiled" in line)
    assert "(phoneA -> phoneB)" in cl and " faster " in cl
    cpu = next(line for line in lines if "mlp_784_256_128_16 cpu" in line)
    assert "no difference" in cpu
    res = CliRunner().invoke(main, ["compare", str(folders[0]), str(tmp_path / "nowhere")])
    assert res.exit_code != 0 and "runs.parquet" in res.output
