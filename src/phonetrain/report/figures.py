"""The report's figures, drawn with matplotlib (Agg) from the Parquet tables.

Every function takes DataFrames as read by :func:`phonetrain.results.schema.read_table`, a
``path`` and a ``dpi``, writes one figure file there (format from the suffix) and the same
figure in the other format beside it (SVG beside PNG), and returns its path. A figure is
always written (with a "no data" note when its table is empty) so the report and Snakemake's
``report()`` outputs are stable; such a figure's path is a :class:`NoDataFigure`, whose
``what`` the report prints as one line instead of the picture.

Layout rules, so a figure stays legible from one device to eight and with up to ten kernel
versions: small multiples, one panel (or one row of panels) per device, each sized by what it
holds; bars horizontal, so labels sit on their own rows and never overlap; value labels inside
a margin the axes reserve for them; legends outside the data (below the panels, or to their
right where that leaves each panel at least half its column), with entries only for what is
drawn; tick labels thinned or rotated so none overlaps. Only runs with status ``ok`` are
drawn as speeds; ``unstable`` runs as hatched grey bars marked so (the breakdown figures draw
a device's unstable runs hatched where it has no usable one), ``wrong`` runs as "verification
failed", ``failed`` runs as "missing", ``skipped`` runs (device lacks a library) as "skipped". Paper
reference lines are labelled with their provenance (see :mod:`phonetrain.report.paper`). The
numbers drawn come from :mod:`phonetrain.report.analysis`.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import phonetrain.report.wording as w  # noqa: E402

from phonetrain.report.analysis import (  # noqa: E402
    BATCH_KEY, CPU_KERNEL, MEMORY_ROLES, SEGMENTS, bandwidth_peak, batch_scaling,
    breakdown_frame, memory_frame, with_unstable,
    compute_peak, energy_frame, gemm_sweep, roof_labels, roofline_notes,
    gemm_table, intensity, interval, is_cpu, opencl_label, roofline, run_label,
    training_timeline, transfer_time_classes)
from phonetrain.report.paper import ANCHORS  # noqa: E402

SEGMENT_COLORS = {  # breakdown figure: reds for data movement, blue kernels, greys the rest
    "h2d_ms": "#d62728", "d2h_ms": "#ff7f0e", "mapunmap_ms": "#e377c2", "d2d_ms": "#8c564b",
    "host_copy_ms": "#bcbd22", "transfer_overhead_ms": "#f7b6d2", "kernel_ms": "#1f77b4",
    "host_other_ms": "#7f7f7f", "other_gap_ms": "#c7c7c7",
}
ROLE_COLORS = {  # memory_roles figure: the model's state blue/purple, the step's own warm
    "param_bytes": "#1f77b4", "grad_bytes": "#9467bd", "optimizer_state_bytes": "#17becf",
    "activation_bytes": "#ff7f0e", "scratch_bytes": "#d62728", "staging_bytes": "#7f7f7f",
}
CPU_COLOR, CL_COLOR = "#2ca02c", "#1f77b4"
MARKERS = "osD^v<>PX*"   # with the ten tab10 colours: ten kernel versions stay distinct
BAR_IN = 0.26            # inches per horizontal bar
NOT_OK = {"wrong": "verification failed", "skipped": "skipped (no library)", "oom": "out of memory",
          "failed": "missing (failed)"}


def _save(fig: plt.Figure, path: Path, dpi: int) -> Path:
    """Write ``fig`` to ``path`` and, in the other format, beside it (SVG beside PNG, PNG
    beside SVG), each atomically (temp file in the same folder, then rename); close it and
    return ``path``.

    Laid out once for both files: the layout engine's pass (constrained layout) and the tight
    box that ``bbox_inches="tight"`` would find (:meth:`Figure.get_tightbbox`, padded by
    :rc:`savefig.pad_inches`, in inches) are computed at ``dpi`` with Agg's text metrics, then
    the engine is switched off and both files are cut to that box. ``savefig`` with
    ``bbox_inches="tight"`` would repeat the layout pass and the box search for each format.
    The PNG is the picture that did (pixel for pixel); the SVG shares its layout (in figure
    fractions) and its box, where it had searched its own with the SVG renderer's metrics."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    other = path.with_suffix({".png": ".svg", ".svg": ".png"}[path.suffix])
    try:
        fig.set_dpi(dpi)
        fig.draw_without_rendering()
        box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(
            plt.rcParams["savefig.pad_inches"])
        fig.set_layout_engine(None)     # laid out above; None keeps the positions as they are
        for out in (path, other):
            tmp = out.with_name(f".{out.stem}.{os.getpid()}.tmp{out.suffix}")
            try:
                fig.savefig(tmp, dpi=dpi, bbox_inches=box)
                tmp.replace(out)
            finally:
                tmp.unlink(missing_ok=True)
    finally:
        plt.close(fig)
    return path


class NoDataFigure(type(Path())):
    """The path of a figure that shows nothing but ``no data: <what>``; ``what`` (one line)
    is why, and what to set to fill it. Equal to the plain path."""

    what: str = ""


def _no_data(path: Path, dpi: int, what: str) -> NoDataFigure:
    """Write a figure that says ``no data: <what>`` to ``path``; return ``path`` as a
    :class:`NoDataFigure` carrying ``what`` on one line."""
    fig, ax = plt.subplots(figsize=(8, 1.5))
    ax.set_xticks([])      # no hidden tick labels for a long line to cover
    ax.set_yticks([])
    ax.axis("off")
    ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center")
    out = NoDataFigure(_save(fig, path, dpi))
    out.what = " ".join(what.split())
    return out


