"""The report's first screen: per device, the paper's findings and this study's, side by side.

:func:`at_a_glance` returns one table per device. Rows: the paper's findings (GPU vs CPU step
time, gain from kernel optimization, share of data movement by each measure) and this study's
own (launch overhead, staged vs resident tensors, map vs copy). Columns: the paper's figure
(marked second-hand where it is), this study's figure with its interval, a verdict and the
finding it comes from. Verdicts: ``agrees`` / ``differs`` (the study's interval overlaps the
paper's range, or not: :func:`phonetrain.report.wording.overlap_verdict`; per model, GEMM shape
or run where a row has several, ``differs (k of n agree)`` when only some do), ``cannot tell``
with the reason (no interval recorded, an unstable run whose figure does not survive its
noise), ``... (measured under contention)`` (decided from unstable runs: their interval
widened by :data:`~phonetrain.report.wording.SURVIVES_NOISE_FACTOR` on both ends still
decides; a data-movement share by its odds widened so, :func:`_contended_share`),
``not measured``, ``unstable`` (only unstable runs measured a figure that has no interval to
decide from), ``no paper figure`` (the study's own finding).
The figures are computed by the same functions as the findings (:mod:`.findings`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import pandas as pd

import phonetrain.report.findings as fd
import phonetrain.report.wording as w
from phonetrain.report.analysis import run_names
from phonetrain.report.paper import ANCHORS, Anchor

# The paper's reading of the data-movement share: it dominates an iteration (~91%).
DOMINANT_RANGE = (w.DOMINANT_SHARE, 1.0)


@dataclass
class GlanceRow:
    """One row of a device's table: ``finding`` (what is compared), ``paper`` (the paper's
    figure, '' for the study's own), ``second_hand``, ``study`` (this study's figure with its
    interval), ``verdict`` and ``link`` (the anchor of the finding behind it)."""

    finding: str
    paper: str
    second_hand: bool
    study: str
    verdict: str
    link: str


def _against_paper(v: w.Verdict, lo: float, hi: float, anchor: Anchor) -> str:
    """One ratio's verdict against the paper's range: ``cannot tell (<reason>)`` when the
    comparison behind it could not decide for lack of evidence (no interval, an unstable side
    whose noise hides the difference, settings differ), else :func:`w.overlap_verdict` of its
    interval, widened by the noise factor and marked when decided from unstable runs."""
    if v.word == "not valid":
        return f"cannot tell ({v.reason})"
    if not v.stated and v.reason != "intervals overlap":
        return str(v)
    if v.contended:
        f = w.SURVIVES_NOISE_FACTOR
        return f"{w.overlap_verdict(lo / f, hi * f, anchor.low, anchor.high)} " \
               f"({w.UNDER_CONTENTION})"
    return w.overlap_verdict(lo, hi, anchor.low, anchor.high)


def _combine(verdicts: list[str], what: str) -> str:
    """Several items' verdicts as one: :func:`w.count_verdict` over the decided ones (marked
    measured under contention when any was), with how many it cannot tell; the first reason
    when it can tell none."""
    told = [v for v in verdicts if not v.startswith(w.CANNOT_TELL)]
    if not told:
        return verdicts[0] if len(set(verdicts)) == 1 else \
            f"{w.CANNOT_TELL} ({len(verdicts)} {what}; first: {verdicts[0]})"
    text = w.count_verdict([v.startswith("agrees") for v in told], what)
    if any(w.UNDER_CONTENTION in v for v in told):
        text += f" ({w.UNDER_CONTENTION})"
    n = len(verdicts) - len(told)
    return text + (f"; cannot tell for {n} of {len(verdicts)} {what}" if n else "")


def brief(v: w.Verdict) -> w.Verdict:
    """``v`` without the conditions a difference stated under contention carries (the first
    screen names them once per device): its reason just ``measured under contention``."""
    return replace(v, reason=w.UNDER_CONTENTION) if v.contended else v


def _paper_verdicts(frame: pd.DataFrame, dev: str, anchor: str, col: str
                    ) -> tuple[pd.DataFrame, list[str]] | None:
    """The rows of ``frame`` on ``dev`` and, per row, its verdict (``verdict``, interval
    ``<col>_low``..``<col>_high``) against the paper's ``ANCHORS[anchor]``; None when the
    device has no row."""
    d = frame[frame["device"] == dev]
    if d.empty:
        return None
    a = ANCHORS[anchor]
    return d, [_against_paper(v, lo, hi, a)
               for v, lo, hi in zip(d["verdict"], d[f"{col}_low"], d[f"{col}_high"])]


def _step_time(runs: pd.DataFrame, dev: str) -> tuple[str, str] | None:
    got = _paper_verdicts(fd.best_pairs(fd.gpu_cpu_pairs(runs)), dev, "gpu_slowdown",
                          "ratio")
    if got is None:
        return None
    b, verdicts = got
    study = "; ".join(f"{m} {w.times(q, lo, hi)} ({w.gpu_vs_cpu_text(brief(v))})"
                      for m, q, lo, hi, v
                      in zip(b["model"], b["ratio"], b["ratio_low"], b["ratio_high"],
                             b["verdict"]))
    return f"best OpenCL / CPU time (host clock): {study}", _combine(verdicts, "models")


def _gain(gemm: pd.DataFrame, dev: str) -> tuple[str, str] | None:
    got = _paper_verdicts(fd.optimization_gain(gemm), dev, "gpu_gemm_gain", "gain")
    if got is None:
        return None
    d, verdicts = got
    shown = d.dropna(subset=["gain_low", "gain_high"])
    study = (f"per GEMM shape (kernel-time intervals): {w.span(shown['gain'], w.times)} over "
             f"{len(shown)} of {len(d)} shape(s) with an interval" if len(shown) else
             f"{w.span(d['gain'], w.times)} over {len(d)} GEMM shape(s), no interval recorded")
    return study, _combine(verdicts, "shapes")


def moving_shares(runs: pd.DataFrame, dev: str, col: str) -> pd.Series:
    """The device's staged and pipelined shares, clipped to [0, 1] (a transfer call's time,
    taken on another clock than the iteration's, can read a hair over the whole iteration),
    indexed by :func:`run_names`."""
    g = fd.moving(fd.movement_frame(runs))
    g = g[(g["device"] == dev) & (g["below"] != True)].dropna(subset=[col])  # noqa: E712
    return pd.Series(g[col].clip(0.0, 1.0).to_numpy(), index=run_names(g), dtype=float)


def _contended_share(share: float) -> str:
    """One unstable run's share against the paper's "dominant": decided only when the share
    widened for the noise (:func:`w.widened_share`) stays on one side of
    :data:`~phonetrain.report.wording.DOMINANT_SHARE`."""
    lo, hi = w.widened_share(share)
    if lo > w.DOMINANT_SHARE:
        return f"agrees ({w.UNDER_CONTENTION})"
    if hi <= w.DOMINANT_SHARE:
        return f"differs ({w.UNDER_CONTENTION})"
    return (f"{w.CANNOT_TELL} (widened {w.SURVIVES_NOISE_FACTOR:g}x for the noise, "
            f"{w.pct(lo)} to {w.pct(hi)} lies on both sides of {w.pct(w.DOMINANT_SHARE)})")


def _share(runs: pd.DataFrame, dev: str, col: str, measure: str) -> tuple[str, str] | None:
    """The data-movement share of the device's usable staged and pipelined runs against the
    paper's "dominant"; with none usable, of its unstable ones, each decided only where its
    share widened for the noise stays on one side of the threshold (:func:`_contended_share`)."""
    g = moving_shares(runs, dev, col)
    if len(g):
        study = (f"{w.span(g, names=g.index)} over {len(g)} staged or pipelined OpenCL "
                 f"run(s) ({measure})")
        lo, hi = DOMINANT_RANGE
        return study, w.count_verdict([lo < x <= hi for x in g], "runs")
    g = moving_shares(fd.unstable_as_ok(runs), dev, col)
    if g.empty:
        return None
    study = (f"{w.span(g, names=g.index)} over {len(g)} staged or pipelined OpenCL run(s) "
             f"({measure}, "
             f"{w.UNDER_CONTENTION}: each share's odds widened {w.SURVIVES_NOISE_FACTOR:g}x)")
    return study, _combine([_contended_share(x) for x in g], "runs")


def _gaps(runs: pd.DataFrame, dev: str) -> tuple[str, str] | None:
    """The launch gaps' share of an iteration over the device's usable OpenCL runs; with none
    usable, over its unstable ones, marked measured under contention (as the pair rows are:
    a figure of the study's own, with no paper figure for it to contradict)."""
    g = gap_shares(runs, dev)
    marked = ""
    if g.empty:
        g, marked = gap_shares(fd.unstable_as_ok(runs), dev), f", {w.UNDER_CONTENTION}"
    if g.empty:
        return None
    return (f"{w.span(g, names=g.index)} of an iteration over {len(g)} OpenCL run(s) "
            f"(host clock{marked})", "no paper figure")


def gap_shares(runs: pd.DataFrame, dev: str) -> pd.Series:
    """The launch gaps' share of an iteration (:func:`~.findings.movement_frame`'s
    ``gap_share``) of the device's OpenCL runs counted usable in ``runs``, indexed by
    :func:`run_names`."""
    g = fd.movement_frame(runs)
    g = g[g["device"] == dev].dropna(subset=["gap_share"])
    return pd.Series(g["gap_share"].to_numpy(), index=run_names(g), dtype=float)


def _pairs(runs: pd.DataFrame, dev: str, a, b, what: str) -> tuple[str, str] | None:
    p = fd.pair_frame(runs, a, b)
    p = p[p["device"] == dev]
    if p.empty:
        return None
    clear = p[~p["no_difference"]]
    reasons = sorted({v.reason for v in p.loc[p["no_difference"], "verdict"]})
    text = (f"{what} {w.span(clear['ratio'], w.times)} (host clock)" if len(clear) else
            f"{w.CANNOT_TELL} ({'; '.join(reasons)})")
    if any(v.contended for v in clear["verdict"]):
        text += f", {w.UNDER_CONTENTION}"
    if len(clear) and len(clear) < len(p):
        text += f"; cannot tell for {len(p) - len(clear)} of {len(p)} pair(s)"
    # a row whose every pair is undecided has no figure of the study's own either
    return text, "no paper figure" if len(clear) else w.CANNOT_TELL


ROWS: list[tuple[str, str, Anchor | None, Callable]] = [
    ("GPU vs CPU step time", "gpu_vs_cpu", ANCHORS["gpu_slowdown"],
     lambda t, d: _step_time(t["runs"], d)),
    ("Gain from kernel optimization (GEMM)", "kernel_optimization", ANCHORS["gpu_gemm_gain"],
     lambda t, d: _gain(t["gemm"], d)),
    ("Share of data movement (device events)", "data_movement", ANCHORS["movement_share"],
     lambda t, d: _share(t["runs"], d, "data_movement_share", w.EVENTS)),
    ("Share of data movement (call time)", "data_movement", ANCHORS["movement_share"],
     lambda t, d: _share(t["runs"], d, "data_movement_call_share", w.CALLS)),
    ("Launch overhead (gaps outside transfer calls)", "launch_overhead", None,
     lambda t, d: _gaps(t["runs"], d)),
    ("Staged vs resident tensors", "placement", None,
     lambda t, d: _pairs(t["runs"], d, ("resident", "copy"), ("staged", "copy"),
                         "staged / resident")),
    ("Pipelined vs staged transfers", "pipelining", None,
     lambda t, d: _pairs(t["runs"], d, ("staged", "copy"), ("pipelined", "copy"),
                         "pipelined / staged")),
    ("Map/unmap vs copies", "transfer_method", None,
     lambda t, d: _pairs(t["runs"], d, ("staged", "copy"), ("staged", "map"), "map / copy")),
]


def _paper_text(a: Anchor | None) -> str:
    if a is None:
        return ""
    if a.key == "movement_share":
        return "~91% of GPU training time (dominant)"
    if a.key == "gpu_gemm_gain":
        return "4-5x (5-15 -> 25-70 GFLOPS)"
    if a.key == "gpu_slowdown":
        return "GPU >= ~10x slower than CPU"
    return a.text


def at_a_glance(tables: dict[str, pd.DataFrame]) -> dict[str, list[GlanceRow]]:
    """Takes the tables of :func:`phonetrain.report.build.load_tables`; returns device ->
    its rows (:class:`GlanceRow`), devices sorted, for every device with runs or a GEMM
    sweep. A row measured only by unstable runs says so (verdict ``unstable``)."""
    runs = tables["runs"]
    as_ok = {**tables, "runs": fd.unstable_as_ok(runs)}
    devices = sorted(set(runs["device"]) | set(tables["gemm"]["device"]))
    out = {}
    for dev in devices:
        rows = []
        for name, key, anchor, fn in ROWS:
            got = fn(tables, dev)
            if got is None and fn(as_ok, dev) is not None:
                got = ("unstable runs only: not used (see Unstable runs)", "unstable")
            study, verdict = got if got is not None else ("", "not measured")
            rows.append(GlanceRow(name, _paper_text(anchor),
                                  bool(anchor and anchor.second_hand), study, verdict,
                                  f"finding-{key}"))
        out[dev] = rows
    return out


def contention_note(runs: pd.DataFrame) -> str | None:
    """A sentence naming the verified runs measured while other processes used more than
    :data:`~phonetrain.report.wording.CONTENDED_SHARE` of the device's CPU capacity
    (``other_cpu_share``); None when none was (or none recorded it)."""
    ok = runs[runs["status"] == "ok"]
    busy = ok[[w.contended(r) for _, r in ok.iterrows()]] if len(ok) else ok
    if busy.empty:
        return None
    worst = busy.loc[pd.to_numeric(busy["other_cpu_share"]).idxmax()]
    return (f"{len(busy)} verified run(s) were measured while other processes used more than "
            f"{w.CONTENDED_SHARE:.0%} of the CPU (worst: {worst['run_id']}, "
            f"{float(worst['other_cpu_share']):.0%}); their times may be inflated.")
