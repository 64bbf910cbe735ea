"""The guideline report: ``report.html`` (self-contained), ``report.md`` and ``figures/``.

Reads ``results/summary/*.parquet`` (schemas re-checked), draws the figures of
:mod:`phonetrain.report.figures`, computes the findings of :mod:`phonetrain.report.findings`,
and renders the Jinja2 templates in ``templates/``. The HTML inlines its CSS and figures
(base64 data URIs) so it opens anywhere as one file; the Markdown links
``figures/<name>.<fmt>``. A figure without data (no batch sweep, no held-out evaluation, no
energy, ...) is one line saying why and what to set, not an empty picture.

The first screen is one sentence per device (:mod:`phonetrain.report.answer`: where to train,
by how much, why, and whether the paper agrees; the conditions folded under it), side by side,
then the at-a-glance table per device (:mod:`phonetrain.report.glance`); then
what changed since the last study (:mod:`phonetrain.report.changes`), the guidelines, figures
and the tables behind them.

Rules the report keeps: only ``ok`` runs show speeds in guidelines; ``wrong`` runs (verification
failed) are listed with their error, never with a speed; ``unstable`` runs (measured under
contention) are listed with their reason and conditions and kept
out of guidelines; ``failed`` runs are listed as missing with their reason; ``skipped`` runs
(the device lacks a library the kernel version needs: CLBlast, image support) are listed beside
them with their reason, never with a speed; runs measured under different settings (warm-up,
iterations, threads, repeats) are flagged; figures summed from commands shorter than the timer
resolution say so.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any, Mapping

import jinja2
import pandas as pd

import phonetrain.report.answer as answer
import phonetrain.report.changes as changes
import phonetrain.report.figures as figures
import phonetrain.report.findings as findings
import phonetrain.report.glance as glance
import phonetrain.report.wording as w
from phonetrain.io import write_text
from phonetrain.report.analysis import (TOO_SHORT, UNREADABLE, gemm_table, gpu_api, interval,
                                        interval_name, is_cpu, roofline_notes, run_label,
                                        several_devices, transfer_time_classes)
from phonetrain.report.paper import ANCHORS, CITATION
from phonetrain.report.registry import FIGURES
from phonetrain.results import schema

TEMPLATES = Path(__file__).parent / "templates"
SECTIONS = ("at-a-glance", "summary", "since-last-study", "guidelines", "figures", "runs",
            "unstable", "not-valid", "missing", "builds", "bandwidth", "provenance", "method")
STATUS_WORDS = {"ok": "verified", "wrong": "failed verification (speeds not valid)",
                "failed": "missing (job failed)", "skipped": "skipped (device lacks a library)",
                "unstable": "unstable (kept out of guidelines)",
                "oom": "out of memory at their batch size"}
OTHER_FORMAT = {"png": "svg", "svg": "png"}
MEMORY_ROOF_NOTE = ("These GB/s are transfers through the OpenCL API (host<->device copies, "
                    "maps, device-to-device copies); the roofline's memory roof is another "
                    "measurement: an OpenCL kernel reading device memory (bench-peak "
                    "read_float4).")


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


def _flag(r: pd.Series, col: str) -> bool | None:
    v = r.get(col)
    return None if v is None or pd.isna(v) else bool(v)


def run_rows(runs: pd.DataFrame, gemm: pd.DataFrame) -> list[dict[str, str]]:
    """Takes runs.parquet and :func:`~phonetrain.report.analysis.gemm_table` (indexed by
    ``run_id``); returns one dict of display strings per run, sorted by model, device,
    placement, transfer and kernel: ``run_id``, ``label`` (naming the device when the runs
    come from several), ``model``, ``status``, ``reason`` (last 4000 characters), ``verify``
    (max abs error), ``loss`` (first -> last; the last held-out accuracy when the run
    evaluated), ``conditions`` (load, other processes' CPU
    share, OpenMP wait policy, clocks and temperatures where recorded), and the speeds, filled
    for ``ok`` and ``unstable`` runs: ``iteration`` (``iteration_ms`` [its interval] ms, else "not
    valid"), ``kernel``, ``transfer``, ``gaps`` (ms; sums of commands below the timer
    resolution marked as upper bounds), ``movement`` (data-movement share by device events /
    by call time; CPU-backend runs move no data: ``- (CPU)``) and ``gemm_gflops``."""
    rows = []
    dev = several_devices(runs)
    order = ["model", "device", "placement", "transfer", "kernel"]
    for _, r in runs.sort_values(order, na_position="first").iterrows():
        timed = r["status"] in ("ok", "unstable")
        g = gemm["gemm_gflops"].get(r["run_id"]) if timed and len(gemm) else None
        tb, kb = _flag(r, "transfer_below_resolution"), _flag(r, "kernel_below_resolution")
        cpu = r["placement"] in (None, "none", "") or pd.isna(r["placement"])
        speed = {
            "iteration": (w.ms_interval(r["iteration_ms"], *interval(r))
                          if timed else "not valid"),
            "kernel": w.ms(r["kernel_ms"], kb) if timed else "",
            "transfer": "" if not timed else "- (CPU)" if cpu else w.ms(r["transfer_ms"], tb),
            "gaps": w.ms(r["gap_ms"]) if timed else "",
            "movement": "" if not timed else "- (CPU)" if cpu else (
                f"{w.pct(r['data_movement_share'], tb)} / "
                f"{w.pct(r['data_movement_call_share'], tb)}"),
            "gemm_gflops": _fmt(g),
        }
        rows.append({"run_id": r["run_id"], "label": run_label(r, dev),
                     "model": r["model"],
                     "status": r["status"], "reason": _str(r["status_reason"])[-4000:],
                     "verify": _fmt(r["verify_max_abs_err"]),
                     "loss": (f"{_fmt(r['loss_first'])} -> {_fmt(r['loss_last'])}"
                              if pd.notna(r["loss_first"]) else "") +
                     (f"; held-out accuracy {w.pct(r['heldout_accuracy_last'])}"
                      if pd.notna(r.get("heldout_accuracy_last")) else ""),
                     "conditions": w.conditions(r), **speed})
    return rows


def step_time_notes(runs: pd.DataFrame) -> list[str]:
    """Takes runs.parquet; returns the note saying where the step times and the breakdowns
    of the measured runs come from: for runs whose step time came from processes without
    per-command events (``events_iteration_ms`` set), that the kernel/transfer/gap columns
    and the breakdown figure come from one more process of the same run that recorded
    them, how much slower that process ran per step, and how the breakdown is fitted into
    the step (:func:`phonetrain.results.runs.fit_breakdown`); none when no run is such."""
    ran = runs[runs["status"].isin(["ok", "unstable"])]
    apart = ran[ran["events_iteration_ms"].notna()]
    if apart.empty:
        return []
    slower = (apart["events_iteration_ms"] / apart["iteration_median_ms"]).dropna()
    scaled = int((apart["breakdown_scale"] < 1).sum())
    return [f"Step times of {len(apart)} of {len(ran)} measured runs (OpenCL on one queue) "
            "come from runner processes that recorded no per-command event; their kernel, "
            "transfer and gap columns, the commands table and the breakdown figure come from "
            "one more process of the same run that recorded an event per command, "
            f"{w.span(slower - 1)} slower per step (the events' host cost). That excess "
            "is taken off the breakdown's gaps" + (f", and {scaled} breakdown(s) scaled down "
            "to fit the step" if scaled else "") + ", so no breakdown claims more time "
            "than its step."]


SETTINGS = ("warmup", "repeats", "threads", "batch_size", "dataset")


def settings_notes(runs: pd.DataFrame) -> list[str]:
    """Takes runs.parquet; returns one note per measurement setting of :data:`SETTINGS`
    (warm-up, repeats, threads, batch size, dataset) that differs between the runs that ran
    (not ``failed``, ``skipped`` or ``oom``). The count of measured iterations is not one:
    the adaptive stop ends each run when its interval is narrow enough, so counts differ in
    every study, and what they change, the interval's width, every comparison already
    judges."""
    ran = runs[~runs["status"].isin(["failed", "skipped", "oom"])]
    notes = []
    for col in SETTINGS:
        vals = sorted({str(v) for v in ran[col].dropna()})
        if len(vals) > 1:
            notes.append(f"runs were measured with different {col}: {', '.join(vals)} -- "
                         "compare them with care")
    return notes


def opencl_devices(runs: pd.DataFrame) -> list[dict[str, str]]:
    """Takes runs.parquet; returns the distinct GPU-API devices the runs used (OpenCL and
    Vulkan), one dict of strings each: ``device`` (configured name), ``api`` (OpenCL or
    Vulkan, :func:`~phonetrain.report.analysis.gpu_api`), ``device_name``, ``device_type``,
    ``platform_name``, ``memory_types`` (a Vulkan device's memory types, ``device_memory_types``;
    '' for OpenCL) and ``timer_resolution_ns`` (as the runner reported them)."""
    cols = ["device", "device_name", "device_type", "platform_name", "timer_resolution_ns"]
    cl = runs.dropna(subset=["device_type"]).copy()
    cl["api"] = [gpu_api(r) for _, r in cl.iterrows()]
    cl["memory_types"] = cl["device_memory_types"] if "device_memory_types" in cl else None
    cols = cols[:1] + ["api"] + cols[1:4] + ["memory_types"] + cols[4:]
    cl = cl[cols].drop_duplicates()
    return [{c: _str(r[c]) for c in cols} for _, r in cl.iterrows()]


def missing_apis(runs: pd.DataFrame) -> list[str]:
    """Takes runs.parquet; returns one note per device and GPU API the study asked for but the
    device lacks: every run of that API on it was recorded ``skipped`` (the runner found no
    OpenCL library or no Vulkan library, driver or device), e.g. ``phone: no Vulkan (no Vulkan
    library: tried ...); its 2 runs are skipped``."""
    dev = runs[~is_cpu(runs)].copy()
    if dev.empty:
        return []
    dev["api"] = [gpu_api(r) for _, r in dev.iterrows()]
    out = []
    for (device, api), g in dev.groupby(["device", "api"], sort=True):
        if (g["status"] == "skipped").all():
            reason = g["status_reason"].dropna()
            why = f" ({reason.iloc[0]})" if len(reason) and reason.iloc[0] else ""
            out.append(f"{device}: no {api}{why}; its {len(g)} run(s) are skipped")
    return out


def energy(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Takes runs.parquet; returns one dict per device: ``device``, ``note`` ("not measured on
    <device> (<why>)" when no run of it recorded energy: the battery unreadable, or readable
    but the runs too short to sample; else '') and ``rows``, one per measured run
    with energy: ``run_id``, ``energy`` (mJ per iteration +- the standard error,
    src/runner/power.c), ``sample_hz``, ``temperature`` (start->end C), ``gpu_mhz``
    (start->end) and ``throttled`` (yes/no/not known)."""
    out = []
    for dev, g in runs.groupby("device", sort=True):
        m = g.dropna(subset=["energy_per_iteration_mj"])
        rows = [{"run_id": r["run_id"],
                 "energy": f"{r['energy_per_iteration_mj']:.4g} +- "
                           f"{r['energy_uncertainty_mj']:.2g}" + _energy_method(r),
                 "sample_hz": _fmt(r["power_sample_hz"], ".0f"),
                 "temperature": f"{_fmt(r['temperature_c_start'], '.1f')}->"
                                f"{_fmt(r['temperature_c_end'], '.1f')}",
                 "gpu_mhz": f"{_fmt(r['gpu_mhz_start'], '.0f')}->{_fmt(r['gpu_mhz_end'], '.0f')}",
                 "throttled": {True: "yes", False: "no"}.get(_flag(r, "throttled"), "not known")}
                for _, r in m.iterrows()]
        short = (g["power_samples"].fillna(0) > 0).any()
        caveats = g.loc[g["energy_per_iteration_mj"].isna(), "energy_caveat"].dropna() \
            if "energy_caveat" in g else pd.Series(dtype=object)
        why = caveats.iloc[0] if len(caveats) else TOO_SHORT if short else UNREADABLE
        note = f"not measured on {dev} ({why})" if not rows else \
            f"{len(caveats)} run(s) of {dev} not measured ({caveats.iloc[0]})" if len(caveats) \
            else ""
        out.append({"device": dev, "rows": rows, "note": note})
    return out