def _panels(heights: list[float], ncols: int = 1,
            width: float = 9.0) -> tuple[plt.Figure, np.ndarray]:
    """A figure of ``len(heights)`` rows x ``ncols`` panels, row i ``heights[i]`` inches
    tall plus room for its title and axis labels, laid out by matplotlib's constrained layout
    (nothing overlaps; legends placed ``outside`` get their own room); axes as a 2-D array."""
    fig, axes = plt.subplots(len(heights), ncols, squeeze=False, layout="constrained",
                             figsize=(width, sum(heights) + 0.9 * len(heights) + 0.8),
                             gridspec_kw={"height_ratios": heights})
    return fig, axes


def _legend_below(fig: plt.Figure, handles, labels, ncol: int = 3) -> None:
    """One legend for the whole figure, below the panels (outside every axes)."""
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8,
                   frameon=False)


def _log_ticks(axis) -> None:
    """Log-axis ticks at 1, 2 and 5 per decade, written as plain numbers."""
    axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _estimate(r: pd.Series) -> float:
    """A run row's iteration time in ms: its location estimate ``iteration_ms``, else (tables
    written before the estimate existed) its median."""
    est = r.get("iteration_ms")
    return est if est is not None and pd.notna(est) else r["iteration_median_ms"]


def _hbars(ax: plt.Axes, sub: pd.DataFrame, log: bool = True) -> None:
    """Iteration time of each run of ``sub`` by its location estimate (``iteration_ms``, the
    figure every comparison uses; the median for tables without one) as a horizontal bar with
    the estimate's interval (:func:`~phonetrain.report.analysis.interval`) as whiskers,
    the figure written at the whisker's end inside a margin the x-axis reserves; runs
    without a valid speed get a marked empty row."""
    y = np.arange(len(sub))
    top = []
    cpu = is_cpu(sub).to_numpy()
    for yi, (_, r) in zip(y, sub.iterrows()):
        med = _estimate(r)
        if r["status"] in ("ok", "unstable") and pd.notna(med):
            lo, hi = interval(r)
            # an interval of another estimate (older tables) is drawn only where it holds it
            lo, hi = (med, med) if np.isnan(lo) else (min(lo, med), max(hi, med))
            unstable = r["status"] == "unstable"
            ax.barh(yi, med, color="#bbbbbb" if unstable else
                    (CPU_COLOR if cpu[yi] else CL_COLOR),
                    hatch="//" if unstable else None, height=0.7, zorder=2,
                    xerr=[[med - lo], [hi - med]], capsize=2, ecolor="#444")
            ax.text(hi * (1.08 if log else 1.02), yi,
                    f"{med:.3g} ms" + (" (unstable)" if unstable else ""),
                    va="center", ha="left", fontsize=7)
            top.append(hi)
        else:
            ax.text(0.01, yi, NOT_OK.get(r["status"], r["status"]), va="center",
                    ha="left", color="#d62728", fontsize=7, transform=ax.get_yaxis_transform())
    ax.set_yticks(y, [run_label(r, False) for _, r in sub.iterrows()], fontsize=7)
    ax.set_ylim(len(sub) - 0.4, -0.6)
    if top:
        usable = sub[sub["status"].isin(["ok", "unstable"])]
        lo = usable["iteration_ms"].fillna(usable["iteration_median_ms"]).min()
        if log:
            ax.set_xscale("log")
            ax.set_xlim(lo / 2, max(top) * 3.5)
            _log_ticks(ax.xaxis)
        else:
            ax.set_xlim(0, max(top) * 1.5)


UNSTABLE_HATCH = "///"
UNSTABLE_TITLE = "no usable run: unstable runs, measured under contention"


def _unstable_entry(df: pd.DataFrame, handles: list, labels: list) -> tuple[list, list]:
    """The legend's handles and labels, with a hatched entry for unstable runs when ``df``
    (a :func:`~phonetrain.report.analysis.with_unstable` frame) drew any."""
    if not df["unstable"].any():
        return handles, labels
    return ([*handles, plt.Rectangle((0, 0), 1, 1, fc="#bbbbbb", hatch=UNSTABLE_HATCH,
                                     ec="white")],
            [*labels, "hatched: unstable run (measured under contention), drawn where the "
                      "device has no usable one"])


def _device_model_grid(frame: pd.DataFrame, min_row_in: float) -> tuple[plt.Figure, list]:
    """One row of panels per device and one panel per model of ``frame`` (rows at least
    ``min_row_in`` inches, :data:`BAR_IN` per bar of the device's largest panel), each titled
    ``<device>: <model>``; a panel without rows says "no runs". Returns the figure and
    ``(axes, rows)`` of every panel with rows."""
    devices, models = sorted(frame["device"].unique()), sorted(frame["model"].unique())
    n = frame.groupby("device")["model"].value_counts().groupby("device").max()
    fig, axes = _panels([max(min_row_in, BAR_IN * n[d]) for d in devices], len(models),
                        width=max(7.0, 5.2 * len(models)))
    cells = []
    for row, dev in zip(axes, devices):
        for ax, model in zip(row, models):
            sub = frame[(frame["device"] == dev) & (frame["model"] == model)]
            ax.set_title(f"{dev}: {model}", fontsize=9)
            if sub.empty:
                ax.axis("off")
                ax.text(0.5, 0.5, "no runs", ha="center", va="center", fontsize=8,
                        transform=ax.transAxes)
            else:
                cells.append((ax, sub))
    return fig, cells


