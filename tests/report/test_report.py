"""The report: every section and figure, self-contained HTML, wrong runs never shown as speeds,
guidelines computed from the tables."""

from __future__ import annotations

import json
import re
import shutil

import markupsafe
import pandas as pd
import pytest

from helpers import REPO
from helpers.real_study import FAILED, MODEL, OK, WRONG
from helpers.results import report_paths, summary_paths, write_run
from phonetrain import report
from phonetrain.report import build
from phonetrain.report import findings as guidelines
from phonetrain.results import aggregate, schema


@pytest.fixture(scope="module")
def built(real_study, tmp_path_factory):
    """The report of a real study: the runner on PoCL, one run wrong, one missing."""
    root = tmp_path_factory.mktemp("report")
    inputs = real_study
    aggregate.aggregate(inputs["runs"], summary_paths(root / "summary"), bandwidth_csvs=inputs["bandwidth"],
                        build_jsons=inputs["builds"])
    paths = report.build_report(root / "summary", report_paths(root / "report"), title="T")
    tables = report.load_tables(root / "summary")
    return paths, tables


def _section(html: str, sid: str) -> str:
    m = re.search(rf'<section id="{sid}">(.*?)</section>', html, re.S)
    assert m, sid
    return m.group(1)


def test_every_section_and_figure_present(built):
    paths, _ = built
    html = paths["html"].read_text()
    md = paths["md"].read_text()
    for sid in build.SECTIONS:
        _section(html, sid)
    drawn = 0
    for name in build.FIGURES:
        png = paths[name]
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'id="fig-{name}"' in html
        if getattr(png, "what", ""):    # no data: one line instead of the picture
            assert f"](figures/{png.name})" not in md and f"no data: {png.what}" in md
            continue
        drawn += 1
        assert png.stat().st_size > 5000 and f"](figures/{png.name})" in md
    assert drawn >= 5 and html.count('src="data:image/png;base64,') == drawn
    for heading in ("## Guidelines", "## Figures", "## Runs", "## Missing runs",
                    "## Runs that failed verification", "## Kernel builds", "## Bandwidth"):
        assert heading in md


def test_html_is_self_contained(built):
    html = built[0]["html"].read_text()
    assert "<style>" in html
    assert not re.search(r'(src|href)="(https?:|//|figures/)', html)
    assert "<link" not in html and "<script src" not in html  # the sorting script is inline


def test_provenance_lists_the_tables_values(built):
    paths, tables = built
    revs = sorted(set(tables["runs"]["git_rev"].dropna().astype(str)))
    assert revs
    for text in (paths["md"].read_text(), paths["html"].read_text()):
        assert "built-in method" not in text
        assert all(r in text for r in revs)


def test_wrong_run_never_shown_as_a_speed(built):
    paths, tables = built
    runs = tables["runs"].set_index("run_id")
    wrong_ms = f"{runs.loc[f'host/{WRONG}', 'iteration_median_ms']:.3g}"
    html = paths["html"].read_text()
    runs_sec = _section(html, "runs")
    row = next(r for r in runs_sec.split("<tr>") if "staged/copy" in r)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)  # model, run, status, iteration, ...
    assert cells[2] == "wrong" and cells[3] == "not valid"
    assert all(c == "" for c in cells[4:9]) and wrong_ms not in "".join(cells[3:9])
    assert f"<td>host/{WRONG}</td>" in _section(html, "not-valid")
    assert WRONG not in _section(html, "guidelines")
    for f in guidelines.all_findings(tables):
        assert not any(WRONG in r for r in f.rows)
    md_row = next(line for line in paths["md"].read_text().splitlines() if "staged/copy" in line
                  and line.startswith("|"))
    md_cells = [c.strip() for c in md_row.strip("|").split("|")]
    assert md_cells[3] == "not valid" and all(c == "" for c in md_cells[4:9])


def test_missing_runs_are_listed_with_their_reason(built):
    paths, _ = built
    sec = _section(paths["html"].read_text(), "missing")
    assert f"<td>host/{FAILED}</td>" in sec and "no run.json" in sec


