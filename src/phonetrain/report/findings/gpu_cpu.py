"""Guidelines on GPU vs CPU: the OpenCL run against the CPU run of the same model and device
(:func:`gpu_vs_cpu`), and how that ratio moves with model size (:func:`size_trend`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import (estimate, gpu_api_label, interval, interval_name, is_cpu,
                                        ratio_interval, run_label)
from phonetrain.report.findings.base import (Finding, Table, baseline_first, measured_runs,
                                             not_measured, run_refs, run_verdict)
from phonetrain.report.paper import ANCHORS


def gpu_cpu_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Every OpenCL run with an iteration time (``ok`` or ``unstable``) set against the CPU
    run of the same model and device (the fastest usable one, else the fastest unstable one).
    Takes runs.parquet; returns one row per pair: ``device``, ``model``, ``run_id``,
    ``cpu_run_id``, ``label`` (the OpenCL run), ``gpu_ms``, ``cpu_ms`` (location estimates of
    the iteration time, ``iteration_ms``, host clock), ``ratio`` = gpu / cpu,
    ``ratio_low``/``ratio_high`` (:func:`~phonetrain.report.analysis.ratio_interval`),
    ``verdict`` (:class:`~phonetrain.report.wording.Verdict` of the OpenCL run against the CPU
    run), ``no_difference`` (no difference stated), ``interval`` (the estimator's name),
    ``gpu``/``cpu`` (the two rows)."""
    ok = measured_runs(runs)
    cpu = baseline_first(ok[is_cpu(ok)]).drop_duplicates(["model", "device"])
    cpu = cpu.set_index(["model", "device"])
    out = []
    for _, r in ok[~is_cpu(ok)].iterrows():
        if (r["model"], r["device"]) not in cpu.index:
            continue
        c = cpu.loc[(r["model"], r["device"])]
        if not estimate(c) > 0:
            continue
        lo, hi = ratio_interval(r, c)
        v = run_verdict(c, r)
        out.append({"device": r["device"], "model": r["model"], "run_id": r["run_id"],
                    "cpu_run_id": c["run_id"], "label": run_label(r, False),
                    "gpu_ms": estimate(r), "cpu_ms": estimate(c),
                    "ratio": estimate(r) / estimate(c),
                    "ratio_low": lo, "ratio_high": hi, "verdict": v,
                    "no_difference": not v.stated, "interval": interval_name(r, c),
                    "gpu": r, "cpu": c})
    cols = ["device", "model", "run_id", "cpu_run_id", "label", "gpu_ms", "cpu_ms", "ratio",
            "ratio_low", "ratio_high", "verdict", "no_difference", "interval", "gpu", "cpu"]
    return pd.DataFrame(out, columns=cols)


def best_pairs(pairs: pd.DataFrame) -> pd.DataFrame:
    """The fastest OpenCL configuration per (device, model) of :func:`gpu_cpu_pairs`."""
    return pairs.sort_values("ratio").drop_duplicates(["device", "model"]).sort_values(
        ["device", "model"])


def _device_advice(dev: str, b: pd.DataFrame) -> str:
    """One clause per device from its best pairs: where the GPU wins, loses or cannot be told
    apart, each verdict with its reason."""
    v = list(b["verdict"])
    parts = [f"{m} {w.times(q, lo, hi)} ({w.gpu_vs_cpu_text(x)})" for m, q, lo, hi, x in
             zip(b["model"], b["ratio"], b["ratio_low"], b["ratio_high"], v)]
    words = [x.word for x in v]
    advice = ("use the GPU" if all(x == "faster" for x in words) else
              "train on the CPU" if all(x == "slower" for x in words) else
              "cannot tell" if not any(x.stated for x in v) else "depends on the model")
    return f"{dev}: {', '.join(parts)}: {advice}"