def _energy_method(r: pd.Series) -> str:
    """`` (method: caveat)`` after an energy figure not taken from a discharging battery whose
    status was read (``energy_method`` other than ``battery_discharge``), else ''."""
    method = r.get("energy_method")
    if not isinstance(method, str) or method == "battery_discharge":
        return ""
    caveat = r.get("energy_caveat")
    return f" ({method}: {caveat})" if isinstance(caveat, str) else f" ({method})"


def provenance(tables: dict[str, pd.DataFrame]) -> list[dict[str, str]]:
    """Takes the tables of :func:`load_tables`; returns, per provenance column (``git_rev``,
    ``runner_hash``, ``device_fingerprint``, ``config_hash``, ``kernel_hash``), a dict of
    ``column``, ``count`` (distinct values over all tables) and ``values`` (the first 8)."""
    out = []
    for col in ("git_rev", "runner_hash", "device_fingerprint", "config_hash", "kernel_hash"):
        vals = sorted({str(v) for df in tables.values() if len(df) and col in df
                       for v in df[col].dropna()})
        out.append({"column": col, "count": str(len(vals)),
                    "values": ", ".join(vals[:8]) + (" ..." if len(vals) > 8 else "")})
    return out


def draw_figures(tables: dict[str, pd.DataFrame], paths: Mapping[str, Path], dpi: int = 120,
                 paper_reference: bool = True) -> dict[str, Path]:
    """Takes the tables of :func:`load_tables`; writes every figure of :data:`FIGURES` to its
    path in ``paths`` (the suffix picks PNG or SVG; the other format is written beside it)
    with :mod:`phonetrain.report.figures`; returns name -> path."""
    out = {}
    for name, fig in FIGURES.items():   # each returns its path (a NoDataFigure: no data drawn)
        draw = getattr(figures, fig.function)
        kw = {"paper_reference": paper_reference} if fig.paper_reference else {}
        out[name] = draw(*(tables[t] for t in fig.tables), Path(paths[name]), dpi,
                         *(tables[t] for t in fig.tables_after_dpi), **kw)
    return out


