"""Guidelines on GEMM: throughput inside training (:func:`gemm_throughput`) and what the
optimized kernel versions gain over the baseline, CLBlast and the CPU backend in the GEMM
sweep (:func:`kernel_optimization`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import (CPU_KERNEL, OWN_KERNELS, compute_peak, gemm_sweep,
                                        gemm_table, is_cpu, peak_share, run_label)
from phonetrain.report.findings.base import Finding, Table, not_measured, run_refs
from phonetrain.report.paper import ANCHORS


def gemm_throughput(runs: pd.DataFrame, commands: pd.DataFrame) -> Finding:
    """Takes runs.parquet and commands.parquet. Per device, the best GEMM throughput inside
    training (``gemm_gflops`` of :func:`~phonetrain.report.analysis.gemm_table`: GEMM FLOPs of
    an iteration over their median device-event time, 1e9 FLOP/s) on the CPU backend and on
    OpenCL, and their ratio, beside the paper's GEMM and CPU GFLOPS (``ANCHORS``
    gpu_gemm_before, gpu_gemm_after, gpu_opt_abstract, cpu_gflops)."""
    title = "GEMM throughput: GPU kernels vs CPU"
    paper = [ANCHORS["gpu_gemm_before"], ANCHORS["gpu_gemm_after"],
             ANCHORS["gpu_opt_abstract"], ANCHORS["cpu_gflops"]]
    g = gemm_table(runs, commands)
    if g.empty:
        return not_measured("gemm_throughput", title, "no verified run with GEMM kernels", paper)
    g = g.reset_index()
    parts, refs = [], []
    for dev, d in g.groupby("device"):
        best = {}
        for name, sub in (("CPU", d[is_cpu(d)]), ("OpenCL", d[~is_cpu(d)])):
            if len(sub):
                best[name] = sub.loc[sub["gemm_gflops"].idxmax()]
                refs.append(best[name]["run_id"])
        s = f"{dev}: " + ", ".join(f"best {n} {b['gemm_gflops']:.3g} GFLOPS ({b['model']}, "
                                   f"{run_label(b, False)})" for n, b in best.items())
        if len(best) == 2:
            s += (f", OpenCL / CPU {best['OpenCL']['gemm_gflops'] / best['CPU']['gemm_gflops']:.3g}"
                  "x")
        parts.append(s)
    stmt = ("GEMM inside training (GEMM FLOPs over their device-event time; paper: optimized GPU "
            "GEMM 25-70 vs CPU 15-30 GFLOPS): " + "; ".join(parts) + ".")
    rows = [[r["device"], r["model"], run_label(r, False), f"{r['gemm_gflops']:.3g}"]
            for _, r in g.sort_values(["device", "model", "gemm_gflops"],
                                      ascending=[True, True, False]).iterrows()]
    table = Table(["device", "model", "run", "GEMM GFLOPS (device events)"], rows)
    return Finding("gemm_throughput", title, stmt, run_refs(refs), paper, table)


GEMM_CONDITIONS = ("load_avg_1m", "other_cpu_share", "omp_wait_policy", "cpu_mhz_start",
                   "cpu_mhz_end", "temperature_c_start", "temperature_c_end")


def gemm_side(r: pd.Series | dict) -> w.Side:
    """One GEMM row as a side of a comparison of kernel times: ``median_ms`` with its
    interval ``low_ms``..``high_ms`` (null until the runner records one: then no verdict),
    its status and the conditions the row records (none in older tables)."""
    g = r.get
    reason = g("status_reason")
    return w.Side(_float(g("median_ms")), _float(g("low_ms")), _float(g("high_ms")),
                  status=str(g("status")), reason="" if reason is None or pd.isna(reason)
                  else str(reason), conditions=w.conditions(r))


def _float(x) -> float:
    """``x`` as a float, nan for null."""
    return float("nan") if x is None or pd.isna(x) else float(x)


def gemm_conditions(r: pd.Series | dict) -> str:
    """The measurement conditions a GEMM row records, or ``not recorded``."""
    return w.conditions({k: r.get(k) for k in GEMM_CONDITIONS}) or "not recorded"


def optimization_gain(gemm: pd.DataFrame) -> pd.DataFrame:
    """Per device and GEMM shape of the verified sweep
    (:func:`~phonetrain.report.analysis.gemm_sweep`): ``own`` (the best GFLOPS of the
    project's optimized versions, :data:`~phonetrain.report.analysis.OWN_KERNELS`),
    ``own_kernel`` (which), ``baseline``, ``clblast`` and ``cpu`` GFLOPS where measured,
    ``gain`` = own / baseline (the same FLOPs, so baseline time / optimized time), its
    interval ``gain_low``/``gain_high`` from the two rows' kernel-time intervals (baseline
    low / optimized high .. baseline high / optimized low; nan where either row records
    none), ``verdict`` (:func:`~phonetrain.report.wording.judge` of the optimized kernel time
    against the baseline's: ``faster`` means the optimized version is) and ``conditions``
    (both rows'). Empty when no device has baseline and an optimized version."""
    g = gemm_sweep(gemm)
    out = []
    for (dev, shape), d in g.groupby(["device", "shape"]):
        own = d[d["kernel"].isin(OWN_KERNELS)]
        base = d[d["kernel"] == "baseline"]
        if own.empty or base.empty:
            continue
        o, b = own.loc[own["gflops"].idxmax()], base.loc[base["gflops"].idxmax()]
        best = {k: d.loc[d["kernel"] == k, "gflops"].max() for k in ("clblast", CPU_KERNEL)}
        so, sb = gemm_side(o), gemm_side(b)
        lo = sb.low / so.high if so.has_interval and sb.has_interval else np.nan
        hi = sb.high / so.low if so.has_interval and sb.has_interval else np.nan
        out.append({"device": dev, "shape": shape, "own": o["gflops"],
                    "own_kernel": o["kernel"], "baseline": b["gflops"],
                    "clblast": best["clblast"], "cpu": best[CPU_KERNEL],
                    "gain": o["gflops"] / b["gflops"], "gain_low": lo, "gain_high": hi,
                    "verdict": w.judge(sb, so),
                    "conditions": f"{gemm_conditions(o)} / {gemm_conditions(b)}"})
    return pd.DataFrame(out, columns=["device", "shape", "own", "own_kernel", "baseline",
                                      "clblast", "cpu", "gain", "gain_low", "gain_high",
                                      "verdict", "conditions"])


def _verdict_counts(verdicts) -> str:
    """``faster in 3, cannot tell in 2 (no interval recorded)`` over :class:`Verdict` s."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[str(v)] = counts.get(str(v), 0) + 1
    return ", ".join(f"{k} in {n}" for k, n in sorted(counts.items()))


def kernel_optimization(gemm: pd.DataFrame, peaks: pd.DataFrame) -> Finding:
    """Takes gemm.parquet and peaks.parquet. Per device: the best GFLOPS of the optimized
    versions at their best shape, with baseline, CLBlast and the CPU backend at that same
    shape, and the best as a share of the device's measured compute peak
    (:func:`~phonetrain.report.analysis.peak_share`); then, labelled as such, the median over
    shapes of the per-shape ratios (a typical shape, not the best result), and per shape the
    ratio's interval from the two rows' kernel-time intervals with its verdict
    (:func:`optimization_gain`; cannot tell where a row records no interval). Set beside the
    paper's 5-15 -> 25-70 GFLOPS (second-hand, ``ANCHORS["gpu_gemm_gain"]``)."""
    title = "Kernel optimization: GEMM GFLOPS per version"
    paper = [ANCHORS["gpu_gemm_before"], ANCHORS["gpu_gemm_after"], ANCHORS["gpu_gemm_gain"],
             ANCHORS["cpu_gflops"]]
    gain = optimization_gain(gemm)
    if gain.empty:
        return not_measured("kernel_optimization", title,
                        "no verified GEMM sweep with baseline and an optimized version", paper)
    parts, rows, refs = [], [], []
    for dev, d in gain.groupby("device"):
        b = d.loc[d["own"].idxmax()]
        at = ", ".join(f"{n} {b[c]:.3g}" for c, n in (("baseline", "baseline"),
                                                       ("clblast", "CLBlast"),
                                                       ("cpu", "CPU backend"))
                       if pd.notna(b[c]))
        s = (f"{dev}: best {b['own_kernel']} {b['own']:.3g} GFLOPS at {b['shape']} "
             f"(same shape: {at})")
        pk, pk_name = compute_peak(peaks, dev)
        if pk == pk:
            s += ", " + peak_share(b["own"], pk, pk_name)
        meds = [f"{(d['own'] / d[c]).median():.2g}x {n}" for c, n in
                (("baseline", "baseline"), ("clblast", "CLBlast"), ("cpu", "the CPU backend"))
                if d[c].notna().any()]
        s += f"; median over {len(d)} shapes of the per-shape ratio: " + ", ".join(meds)
        s += "; per shape, optimized vs baseline kernel time: " + _verdict_counts(d["verdict"])
        parts.append(s)
        rows += [[dev, r["shape"], f"{r['own']:.3g} ({r['own_kernel']})",
                  *(w.num(r[c]) for c in ("baseline", "clblast", "cpu")),
                  w.times(r["gain"], r["gain_low"], r["gain_high"]),
                  r["verdict"].text("optimized faster", "optimized slower"), r["conditions"]]
                 for _, r in d.iterrows()]
        refs.append(f"gemm.parquet: device={dev}")
    stmt = ("Optimized GEMM kernels (GEMM sweep, GFLOPS, median of repeats; paper: 5-15 -> "
            "25-70 GFLOPS, 4-5x, second-hand): " + "; ".join(parts) + ".")
    table = Table(["device", "shape", "best optimized GFLOPS", "baseline", "CLBlast",
                   "CPU backend", "optimized / baseline [interval]", "verdict",
                   "conditions (optimized / baseline)"], rows)
    return Finding("kernel_optimization", title, stmt, refs, paper, table)
