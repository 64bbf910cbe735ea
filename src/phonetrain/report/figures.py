"""The report's figures, drawn with matplotlib (Agg) from the Parquet tables.

Every function takes DataFrames as read by :func:`phonetrain.results.schema.read_table`, writes one
figure file and returns its path. A figure is always written (with a "no data" note when its
table is empty) so the report and Snakemake's ``report()`` outputs are stable. Only runs with
status ``ok`` are drawn as speeds; ``wrong`` runs appear as a marked empty slot, ``failed``
runs as "missing", ``skipped`` runs (device lacks a library) as "skipped". Paper reference lines are labelled with their provenance (see
:mod:`phonetrain.report.paper`).
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from phonetrain.report.paper import ANCHORS  # noqa: E402

SEGMENTS = [  # stacked breakdown: data movement first, so its total reads off the axis
    ("h2d_ms", "h2d", "#d62728"), ("d2h_ms", "d2h", "#ff7f0e"),
    ("mapunmap_ms", "map/unmap", "#e377c2"), ("d2d_ms", "d2d", "#8c564b"),
    ("host_copy_ms", "host copy (mapped)", "#bcbd22"),
    ("transfer_overhead_ms", "idle in transfer calls", "#f7b6d2"),
    ("kernel_ms", "kernel", "#1f77b4"), ("host_other_ms", "host (load, other)", "#7f7f7f"),
    ("other_gap_ms", "other launch gaps", "#c7c7c7"),
]


def is_cpu(runs: pd.DataFrame) -> pd.Series:
    """True for CPU-backend rows (no OpenCL placement)."""
    return runs["placement"].isna() | runs["placement"].isin(["none", ""])


def run_label(r: pd.Series | dict, device: bool = True) -> str:
    """Short label of a run: ``cpu`` or ``<placement>/<transfer> <kernel>``, prefixed with
    ``<device>: `` when ``device``."""
    dev = f"{r['device']}: " if device else ""
    if r["placement"] in (None, "none", "") or pd.isna(r["placement"]):
        return dev + "cpu"
    return dev + f"{r['placement']}/{r['transfer']} {r['kernel']}"


def opencl_label(runs: pd.DataFrame) -> str:
    """How figures name the OpenCL backend, from the OpenCL device type of the verified
    OpenCL runs (``device_type`` in runs.parquet): ``OpenCL GPU`` only when every one is a
    GPU; ``OpenCL (CPU device: PoCL)`` when all are CPU devices (a CPU driver such as PoCL
    is not a GPU); otherwise ``OpenCL device``."""
    cl = runs[~is_cpu(runs) & (runs["status"] == "ok")] if "status" in runs else runs[~is_cpu(runs)]
    types = set(cl["device_type"].dropna().str.lower()) if "device_type" in cl else set()
    if types == {"gpu"}:
        return "OpenCL GPU"
    if types == {"cpu"}:
        plats = sorted({"PoCL" if "Portable Computing Language" in p else p
                        for p in cl["platform_name"].dropna()}) if "platform_name" in cl else []
        return "OpenCL (CPU device" + (f": {', '.join(plats)})" if plats else ")")
    return "OpenCL device"


def several_devices(runs: pd.DataFrame) -> bool:
    """True when the runs come from more than one device: labels then name the device."""
    return runs["device"].nunique() > 1


def _save(fig: plt.Figure, path: Path, dpi: int) -> Path:
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
    fig, ax = plt.subplots(figsize=(6, 1.5))
    ax.axis("off")
    ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center")
    return _save(fig, path, dpi)


def iteration_time(runs: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """Median iteration time (ms, log scale) with IQR whiskers per run, one panel per model;
    wrong runs shown as 'verification failed', failed runs as 'missing'."""
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


def breakdown_frame(runs: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Per ok run, medians over measured iterations of each :data:`SEGMENTS` column (ms)."""
    ok = runs[runs["status"] == "ok"]
    it = iterations[iterations["measured"] & iterations["run_id"].isin(ok["run_id"])].copy()
    if it.empty:
        return pd.DataFrame()
    it["mapunmap_ms"] = it["map_ms"] + it["unmap_ms"]
    moved = it[["h2d_ms", "d2h_ms", "map_ms", "unmap_ms", "d2d_ms"]].sum(axis=1)
    it["host_copy_ms"] = (it["transfer_ms"] - moved).clip(lower=0)
    it["host_other_ms"] = (it["host_ms"] - it["host_copy_ms"]).clip(lower=0)
    it["other_gap_ms"] = (it["gap_ms"] - it["transfer_overhead_ms"]).clip(lower=0)
    cols = [c for c, _, _ in SEGMENTS]
    med = it.groupby("run_id")[cols + ["wall_ms"]].median()
    return ok.set_index("run_id")[["model", "device", "placement", "transfer", "kernel"]].join(
        med, how="inner")


def breakdown(runs: pd.DataFrame, iterations: pd.DataFrame, path: Path, dpi: int = 120, *,
              paper_reference: bool = True) -> Path:
    """Stacked horizontal bars per ok run: share of the median iteration spent in each
    segment (data movement first), with the total ms at the bar's end and the paper's ~91%."""
    df = breakdown_frame(runs, iterations)
    if df.empty:
        return _no_data(path, dpi, "no verified run with a trace")
    df = df.sort_values(["model", "device", "placement", "transfer", "kernel"])
    total = df[[c for c, _, _ in SEGMENTS]].sum(axis=1).replace(0, np.nan)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(df) + 1.6))
    y = np.arange(len(df))
    left = np.zeros(len(df))
    for col, label, color in SEGMENTS:
        share = (df[col] / total).fillna(0).to_numpy()
        ax.barh(y, share, left=left, color=color, label=label)
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
    """GB/s vs transfer size (log2 bytes) per device and kind: host-timed (solid, what a
    training step sees) and event-timed (dashed, the device's view)."""
    if bw.empty:
        return _no_data(path, dpi, "no bandwidth sweep")
    from phonetrain.report.findings import zero_copy  # guidelines imports this module
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
    """Loss per iteration (repeat 0, warm-up included and shaded), one panel per model;
    runs that failed verification are dashed and labelled."""
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
    """GEMM throughput (GFLOPS) per ok run from the commands table, beside the paper's
    bands: CPU 15-30, GPU GEMM 5-15 before and 25-70 after optimization (second-hand)."""
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


def gemm_table(runs: pd.DataFrame, commands: pd.DataFrame) -> pd.DataFrame:
    """Per ok run: GEMM FLOPs per iteration, GEMM time per iteration (sum over GEMM commands
    of their median per-iteration time) and ``gemm_gflops`` (kernels named ``gemm*``; FLOPs
    as the lowering counts them, 2 x MACs)."""
    ok = runs[runs["status"] == "ok"].set_index("run_id")
    c = commands[(commands["kind"] == "kernel") & commands["name"].str.startswith("gemm")
                 & commands["run_id"].isin(ok.index)]
    if c.empty:
        return pd.DataFrame()
    s = c.groupby("run_id")[["flops_per_iteration", "per_iteration_median_ms"]].sum()
    s["gemm_gflops"] = s["flops_per_iteration"] / (s["per_iteration_median_ms"] * 1e6)
    return ok[["model", "device", "placement", "transfer", "kernel"]].join(s, how="inner")