def md_line(text: Any) -> str:
    """Text for one Markdown line (a heading): its lines joined by spaces, ``<`` written as
    ``&lt;`` so no raw HTML passes into report.md (an HTML tag starts with ``<``: CommonMark
    0.31, 6.6); ``>`` stays (arrows such as ``->`` read as written)."""
    return " ".join(_str(text).split()).replace("<", "&lt;")


def md_cell(text: Any, width: int = 160) -> str:
    """One Markdown table cell: the first line, ``|`` escaped and ``<`` as ``&lt;``
    (:func:`md_line`), cut at ``width`` characters (the full text follows the table in a
    code block)."""
    lines = _str(text).strip().splitlines() or [""]
    first = md_line(lines[0]).replace("|", "\\|")
    more = len(lines) > 1 or len(first) > width
    return (first[:width] + (" ..." if more else "")).strip()


def _data_uri(path: Path) -> str:
    """The file as a base64 ``data:`` URI (SVG or PNG), for the self-contained HTML."""
    mime = "image/svg+xml" if path.suffix == ".svg" else "image/png"
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def counts(runs: pd.DataFrame) -> list[dict[str, Any]]:
    """Takes runs.parquet; returns one dict per run status of
    :data:`phonetrain.results.schema.STATUSES`: ``status``, ``n`` and ``words`` (what it
    means), in that order."""
    c = runs["status"].value_counts()
    return [{"status": st, "n": int(c.get(st, 0)), "words": STATUS_WORDS[st]}
            for st in schema.STATUSES]


