"""The report's figures, drawn with matplotlib (Agg) from the Parquet tables.

Every function takes DataFrames as read by :func:`phonetrain.results.schema.read_table`, a
``path`` and a ``dpi``, writes one figure file there (format from the suffix) and returns its
path. A figure is always written (with a "no data" note when its table is empty) so the
report and Snakemake's ``report()`` outputs are stable. Only runs with status ``ok`` are drawn
as speeds; ``wrong`` runs appear as a marked empty slot, ``failed`` runs as "missing",
``skipped`` runs (device lacks a library) as "skipped". Paper reference lines are labelled
with their provenance (see :mod:`phonetrain.report.paper`). The numbers drawn come from
:mod:`phonetrain.report.analysis`.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from phonetrain.report.analysis import (  # noqa: E402
    CPU_KERNEL, SEGMENTS, bandwidth_peak, breakdown_frame, compute_peak, gemm_sweep,
    gemm_table, intensity, is_cpu, opencl_label, roofline, run_label, several_devices,
    zero_copy)
from phonetrain.report.paper import ANCHORS  # noqa: E402

SEGMENT_COLORS = {  # breakdown figure: reds for data movement, blue kernels, greys the rest
    "h2d_ms": "#d62728", "d2h_ms": "#ff7f0e", "mapunmap_ms": "#e377c2", "d2d_ms": "#8c564b",
    "host_copy_ms": "#bcbd22", "transfer_overhead_ms": "#f7b6d2", "kernel_ms": "#1f77b4",
    "host_other_ms": "#7f7f7f", "other_gap_ms": "#c7c7c7",
}


def _save(fig: plt.Figure, path: Path, dpi: int) -> Path:
    """Write ``fig`` to ``path`` atomically (temp file in the same folder, then rename), close
    it and return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
        tmp.replace(path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path


def _no_data(path: Path, dpi: int, what: str) -> Path:
    """Write a figure that says ``no data: <what>`` to ``path``; return ``path``."""
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.axis("off")
    ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center")
    return _save(fig, path, dpi)


def iteration_time(runs: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """Takes runs.parquet. Median iteration time (``iteration_median_ms``, log scale) with
    IQR whiskers (``iteration_p25_ms``..``iteration_p75_ms``) per run, one panel per model;
    wrong runs shown as 'verification failed', failed runs as 'missing', skipped runs as
    'skipped (no library)'."""
    if runs.empty:
        return _no_data(path, dpi, "no runs")
    models = sorted(runs["model"].unique())
    fig, axes = plt.subplots(1, len(models), figsize=(4.5 * len(models), 4.2), squeeze=False)
    dev = several_devices(runs)
    for ax, model in zip(axes[0], models):
        sub = runs[runs["model"] == model].sort_values(["device", "placement", "transfer",
                                                        "kernel"], na_position="first")
        labels = [run_label(r, dev) for _, r in sub.iterrows()]
        x = np.arange(len(sub))
        ok = (sub["status"] == "ok").to_numpy()
        med = sub["iteration_median_ms"].to_numpy(dtype=float)
        err = np.vstack([med - sub["iteration_p25_ms"].to_numpy(dtype=float),
                         sub["iteration_p75_ms"].to_numpy(dtype=float) - med])
        colors = ["#2ca02c" if c else "#1f77b4" for c in is_cpu(sub)]
        ax.bar(x[ok], med[ok], yerr=err[:, ok], color=np.array(colors)[ok], capsize=3)
        ax.set_yscale("log")
        for xi, m in zip(x[ok], med[ok]):
            ax.annotate(f"{m:.3g} ms", (xi, m), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=8)
        for xi, (_, r) in zip(x, sub.iterrows()):
            if r["status"] != "ok":
                text = {"wrong": "verification failed",
                        "skipped": "skipped (no library)"}.get(r["status"], "missing (failed)")
                ax.text(xi, 0.02, text, rotation=90, ha="center", va="bottom", color="#d62728",
                        transform=ax.get_xaxis_transform(), fontsize=8)
        ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
        ax.set_xlim(-0.6, len(sub) - 0.4)
        ax.set_title(model)
        ax.set_ylabel("iteration time, median [IQR] (ms)")
    fig.suptitle(f"Training iteration time: CPU (green) vs {opencl_label(runs)} (blue)")
    return _save(fig, path, dpi)


def breakdown(runs: pd.DataFrame, iterations: pd.DataFrame, path: Path, dpi: int = 120, *,
              paper_reference: bool = True) -> Path:
    """Takes runs.parquet and iterations.parquet. Stacked horizontal bars per ok run: share
    of the median iteration spent in each segment of
    :func:`~phonetrain.report.analysis.breakdown_frame` (data movement first), with the
    median wall ms at the bar's end and, when ``paper_reference``, the paper's ~91% data
    movement (``ANCHORS["movement_share"]``)."""
    df = breakdown_frame(runs, iterations)
    if df.empty:
        return _no_data(path, dpi, "no verified run with a trace")
    df = df.sort_values(["model", "device", "placement", "transfer", "kernel"])
    total = df[[c for c, _ in SEGMENTS]].sum(axis=1).replace(0, np.nan)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(df) + 1.6))
    y = np.arange(len(df))
    left = np.zeros(len(df))
    for col, label in SEGMENTS:
        share = (df[col] / total).fillna(0).to_numpy()
        ax.barh(y, share, left=left, color=SEGMENT_COLORS[col], label=label)
        left += share
    for yi, ms in zip(y, df["wall_ms"]):
        ax.text(1.01, yi, f"{ms:.3g} ms", va="center", fontsize=8)
    if paper_reference:
        a = ANCHORS["movement_share"]
        ax.axvline(a.low, color="k", ls="--", lw=1)
        # Inside the axes, beside the line: above them it ran into the title.
        ax.text(a.low - 0.005, 0.002, "paper: ~91% data movement", ha="right", va="bottom",
                fontsize=8, transform=ax.get_xaxis_transform(),
                bbox={"fc": "white", "ec": "none", "alpha": 0.85})
    dev = several_devices(runs)
    ax.set_yticks(y, [f"{m} | {run_label(r, dev)}" for m, (_, r) in
                      zip(df["model"], df.iterrows())], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("share of the median measured iteration")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.1, 1.0))
    ax.set_title("Where an iteration goes: data movement, kernels, host work, launch gaps",
                 pad=14)
    return _save(fig, path, dpi)