def test_guideline_numbers_come_from_the_tables(built, real_study):
    paths, tables = built
    runs = tables["runs"].set_index("run_id")
    ratios = [runs.loc[f"host/mlp_784_256_128_16.{b}.baseline", "iteration_ms"]
              / runs.loc["host/mlp_784_256_128_16.cpu.none", "iteration_ms"]
              for b in ("opencl", "opencl_staged_map")]
    ratio = min(ratios)
    f = {x.key: x for x in guidelines.all_findings(tables)}
    assert f"{ratio:.3g}x" in f["gpu_vs_cpu"].statement
    cells = " ".join(c for row in f["gpu_vs_cpu"].table.rows for c in row)
    assert all(f"{q:.3g}x" in cells for q in ratios)
    assert "runs.parquet: host/mlp_784_256_128_16.cpu.none" in f["gpu_vs_cpu"].rows
    share = runs.loc["host/mlp_784_256_128_16.opencl_staged_map.baseline", "data_movement_share"]
    assert f"{share:.1%}" in " ".join([f["data_movement"].statement] + [
        c for row in f["data_movement"].table.rows for c in row])
    # the only staged/copy run failed verification: no placement finding may use it
    assert not f["placement"].measured and "Not measured" in f["placement"].statement
    assert f["bandwidth"].measured and f["gemm_throughput"].measured
    html = paths["html"].read_text()
    assert f"{ratio:.3g}x" in _section(html, "guidelines")
    assert "second-hand" in html and "~91%" in html
    # PoCL runs OpenCL on this host's CPU: the report must not pass it off as a GPU
    assert (tables["runs"].query("status == 'ok' and kernel == 'baseline'")["device_type"]
            == "cpu").all()
    caveat = guidelines.opencl_on_cpu(tables["runs"])
    assert caveat and "not a GPU" in caveat and str(markupsafe.escape(caveat)) in html
    run_json = real_study["runs"][OK.index(f"{MODEL}.opencl.baseline")] / "run.json"
    name = json.loads(run_json.read_text())["device"]["name"]
    # the device is named, with the API that ran it
    assert f"| host | OpenCL | {build.md_cell(name)} |" in paths["md"].read_text()


def _placement_study(tmp_path, *extra: dict) -> tuple[dict, dict, float]:
    """A CPU run, OpenCL resident/copy and staged/copy baseline runs and ``extra`` runs
    (write_run keywords), aggregated: (tables, findings by key, staged / resident median)."""
    raw = tmp_path / "raw"
    dirs = [write_run(raw, **kw) for kw in (
        {"backend": "cpu"},
        {"backend": "opencl", "placement": "resident", "transfer": "copy",
         "kernel": "baseline", "unit_ns": 100_000},
        {"backend": "opencl_staged", "placement": "staged", "transfer": "copy",
         "kernel": "baseline", "unit_ns": 400_000}, *extra)]
    aggregate.aggregate(dirs, summary_paths(tmp_path / "summary"))
    tables = report.load_tables(tmp_path / "summary")
    runs = tables["runs"].set_index("run_id")
    q = (runs.loc["host/mlp_784_256_128_16.opencl_staged.baseline", "iteration_median_ms"]
         / runs.loc["host/mlp_784_256_128_16.opencl.baseline", "iteration_median_ms"])
    return tables, {x.key: x for x in guidelines.all_findings(tables)}, q


def test_placement_and_transfer_findings_compare_the_measured_runs(tmp_path):
    _, f, q = _placement_study(tmp_path, {
        "backend": "opencl_staged_map", "placement": "staged", "transfer": "map",
        "kernel": "baseline", "unit_ns": 200_000})
    assert f["placement"].measured and f"{q:.3g}x" in f["placement"].statement
    assert "(map/unmap is faster)" in f["transfer_method"].statement
    assert not f["bandwidth"].measured


def test_a_vulkan_run_beside_the_opencl_pair_leaves_the_placement_finding_to_opencl(tmp_path):
    """The default study has a Vulkan resident/copy baseline run beside the OpenCL one of the
    same model and device: the placement pair stays OpenCL's and the whole report renders."""
    _, f, q = _placement_study(tmp_path, {
        "backend": "vulkan", "placement": "resident", "transfer": "copy",
        "kernel": "baseline", "unit_ns": 900_000})
    assert f["placement"].measured and f"{q:.3g}x" in f["placement"].statement
    out = build.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    assert "Vulkan" in out["md"].read_text()


