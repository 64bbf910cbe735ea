"""What changed: the history keeps the measurements that re-measurements replace (keyed by the
kernel, runner and config hashes), the report's "Since the last study" sets them beside the new
ones with a verdict and the source files and tuning choices that changed, and `phonetrain
compare` does the same for two results folders. A verdict needs both sides usable and their
intervals apart; identical measurements are never a change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from helpers.results import report_paths, summary_paths, write_gemm_versions, write_run
from phonetrain import report
from phonetrain.cli import main
from phonetrain.report import changes
from phonetrain.results import aggregate, schema, stats

CL = dict(backend="opencl", placement="resident", transfer="copy", kernel="tiled")
NOT_GAUGED = "host drift not gauged: nothing unchanged measured on both sides"


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


def mark_unstable(run_dir: Path, reason: str, low_ms: float, high_ms: float,
                   other_cpu_share: float = 0.4) -> None:
    """Give a :func:`write_run` folder the train stage's measurement verdict ``unstable``
    (``reason``), its estimate's interval widened to ``low_ms``..``high_ms``."""
    doc = json.loads((run_dir / "run.json").read_text())
    walls = [i["wall_ms"] for i in doc["iters"] if not i["warmup"]]
    m = stats.judge(walls, [{}], ci_target=0, max_other_cpu_share=1.0)
    m.update(unstable=True, reasons=[reason], low_ms=low_ms, high_ms=high_ms,
             other_cpu_share=other_cpu_share, load_avg_1m=3.5)
    (run_dir / "measurement.json").write_text(json.dumps(m))


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
    # the CPU run is the same measurement (no control): the interval verdict stands, said so
    assert c.verdict == f"faster ({NOT_GAUGED})" and c.changed == "src/kernels/tiled/gemm.cl"
    assert c.before.startswith(f"{old['median_ms']:.3g} ms [")
    assert c.after.startswith(f"{new['median_ms']:.3g} ms [")
    # the report shows it
    md = report.build_report(out / "summary", report_paths(out / "report"))["md"].read_text()
    since = md.split("## Since the last study")[1].split("\n## ")[0]
    assert "mlp_784_256_128_16 resident/copy tiled" in since and f"| faster ({NOT_GAUGED}) |" in since
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
    assert rows[0].verdict.split(" (")[0] in ("slower", "no difference")


def _regemm(path: Path, khash: str, scale: float, spread: float | None = None,
            tuned_class: str | None = None) -> None:
    """Re-measure a GEMM sweep file: every shape ``scale`` x faster, its interval +-``spread``
    x the median (none when None), tuned with ``tuned_class``."""
    doc = json.loads(path.read_text())
    for r in doc["rows"]:
        r["gflops"] *= scale
        r["median_ms"] /= scale
        r["low_ms"] = None if spread is None else r["median_ms"] * (1 - spread)
        r["high_ms"] = None if spread is None else r["median_ms"] * (1 + spread)
        if tuned_class:
            r["tuned_class"] = tuned_class
    path.write_text(json.dumps({**doc, "kernel_hash": khash}))


def test_gemm_shapes_without_an_interval_get_no_verdict(tmp_path):
    """2x the GFLOPS but no interval recorded: cannot tell, never a tolerance verdict."""
    raw, out = tmp_path / "raw", tmp_path / "out"
    g = write_gemm_versions(raw, "host", ["tiled"])
    t1 = _aggregate(raw, out, [], gemm=g)
    assert set(t1["history"]["kind"]) == {"gemm"} and len(t1["history"]) == 6
    _regemm(g[0], "k-tiled-2", 2.0)
    rows = changes.since_last_study(_aggregate(raw, out, [], gemm=g)["history"])[1]
    assert len(rows) == 3 and {r.verdict for r in rows} == {"cannot tell (no interval recorded)"}
    assert all(r.label.startswith("tiled gemm_nn ") and "GFLOPS" in r.after for r in rows)


@pytest.mark.parametrize("scale, spread, verdict", [
    (2.0, 0.05, f"faster ({NOT_GAUGED})"),              # intervals apart
    (1.05, 0.1, "cannot tell (intervals overlap)")])    # 5% apart inside +-10%