def context(tables: dict[str, pd.DataFrame], *, title: str,
            paper_reference: bool = True) -> dict[str, Any]:
    """Takes the tables of :func:`load_tables`; returns everything the templates render
    except ``facts`` and ``figures``: the at-a-glance tables, counts per status, what changed
    since the last study, the findings, the run rows of :func:`run_rows` split by status, the
    unstable runs, builds (with whether the binary came from a cache), the bandwidth table
    (each device and kind: its time-vs-size behaviour, peak host-timed GB/s where it copies),
    settings notes, provenance, OpenCL devices, notes per figure (``figure_notes``: points
    above the roofline) and what the bandwidth table measures beside the memory roof."""
    runs = tables["runs"]
    gemm = gemm_table(runs, tables["commands"])
    rows = run_rows(runs, gemm)
    n_change, since = changes.since_last_study(tables["history"])
    by = {c["status"]: c["n"] for c in counts(runs)}
    timed = runs[runs["status"].isin(["ok", "unstable"]) & runs["iteration_low_ms"].notna()]
    intervals = {interval_name(r) for _, r in timed.iterrows()} - {"no interval recorded"}
    at = glance.at_a_glance(tables)
    return {
        "title": title, "citation": CITATION, "paper_reference": paper_reference,
        "anchors": list(ANCHORS.values()), "sections": SECTIONS,
        "glance": at, "answers": answer.answers(tables, at), "counts": counts(runs),
        "under_contention": w.UNDER_CONTENTION,
        "contention": glance.contention_note(runs),
        "n_runs": len(runs), "n_ok": by["ok"], "n_wrong": by["wrong"],
        "n_failed": by["failed"], "n_skipped": by["skipped"], "n_unstable": by["unstable"],
        "devices": sorted(runs["device"].unique()), "models": sorted(runs["model"].unique()),
        "findings": findings.all_findings(tables),
        "caveat": findings.opencl_on_cpu(runs),
        "since": since, "since_n": n_change,
        "interval_names": " / ".join(sorted(intervals)),
        "noise_factor": f"{w.SURVIVES_NOISE_FACTOR:g}",
        "runs": [r for r in rows if r["status"] not in ("failed", "skipped", "oom")],
        "unstable": findings.unstable_runs(runs),
        "wrong": [r for r in rows if r["status"] == "wrong"],
        "missing": [r for r in rows if r["status"] == "failed"],
        "skipped": [r for r in rows if r["status"] == "skipped"],
        "builds": [_build_row(b) for _, b in tables["builds"].iterrows()],
        "bandwidth": bandwidth_rows(tables["bandwidth"], tables["peaks"]),
        "settings_notes": settings_notes(runs) + step_time_notes(runs) + missing_apis(runs),
        "provenance": provenance(tables),
        "opencl_devices": opencl_devices(runs), "energy": energy(runs),
        "figure_notes": {"gemm_kernels": roofline_notes(tables["gemm"], tables["peaks"])},
        "memory_roof_note": MEMORY_ROOF_NOTE,
    }