def iteration_time(runs: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """Takes runs.parquet. Iteration time by the runs' location estimate (``iteration_ms``,
    host clock, log scale) with its interval as whiskers per run: one row
    of panels per device, one panel per model; wrong runs shown as 'verification failed',
    failed runs as 'missing', skipped runs as 'skipped (no library)', unstable runs hatched
    grey."""
    if runs.empty:
        return _no_data(path, dpi, "no runs")
    fig, cells = _device_model_grid(runs, 1.2)
    for ax, sub in cells:
        _hbars(ax, sub.sort_values(["placement", "transfer", "kernel"], na_position="first"))
        ax.set_xlabel("iteration time, ms (location estimate, log)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (CPU_COLOR, CL_COLOR)]
    labels = ["CPU backend", opencl_label(runs)]
    if (runs["status"] == "unstable").any():
        handles.append(plt.Rectangle((0, 0), 1, 1, fc="#bbbbbb", hatch="//"))
        labels.append("unstable (not used in guidelines)")
    _legend_below(fig, handles, labels)
    fig.suptitle("Training iteration time per device and model (whiskers: interval of the "
                 "estimate)", fontsize=10)
    return _save(fig, path, dpi)


def breakdown(runs: pd.DataFrame, iterations: pd.DataFrame, path: Path, dpi: int = 120, *,
              paper_reference: bool = True) -> Path:
    """Takes runs.parquet and iterations.parquet. Stacked horizontal bars per ok run (on a
    device with none, per unstable run, hatched and labelled: what At a glance decides from
    under contention, :func:`~phonetrain.report.analysis.with_unstable`), one panel per
    device: share of the median iteration spent in each segment of
    :func:`~phonetrain.report.analysis.breakdown_frame` (data movement first), with the
    median wall ms at the bar's end and, when ``paper_reference``, the paper's ~91% data
    movement (``ANCHORS["movement_share"]``). The legend lists only segments drawn."""
    df = with_unstable(breakdown_frame, runs, iterations)
    if df.empty:
        return _no_data(path, dpi, "no verified or unstable run with a trace")
    df = df.sort_values(["device", "model", "placement", "transfer", "kernel"])
    cols = [c for c, _ in SEGMENTS]
    drawn = [(c, lab) for c, lab in SEGMENTS if (df[c].fillna(0) > 0).any()]
    devices = sorted(df["device"].unique())
    fig, axes = _panels([max(0.9, BAR_IN * (df["device"] == d).sum()) for d in devices],
                        width=9.5)
    for ax, dev in zip(axes[:, 0], devices):
        d = df[df["device"] == dev]
        total = d[cols].sum(axis=1).replace(0, np.nan)
        y = np.arange(len(d))
        left = np.zeros(len(d))
        busy = d["unstable"].to_numpy()
        for col, label in drawn:
            share = (d[col] / total).fillna(0).to_numpy()
            ax.barh(y, share, left=left, color=SEGMENT_COLORS[col], label=label, height=0.7,
                    hatch=[UNSTABLE_HATCH if b else None for b in busy], edgecolor="white",
                    linewidth=0)
            left += share
        for yi, ms, b in zip(y, d["wall_ms"], busy):
            ax.text(1.02, yi, f"{ms:.3g} ms" + (" (unstable)" if b else ""), va="center",
                    fontsize=7)
        if paper_reference:
            ax.axvline(ANCHORS["movement_share"].low, color="k", ls="--", lw=1,
                       label="paper: ~91% data movement")
        ax.set_yticks(y, [f"{m} | {run_label(r, False)}" for m, (_, r) in
                          zip(d["model"], d.iterrows())], fontsize=7)
        ax.set_ylim(len(d) - 0.4, -0.6)
        ax.set_xlim(0, 1.16 + 0.1 * busy.any())
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0", "25%", "50%", "75%", "100%"],
                      fontsize=7)
        ax.set_title(dev + (f" ({UNSTABLE_TITLE})" if busy.any() else ""), fontsize=9)
        ax.set_xlabel("share of the median measured iteration (device events on the host "
                      "clock; label: median iteration)", fontsize=8)
    h, lab = axes[0, 0].get_legend_handles_labels()
    h, lab = _unstable_entry(df, h, lab)
    _legend_below(fig, h, lab, ncol=4)
    fig.suptitle("Where an iteration goes: data movement, kernels, host work, launch gaps",
                 fontsize=10)
    return _save(fig, path, dpi)


def bandwidth(bw: pd.DataFrame, path: Path, dpi: int = 120,
              peaks: pd.DataFrame | None = None) -> Path:
    """Takes bandwidth.parquet (and peaks.parquet for the reference bandwidth of
    :func:`~phonetrain.report.analysis.transfer_time_classes`). One row per device: left,
    GB/s (1e9 B/s) vs transfer size of the kinds whose time grows with size, host-timed
    (solid, what a training step sees) and event-timed (dashed); right, host-timed
    microseconds per call vs size of every kind, labelled with its class (copy, zero-copy,
    overhead-bound), so a kind with no meaningful GB/s still has a curve behind its entry."""
    if bw.empty:
        return _no_data(path, dpi, "no bandwidth sweep")
    cls = transfer_time_classes(bw, peaks).set_index(["device", "kind"])
    devices = sorted(bw["device"].unique())
    fig, axes = _panels([2.8] * len(devices), 2, width=12.5)
    for (gax, tax), dev in zip(axes, devices):
        d = bw[bw["device"] == dev].sort_values("size_bytes")
        for i, (kind, g) in enumerate(d.groupby("kind")):
            color, c = f"C{i % 10}", cls.loc[(dev, kind), "cls"]
            if c == "copy":
                gax.plot(g["size_bytes"], g["host_gbps"], marker="o", ms=3, color=color,
                         label=f"{kind} (host clock)")
                gax.plot(g["size_bytes"], g["device_gbps"], ls="--", lw=1, color=color,
                         label=f"{kind} (device events)")
            tax.plot(g["size_bytes"], g["host_ns"] / 1e3, marker="o", ms=3, color=color,
                     label=f"{kind}: {c}")
        for ax in (gax, tax):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.grid(alpha=0.3)
            ax.set_xlabel("transfer size (bytes)", fontsize=8)
            ax.tick_params(labelsize=7)
        gax.set_ylabel("GB/s (1e9 B/s)", fontsize=8)
        tax.set_ylabel("time per call, us (host clock)", fontsize=8)
        gax.set_title(f"{dev}: bandwidth of kinds that copy", fontsize=9)
        tax.set_title(f"{dev}: time per call, every kind", fontsize=9)
        if gax.lines:
            gax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        else:
            gax.text(0.5, 0.5, "no kind grows with size", ha="center", va="center",
                     fontsize=8, transform=gax.transAxes)
        tax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    fig.suptitle("Host <-> device transfers (zero-copy only where a copy at the measured "
                 "bandwidth would have grown)", fontsize=10)
    return _save(fig, path, dpi)


# three short lines: the "no data" panel is 6 inches wide
NO_EVAL = ("no run evaluated on a held-out split;\nset measure.eval_every (e.g. "
           "measure.eval_every=10)\nto record held-out accuracy")


def accuracy_vs_time(runs: pd.DataFrame, iterations: pd.DataFrame, path: Path,
                     dpi: int = 120) -> Path:
    """Takes runs.parquet and iterations.parquet. Held-out accuracy (left panel of a model)
    and training loss (right) against cumulative wall time (host clock, warm-up included;
    :func:`~phonetrain.report.analysis.training_timeline`), repeat 0, one row of panels per
    device, one line per backend/placement/kernel (the same colour in both panels) of each
    model that evaluated (``measure.eval_every`` > 0); runs that are not ``ok`` dashed and
    labelled. Without evaluations, a "no data" figure saying how to enable them."""
    tl = training_timeline(iterations)
    evaluated = tl.loc[tl["heldout_accuracy"].notna(), "run_id"].unique()
    tl = tl[tl["run_id"].isin(evaluated)]
    if tl.empty:
        return _no_data(path, dpi, NO_EVAL)
    devices, models = sorted(tl["device"].unique()), sorted(tl["model"].unique())
    status = runs.set_index("run_id")["status"]
    fig, axes = _panels([2.6] * len(devices), 2 * len(models), width=7.0 * len(models) + 2.6)
    for row, dev in zip(axes, devices):
        for k, model in enumerate(models):
            acc_ax, loss_ax = row[2 * k], row[2 * k + 1]
            sub = tl[(tl["model"] == model) & (tl["device"] == dev)]
            for i, (run_id, g) in enumerate(sub.groupby("run_id")):
                st = status.get(run_id)
                style = {"ls": "-" if st == "ok" else "--", "color": f"C{i % 10}",
                         "label": run_label(g.iloc[0], False) +
                         ("" if st == "ok" else f" ({NOT_OK.get(st, st)})")}
                ev = g[g["heldout_accuracy"].notna()]
                acc_ax.plot(ev["cumulative_wall_ms"] / 1e3, 100 * ev["heldout_accuracy"],
                            marker=MARKERS[i % len(MARKERS)], ms=3, **style)
                tr = g[g["loss"].notna()]
                loss_ax.plot(tr["cumulative_wall_ms"] / 1e3, tr["loss"], lw=1, **style)
            acc_ax.set_title(f"{dev}: {model}, held-out accuracy", fontsize=9)
            loss_ax.set_title(f"{dev}: {model}, training loss", fontsize=9)
            acc_ax.set_ylabel("held-out accuracy (%)", fontsize=8)
            loss_ax.set_ylabel("training loss (cross-entropy)", fontsize=8)
            for ax in (acc_ax, loss_ax):
                ax.set_xlabel("wall time since the first iteration (s, host clock)", fontsize=8)
                ax.tick_params(labelsize=7)
                ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
            if loss_ax.lines:
                loss_ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                               frameon=False)
    fig.suptitle("Held-out accuracy and training loss against wall time: which configuration "
                 "gets there first", fontsize=10)
    return _save(fig, path, dpi)