def test_svg_figures_are_embedded_and_bad_format_or_folder_is_refused(tmp_path, built):
    paths, _ = built
    summary = paths["html"].parent.parent / "summary"
    out = report.build_report(summary, report_paths(tmp_path / "svg", "svg"), figure_format="svg",
                              paper_reference=False)
    assert out["loss"].suffix == ".svg" and out["loss"].read_text().lstrip().startswith("<?xml")
    assert "data:image/svg+xml;base64," in out["html"].read_text()
    with pytest.raises(ValueError, match="figure_format"):
        report.build_report(summary, report_paths(tmp_path / "x"), figure_format="gif")
    with pytest.raises(FileNotFoundError, match=r"runs\.parquet"):
        report.build_report(tmp_path / "nowhere", report_paths(tmp_path / "y"))


def test_different_settings_are_flagged(tmp_path):
    """Different thread counts are a setting to flag; different counts of measured
    iterations (the adaptive stop's outcome, in every study) are not."""
    dirs = [write_run(tmp_path / "raw", backend="cpu", iterations=3),
            write_run(tmp_path / "raw", backend="opencl", placement="resident",
                      transfer="copy", kernel="baseline", iterations=5)]
    aggregate.aggregate(dirs, summary_paths(tmp_path / "summary"))
    assert build.settings_notes(report.load_tables(tmp_path / "summary")["runs"]) == []
    p = dirs[0] / "params.json"
    p.write_text(json.dumps({**json.loads(p.read_text()), "threads": 2}))
    aggregate.aggregate(dirs, summary_paths(tmp_path / "summary2"))
    notes = build.settings_notes(report.load_tables(tmp_path / "summary2")["runs"])
    assert notes == ["runs were measured with different threads: 0, 2 -- compare them "
                     "with care"]


def test_empty_study_still_renders(tmp_path):
    for t in schema.TABLES:
        schema.write_table(schema.empty(t), t, tmp_path / "summary" / f"{t}.parquet")
    out = report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    assert all(out[n].exists() for n in build.FIGURES)
    assert "Not measured" in out["md"].read_text()
    assert isinstance(pd.read_parquet(tmp_path / "summary" / "runs.parquet"), pd.DataFrame)


def test_snakemake_declares_every_figure_with_a_caption():
    rules = REPO / "rules"
    smk = (rules / "report.smk").read_text()
    for name in build.FIGURES:
        caption = rules / "captions" / f"{name}.rst"
        assert caption.exists() and caption.read_text().strip(), caption
    assert "**{name: figure(name) for name in FIGURES}" in smk   # phonetrain.report.registry