def _build_row(b: pd.Series) -> dict[str, str]:
    """One row of the kernel builds table; a build served from the OpenCL implementation's
    cache (``cached``) says so, since its time and size are not a compile's."""
    cached = _flag(b, "cached")
    return {"device": b["device"], "kernel": b["kernel"], "program": b["program"],
            "status": b["status"], "build_ms": _fmt(b["build_ms"]),
            "binary_size_bytes": _fmt(b["binary_size_bytes"], ".0f"),
            "cached": {True: "yes: from the implementation's cache (not a compile's time "
                             "and size)", False: "no (compiled)"}.get(cached, "not recorded"),
            "log": _str(b["log"])[-2000:]}


def bandwidth_rows(bw: pd.DataFrame, peaks: pd.DataFrame) -> list[dict[str, str]]:
    """Takes bandwidth.parquet and peaks.parquet; returns one row per device and kind: its
    time-vs-size class (:func:`~phonetrain.report.analysis.transfer_time_classes`), and for
    kinds that copy the peak host-timed GB/s, the event-timed GB/s at that size and the size;
    a zero-copy or overhead-bound kind shows its time per call instead of a GB/s figure."""
    if bw.empty:
        return []
    cls = transfer_time_classes(bw, peaks).set_index(["device", "kind"])
    out = []
    for (dev, kind), g in bw.dropna(subset=["host_gbps"]).groupby(["device", "kind"]):
        c = cls.loc[(dev, kind)]
        r = g.loc[g["host_gbps"].idxmax()]
        row = {"device": dev, "kind": kind, "behaviour": c["cls"],
               "host_gbps": _fmt(r["host_gbps"]), "device_gbps": _fmt(r["device_gbps"]),
               "size_bytes": str(int(r["size_bytes"]))}
        if c["cls"] != "copy":
            row.update(host_gbps=f"~{c['call_us']:.3g} us per call (no GB/s)",
                       device_gbps="n/a", size_bytes=f"up to {int(c['max_bytes'])}")
        out.append(row)
    return out


