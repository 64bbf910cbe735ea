"""The guideline report: ``report.html`` (self-contained), ``report.md`` and ``figures/``.

Reads ``results/summary/*.parquet`` (schemas re-checked), draws the figures of
:mod:`phonetrain.report.figures`, computes the findings of :mod:`phonetrain.report.findings`,
and renders the Jinja2 templates in ``templates/``. The HTML inlines its CSS and figures
(base64 data URIs) so it opens anywhere as one file; the Markdown links
``figures/<name>.<fmt>``.

Rules the report keeps: only ``ok`` runs show speeds; ``wrong`` runs (verification failed)
are listed with their error, never with a speed; ``failed`` runs are listed as missing with
their reason; ``skipped`` runs (the device lacks a library the kernel version needs: CLBlast,
image support) are listed beside them with their reason, never with a speed; runs measured
under different settings (warm-up, iterations, threads, repeats) are flagged.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any, Mapping

import jinja2
import pandas as pd

import phonetrain.report.figures as figures
import phonetrain.report.findings as findings
from phonetrain.io import write_text
from phonetrain.report.analysis import gemm_table, run_label, several_devices, zero_copy
from phonetrain.report.paper import ANCHORS, CITATION
from phonetrain.results import schema

TEMPLATES = Path(__file__).parent / "templates"
FIGURES = {  # name -> title; file figures/<name>.<fmt>; rules/captions/<name>.rst
    "iteration_time": "Iteration time, CPU vs OpenCL device, per model and placement",
    "breakdown": "Data-movement breakdown per run",
    "gemm_gflops": "GEMM throughput inside training",
    "gemm_kernels": "GEMM kernel versions vs the device's peak (roofline)",
    "bandwidth": "Bandwidth vs transfer size (zero-copy kinds: time per call, no GB/s)",
    "loss": "Loss curves",
}
SECTIONS = ("summary", "guidelines", "figures", "runs", "not-valid", "missing", "builds",
            "bandwidth", "provenance", "method")


def load_tables(summary_dir: str | Path) -> dict[str, pd.DataFrame]:
    """Takes the folder of the aggregate stage's Parquet files; returns table name -> DataFrame
    for every table of :data:`phonetrain.results.schema.TABLES`, read and schema-checked by
    :func:`phonetrain.results.schema.read_table` (columns and units defined there).

    Raises :class:`FileNotFoundError` naming the missing file (run the aggregate stage) and
    :class:`phonetrain.results.schema.SchemaError` for a stale file."""
    summary_dir = Path(summary_dir)
    out = {}
    for t in schema.TABLES:
        p = summary_dir / f"{t}.parquet"
        if not p.exists():
            raise FileNotFoundError(f"{p}: missing; run `phonetrain aggregate` (or the "
                                    "workflow's aggregate stage) first")
        out[t] = schema.read_table(p, t)
    return out


def _str(x: Any) -> str:
    """A text cell: '' for null (pandas reads null strings back as NaN)."""
    return "" if x is None or (not isinstance(x, str) and pd.isna(x)) else str(x)


def _fmt(x: Any, spec: str = ".3g") -> str:
    """A number cell: ``x`` formatted with ``spec``; '' for null."""
    return "" if x is None or pd.isna(x) else format(x, spec)


def run_rows(runs: pd.DataFrame, gemm: pd.DataFrame) -> list[dict[str, str]]:
    """Takes runs.parquet and :func:`~phonetrain.report.analysis.gemm_table` (indexed by
    ``run_id``); returns one dict of display strings per run, sorted by model, device,
    placement, transfer and kernel: ``run_id``, ``label`` (naming the device when the runs
    come from several), ``model``, ``status``, ``reason`` (last 4000 characters), ``verify``
    (max abs error), ``loss`` (first -> last), and the speeds, filled only for ``ok`` runs:
    ``iteration`` (median [p25-p75] ms, else "not valid"), ``kernel``, ``transfer``,
    ``gaps`` (ms), ``movement`` (data-movement share by events / with call overhead) and
    ``gemm_gflops``."""
    rows = []
    dev = several_devices(runs)
    order = ["model", "device", "placement", "transfer", "kernel"]
    for _, r in runs.sort_values(order, na_position="first").iterrows():
        ok = r["status"] == "ok"
        g = gemm["gemm_gflops"].get(r["run_id"]) if ok and len(gemm) else None
        speed = {
            "iteration": (f"{_fmt(r['iteration_median_ms'])} [{_fmt(r['iteration_p25_ms'])}-"
                          f"{_fmt(r['iteration_p75_ms'])}]") if ok else "not valid",
            "kernel": _fmt(r["kernel_ms"]) if ok else "",
            "transfer": _fmt(r["transfer_ms"]) if ok else "",
            "gaps": _fmt(r["gap_ms"]) if ok else "",
            "movement": (f"{_fmt(r['data_movement_share'], '.1%')} / "
                         f"{_fmt(r['data_movement_call_share'], '.1%')}") if ok else "",
            "gemm_gflops": _fmt(g),
        }
        rows.append({"run_id": r["run_id"], "label": run_label(r, dev),
                     "model": r["model"],
                     "status": r["status"], "reason": _str(r["status_reason"])[-4000:],
                     "verify": _fmt(r["verify_max_abs_err"]),
                     "loss": f"{_fmt(r['loss_first'])} -> {_fmt(r['loss_last'])}"
                     if pd.notna(r["loss_first"]) else "", **speed})
    return rows


def settings_notes(runs: pd.DataFrame) -> list[str]:
    """Takes runs.parquet; returns one note per measurement setting (warm-up, iterations,
    repeats, threads, batch size, dataset) that differs between the runs that ran (not
    ``failed`` or ``skipped``)."""
    ran = runs[~runs["status"].isin(["failed", "skipped"])]
    notes = []
    for col in ("warmup", "iterations", "repeats", "threads", "batch_size", "dataset"):
        vals = sorted({str(v) for v in ran[col].dropna()})
        if len(vals) > 1:
            notes.append(f"runs were measured with different {col}: {', '.join(vals)} -- "
                         "compare them with care")
    return notes


def opencl_devices(runs: pd.DataFrame) -> list[dict[str, str]]:
    """Takes runs.parquet; returns the distinct OpenCL devices the runs used, one dict of
    strings each: ``device`` (configured name), ``device_name``, ``device_type``,
    ``platform_name`` and ``timer_resolution_ns`` (as the runner reported them)."""
    cols = ["device", "device_name", "device_type", "platform_name", "timer_resolution_ns"]
    cl = runs.dropna(subset=["device_type"])[cols].drop_duplicates()
    return [{c: _str(r[c]) for c in cols} for _, r in cl.iterrows()]


def provenance(tables: dict[str, pd.DataFrame]) -> list[dict[str, str]]:
    """Takes the tables of :func:`load_tables`; returns, per provenance column (``git_rev``,
    ``runner_hash``, ``device_fingerprint``, ``config_hash``, ``kernel_hash``), a dict of
    ``column``, ``count`` (distinct values over all tables) and ``values`` (the first 8)."""
    out = []
    for col in ("git_rev", "runner_hash", "device_fingerprint", "config_hash", "kernel_hash"):
        vals = sorted({str(v) for df in tables.values() if len(df) for v in df[col].dropna()})
        out.append({"column": col, "count": str(len(vals)),
                    "values": ", ".join(vals[:8]) + (" ..." if len(vals) > 8 else "")})
    return out


def draw_figures(tables: dict[str, pd.DataFrame], paths: Mapping[str, Path], dpi: int = 120,
                 paper_reference: bool = True) -> dict[str, Path]:
    """Takes the tables of :func:`load_tables`; writes every figure of :data:`FIGURES` to its
    path in ``paths`` (the suffix picks PNG or SVG) with :mod:`phonetrain.report.figures`;
    returns name -> path."""
    runs, it, cmds = tables["runs"], tables["iterations"], tables["commands"]
    p = dict(paths)
    figures.iteration_time(runs, p["iteration_time"], dpi)
    figures.breakdown(runs, it, p["breakdown"], dpi, paper_reference=paper_reference)
    figures.gemm_gflops(runs, cmds, p["gemm_gflops"], dpi, paper_reference=paper_reference)
    figures.bandwidth(tables["bandwidth"], p["bandwidth"], dpi)
    figures.gemm_kernels(tables["gemm"], tables["peaks"], p["gemm_kernels"], dpi)
    figures.loss_curves(runs, it, p["loss"], dpi)
    return p


def md_cell(text: Any, width: int = 160) -> str:
    """One Markdown table cell: the first line, ``|`` escaped, cut at ``width`` characters
    (the full text follows the table in a code block)."""
    lines = _str(text).strip().splitlines() or [""]
    first = lines[0].replace("|", "\\|")
    more = len(lines) > 1 or len(first) > width
    return (first[:width] + (" ..." if more else "")).strip()


def _data_uri(path: Path) -> str:
    """The file as a base64 ``data:`` URI (SVG or PNG), for the self-contained HTML."""
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def context(tables: dict[str, pd.DataFrame], *, title: str,
            paper_reference: bool = True) -> dict[str, Any]:
    """Takes the tables of :func:`load_tables`; returns everything the templates render
    except ``facts`` and ``figures``: counts per status, the findings, the run rows of
    :func:`run_rows` split by status, builds, the bandwidth table (each device and kind at
    its peak host-timed GB/s), settings notes, provenance and OpenCL devices."""
    runs = tables["runs"]
    gemm = gemm_table(runs, tables["commands"])
    rows = run_rows(runs, gemm)
    builds = tables["builds"]
    bw = tables["bandwidth"]
    peaks = (bw.loc[bw.groupby(["device", "kind"])["host_gbps"].idxmax()] if len(bw) else bw)
    zc = zero_copy(bw) if len(bw) else pd.Series(dtype=float)
    counts = runs["status"].value_counts()
    return {
        "title": title, "citation": CITATION, "paper_reference": paper_reference,
        "anchors": list(ANCHORS.values()), "sections": SECTIONS,
        "n_runs": len(runs), "n_ok": int(counts.get("ok", 0)),
        "n_wrong": int(counts.get("wrong", 0)), "n_failed": int(counts.get("failed", 0)),
        "n_skipped": int(counts.get("skipped", 0)),
        "devices": sorted(runs["device"].unique()), "models": sorted(runs["model"].unique()),
        "findings": findings.all_findings(tables),
        "caveat": findings.opencl_on_cpu(runs),
        "runs": [r for r in rows if r["status"] not in ("failed", "skipped")],
        "wrong": [r for r in rows if r["status"] == "wrong"],
        "missing": [r for r in rows if r["status"] == "failed"],
        "skipped": [r for r in rows if r["status"] == "skipped"],
        "builds": [{"device": b["device"], "kernel": b["kernel"], "program": b["program"],
                    "status": b["status"], "build_ms": _fmt(b["build_ms"]),
                    "binary_size_bytes": _fmt(b["binary_size_bytes"], ".0f"),
                    "log": _str(b["log"])[-2000:]} for _, b in builds.iterrows()],
        "bandwidth": [_bandwidth_row(r, zc) for _, r in peaks.iterrows()],
        "settings_notes": settings_notes(runs), "provenance": provenance(tables),
        "opencl_devices": opencl_devices(runs),
    }


def _bandwidth_row(r: pd.Series, zc: pd.Series) -> dict[str, str]:
    """One row of the report's bandwidth table from a bandwidth.parquet row and
    :func:`~phonetrain.report.analysis.zero_copy`'s result; a zero-copy kind shows its
    constant time per call instead of a meaningless GB/s."""
    row = {"device": r["device"], "kind": r["kind"], "host_gbps": _fmt(r["host_gbps"]),
           "device_gbps": _fmt(r["device_gbps"]), "size_bytes": int(r["size_bytes"])}
    if (r["device"], r["kind"]) in zc.index:
        row["host_gbps"] = f"zero-copy: ~{zc[(r['device'], r['kind'])]:.3g} us per call"
        row["device_gbps"] = "n/a (time constant over sizes)"
    return row


def build_report(summary_dir: str | Path, outputs: Mapping[str, str | Path], *,
                 title: str = "phonetrain report", paper_reference: bool = True,
                 figure_format: str = "png", dpi: int = 120,
                 facts: list[dict[str, Any]] = ()) -> dict[str, Path]:
    """Write the report from the Parquet tables in ``summary_dir`` to ``outputs``: ``html``
    (self-contained), ``md`` (linking the figure files relative to itself) and one path per
    figure of :data:`FIGURES` (by name).

    ``title`` heads the report; ``paper_reference`` draws and quotes the seed paper's figures
    (:mod:`phonetrain.report.paper`); ``figure_format`` is ``png`` or ``svg`` (the figure
    paths' suffix), ``dpi`` its resolution; ``facts`` holds one dict per device with
    ``device``, ``soc``, ``gpu``, ``peak_gflops`` and ``bandwidth_gbps`` (datasheet figures;
    absent or null keys print "unknown"). Returns ``{"html", "md", <figure name>...}`` -> path.
    Raises :class:`FileNotFoundError` / :class:`phonetrain.results.schema.SchemaError` for
    missing or stale tables, naming the file, and ValueError for a bad format or a missing
    output path."""
    if figure_format not in ("png", "svg"):
        raise ValueError(f"report.figure_format {figure_format!r} must be 'png' or 'svg'")
    missing = sorted({"html", "md", *FIGURES} - set(outputs))
    if missing:
        raise ValueError(f"build_report: no output path for {missing}")
    html_path, md_path = Path(outputs["html"]), Path(outputs["md"])
    tables = load_tables(summary_dir)
    figs = draw_figures(tables, {n: Path(outputs[n]) for n in FIGURES}, dpi, paper_reference)
    ctx = context(tables, title=title, paper_reference=paper_reference)
    ctx["facts"] = [{k: _str(f.get(k)) or "unknown" for k in (
        "device", "soc", "gpu", "peak_gflops", "bandwidth_gbps")} for f in facts]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True,
                             autoescape=jinja2.select_autoescape(("html.j2",)))
    env.filters["cell"] = md_cell
    html_figs = [{"name": n, "title": FIGURES[n], "src": _data_uri(p)} for n, p in figs.items()]
    md_figs = [{"name": n, "title": FIGURES[n],
                "src": os.path.relpath(p, md_path.parent).replace(os.sep, "/")}
               for n, p in figs.items()]
    write_text(html_path, env.get_template("report.html.j2").render(**ctx, figures=html_figs))
    write_text(md_path, env.get_template("report.md.j2").render(**ctx, figures=md_figs))
    return {"html": html_path, "md": md_path, **figs}