def loss_curves(runs: pd.DataFrame, iterations: pd.DataFrame, path: Path,
                dpi: int = 120) -> Path:
    """Takes runs.parquet and iterations.parquet. Training loss per iteration (repeat 0,
    warm-up included and shaded), one row of panels per device, one panel per model, the
    legend to the right of each row; runs that are not ``ok`` are dashed and labelled."""
    it = iterations[(iterations["repeat"] == 0) & iterations["loss"].notna()]
    if it.empty:
        return _no_data(path, dpi, "no losses recorded")
    devices, models = sorted(it["device"].unique()), sorted(it["model"].unique())
    status = runs.set_index("run_id")["status"]  # run_id is unique: <device>/<experiment>
    fig, axes = _panels([2.6] * len(devices), len(models), width=4.6 * len(models) + 2.6)
    for row, dev in zip(axes, devices):
        for ax, model in zip(row, models):
            sub = it[(it["model"] == model) & (it["device"] == dev)]
            for i, (run_id, g) in enumerate(sub.groupby("run_id")):
                st = status.get(run_id)
                ax.plot(g["iteration"], g["loss"], ls="-" if st == "ok" else "--",
                        marker=MARKERS[i % len(MARKERS)], ms=3, color=f"C{i % 10}",
                        label=run_label(g.iloc[0], False) +
                        ("" if st == "ok" else f" ({NOT_OK.get(st, st)})"))
            warm = sub.loc[~sub["measured"], "iteration"]
            if len(warm):
                ax.axvspan(warm.min() - 0.5, warm.max() + 0.5, color="0.9", label="warm-up")
            ax.set_title(f"{dev}: {model}", fontsize=9)
            ax.set_xlabel("iteration", fontsize=8)
            ax.set_ylabel("training loss (cross-entropy)", fontsize=8)
            ax.tick_params(labelsize=7)
            if ax.lines:
                ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                          frameon=False)
    fig.suptitle("Loss curves (sanity check: every backend trains the same model)",
                 fontsize=10)
    return _save(fig, path, dpi)