def bandwidth(bw: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """Takes bandwidth.parquet. GB/s (1e9 B/s) vs transfer size (log2 bytes) per device and
    kind: host-timed (solid, what a training step sees) and event-timed (dashed, the device's
    view). Zero-copy kinds (:func:`~phonetrain.report.analysis.zero_copy`) get a legend entry
    with their time per call instead of a curve."""
    if bw.empty:
        return _no_data(path, dpi, "no bandwidth sweep")
    zc = zero_copy(bw)
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    for i, ((dev, kind), g) in enumerate(bw.sort_values("size_bytes").groupby(["device", "kind"])):
        color = f"C{i % 10}"
        if (dev, kind) in zc.index:  # time constant over sizes: a GB/s curve would mislead
            ax.plot([], [], marker="x", ls="none", color=color,
                    label=f"{dev} {kind}: zero-copy, ~{zc[(dev, kind)]:.3g} us per call "
                          "regardless of size (no GB/s)")
            continue
        ax.plot(g["size_bytes"], g["host_gbps"], marker="o", ms=3, color=color,
                label=f"{dev} {kind} (host-timed)")
        ax.plot(g["size_bytes"], g["device_gbps"], ls="--", lw=1, color=color,
                label=f"{dev} {kind} (event-timed)")
    ax.set_xscale("log", base=2)
    if len(zc) < bw.groupby(["device", "kind"]).ngroups:  # some GB/s curve was drawn
        ax.set_yscale("log")
    ax.set_xlabel("transfer size (bytes)")
    ax.set_ylabel("bandwidth (GB/s, 1e9 B/s)")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3)
    ax.set_title("Host <-> device transfer bandwidth")
    return _save(fig, path, dpi)


def loss_curves(runs: pd.DataFrame, iterations: pd.DataFrame, path: Path,
                dpi: int = 120) -> Path:
    """Takes runs.parquet and iterations.parquet. Training loss per iteration (repeat 0,
    warm-up included and shaded), one panel per model; runs that are not ``ok`` are dashed
    and labelled 'verification failed'."""
    it = iterations[(iterations["repeat"] == 0) & iterations["loss"].notna()]
    if it.empty:
        return _no_data(path, dpi, "no losses recorded")
    models = sorted(it["model"].unique())
    fig, axes = plt.subplots(1, len(models), figsize=(4.5 * len(models), 3.6), squeeze=False)
    status = runs.set_index("run_id")["status"]  # run_id is unique: <device>/<experiment>
    dev = several_devices(runs)
    for ax, model in zip(axes[0], models):
        sub = it[it["model"] == model]
        for run_id, g in sub.groupby("run_id"):
            r = g.iloc[0]
            wrong = status.get(run_id) != "ok"
            ax.plot(g["iteration"], g["loss"], ls="--" if wrong else "-", marker=".",
                    label=run_label(r, dev) + (" (verification failed)" if wrong else ""))
        warm = sub.loc[~sub["measured"], "iteration"]
        if len(warm):
            ax.axvspan(warm.min() - 0.5, warm.max() + 0.5, color="0.9", label="warm-up")
        ax.set_title(model)
        ax.set_xlabel("iteration")
        ax.set_ylabel("training loss (cross-entropy)")
        ax.legend(fontsize=7)
    fig.suptitle("Loss curves (sanity check: every backend trains the same model)")
    return _save(fig, path, dpi)


