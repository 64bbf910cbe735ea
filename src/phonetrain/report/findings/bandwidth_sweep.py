"""The guideline on host-device bandwidth: how each transfer kind's time grows with its size
(:func:`bandwidth`), from bandwidth.parquet."""

from __future__ import annotations

import numpy as np
import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import transfer_time_classes
from phonetrain.report.findings.base import Finding, Table, not_measured
from phonetrain.report.paper import ANCHORS


def _behaviour(c: pd.Series) -> str:
    """How a transfer kind's time behaves, in words, from a row of
    :func:`~phonetrain.report.analysis.transfer_time_classes`."""
    if c["cls"] == "zero-copy":
        return (f"zero-copy: ~{c['call_us']:.3g} us per call up to {c['max_bytes']} bytes, "
                f"where a copy at {c['reference_gbps']:.3g} GB/s would have grown by "
                f"{c['copy_growth_us']:.3g} us")
    if c["cls"] == "overhead-bound":
        return (f"inside the call overhead: ~{c['call_us']:.3g} us per call up to "
                f"{c['max_bytes']} bytes, where a copy at the measured "
                f"{c['reference_gbps']:.3g} GB/s takes only {c['copy_growth_us']:.3g} us more; "
                "not zero-copy, the sweep ends before the bytes show")
    if c["cls"] == "undetermined":
        return (f"flat at ~{c['call_us']:.3g} us per call up to {c['max_bytes']} bytes; no "
                "measured bandwidth to tell zero-copy from call overhead")
    return "grows with size (a copy)"


def _gbps_interval(r: pd.Series) -> str:
    """A bandwidth row's host-timed GB/s with its interval, ``12.3 GB/s [11.9-12.6]``, or
    ``12.3 GB/s (no interval recorded)``."""
    lo, hi = r.get("host_gbps_low"), r.get("host_gbps_high")
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return f"{r['host_gbps']:.3g} GB/s (no interval recorded)"
    return f"{r['host_gbps']:.3g} GB/s [{float(lo):.3g}-{float(hi):.3g}]"


def bandwidth(bw: pd.DataFrame, peaks: pd.DataFrame | None = None) -> Finding:
    """Takes bandwidth.parquet and peaks.parquet. Per device and transfer kind: how its time
    behaves with size (:func:`~phonetrain.report.analysis.transfer_time_classes`: zero-copy
    only where a copy at the device's measured bandwidth would have grown), the peak
    host-timed GB/s (1e9 B/s) of kinds that copy, and the share of it the smallest transfer
    reaches (host clock: what a training step pays, call overhead included). Set beside
    published clpeak transfer figures for phone GPUs (``ANCHORS["phone_transfer"]``)."""
    title, paper = "Host <-> device bandwidth", [ANCHORS["phone_transfer"]]
    bw = bw.dropna(subset=["host_gbps"])
    if bw.empty:
        return not_measured("bandwidth", title, "no bandwidth sweep", paper)
    cls = transfer_time_classes(bw, peaks).set_index(["device", "kind"])
    rows, flat, peak_text, fracs = [], {}, [], []
    for (dev, kind), g in bw.groupby(["device", "kind"]):
        c = cls.loc[(dev, kind)]
        if c["cls"] != "copy":
            flat.setdefault(c["cls"], []).append(f"{dev} {kind} ~{c['call_us']:.3g} us")
            rows.append([dev, kind, _behaviour(c), "n/a", "n/a", "n/a"])
            continue
        pk = g.loc[g["host_gbps"].idxmax()]
        frac = g.loc[g["size_bytes"].idxmin(), "host_gbps"] / pk["host_gbps"]
        fracs.append(frac)
        peak_text.append(f"{dev} {kind} {_gbps_interval(pk)}")
        rows.append([dev, kind, _behaviour(c),
                     f"{_gbps_interval(pk)} ({w.num(pk['device_gbps'])})",
                     str(int(pk["size_bytes"])), w.pct(frac)])
    sentences = []
    if peak_text:
        med = float(np.median(fracs))
        sentences.append(
            "Peak host-timed bandwidth: " + ", ".join(peak_text) +
            f"; the smallest transfers reach a median {w.pct(med)} of their kind's peak" +
            (": per-call overhead dominates small tensors, so fewer, larger transfers pay off."
             if med < w.SMALL_TRANSFER_EFFICIENCY else "."))
    words = {"zero-copy": "Zero-copy (flat where a copy at the measured bandwidth would have "
                          "grown)",
             "overhead-bound": "inside the call overhead, not zero-copy (a copy at the "
                               "measured bandwidth would not have grown beyond it over the "
                               "sweep)",
             "undetermined": "flat, but no measured bandwidth to tell zero-copy from overhead"}
    if flat:
        sentences.append("; ".join(f"{words[k]}: {', '.join(v)} per call"
                                   for k, v in flat.items()) + ".")
    stmt = " ".join(sentences)
    table = Table(["device", "kind", "time vs size",
                   "peak host clock [interval] (GB/s, device events)",
                   "at bytes", "smallest transfer's share of peak"], rows)
    refs = [f"bandwidth.parquet: {d}/{k}" for d, k in cls.index]
    return Finding("bandwidth", title, stmt, refs, paper, table)
