"""Guidelines on placement and transfers: resident vs staged (:func:`placement`), copy vs
map (:func:`transfer_method`) and the pipelined placement (:func:`pipelining`), each a pair
of runs of one model, device and kernel version."""

from __future__ import annotations

import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import estimate, gpu_api, interval, ratio_interval
from phonetrain.report.findings.base import (Finding, Table, flag_of, measured_runs, not_measured,
                                             run_refs, run_verdict)
from phonetrain.report.paper import ANCHORS


def _paired(runs: pd.DataFrame, a: tuple[str, str], b: tuple[str, str]) -> list[tuple]:
    """OpenCL runs with an iteration time (``ok`` or ``unstable``) with (placement, transfer)
    ``a`` and ``b`` on the same model, device and kernel version: a list of ((model, device,
    kernel), row a, row b). Vulkan runs are left out: a Vulkan run of the same placement,
    model, device and kernel version is another subject, not a second row of the OpenCL one."""
    ok = measured_runs(runs)
    ok = ok[pd.Series([gpu_api(r) == "OpenCL" for _, r in ok.iterrows()], index=ok.index,
                      dtype=bool)]
    key = ["model", "device", "kernel"]
    ra = ok[(ok["placement"] == a[0]) & (ok["transfer"] == a[1])].set_index(key)
    rb = ok[(ok["placement"] == b[0]) & (ok["transfer"] == b[1])].set_index(key)
    both = ra.index.intersection(rb.index)
    return [(k, ra.loc[k], rb.loc[k]) for k in both]


def pair_frame(runs: pd.DataFrame, a: tuple[str, str], b: tuple[str, str]) -> pd.DataFrame:
    """:func:`_paired` as a frame: ``device``, ``model``, ``kernel``, ``ratio`` = b / a
    iteration time (``iteration_ms``), its interval ``ratio_low``/``ratio_high``,
    ``verdict`` (:func:`run_verdict` of b against a: ``faster``
    means b is faster), ``no_difference`` (no difference stated), ``a``/``b`` (the rows)."""
    out = []
    for (model, dev, kernel), ra, rb in _paired(runs, a, b):
        lo, hi = ratio_interval(rb, ra)
        v = run_verdict(ra, rb)
        out.append({"device": dev, "model": model, "kernel": kernel,
                    "ratio": estimate(rb) / estimate(ra),
                    "ratio_low": lo, "ratio_high": hi, "verdict": v,
                    "no_difference": not v.stated, "a": ra, "b": rb})
    return pd.DataFrame(out, columns=["device", "model", "kernel", "ratio", "ratio_low",
                                      "ratio_high", "verdict", "no_difference", "a", "b"])


def _pair_clause(dev: str, g: pd.DataFrame, slower: str, faster: str) -> str:
    """``<dev> <span of the stated ratios> (<verdict>)``, then the pairs it cannot tell apart;
    a stated difference from an unstable run carries "measured under contention"."""
    clear = g[~g["no_difference"]]
    if clear.empty:
        return f"{dev}: cannot tell in {len(g)} pair(s)"
    v = (slower if (clear["ratio"] > 1).all() else faster if (clear["ratio"] < 1).all()
         else "mixed")
    n = len(g) - len(clear)
    busy = sum(x.contended for x in clear["verdict"])
    return (f"{dev}: {w.span(clear['ratio'], w.times)} ({v}"
            + (f"; {busy} pair(s) {w.UNDER_CONTENTION}" if busy else "") + ")"
            + (f", cannot tell in {n} pair(s)" if n else ""))


def _pair_verdict(r: pd.Series, what: str) -> str:
    """A pair's verdict cell: ``<what> faster``/``<what> slower`` or ``cannot tell (...)``."""
    return r["verdict"].text(f"{what} faster", f"{what} slower")