def gemm_gflops(runs: pd.DataFrame, commands: pd.DataFrame, path: Path, dpi: int = 120, *,
                paper_reference: bool = True) -> Path:
    """Takes runs.parquet and commands.parquet. GEMM throughput inside training
    (``gemm_gflops`` of :func:`~phonetrain.report.analysis.gemm_table`, 1e9 FLOP/s, log
    scale) per ok run; when ``paper_reference``, beside the paper's bands from
    :data:`~phonetrain.report.paper.ANCHORS`: CPU 15-30, GPU GEMM 5-15 before and 25-70
    after optimization (the last two second-hand, and labelled so)."""
    g = gemm_table(runs, commands)
    if g.empty:
        return _no_data(path, dpi, "no verified run with GEMM kernels")
    g = g.sort_values(["model", "device", "placement", "transfer", "kernel"])
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(g) + 1.8))
    y = np.arange(len(g))
    colors = ["#2ca02c" if c else "#1f77b4" for c in is_cpu(g)]
    ax.barh(y, g["gemm_gflops"], color=colors, zorder=2)
    dev = several_devices(runs)
    ax.set_yticks(y, [f"{r['model']} | {run_label(r, dev)}" for _, r in g.iterrows()],
                  fontsize=8)
    ax.invert_yaxis()
    if paper_reference:
        for key, color in (("cpu_gflops", "#2ca02c"), ("gpu_gemm_before", "#9467bd"),
                           ("gpu_gemm_after", "#1f77b4")):
            a = ANCHORS[key]
            ax.axvspan(a.low, a.high, color=color, alpha=0.12, zorder=0,
                       label=f"paper: {key.replace('_', ' ')} {a.low:g}-{a.high:g}"
                             f"{' (second-hand)' if a.second_hand else ''}")
        ax.legend(fontsize=7, loc="lower right")
    ax.set_xscale("log")
    ax.set_xlim(left=min(float(g["gemm_gflops"].min()) / 3, 1.0))
    ax.set_xlabel("GEMM GFLOPS (GEMM FLOPs of an iteration / their median time per iteration)")
    ax.set_title(f"GEMM throughput inside training: CPU (green) vs {opencl_label(runs)} (blue)")
    return _save(fig, path, dpi)


def gemm_kernels(gemm: pd.DataFrame, peaks: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """The GEMM sweep's kernel figure, one row of two panels per device, stacked in one file.

    Takes gemm.parquet and peaks.parquet. Left: GFLOPS per kernel version per GEMM shape
    (verified measurements only; the runner's CPU backend dashed; the device's best measured
    compute peak, :func:`~phonetrain.report.analysis.compute_peak`, as a horizontal line).
    Right: the roofline, attainable GFLOPS = min(peak compute, arithmetic intensity x peak
    read bandwidth) (:func:`~phonetrain.report.analysis.roofline`), with every verified
    measurement at its :func:`~phonetrain.report.analysis.intensity`."""
    g = gemm_sweep(gemm)
    if g.empty:
        return _no_data(path, dpi, "no verified GEMM measurement (run the gemm rule)")
    devices = sorted(g["device"].unique())
    fig, axes = plt.subplots(len(devices), 2, figsize=(13, 4.8 * len(devices)), squeeze=False)
    for (ax, rax), dev in zip(axes, devices):
        d = g[g["device"] == dev]
        shapes = list(dict.fromkeys(d.sort_values(["shape_source", "m"])["shape"]))
        x = np.arange(len(shapes))
        peak, peak_name = compute_peak(peaks, dev)
        bw = bandwidth_peak(peaks, dev)
        for v, sub in d.groupby("kernel"):
            y = sub.set_index("shape")["gflops"].reindex(shapes)
            ax.plot(x, y, "--" if v == CPU_KERNEL else "-o", ms=4, label=f"{v}" +
                    (" (runner CPU backend)" if v == CPU_KERNEL else ""))
            rax.scatter(intensity(sub), sub["gflops"], s=14, label=v)
        if peak == peak:
            ax.axhline(peak, color="k", lw=1,
                       label=f"best measured peak {peak:.0f} GFLOPS ({peak_name})")
        ax.set_xticks(x, shapes, rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("GFLOPS (median of repeats)")
        ax.set_title(f"{dev}: GEMM GFLOPS per kernel version")
        ax.legend(fontsize=7)
        ai = np.logspace(-1, 3, 100)
        if peak == peak and bw == bw:
            rax.plot(ai, roofline(ai, peak, bw), "k-", lw=1,
                     label=f"roofline: {peak:.0f} GFLOPS ({peak_name}), {bw:.0f} GB/s")
        rax.set_xscale("log")
        rax.set_yscale("log")
        rax.set_xlabel("arithmetic intensity (FLOPs / byte of compulsory traffic)")
        rax.set_ylabel("GFLOPS")
        rax.set_title(f"{dev}: roofline (clpeak-style peaks)")
        rax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path, dpi)