def build_report(summary_dir: str | Path, outputs: Mapping[str, str | Path], *,
                 title: str = "phonetrain report", paper_reference: bool = True,
                 figure_format: str = "png", dpi: int = 120,
                 facts: list[dict[str, Any]] = ()) -> dict[str, Path]:
    """Write the report from the Parquet tables in ``summary_dir`` to ``outputs``: ``html``
    (self-contained), ``md`` (linking the figure files relative to itself) and one path per
    figure of :data:`FIGURES` (by name).

    ``title`` heads the report; ``paper_reference`` draws and quotes the seed paper's figures
    (:mod:`phonetrain.report.paper`); ``figure_format`` is ``png`` or ``svg`` (the figure
    paths' suffix; every figure is also written in the other format beside it,
    :func:`alt_figure`), ``dpi`` the PNG's resolution; ``facts`` holds one dict per device with
    ``device``, ``soc``, ``gpu``, ``peak_gflops`` and ``bandwidth_gbps`` (datasheet figures;
    absent or null keys print "unknown"). Returns ``{"html", "md", <figure name>...,
    <figure name>_alt...}`` -> path.
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
    env.filters["line"] = md_line
    rel = lambda p: os.path.relpath(p, md_path.parent).replace(os.sep, "/")  # noqa: E731
    html_figs = [{"name": n, "title": FIGURES[n].title, "empty": empty_figure(p),
                  "src": "" if empty_figure(p) else _data_uri(p)} for n, p in figs.items()]
    md_figs = [{"name": n, "title": FIGURES[n].title, "empty": empty_figure(p), "src": rel(p),
                "alt": rel(alt_figure(p)), "alt_format": OTHER_FORMAT[figure_format]}
               for n, p in figs.items()]
    write_text(html_path, env.get_template("report.html.j2").render(**ctx, figures=html_figs))
    write_text(md_path, env.get_template("report.md.j2").render(**ctx, figures=md_figs))
    return {"html": html_path, "md": md_path, **figs,
            **{f"{n}_alt": alt_figure(p) for n, p in figs.items()}}


def empty_figure(path: Path) -> str:
    """The one line the report shows instead of a figure that has no data (``no data:
    <why>; <what to set>``, :class:`~phonetrain.report.figures.NoDataFigure`); '' for a
    figure with data."""
    what = getattr(path, "what", "")
    return f"no data: {what}" if what else ""


def alt_figure(path: str | Path) -> Path:
    """The figure file written beside ``path`` in the other format (SVG beside PNG, PNG
    beside SVG)."""
    path = Path(path)
    return path.with_suffix("." + OTHER_FORMAT[path.suffix.lstrip(".")])
