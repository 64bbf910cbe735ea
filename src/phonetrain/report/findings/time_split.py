"""Guidelines on where an iteration's time goes: data movement (:func:`data_movement`) and
the gaps between kernel launches (:func:`launch_overhead`)."""

from __future__ import annotations

import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import estimate, interval, is_cpu, run_label, run_names
from phonetrain.report.findings.base import (Finding, Table, flag_of, from_unstable, not_measured,
                                             ok_runs, run_refs, run_verdict)
from phonetrain.report.paper import ANCHORS


def movement_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """The verified OpenCL runs with a data-movement share: runs.parquet rows with
    ``below`` (every transfer command below the timer resolution: the shares are upper
    bounds; None when not recorded) and ``gap_share`` = (``gap_ms`` -
    ``transfer_overhead_ms``) / ``iteration_median_ms``, the launch gaps outside transfer
    calls."""
    ok = ok_runs(runs)
    gpu = ok[~is_cpu(ok)].dropna(subset=["data_movement_share", "data_movement_call_share"])
    gpu = gpu.copy()
    gpu["below"] = [flag_of(r, "transfer_below_resolution") for _, r in gpu.iterrows()]
    gpu["gap_share"] = ((gpu["gap_ms"] - gpu["transfer_overhead_ms"]).clip(lower=0)
                        / gpu["iteration_median_ms"])
    return gpu


MOVING_PLACEMENTS = ("staged", "pipelined")   # placements that move tensors every kernel