def gemm_gflops(runs: pd.DataFrame, commands: pd.DataFrame, path: Path, dpi: int = 120, *,
                paper_reference: bool = True) -> Path:
    """Takes runs.parquet and commands.parquet. GEMM throughput inside training
    (``gemm_gflops`` of :func:`~phonetrain.report.analysis.gemm_table`, device events, 1e9
    FLOP/s, log scale) per ok run (on a device with none, per unstable run, hatched and
    labelled), one panel per device; when ``paper_reference``, beside the
    paper's bands from :data:`~phonetrain.report.paper.ANCHORS`: CPU 15-30, GPU GEMM 5-15
    before and 25-70 after optimization (the last two second-hand, and labelled so)."""
    g = with_unstable(gemm_table, runs, commands)
    if g.empty:
        return _no_data(path, dpi, "no verified or unstable run with GEMM kernels")
    g = g.sort_values(["device", "model", "placement", "transfer", "kernel"])
    devices = sorted(g["device"].unique())
    fig, axes = _panels([max(0.9, BAR_IN * (g["device"] == d).sum()) for d in devices],
                        width=9.0)
    lo = min(float(g["gemm_gflops"].min()) / 3, 1.0)
    hi = max(float(g["gemm_gflops"].max()), 70.0) * 6
    for ax, dev in zip(axes[:, 0], devices):
        d = g[g["device"] == dev]
        y = np.arange(len(d))
        busy = d["unstable"].to_numpy()
        ax.barh(y, d["gemm_gflops"], height=0.7, zorder=2, edgecolor="white", linewidth=0,
                color=[CPU_COLOR if c else CL_COLOR for c in is_cpu(d)],
                hatch=[UNSTABLE_HATCH if b else None for b in busy])
        for yi, v, b in zip(y, d["gemm_gflops"], busy):
            ax.text(v * 1.1, yi, f"{v:.3g}" + (" (unstable)" if b else ""), va="center",
                    fontsize=7, zorder=3)
        if paper_reference:
            for key, color in (("cpu_gflops", CPU_COLOR), ("gpu_gemm_before", "#9467bd"),
                               ("gpu_gemm_after", CL_COLOR)):
                a = ANCHORS[key]
                ax.axvspan(a.low, a.high, color=color, alpha=0.12, zorder=0,
                           label=f"paper: {key.replace('_', ' ')} {a.low:g}-{a.high:g}"
                                 f"{' (second-hand)' if a.second_hand else ''}")
        ax.set_yticks(y, [f"{r['model']} | {run_label(r, False)}" for _, r in d.iterrows()],
                      fontsize=7)
        ax.set_ylim(len(d) - 0.4, -0.6)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_title(dev + (f" ({UNSTABLE_TITLE})" if busy.any() else ""), fontsize=9)
        ax.set_xlabel("GEMM GFLOPS (GEMM FLOPs of an iteration / their median device-event "
                      "time)", fontsize=8)
    h, lab = axes[0, 0].get_legend_handles_labels()
    h = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (CPU_COLOR, CL_COLOR)] + h
    lab = ["CPU backend", opencl_label(runs)] + lab
    h, lab = _unstable_entry(g, h, lab)
    _legend_below(fig, h, lab, ncol=3)
    fig.suptitle("GEMM throughput inside training", fontsize=10)
    return _save(fig, path, dpi)


GEMM_PANEL_IN = 6.3      # gemm_kernels: inches per panel, two panels a row
ATTAINABLE = "attainable = min(compute roof, intensity x bandwidth)"


def _shape_ticks(ax: plt.Axes, shapes: list[str], width_in: float) -> None:
    """X ticks of the GEMM shapes ``<gemm> <m>x<n>x<k>``: the kernel name dropped when every
    shape shares it (it goes into the axis label), upright (rotated 90 degrees), thinned to every
    k-th shape when more would not fit across ``width_in`` inches at one label per 0.16 in."""
    names = {s.split(" ", 1)[0] for s in shapes}
    shown = [s.split(" ", 1)[1] for s in shapes] if len(names) == 1 else shapes
    step = max(1, int(np.ceil(len(shapes) * 0.16 / width_in)))
    x = np.arange(len(shapes))
    ax.set_xticks(x[::step], shown[::step], rotation=90, fontsize=6)
    ax.set_xlim(-0.5, len(shapes) - 0.5)
    what = f"GEMM shape M x N x K ({names.pop()})" if len(names) == 1 else "GEMM shape"
    ax.set_xlabel(what + (f", every {step}th labelled" if step > 1 else ""), fontsize=8)