def test_cli_aggregate_report_and_trace_work_on_a_results_folder(real_study, tmp_path):
    from click.testing import CliRunner

    from phonetrain.cli import main
    results = tmp_path / "results"   # a copy: the session's study stays as other tests read it
    shutil.copytree(real_study["runs"][0].parents[2], results)
    cli = CliRunner()
    res = cli.invoke(main, ["aggregate", "--found", "--results", str(results)])
    assert res.exit_code == 0, res.output
    runs = schema.read_table(results / "summary" / "runs.parquet", "runs")
    assert set(runs["status"]) == {"ok", "wrong", "failed"}
    res = cli.invoke(main, ["report", "--results", str(results)])
    assert res.exit_code == 0, res.output
    md = (results / "report" / "report.md").read_text()
    assert md.startswith("# ") and WRONG in md and FAILED in md
    run_dir = results / "runs" / "host" / "mlp_784_256_128_16.opencl.baseline"
    res = cli.invoke(main, ["trace", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert json.loads((run_dir / "trace.perfetto.json").read_text())["traceEvents"]
    res = cli.invoke(main, ["report", "--results", str(results / "nowhere")])
    assert res.exit_code != 0 and "nowhere does not exist" in res.output, res.output


def _report_with_a_failed_run(tmp_path, kernel: str, reason: str, **kw) -> dict:
    """The report of a CPU run and an OpenCL run of ``kernel`` that failed with ``reason``."""
    dirs = [write_run(tmp_path / "raw", backend="cpu"),
            write_run(tmp_path / "raw", backend="opencl", placement="resident",
                      transfer="copy", kernel=kernel, failed_reason=reason)]
    aggregate.aggregate(dirs, summary_paths(tmp_path / "summary"))
    return report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"), **kw)


def test_multiline_failure_reason_keeps_tables_intact(tmp_path):
    reason = "kernel version 'broken' failed to build | exit 4\nerror: expected ';'\n  x = 1"
    out = _report_with_a_failed_run(tmp_path, "broken", reason)
    md = out["md"].read_text()
    row = next(line for line in md.splitlines()
               if line.startswith("| host/mlp_784_256_128_16.opencl"))
    assert row.count(" | ") == 1 and "\\| exit 4 ..." in row
    assert "error: expected ';'" in md.split("## Missing runs")[1]
    assert "<pre>kernel version &#39;broken&#39; failed" in out["html"].read_text()


def test_markdown_report_passes_no_raw_html_or_extra_heading(tmp_path):
    reason = "<script>alert(1)</script> lost"
    out = _report_with_a_failed_run(tmp_path, "baseline", reason,
                                    title="T</title><script>x</script>\n# second")
    md = out["md"].read_text()
    assert md.splitlines()[0] == "# T&lt;/title>&lt;script>x&lt;/script> # second"
    row = next(line for line in md.splitlines()
               if line.startswith("| host/mlp_784_256_128_16.opencl"))
    assert "&lt;script>alert(1)&lt;/script> lost" in row and "<script>" not in row
    html = out["html"].read_text()
    assert "<script>alert(1)" not in html and "<script>x" not in html


def test_same_experiment_on_two_devices_is_reported_per_device(tmp_path):
    """One experiment id on two devices: two rows, labels naming the device, every figure."""
    raw = tmp_path / "raw"
    dirs = [write_run(raw, device=dev, backend=b, placement=pl, transfer=tr, kernel=k,
                      unit_ns=u)
            for dev, u in (("host", 50_000), ("phone", 90_000))
            for b, pl, tr, k in (("cpu", "none", "none", "none"),
                                 ("opencl", "resident", "copy", "baseline"))]
    dirs.append(write_run(raw, device="phone", model="lenet5", failed_reason="adb: offline"))
    aggregate.aggregate(dirs, summary_paths(tmp_path / "summary"))
    out = report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))
    for name in ("iteration_time", "breakdown", "gemm_gflops", "loss"):  # drawn, not "no data"
        assert out[name].stat().st_size > 20_000, name
    md = out["md"].read_text()
    runs_md = md.split("## Runs\n")[1].split("\n## ")[0]
    for dev in ("host", "phone"):
        assert f"| mlp_784_256_128_16 | {dev}: cpu | ok |" in runs_md
        assert f"| mlp_784_256_128_16 | {dev}: resident/copy baseline | ok |" in runs_md
    assert "| phone/lenet5.cpu.none | adb: offline |" in md
    assert "host/lenet5.cpu.none" not in md
    html = out["html"].read_text()
    assert "<td>phone: cpu</td>" in html and "<td>host: cpu</td>" in html
    tables = report.load_tables(tmp_path / "summary")
    gpu_vs_cpu = next(f for f in guidelines.all_findings(tables) if f.key == "gpu_vs_cpu")
    assert {r.split(": ")[1].split("/")[0] for r in gpu_vs_cpu.rows} == {"host", "phone"}
    assert {row[0] for row in gpu_vs_cpu.table.rows} == {"host", "phone"}
    assert "host: mlp_784_256_128_16" in gpu_vs_cpu.statement
    assert "phone: mlp_784_256_128_16" in gpu_vs_cpu.statement


def test_one_device_labels_omit_the_device(tmp_path):
    dirs = [write_run(tmp_path / "raw", backend="cpu")]
    aggregate.aggregate(dirs, summary_paths(tmp_path / "summary"))
    md = report.build_report(tmp_path / "summary", report_paths(tmp_path / "report"))["md"].read_text()
    assert "| mlp_784_256_128_16 | cpu | ok |" in md
