"""The report's kernel figure and kernel-optimization guideline, from ``gemm.parquet`` and
``peaks.parquet`` (schemas in :mod:`phonetrain.results.schema`; written by the GEMM sweep).

Figure (per device): left, GFLOPS per kernel version per GEMM shape (the CPU backend dashed,
the best measured compute peak over widths float..float16 as a horizontal line); right, the
roofline: attainable GFLOPS = min(peak compute, arithmetic intensity x peak read bandwidth),
with every verified measurement at its intensity. Intensity = 2MNK FLOPs / (4 (MK + KN + 2MN))
bytes (A and B read once, C read and written: the compulsory traffic).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from phonetrain.report.figures import _no_data, _save  # noqa: E402
from phonetrain.report.findings import Finding, _missing  # noqa: E402
from phonetrain.report.paper import ANCHORS  # noqa: E402

CPU = "cpu"
OWN = ("tiled", "regblock")          # the project's optimized versions


def intensity(df: pd.DataFrame) -> pd.Series:
    """FLOPs per byte of compulsory traffic for each row (columns m, n, k)."""
    m, n, k = (df[c].astype(float) for c in ("m", "n", "k"))
    return 2 * m * n * k / (4 * (m * k + k * n + 2 * m * n))


def compute_peak(peaks: pd.DataFrame, device: str) -> tuple[float, str]:
    """The device's measured compute peak: the best ``gflops`` over every ``compute`` row of
    ``peaks.parquet`` (widths float..float16: a scalar chain underestimates a vector unit),
    and the row's name (e.g. ``float16``); ``(nan, "")`` when the device has none."""
    pk = peaks[(peaks["device"] == device) & (peaks["kind"] == "compute")
               & peaks["gflops"].notna()]
    if pk.empty:
        return float("nan"), ""
    r = pk.loc[pk["gflops"].idxmax()]
    return float(r["gflops"]), str(r["name"])


def peak_share(gflops: float, peak: float, name: str) -> str:
    """``NN% of the measured peak P GFLOPS (name)``, or, above 100%, a flag that the peak
    microbenchmark underestimates rather than a plain share over 100%."""
    if gflops > peak:
        return (f"above the measured peak {peak:.3g} GFLOPS ({name}, {gflops / peak:.2g}x): "
                "the microbenchmark underestimates the device's peak")
    return f"{100 * gflops / peak:.0f}% of the measured peak {peak:.3g} GFLOPS ({name})"


def _ok(gemm: pd.DataFrame) -> pd.DataFrame:
    g = gemm[(gemm["status"] == "ok") & gemm["gflops"].notna()].copy()
    g["shape"] = g["gemm"] + " " + g["m"].astype(str) + "x" + g["n"].astype(str) + "x" + \
        g["k"].astype(str)
    return g


def kernel_figure(gemm: pd.DataFrame, peaks: pd.DataFrame, path: Path, dpi: int = 120) -> Path:
    """The kernel figure (module docstring) for every device, stacked; one file."""
    g = _ok(gemm)
    if g.empty:
        return _no_data(path, dpi, "no verified GEMM measurement (run the gemm rule)")
    devices = sorted(g["device"].unique())
    fig, axes = plt.subplots(len(devices), 2, figsize=(13, 4.8 * len(devices)), squeeze=False)
    for (ax, rax), dev in zip(axes, devices):
        d = g[g["device"] == dev]
        shapes = list(dict.fromkeys(d.sort_values(["shape_source", "m"])["shape"]))
        x = np.arange(len(shapes))
        pk = peaks[peaks["device"] == dev]
        peak, peak_name = compute_peak(peaks, dev)
        bw = pk.loc[pk["kind"] == "bandwidth", "gbps"].max() if len(pk) else np.nan
        for v, sub in d.groupby("kernel"):
            y = sub.set_index("shape")["gflops"].reindex(shapes)
            ax.plot(x, y, "--" if v == CPU else "-o", ms=4, label=f"{v}" +
                    (" (runner CPU backend)" if v == CPU else ""))
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
            rax.plot(ai, np.minimum(peak, ai * bw), "k-", lw=1,
                     label=f"roofline: {peak:.0f} GFLOPS ({peak_name}), {bw:.0f} GB/s")
        rax.set_xscale("log")
        rax.set_yscale("log")
        rax.set_xlabel("arithmetic intensity (FLOPs / byte of compulsory traffic)")
        rax.set_ylabel("GFLOPS")
        rax.set_title(f"{dev}: roofline (clpeak-style peaks)")
        rax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path, dpi)


def kernel_optimization(gemm: pd.DataFrame, peaks: pd.DataFrame) -> Finding:
    """Guideline: how far the optimized versions take GEMM over baseline, against CLBlast,
    the CPU backend and the device's peak, per device, beside the paper's 5-15 -> 25-70."""
    title = "Kernel optimization: GEMM GFLOPS per version"
    paper = [ANCHORS["gpu_gemm_before"], ANCHORS["gpu_gemm_after"], ANCHORS["cpu_gflops"]]
    g = _ok(gemm)
    if g.empty or not (g["kernel"] == "baseline").any() or not g["kernel"].isin(OWN).any():
        return _missing("kernel_optimization", title,
                        "no verified GEMM sweep with baseline and an optimized version", paper)
    parts, details, rows = [], [], []
    for dev, d in g.groupby("device"):
        piv = d.pivot_table(index="shape", columns="kernel", values="gflops", aggfunc="max")
        own = piv[[c for c in OWN if c in piv]].max(axis=1)
        speedup = (own / piv["baseline"]).dropna()
        best_shape = own.idxmax()
        pk, pk_name = compute_peak(peaks, dev)
        s = (f"{dev}: best optimized {own.max():.3g} GFLOPS ({best_shape}), "
             f"{speedup.median():.2g}x baseline (median over {len(speedup)} shapes, "
             f"{speedup.min():.2g}-{speedup.max():.2g}x)")
        if "clblast" in piv:
            r = (own / piv["clblast"]).dropna()
            s += f", {r.median():.2g}x CLBlast"
        if CPU in piv:
            r = (own / piv[CPU]).dropna()
            s += f", {r.median():.2g}x the CPU backend"
        if pk == pk:
            s += "; " + peak_share(own.max(), pk, pk_name)
        parts.append(s)
        details += [f"{dev} {shape}: " + ", ".join(f"{k} {v:.3g}" for k, v in r.dropna().items())
                    for shape, r in piv.iterrows()]
        rows.append(f"gemm.parquet: device={dev}")
    stmt = ("; ".join(parts) + ". The paper's optimized OpenCL GEMM went from 5-15 to 25-70 "
            "GFLOPS (about 5x) on Snapdragon phones. Register blocking with vector loads and no "
            "local memory is the first optimization to try on CPUs and Mali-class GPUs; "
            "local-memory tiling pays off where local memory is on-chip.")
    return Finding("kernel_optimization", title, stmt, rows, paper, details)