def placement(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Staged (the host owns the tensors) over resident placement, both
    with copy transfers: the ratio of median iteration times (host clock) per pair of the same
    model, device and kernel version, with its interval; pairs it cannot tell apart say why
    (:func:`pair_frame`)."""
    title, paper = "Placement: resident vs staged tensors", [ANCHORS["movement_share"]]
    p = pair_frame(runs, ("resident", "copy"), ("staged", "copy"))
    if p.empty:
        return not_measured("placement", title, "no verified resident/copy and staged/copy pair "
                        "of the same model, device and kernel", paper)
    stmt = ("Staged over resident iteration time (host clock), the regime of frameworks that "
            "fall back to the host between operators: " + "; ".join(
                _pair_clause(d, g, "staging costs", "staging is faster")
                for d, g in p.groupby("device")) + ".")
    rows = [[r["device"], r["model"], r["kernel"],
             w.ms_interval(estimate(r["b"]), *interval(r["b"])),
             w.ms_interval(estimate(r["a"]), *interval(r["a"])),
             w.times(r["ratio"], r["ratio_low"], r["ratio_high"]),
             _pair_verdict(r, "staged")] for _, r in p.iterrows()]
    table = Table(["device", "model", "kernel", "staged (ms, host clock)", "resident (ms)",
                   "staged / resident", "verdict"], rows)
    refs = run_refs(sorted({x["run_id"] for c in ("a", "b") for x in p[c]}))
    return Finding("placement", title, stmt, refs, paper, table)


def transfer_method(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. With staged placement, map/unmap transfers
    (CL_MEM_ALLOC_HOST_PTR buffers) over read/write buffer copies: the ratio of median
    iteration times (host clock) with its interval, and of ``transfer_ms`` (device events).
    Set beside published clpeak transfer figures for phone GPUs
    (``ANCHORS["phone_transfer"]``)."""
    title, paper = "Transfers: map/unmap vs read/write copies", [ANCHORS["phone_transfer"]]
    p = pair_frame(runs, ("staged", "copy"), ("staged", "map"))
    if p.empty:
        return not_measured("transfer_method", title, "no verified staged/copy and staged/map pair",
                        paper)
    stmt = ("Map/unmap over copy iteration time with staged tensors (host clock): " +
            "; ".join(_pair_clause(d, g, "copies are faster", "map/unmap is faster")
                      for d, g in p.groupby("device")) +
            ". Whether map is zero-copy is a property of the device (unified memory on "
            "phones): see the bandwidth finding.")
    rows = []
    for _, r in p.iterrows():
        a, b = r["a"], r["b"]
        below = flag_of(a, "transfer_below_resolution") or flag_of(b, "transfer_below_resolution")
        rows.append([r["device"], r["model"], r["kernel"],
                     w.ms_interval(estimate(b), *interval(b)),
                     w.ms_interval(estimate(a), *interval(a)),
                     w.times(r["ratio"], r["ratio_low"], r["ratio_high"]),
                     _pair_verdict(r, "map"),
                     f"{w.ms(b['transfer_ms'], flag_of(b, 'transfer_below_resolution'))} vs "
                     f"{w.ms(a['transfer_ms'], flag_of(a, 'transfer_below_resolution'))}"
                     + (" (not comparable)" if below else "")])
    table = Table(["device", "model", "kernel", "map (ms, host clock)", "copy (ms)",
                   "map / copy", "verdict", "transfer ms, map vs copy (device events)"], rows)
    refs = run_refs(sorted({x["run_id"] for c in ("a", "b") for x in p[c]}))
    return Finding("transfer_method", title, stmt, refs, paper, table)


def pipelining(runs: pd.DataFrame) -> Finding:
    """Takes runs.parquet. Pipelined placement (staged transfers on a second queue,
    overlapping the kernels) over staged, both with copy transfers: the ratio of median
    iteration times (host clock) per pair of the same model, device and kernel version, and
    for the pipelined run its kernel and data-movement medians (device events), their sum
    (what one in-order queue costs at best) and their maximum (the bound perfect overlap
    reaches), and ``transfer_kernel_overlap_ms``: "no overlap measured" when it stays below
    :data:`~phonetrain.report.wording.OVERLAP_MIN_SHARE` of the data movement (e.g. a device
    whose queues run one after the other). The statement adds the most perfect overlap could
    save, ``min(kernel, transfer) / (kernel + transfer)``, over runs whose times are above
    the timer resolution."""
    title, paper = "Pipelining: transfers overlapped with kernels vs staged", []
    p = pair_frame(runs, ("staged", "copy"), ("pipelined", "copy"))
    if p.empty:
        return not_measured("pipelining", title, "no verified staged/copy and pipelined/copy pair "
                        "of the same model, device and kernel", paper)
    rows, clauses, savings = [], [], []
    for _, r in p.iterrows():
        b = r["b"]
        below = flag_of(b, "transfer_below_resolution") or flag_of(b, "kernel_below_resolution")
        k, t = float(b["kernel_ms"]), float(b["transfer_ms"])
        seen = w.overlap_measured(b["transfer_kernel_overlap_ms"], t, b["timer_resolution_ns"])
        rows.append([r["device"], r["model"], r["kernel"],
                     w.ms_interval(estimate(r["a"]), *interval(r["a"])),
                     w.ms_interval(estimate(b), *interval(b)),
                     w.times(r["ratio"], r["ratio_low"], r["ratio_high"]),
                     _pair_verdict(r, "pipelined"),
                     f"{w.ms(max(k, t), below)} / {w.ms(k + t, below)}",
                     w.overlap_text(b["transfer_kernel_overlap_ms"], t,
                                    b["timer_resolution_ns"])])
        clauses.append((r["device"], seen))
        if not below and k + t > 0:
            savings.append(min(k, t) / (k + t))
    seen_by_dev = {d: [s for dd, s in clauses if dd == d] for d in p["device"].unique()}
    overlap = "; ".join(
        f"{d}: " + (f"overlap measured in {sum(v)} of {len(v)} run(s)" if any(v) else
                    f"no overlap measured (below {w.OVERLAP_MIN_SHARE:.0%} of the data movement "
                    "in every run)")
        for d, v in seen_by_dev.items())
    stmt = ("Pipelined over staged iteration time (host clock): " + "; ".join(
        _pair_clause(d, g, "pipelining costs", "pipelining is faster")
        for d, g in p.groupby("device")) + f". Transfer/kernel overlap (device events): "
        f"{overlap}." + (f" Perfect overlap, max(kernel, transfer) instead of their sum, would "
                         f"save at most {w.span(savings)} of it." if savings else ""))
    table = Table(["device", "model", "kernel", "staged (ms, host clock)",
                   "pipelined (ms, host clock)", "pipelined / staged", "verdict",
                   "max(kernel, transfer) / sum, pipelined (device events)",
                   "overlap (device events)"], rows)
    refs = run_refs(sorted({x["run_id"] for c in ("a", "b") for x in p[c]}))
    return Finding("pipelining", title, stmt, refs, paper, table)