def gpu_vs_cpu(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device and model, the fastest OpenCL configuration's iteration
    time (``iteration_ms``, host clock) over the CPU run's, with the ratio's interval and the
    verdict of :func:`run_verdict` (cannot tell: intervals
    overlap, unstable side, no interval, settings differ; a difference from an unstable side
    only when it survives its noise, marked measured under contention). Set beside the
    paper's ~10x GPU slowdown (``ANCHORS["gpu_slowdown"]``). Both runs' measurement
    conditions are shown: a CPU baseline measured under contention spoils every ratio built
    on it."""
    title, paper = "GPU vs CPU training time", [ANCHORS["gpu_slowdown"]]
    pairs = gpu_cpu_pairs(runs)
    if pairs.empty:
        return not_measured("gpu_vs_cpu", title, "no model has both a CPU run and an OpenCL run "
                        "with an iteration time on the same device", paper)
    best = best_pairs(pairs)
    stmt = (f"Fastest {gpu_api_label(list(best['gpu']))} configuration over the CPU run, "
            "iteration time (host clock, "
            f"{'; '.join(sorted(set(pairs['interval'])))}): "
            + "; ".join(_device_advice(d, b) for d, b in best.groupby("device")) + ".")
    n = int(pairs["no_difference"].sum())
    if n:
        stmt += f" {n} of {len(pairs)} pairing(s): cannot tell (reasons in the table)."
    busy = sorted({c["run_id"] for c in pairs["cpu"] if w.contended(c)})
    if busy:
        stmt += (f" Suspect: CPU baseline(s) {', '.join(busy)} were measured while other "
                 f"processes used more than {w.CONTENDED_SHARE:.0%} of the CPU, which inflates "
                 "the CPU's time and flatters the GPU.")
    rows = [[p["device"], p["model"], p["label"],
             w.ms_interval(p["gpu_ms"], *interval(p["gpu"])),
             w.ms_interval(p["cpu_ms"], *interval(p["cpu"])),
             w.times(p["ratio"], p["ratio_low"], p["ratio_high"]),
             w.gpu_vs_cpu_text(p["verdict"]),
             w.conditions(p["gpu"]) or "not recorded",
             w.conditions(p["cpu"]) or "not recorded"]
            for _, p in pairs.sort_values(["device", "model", "ratio"]).iterrows()]
    table = Table(["device", "model", "OpenCL run", "OpenCL iteration (ms, host clock)",
                   "CPU iteration (ms)", "OpenCL / CPU time", "verdict",
                   "OpenCL run's conditions", "CPU run's conditions"], rows)
    refs = run_refs(sorted(set(pairs["run_id"]) | set(pairs["cpu_run_id"])))
    return Finding("gpu_vs_cpu", title, stmt, refs, paper, table)


def size_trend(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Per device, whether the best GPU/CPU iteration-time ratio shrinks
    as the model grows (``flops_per_iteration``), comparing that device's smallest and
    largest model; a device needs two such models. Ratios of different devices are never
    compared. Set beside ``ANCHORS["gpu_slowdown"]`` (the ratio shrinking with network
    size)."""
    title, paper = "GPU/CPU ratio vs model size", [ANCHORS["gpu_slowdown"]]
    pairs = gpu_cpu_pairs(runs)
    usable = [p["gpu"]["status"] == "ok" and p["cpu"]["status"] == "ok"
              for _, p in pairs.iterrows()]
    best = best_pairs(pairs[usable] if len(pairs) else pairs)
    flops = measured_runs(runs).set_index("run_id")["flops_per_iteration"]
    best = best.assign(flops=best["run_id"].map(flops)).dropna(subset=["flops"])
    trends, rows, refs = [], [], []
    for dev, b in best.groupby("device"):
        b = b.sort_values("flops")
        rows += [[dev, m, f"{f / 1e6:.3g}", w.times(q, lo, hi)] for m, f, q, lo, hi in
                 zip(b["model"], b["flops"], b["ratio"], b["ratio_low"], b["ratio_high"])]
        if b["model"].nunique() < 2:
            continue
        small, large = b.iloc[0], b.iloc[-1]
        tie = (not np.isnan(small["ratio_low"]) and small["ratio_low"] <= large["ratio_high"]
               and large["ratio_low"] <= small["ratio_high"])
        trend = ("shows no clear trend (the two ratios' intervals overlap)" if tie else
                 "shrinks" if large["ratio"] < small["ratio"] else "grows")
        trends.append(f"on {dev} the ratio {trend} from {w.times(small['ratio'])} "
                      f"({small['model']}) to {w.times(large['ratio'])} ({large['model']})")
        refs += [small["run_id"], small["cpu_run_id"], large["run_id"], large["cpu_run_id"]]
    if not trends:
        return not_measured("size_trend", title, "no device has two models with verified CPU "
                        "and OpenCL runs", paper)
    stmt = ("Per device, best OpenCL / CPU iteration time from its smallest to its largest "
            "model (host clock): " + "; ".join(trends) + ".")
    table = Table(["device", "model", "MFLOP / iteration", "best OpenCL / CPU time"], rows)
    return Finding("size_trend", title, stmt, run_refs(sorted(set(refs))), paper, table)