def test_gemm_shapes_with_intervals_are_judged_by_them(tmp_path, scale, spread, verdict):
    raw, out = tmp_path / "raw", tmp_path / "out"
    g = write_gemm_versions(raw, "host", ["tiled"])
    _regemm(g[0], "k-tiled", 1.0, spread)
    _aggregate(raw, out, [], gemm=g)
    _regemm(g[0], "k-tiled-2", scale, spread)
    rows = changes.since_last_study(_aggregate(raw, out, [], gemm=g)["history"])[1]
    assert len(rows) == 3 and {r.verdict for r in rows} == {verdict}
    assert all("[" in r.before and "[" in r.after for r in rows)


def test_a_changed_tuning_choice_is_named_beside_the_sources(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    g = write_gemm_versions(raw, "host", ["tiled"])
    _regemm(g[0], "k-tiled", 1.0, 0.01, tuned_class="medium")
    _aggregate(raw, out, [], gemm=g)
    _regemm(g[0], "k-tiled", 1.5, 0.01, tuned_class="small")   # same sources, re-tuned
    t = _aggregate(raw, out, [], gemm=g)
    rows = changes.since_last_study(t["history"])[1]
    assert rows and all(r.changed == "tuning class medium -> small" for r in rows)
    assert all(r.verdict == f"faster ({NOT_GAUGED})" for r in rows)
    md = report.build_report(out / "summary", report_paths(out / "report"))["md"].read_text()
    since = md.split("## Since the last study")[1].split("\n## ")[0]
    assert "tuning class medium -> small" in since and "none (re-measured)" not in since


def test_identical_figures_are_not_a_change(tmp_path):
    """A re-aggregation whose figures are the same (here only the config hash moved) lists
    nothing, and never says "none (re-measured)"."""
    raw, out = tmp_path / "raw", tmp_path / "out"
    cl = write_run(raw, **CL)
    _aggregate(raw, out, [cl])
    p = cl / "params.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "config_hash": "cfg-2"}))
    t = _aggregate(raw, out, [cl])
    assert t["history"]["superseded_in"].notna().any()     # the ledger did replace it
    assert changes.since_last_study(t["history"]) == (None, [])
    md = report.build_report(out / "summary", report_paths(out / "report"))["md"].read_text()
    since = md.split("## Since the last study")[1].split("\n## ")[0]
    assert "No measurement has been replaced yet" in since and "re-measured)" not in since


def test_an_unstable_side_cannot_tell_unless_it_survives_the_noise(tmp_path):
    raw, out = tmp_path / "raw", tmp_path / "out"
    cl = write_run(raw, **CL, kernel_ns=400_000)
    _aggregate(raw, out, [cl])
    shutil.rmtree(cl)
    cl = write_run(raw, **CL, kernel_ns=300_000)    # faster, but measured under contention
    _set_kernel_hash(cl, "k-tiled-2")
    est = json.loads((cl / "run.json").read_text())["iters"][-1]["wall_ms"]
    mark_unstable(cl, "other processes used 40% of the CPU", est * 0.9, est * 1.1)
    rows = changes.since_last_study(_aggregate(raw, out, [cl])["history"])[1]
    assert rows[0].verdict == "cannot tell (unstable: other processes used 40% of the CPU)"
    assert "other processes 40% of CPU" in rows[0].conditions
    md = report.build_report(out / "summary", report_paths(out / "report"))["md"].read_text()
    since = md.split("## Since the last study")[1].split("\n## ")[0]
    assert "cannot tell (unstable: other processes used 40% of the CPU)" in since
    # ten times faster under the same contention: it survives, marked so
    shutil.rmtree(cl)
    cl = write_run(raw, **CL, kernel_ns=10_000, n_kernels=1)
    _set_kernel_hash(cl, "k-tiled-3")
    est = json.loads((cl / "run.json").read_text())["iters"][-1]["wall_ms"]
    mark_unstable(cl, "other processes used 40% of the CPU", est * 0.9, est * 1.1)
    rows = changes.since_last_study(_aggregate(raw, out, [cl])["history"])[1]
    assert rows[0].verdict.startswith("faster (measured under contention: load 3.5, other "
                                      "processes 40% of CPU")


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
    # the CPU runs measured the same figures on both: not listed, counted
    assert not any("mlp_784_256_128_16 cpu" in line for line in lines)
    assert "1 run(s) or GEMM shape(s) identical on both sides" in res.output
    res = CliRunner().invoke(main, ["compare", str(folders[0]), str(tmp_path / "nowhere")])
    assert res.exit_code != 0 and "runs.parquet" in res.output


def test_compare_names_the_folder_or_devices_it_cannot_match(tmp_path):
    """`phonetrain compare` with a folder that does not exist, one that measured nothing, or
    two folders with no device in common where one holds several: one message naming the
    folders (and their devices) and what to give instead."""
    folders = {}
    for name, devices in (("two", ["phoneA", "phoneB"]), ("other", ["phoneC"]),
                          ("none", [])):
        raw, out = tmp_path / name / "raw", tmp_path / name / "results"
        _aggregate(raw, out, [write_run(raw, device=d, backend="cpu") for d in devices])
        folders[name] = str(out)

    def refused(a: str, b: str) -> str:
        res = CliRunner().invoke(main, ["compare", a, b])
        assert res.exit_code == 1 and "Traceback" not in res.output, (res.output, res.exception)
        return res.output

    out = refused(folders["two"], folders["other"])
    assert f"{folders['two']} holds ['phoneA', 'phoneB']" in out
    assert f"{folders['other']} holds ['phoneC']" in out and "share a device" in out
    out = refused(folders["none"], folders["other"])
    assert f"{folders['none']}/summary/runs.parquet: table 'runs' has no rows" in out, out
    assert "rerun the aggregate stage" in out, out
    out = refused(folders["none"], folders["none"])
    assert f"{folders['none']}: no measured run or GEMM shape" in out and "aggregate" in out
    nowhere = str(tmp_path / "nowhere")
    assert f"{nowhere}: no such folder" in refused(folders["other"], nowhere)

def test_compare_of_the_same_measurements_lists_no_change(tmp_path):
    """Two folders holding the same measurements (a copy): nothing faster or slower, nothing
    "re-measured"; a run measured with other threads cannot be told apart."""
    raw, out = tmp_path / "raw", tmp_path / "a"
    dirs = [write_run(raw, backend="cpu"), write_run(raw, **CL)]
    _aggregate(raw, out, dirs, gemm=write_gemm_versions(raw, "host", ["tiled"]))
    shutil.copytree(out, tmp_path / "b")
    rows = changes.compare(report.load_tables(out / "summary"),
                           report.load_tables(tmp_path / "b" / "summary"))
    assert rows and all(r.identical for r in rows)
    text = changes.text_table(rows, "A", "B")
    assert "faster" not in text and "slower" not in text and "re-measured" not in text
    raw2, out2 = tmp_path / "raw2", tmp_path / "c"
    fast = write_run(raw2, backend="cpu", kernel_ns=10_000)
    p = fast / "params.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "threads": 4}))
    _aggregate(raw2, out2, [fast])
    rows = changes.compare(report.load_tables(out / "summary"),
                           report.load_tables(out2 / "summary"))
    assert [r.verdict for r in rows] == ["cannot tell (settings differ: threads 0 vs 4)"]


def test_the_report_states_findings_that_survive_noise(tmp_path):
    """Both runs unstable (+-20% intervals), OpenCL ~30x slower: the report states it, marked
    measured under contention with the conditions, in the guideline and at a glance."""
    raw, out = tmp_path / "raw", tmp_path / "out"
    cpu = write_run(raw, backend="cpu")
    cl = write_run(raw, **CL, kernel_ns=4_000_000)
    for d in (cpu, cl):
        est = json.loads((d / "run.json").read_text())["iters"][-1]["wall_ms"]
        mark_unstable(d, "other processes used 40% of the CPU", est * 0.8, est * 1.2)
    _aggregate(raw, out, [cpu, cl])
    md = report.build_report(out / "summary", report_paths(out / "report"))["md"].read_text()
    glance_md = md.split("## At a glance")[1].split("\n## ")[0]
    step = next(line for line in glance_md.splitlines() if "GPU vs CPU step time" in line)
    assert "**agrees (measured under contention)**" in step
    assert "GPU slower (measured under contention: load 3.5, other processes 40% of CPU" in md
    assert "Not measured: no model has both" not in md


def test_a_measured_iteration_count_is_not_a_setting(tmp_path):
    """Adaptive measurement stops each run when its interval is narrow enough, so the same
    run measured twice may count 4 and 9 iterations: compare judges the intervals (here one
    run, its kernels edited, 10x faster: "faster"), never "settings differ: iterations"."""
    raw, out = tmp_path / "raw", tmp_path / "a"
    _aggregate(raw, out, [write_run(raw, backend="opencl", kernel="tiled", iterations=4)])
    raw2, out2 = tmp_path / "raw2", tmp_path / "b"
    fast = write_run(raw2, backend="opencl", kernel="tiled", iterations=9, kernel_ns=10_000)
    _set_kernel_hash(fast, "k-tiled-2")
    _aggregate(raw2, out2, [fast])
    a, b = report.load_tables(out / "summary"), report.load_tables(out2 / "summary")
    assert a["runs"]["iterations"].tolist() == [4] and b["runs"]["iterations"].tolist() == [9]
    rows = changes.compare(a, b)
    assert [r.verdict for r in rows] == [f"faster ({NOT_GAUGED})"], [r.verdict for r in rows]
    assert rows[0].changed == "kernel sources k-tiled -> k-tiled-2"


def _rewrite_ledger(ledger: Path, change) -> None:
    """Rewrite the ledger file with ``change`` (a function of its pyarrow table)."""
    pq.write_table(change(pq.read_table(ledger)), ledger)


def test_a_ledger_of_another_schema_is_migrated(tmp_path):
    """A ledger written when a column was nullable that now is not (and with another column
    missing, a third of a narrower type, columns in another order) is migrated: the next
    aggregation keeps its measurements and rewrites it in today's schema."""
    raw, out = tmp_path / "raw", tmp_path / "out"
    ledger = out / "history" / "measurements.parquet"
    run = write_run(raw, backend="cpu")
    first = _aggregate(raw, out, [run])["history"]

    def older(t: pa.Table) -> pa.Table:
        fields = [pa.field(f.name, pa.int32() if f.name == "threads" else f.type,
                           nullable=True) for f in t.schema if f.name != "conditions"]
        return pa.Table.from_arrays([t[f.name].cast(f.type) for f in fields][::-1],
                                    schema=pa.schema(fields[::-1]))
    _rewrite_ledger(ledger, older)
    with pytest.raises(schema.SchemaError):  # the file is of another schema ...
        schema.read_table(ledger, "history")
    later = _aggregate(raw, out, [write_run(raw, backend="cpu", kernel_ns=300_000)])["history"]
    kept = later[later["measurement_id"].isin(first["measurement_id"])]
    assert len(kept) == len(first) and not kept["latest"].any()  # ... but nothing was lost
    assert len(schema.read_table(ledger, "history")) == len(first) + 1


@pytest.mark.parametrize("change, column", [
    (lambda t: t.append_column("calibration", pa.array([1.0] * len(t))),
     "extra columns ['calibration']"),
    (lambda t: t.drop_columns(["measurement_id"]), "missing column 'measurement_id'"),
    (lambda t: t.set_column(t.schema.get_field_index("median_ms"), "median_ms",
                            pa.array(["fast"] * len(t))), "column 'median_ms' of type string"),
])
def test_a_ledger_that_cannot_be_migrated_names_the_column(tmp_path, change, column):
    raw, out = tmp_path / "raw", tmp_path / "out"
    ledger = out / "history" / "measurements.parquet"
    _aggregate(raw, out, [write_run(raw, backend="cpu")])
    _rewrite_ledger(ledger, change)
    with pytest.raises(schema.SchemaError) as e:
        _aggregate(raw, out, [write_run(raw, backend="cpu")])
    assert str(ledger) in e.value.message and column in e.value.message, e.value.message
    assert "move" in e.value.hint