def _legend_panel(ax: plt.Axes, handles, labels, ncol: int, width_in: float) -> None:
    """A legend in an axes of its own below a panel (its axis off, so the legend covers no
    data), labels wrapped to fit ``width_in`` inches in ``ncol`` columns."""
    ax.set_xticks([])      # no hidden tick labels under the legend
    ax.set_yticks([])
    ax.axis("off")
    if not handles:
        return
    chars = max(20, int(width_in * 72 / (7 * 0.55) / ncol) - 6)
    ax.legend(handles, [textwrap.fill(lab, chars) for lab in labels], loc="upper left",
              ncol=ncol, fontsize=7, frameon=False, borderaxespad=0)


def _legend_lines(labels: list[str], ncol: int, width_in: float) -> int:
    """How many text lines :func:`_legend_panel` needs for ``labels`` (its wrapping)."""
    chars = max(20, int(width_in * 72 / (7 * 0.55) / ncol) - 6)
    lines = [len(textwrap.wrap(lab, chars)) or 1 for lab in labels]
    return sum(max(lines[i:i + ncol]) for i in range(0, len(lines), ncol))


def _roof_entries(rax: plt.Axes, d: pd.DataFrame, peaks: pd.DataFrame, peak: float,
                  peak_name: str, bw: float) -> None:
    """The roofline panel's two roofs (drawn) and its notes (legend entries only)."""
    if not (peak == peak and bw == bw):
        return
    ai = np.logspace(-1, 3, 100)
    knee = peak / bw   # the two roofs meet here
    mem = np.append(ai[ai < knee], knee)
    compute_label, memory_label = roof_labels(peak, peak_name, bw)
    rax.plot(mem, roofline(mem, peak, bw), "k--", lw=1, label=memory_label)
    comp = np.insert(ai[ai > knee], 0, knee)
    rax.plot(comp, roofline(comp, peak, bw), "k-", lw=1, label=compute_label)
    rax.plot([], [], ls="none", label=ATTAINABLE)
    for note in roofline_notes(d, peaks):
        rax.plot([], [], ls="none", label="above the roofline: " + note.split(": ", 1)[1])