def moving(gpu: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`movement_frame` whose placement moves data between the host and the
    device around every kernel (:data:`MOVING_PLACEMENTS`: staged with copy or map transfers,
    pipelined): the runs the paper's ~91% describes. Resident runs move only the batch and
    the loss by design."""
    return gpu[gpu["placement"].isin(MOVING_PLACEMENTS)]


def _share_clause(g: pd.DataFrame, col: str, measure: str) -> str:
    """``by <measure> X to Y (median M): it <dominates|does not dominate|dominates in k of n
    runs>``, over the runs whose transfers the timer resolved (the others' shares are upper
    bounds, counted apart in the statement)."""
    resolved = g[g["below"] != True]  # noqa: E712  (None: not recorded, counted as resolved)
    if resolved.empty:
        return f"by {measure} {w.BELOW} in every run"
    return (f"by {measure} {w.span(resolved[col], names=run_names(resolved))}: "
            f"{w.dominance(resolved[col])}")


def data_movement(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device, the share of verified OpenCL iteration time spent
    moving data, by device events (``data_movement_share``) and by call time
    (``data_movement_call_share``: the idle time inside blocking transfer calls added, what a
    host-side profiler counts; both defined in :mod:`phonetrain.results.profiling`). The
    verdict "dominates" follows each measure's median against
    :data:`~phonetrain.report.wording.DOMINANT_SHARE`; runs whose transfers were all below
    the timer resolution are shown as upper bounds and left out of the spans. Only the
    placements that move data (:func:`moving`) are set beside the paper's ~91%
    (``ANCHORS["movement_share"]``) and copies ~10-15x compute
    (``ANCHORS["copy_vs_compute"]``); resident runs are named apart."""
    title = "Data movement share of GPU training time"
    paper = [ANCHORS["movement_share"], ANCHORS["copy_vs_compute"]]
    gpu = movement_frame(runs)
    if gpu.empty:
        return from_unstable(data_movement, runs,
                              not_measured("data_movement", title, "no verified OpenCL run", paper))
    move = moving(gpu)
    parts = [f"{dev}: {_share_clause(g, 'data_movement_share', w.EVENTS)}; "
             f"{_share_clause(g, 'data_movement_call_share', w.CALLS)}"
             for dev, g in move.groupby("device")] or [
        "no verified run of a placement that moves data (staged, pipelined)"]
    resolved = move[move["below"] != True]  # noqa: E712
    ev = (resolved["data_movement_share"] > w.DOMINANT_SHARE).sum()
    call = (resolved["data_movement_call_share"] > w.DOMINANT_SHARE).sum()
    advice = (f"where it dominates by device events ({ev} run(s)), keep tensors resident on the "
              "device and move only the batch and the loss" if ev else
              f"where it dominates by call time ({call} run(s)), the cost sits in the transfer "
              "calls (driver and synchronisation), not in the bytes: fewer, batched transfers "
              "or resident tensors cut it" if call else
              "data movement is not the main cost here" if len(resolved) else
              "not compared with the paper")
    stmt = ("Share of OpenCL iteration time spent moving data in the placements that move it "
            "(staged, pipelined; paper: ~91%), " + "; ".join(parts) + f". Over all devices: "
            f"{advice}.")
    res = gpu[gpu["placement"] == "resident"]
    if len(res):
        stmt += (f" {len(res)} resident run(s) move only the batch and the loss by design and "
                 "are not set beside the paper's figure: "
                 f"{w.span(res['data_movement_share'])} ({w.EVENTS}).")
    n_below = int((gpu["below"] == True).sum())  # noqa: E712
    if n_below:
        stmt += (f" {n_below} run(s) moved data only in commands shorter than the timer "
                 "resolution: their shares are upper bounds.")
    rows = []
    for _, r in gpu.sort_values(["device", "model", "placement", "transfer", "kernel"]).iterrows():
        below = r["below"]
        resolved = below is not True and r["kernel_ms"] > 0 and flag_of(
            r, "kernel_below_resolution") is not True
        rows.append([r["device"], r["model"], run_label(r, False),
                     w.pct(r["data_movement_share"], below),
                     w.pct(r["data_movement_call_share"], below), w.ms(r["transfer_ms"], below),
                     w.ms(r["kernel_ms"], flag_of(r, "kernel_below_resolution")),
                     w.times(r["transfer_ms"] / r["kernel_ms"]) if resolved else "n/a"])
    table = Table(["device", "model", "run", "share (device events)", "share (call time)",
                   "transfer (ms, device events)", "kernels (ms, device events)",
                   "transfer / kernel time"], rows)
    return Finding("data_movement", title, stmt, run_refs(gpu["run_id"]), paper, table)


def launch_overhead(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device, the share of verified OpenCL iteration time in launch
    gaps outside transfer calls (no command running: enqueue and dispatch cost,
    :func:`movement_frame`'s ``gap_share``, host clock). Fusing kernels is advised only where
    that share exceeds :data:`~phonetrain.report.wording.LAUNCH_GAP_SHARE`."""
    title = "Launch overhead: gaps between commands"
    gpu = movement_frame(runs).dropna(subset=["gap_share"])
    if gpu.empty:
        return from_unstable(launch_overhead, runs,
                              not_measured("launch_overhead", title, "no verified OpenCL run", []))
    parts = []
    for dev, g in gpu.groupby("device"):
        med = g["gap_share"].median()
        parts.append(f"{dev} {w.span(g['gap_share'], names=run_names(g))}" + (
            ": fewer, larger kernels (fusion) would pay" if med > w.LAUNCH_GAP_SHARE else
            ": not where the time goes"))
    stmt = ("Launch gaps outside transfer calls (no command running; host clock), share of "
            f"the median iteration, advice above {w.LAUNCH_GAP_SHARE:.0%}: "
            + "; ".join(parts) + ".")
    launches = launch_clause(gpu)
    if launches:
        stmt += " " + launches
    rows = [[r["device"], r["model"], run_label(r, False),
             w.ms(max(r["gap_ms"] - r["transfer_overhead_ms"], 0.0)), w.pct(r["gap_share"]),
             w.num(r.get("launches_per_iteration")), w.num(r.get("kernel_gap_median_us")),
             w.num(r.get("launch_overhead_us"))]
            for _, r in gpu.sort_values(["device", "model", "placement", "transfer",
                                         "kernel"]).iterrows()]
    table = Table(["device", "model", "run", "gaps outside transfer calls (ms)",
                   "share of iteration", "launches / iteration",
                   "median gap between kernels (us, device events)",
                   "gap per launch (us, host clock)"], rows)
    return Finding("launch_overhead", title, stmt, run_refs(gpu["run_id"]), [], table)


def launch_clause(gpu: pd.DataFrame) -> str:
    """Per device and model (resident placement, copy transfers: the launches alone), the
    kernel launches per iteration of each kernel version with its launch cost -- the median
    idle time between consecutive kernels (``kernel_gap_median_us``, device events) and the
    iteration gap per launch (``launch_overhead_us``, host clock) -- and, where versions differ
    in launch count, whether the one with the fewest launches is faster than the one with the
    most (:func:`run_verdict`; cannot tell with its reason). Empty
    when no run has a launch count."""
    if "launches_per_iteration" not in gpu:
        return ""
    g = gpu[(gpu["placement"] == "resident") & (gpu["transfer"] == "copy")].dropna(
        subset=["launches_per_iteration"])
    parts = []
    for (dev, model), m in g.groupby(["device", "model"]):
        m = m.sort_values(["launches_per_iteration", "kernel"])
        each = ", ".join(
            f"{r['kernel']} {int(r['launches_per_iteration'])} "
            f"(gap between kernels {w.num(r['kernel_gap_median_us'])} us, "
            f"{w.num(r['launch_overhead_us'])} us per launch)" for _, r in m.iterrows())
        few, many = m.iloc[0], m.iloc[-1]
        if few["launches_per_iteration"] < many["launches_per_iteration"]:
            v = run_verdict(many, few)
            verdict = (f"{few['kernel']} {v} ({w.ms_interval(estimate(few), *interval(few))} "
                       f"vs {w.ms_interval(estimate(many), *interval(many))}, host clock)"
                       if v.stated else f"iteration time: {v}")
            each += (f"; {int(many['launches_per_iteration'] / few['launches_per_iteration'])}x"
                     f" fewer launches: {verdict}")
        parts.append(f"{dev} {model}: {each}")
    if not parts:
        return ""
    return "Kernel launches per iteration (resident, copy): " + "; ".join(parts) + "."