def gemm_kernels(gemm: pd.DataFrame, peaks: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """The GEMM sweep's kernel figure, one row of two panels per device.

    Takes gemm.parquet and peaks.parquet. Left: GFLOPS per kernel version per GEMM shape
    (verified measurements only; each version its own colour and marker, the runner's CPU
    backend dashed; the device's best measured compute peak,
    :func:`~phonetrain.report.analysis.compute_peak`, as a horizontal line; shape labels
    rotated and thinned to fit, :func:`_shape_ticks`). Right: the roofline, attainable
    GFLOPS = min(peak compute, arithmetic intensity x peak read bandwidth)
    (:func:`~phonetrain.report.analysis.roofline`), its two roofs labelled with what measured
    them (:func:`~phonetrain.report.analysis.roof_labels`), with every verified measurement
    at its :func:`~phonetrain.report.analysis.intensity`; points above the roofs are named
    in the legend (:func:`~phonetrain.report.analysis.roofline_notes`). Each panel's legend
    sits below it, wrapped to the panel's width, so no legend narrows a panel."""
    g = gemm_sweep(gemm)
    if g.empty:
        return _no_data(path, dpi, "no verified GEMM measurement (run the gemm rule)")
    devices = sorted(g["device"].unique())
    versions = sorted(v for v in g["kernel"].unique() if v != CPU_KERNEL)
    style = {v: (f"C{i % 10}", MARKERS[i % len(MARKERS)]) for i, v in enumerate(versions)}
    style[CPU_KERNEL] = ("k", "x")
    drawn = []
    for dev in devices:
        d = g[g["device"] == dev]
        peak, peak_name = compute_peak(peaks, dev)
        bw = bandwidth_peak(peaks, dev)
        left = [*d["kernel"].unique(), *(["compute peak 50 GFLOPS (measured; see the "
                                          "roofline)"] if peak == peak else [])]
        right = ([*roof_labels(peak, peak_name, bw), ATTAINABLE, *roofline_notes(d, peaks)]
                 if peak == peak and bw == bw else [])
        drawn.append((dev, d, peak, peak_name, bw, max(
            _legend_lines(left, 3, GEMM_PANEL_IN), _legend_lines(right, 1, GEMM_PANEL_IN))))
    heights = [h for *_, lines in drawn for h in (3.4, 0.16 * lines)]
    fig, axes = _panels(heights, 2, width=2 * GEMM_PANEL_IN + 0.6)
    for k, (dev, d, peak, peak_name, bw, _) in enumerate(drawn):
        (ax, rax), (lax, rlax) = axes[2 * k], axes[2 * k + 1]
        shapes = list(dict.fromkeys(d.sort_values(["shape_source", "m"])["shape"]))
        for v, sub in d.groupby("kernel"):
            color, marker = style[v]
            y = sub.set_index("shape")["gflops"].reindex(shapes)
            ax.plot(np.arange(len(shapes)), y, ls="--" if v == CPU_KERNEL else "-",
                    marker=marker, ms=4, color=color,
                    label=v + (" (runner CPU backend)" if v == CPU_KERNEL else ""))
            rax.scatter(intensity(sub), sub["gflops"], s=16, marker=marker, color=color,
                        label="_" + v)   # named in the left panel's legend
        if peak == peak:
            ax.axhline(peak, color="k", lw=1, label=f"compute peak {peak:.3g} GFLOPS "
                       "(measured; see the roofline)")
        _shape_ticks(ax, shapes, GEMM_PANEL_IN)
        ax.set_yscale("log")
        _log_ticks(ax.yaxis)
        ax.set_ylabel("GFLOPS (median of repeats)", fontsize=8)
        ax.set_title(f"{dev}: GEMM GFLOPS per kernel version", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        _roof_entries(rax, d, peaks, peak, peak_name, bw)
        rax.set_xscale("log")
        rax.set_yscale("log")
        _log_ticks(rax.yaxis)
        rax.set_xlabel("arithmetic intensity (FLOPs / byte of compulsory traffic)", fontsize=8)
        rax.set_ylabel("GFLOPS", fontsize=8)
        rax.set_title(f"{dev}: roofline", fontsize=9)
        rax.tick_params(labelsize=7)
        _legend_panel(lax, *ax.get_legend_handles_labels(), 3, GEMM_PANEL_IN)
        _legend_panel(rlax, *rax.get_legend_handles_labels(), 1, GEMM_PANEL_IN)
    fig.suptitle("GEMM kernel versions against the device's measured peaks", fontsize=10)
    return _save(fig, path, dpi)


NO_BATCH_SWEEP = ("no batch sweep: every model and configuration ran at one batch size;\n"
                  "list two or more in sweep.batches (e.g. sweep.batches=[16,32,64])")


def batch_sweep(runs: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """Takes runs.parquet. Time per sample and memory against batch size
    (:func:`~phonetrain.report.analysis.batch_scaling`), one row of two panels per device:
    left the median iteration time per sample (host clock, ms, log axes) with its interval,
    right the OpenCL buffer bytes (solid) and the runner's peak RSS (dotted, MiB), one colour
    per model and backend; a batch that ran out of device memory (status ``oom``) is an x on
    the top edge of both panels. Drawn only for series with two or more batch sizes; a
    device without one gets a row that says so, no series at all a "no data" figure
    (:data:`NO_BATCH_SWEEP`)."""
    s = batch_scaling(runs)
    if not s.empty:
        n = s.groupby(BATCH_KEY, dropna=False)["batch_size"].transform("nunique")
        s = s[n >= 2]
    if runs.empty:
        return _no_data(path, dpi, "no runs")
    if s.empty:
        return _no_data(path, dpi, NO_BATCH_SWEEP)
    devices = sorted(runs["device"].unique())
    fig, axes = _panels([3.0] * len(devices), 2, width=10.0)
    handles: dict[str, object] = {}
    for row, dev in zip(axes, devices):
        sub = s[s["device"] == dev]
        t_ax, m_ax = row[0], row[1]
        if sub.empty:
            for ax, what in ((t_ax, "time"), (m_ax, "memory")):
                ax.set_xticks([])
                ax.set_yticks([])
                ax.set_axis_off()
                ax.set_title(f"{dev}: {what}", fontsize=9)
                ax.text(0.5, 0.5, "no batch sweep on this device\n(sweep.batches: two or more "
                        "sizes)", ha="center", va="center", fontsize=8, color="0.4",
                        transform=ax.transAxes)
            continue
        for i, (_, g) in enumerate(sub.groupby(BATCH_KEY, dropna=False, sort=True)):
            r0 = g.iloc[0]
            label = f"{r0['model']}: {run_label(r0, False)}"
            color, marker = f"C{i % 10}", MARKERS[i % len(MARKERS)]
            ok = g[g["status"] == "ok"]
            err = np.vstack([ok["ms_per_sample"] - ok["ms_per_sample_low"],
                             ok["ms_per_sample_high"] - ok["ms_per_sample"]]).clip(min=0)
            h = t_ax.errorbar(ok["batch_size"], ok["ms_per_sample"], yerr=err, color=color,
                              marker=marker, ms=4, lw=1.2, capsize=2)
            m_ax.plot(ok["batch_size"], ok["device_buffer_mib"], color=color, marker=marker,
                      ms=4, lw=1.2)
            m_ax.plot(ok["batch_size"], ok["max_rss_mib"], color=color, ls=":", lw=1.2)
            handles.setdefault(label, h)
            oom = g[g["status"] == "oom"]
            for ax in (t_ax, m_ax):
                ax.plot(oom["batch_size"], [0.96] * len(oom), ls="none", marker="x", ms=8,
                        mew=2, color=color, transform=ax.get_xaxis_transform())
        for ax, ylabel, what in ((t_ax, "iteration time per sample, ms (host clock)", "time"),
                                 (m_ax, "MiB: OpenCL buffers (solid), peak RSS (dotted)",
                                  "memory")):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_yscale("log")
            _log_ticks(ax.yaxis)
            ax.set_xlabel("batch size (x at the top: out of device memory)", fontsize=8)
            ax.set_ylabel(ylabel, fontsize=8)
            ax.tick_params(labelsize=7)
            ax.set_title(f"{dev}: {what}", fontsize=9)
    _legend_below(fig, list(handles.values()), list(handles), ncol=2)
    fig.suptitle("Time per sample and memory against batch size", fontsize=10)
    return _save(fig, path, dpi)


NO_ENERGY = ("no run measured energy: the runner samples battery voltage and current\n"
             "with measure.power_sample_ms > 0 on a device whose battery is readable\n"
             "(docs/device-sensors.md)")


def energy(runs: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """Takes runs.parquet. Energy per training iteration (mJ, log axis) of every verified run
    that measured it (:func:`~phonetrain.report.analysis.energy_frame`), one panel per
    device, one horizontal bar per model and configuration with +-2 standard errors
    (``energy_uncertainty_mj``) as whiskers and the mean power written beside it; a run
    whose clocks dropped while measured (``throttled``) hatched and marked. A device without
    energy gets a panel saying so; no energy at all, a "no data" figure saying how to
    measure it."""
    e = energy_frame(runs)
    if e.empty:
        return _no_data(path, dpi, NO_ENERGY)
    devices = sorted(runs["device"].unique())
    heights = [max(1.0, BAR_IN * (e["device"] == d).sum() + 0.9) for d in devices]
    fig, axes = _panels(heights, 1, width=9.0)
    for ax, dev in zip((row[0] for row in axes), devices):
        sub = e[e["device"] == dev]
        ax.set_title(f"{dev}: energy per training iteration", fontsize=9)
        if sub.empty:
            ax.set_axis_off()
            ax.text(0.5, 0.5, f"not measured on {dev}", ha="center", va="center",
                    fontsize=8, color="0.4", transform=ax.transAxes)
            continue
        y = np.arange(len(sub))
        val = sub["energy_per_iteration_mj"].to_numpy()
        err = 2 * sub["energy_uncertainty_mj"].fillna(0).to_numpy()
        hot = sub["throttled"].fillna(False).astype(bool).to_numpy()
        ax.barh(y, val, xerr=err, height=0.7, capsize=2, ecolor="#444", zorder=2,
                color=np.where(is_cpu(sub), CPU_COLOR, CL_COLOR))
        for yi, v, u, h, pw in zip(y, val, err, hot, sub["mean_power_w"]):
            if h:
                ax.barh(yi, v, height=0.7, fill=False, hatch="//", edgecolor="#444", zorder=3)
            ax.text((v + u) * 1.08, yi, f"{v:.3g} mJ, {pw:.3g} W" + (" (throttled)" if h else ""),
                    va="center", ha="left", fontsize=7)
        ax.set_yticks(y, [f"{m} | {lab}" for m, lab in zip(sub["model"], sub["label"])],
                      fontsize=7)
        ax.set_ylim(len(sub) - 0.4, -0.6)
        ax.set_xscale("log")
        lo = np.clip(val - err, val / 10, None).min()
        ax.set_xlim(lo / 2, (val + err).max() * 4)
        _log_ticks(ax.xaxis)
        ax.set_xlabel("mJ per training iteration (battery V x I, trapezoid rule; "
                      "whiskers +-2 SE)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle("Energy per training iteration (bar colour: CPU green, OpenCL blue)",
                 fontsize=10)
    return _save(fig, path, dpi)


NO_MEMORY = ("no run has memory by role: the aggregate reads it from each run folder's\n"
             "plan.json (re-aggregate with this phonetrain: phonetrain aggregate)")


def _memory_panel(ax: plt.Axes, sub: pd.DataFrame, several: bool) -> None:
    """One model's stacked bars of bytes by role (MiB, or KiB when the largest is under one
    MiB), one bar per batch size (and lowering, when ``several``), total and largest role
    written at the bar's end."""
    big = sub["plan_tensor_bytes"].max() >= 2 ** 20
    scale, unit = (2 ** 20, "MiB") if big else (2 ** 10, "KiB")
    y = np.arange(len(sub))
    left = np.zeros(len(sub))
    for col, label in MEMORY_ROLES:
        v = sub[col].astype(float).to_numpy() / scale
        ax.barh(y, v, left=left, color=ROLE_COLORS[col], label=label, height=0.7)
        left += v
    for yi, (_, r) in zip(y, sub.iterrows()):
        ax.text(left[yi] * 1.02, yi, f"{w.size(r['plan_tensor_bytes'])}; {r['dominant']} "
                f"{w.pct(r['dominant_share'])}" + (" (out of memory)" if r["oom"] else ""),
                va="center", ha="left", fontsize=7, color="#d62728" if r["oom"] else "k")
    ax.set_yticks(y, [f"batch {int(r['batch_size'])}" + (f" ({r['variant']})" if several
                                                           else "")
                      for _, r in sub.iterrows()], fontsize=7)
    ax.set_ylim(len(sub) - 0.4, -0.6)
    ax.set_xlim(0, left.max() * 1.9)
    ax.set_xlabel(f"{unit} allocated by the plan's tensors (2^{20 if big else 10} bytes)",
                  fontsize=8)
    ax.tick_params(axis="x", labelsize=7)


def memory_roles(runs: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """Takes runs.parquet. The bytes a training step's plan allocates, stacked by role
    (:func:`~phonetrain.report.analysis.memory_frame`: parameters and model buffers,
    gradients, optimizer state, activations kept for backward, scratch, staging): one row of
    panels per device, one panel per model (its own scale), one bar per batch size and, where
    lowerings of one model and batch differ (e.g. a fused kernel version without gradient
    buffers), per lowering; the total and the largest role's share at the bar's end, a batch
    that ran out of device memory marked. Runs of every status are drawn: the bytes are the
    plan's, known before it runs."""
    m = memory_frame(runs)
    if m.empty:
        return _no_data(path, dpi, "no runs" if runs.empty else NO_MEMORY)
    fig, cells = _device_model_grid(m, 0.9)
    for ax, sub in cells:
        _memory_panel(ax, sub, sub["batch_size"].duplicated(keep=False).any())
    handles = [plt.Rectangle((0, 0), 1, 1, color=ROLE_COLORS[c]) for c, _ in MEMORY_ROLES]
    _legend_below(fig, handles, [lab for _, lab in MEMORY_ROLES], ncol=6)
    fig.suptitle("Memory of a training step by role: bytes of the plan's tensors per model "
                 "and batch", fontsize=10)
    return _save(fig, path, dpi)
