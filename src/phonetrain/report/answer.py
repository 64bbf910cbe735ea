"""The report's answer: per device, one sentence that says where to train and why.

:func:`answers` returns one :class:`Answer` per device: where to train (the CPU backend or
OpenCL, per model when the models disagree), by how much (the fastest OpenCL configuration's
iteration time over the CPU run's, with the ratio's interval:
:func:`phonetrain.report.findings.best_pairs`), the cost measured inside the OpenCL
iterations (the data-movement share of the placements that move data, by device events, and
the launch gaps' share, both medians over the device's runs) and whether the seed paper
agrees (the verdicts of the at-a-glance rows, :func:`phonetrain.report.glance.at_a_glance`).
The measurement conditions behind it (load, other processes' share of the CPU, the OpenMP
wait policy, clocks, temperatures) are summarised once per device (:func:`conditions`), not
repeated per figure. Every number comes from the same functions as the findings.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

import phonetrain.report.findings as fd
import phonetrain.report.glance as glance
import phonetrain.report.wording as w
from phonetrain.report.analysis import gpu_api_label, is_cpu


@dataclass
class Answer:
    """One device's answer: ``device``; ``lead`` (where to train: ``train on the CPU``,
    ``train on the OpenCL backend``, per model when they differ, or why there is no answer);
    ``by`` (how much, with intervals); ``why`` (the cost measured inside OpenCL iterations,
    '' when none was); ``paper`` (whether the seed paper agrees, '' when nothing compares);
    ``contended`` (something in it was decided from runs measured under contention) and
    ``conditions`` (:func:`conditions`, the device's measurement conditions once)."""

    device: str
    lead: str
    by: str
    why: str
    paper: str
    contended: bool
    conditions: str

    @property
    def rest(self) -> str:
        """What follows the lead: ``<by>; <why>; <paper>`` ('' when none is known)."""
        return "; ".join(p for p in (self.by, self.why, self.paper) if p)

    @property
    def sentence(self) -> str:
        """The answer as one sentence: ``<device>: <lead>: <by>; <why>; <paper>.``"""
        mark = f" ({w.UNDER_CONTENTION})" if self.contended else ""
        return f"{self.device}: {self.lead}{mark}" + (f": {self.rest}." if self.rest else ".")


def _ratio(q: float, lo: float, hi: float, word: str) -> str:
    """An OpenCL/CPU time ratio as the factor of its verdict: slower ``5.7x [5.1-6.3]``;
    faster the inverse, ``2x [1.8-2.2]``; otherwise as measured."""
    if word == "faster" and q > 0:
        return w.times(1 / q, 1 / hi if hi > 0 else float("nan"), 1 / lo if lo > 0 else
                       float("nan"))
    return w.times(q, lo, hi)


def _by(b: pd.DataFrame) -> tuple[str, str, bool]:
    """(lead, by, contended) from a device's best pairs (one row per model)."""
    words = {m: v.word for m, v in zip(b["model"], b["verdict"])}
    contended = any(v.contended for v in b["verdict"])
    parts = {"slower": [], "faster": [], "cannot": []}
    for m, q, lo, hi, v in zip(b["model"], b["ratio"], b["ratio_low"], b["ratio_high"],
                               b["verdict"]):
        key = v.word if v.stated else "cannot"
        reason = "" if v.stated else f", cannot tell: {v.reason or v.word}"
        parts[key].append(f"{_ratio(q, lo, hi, v.word)} ({m}{reason})")
    slower = [m for m, x in words.items() if x == "slower"]
    faster = [m for m, x in words.items() if x == "faster"]
    api = gpu_api_label(list(b["gpu"])) if "gpu" in b else "OpenCL"   # OpenCL, Vulkan or both
    win = gpu_api_label([g for g, x in zip(b["gpu"], b["verdict"]) if x.word == "faster"]) \
        if "gpu" in b else "OpenCL"
    if slower and not faster:
        lead = "train on the CPU backend"
    elif faster and not slower:
        lead = f"train on the {win} backend"
    elif slower and faster:
        lead = f"train on {win} for {', '.join(faster)}, on the CPU for {', '.join(slower)}"
    else:
        lead = "cannot tell yet which backend trains faster"
    told = [f"{api} is {' to '.join(_ends(parts[k]))} {k}" for k in ("slower", "faster")
            if parts[k]]
    by = (", ".join(told) + f" than the CPU (best {api} configuration per model, host clock)"
          ) if told else ""
    if parts["cannot"]:
        by += ("; " if by else "") + f"{api} / CPU time " + ", ".join(parts["cannot"])
    return lead, by, contended


def _ends(items: list[str]) -> list[str]:
    """The first and last of ``items`` (already ordered by ratio), or the one item."""
    return items if len(items) <= 2 else [items[0], items[-1]]


def _median(s: pd.Series) -> str:
    return f"{w.pct(s.median())} (median of {len(s)} run{'s' if len(s) > 1 else ''})"


def _why(runs: pd.DataFrame, dev: str) -> tuple[str, bool]:
    """(the cost measured inside the device's OpenCL iterations, whether from unstable
    runs): the data-movement share of its staged and pipelined runs (device events) and the
    launch gaps' share of its OpenCL runs, the larger named first; usable runs first, else the
    unstable ones."""
    for r, contended in ((runs, False), (fd.unstable_as_ok(runs), True)):
        move = glance.moving_shares(r, dev, "data_movement_share")
        gaps = glance.gap_shares(r, dev)
        if len(move) or len(gaps):
            break
    else:
        return "", False
    parts = []
    api = gpu_api_label(runs[(runs["device"] == dev) & ~is_cpu(runs)])
    if len(move):
        parts.append((move.median(), f"data movement takes {_median(move)} of a staged "
                                     f"{api} iteration"))
    if len(gaps):
        article = "an" if api.startswith("OpenCL") else "a"
        parts.append((gaps.median(), f"launch gaps {_median(gaps)} of {article} {api} iteration"))
    parts.sort(key=lambda p: -p[0])
    return ", ".join(t for _, t in parts), contended


def _paper(rows: list[glance.GlanceRow]) -> str:
    """Whether the seed paper agrees, from the at-a-glance rows of the step-time ratio and
    the data-movement share (device events)."""
    by = {r.finding: r for r in rows}
    said = []
    for finding, what in (("GPU vs CPU step time", "GPU >= ~10x slower"),
                          ("Share of data movement (device events)", "~91% in data movement")):
        r = by.get(finding)
        if r is None or r.verdict in ("not measured", "unstable"):
            continue
        v = r.verdict.split(" (")[0]
        v = "partly agrees" if v == "differs" and " of " in r.verdict and "agree" in \
            r.verdict else v
        said.append(f"{what}{' (second-hand)' if r.second_hand else ''} {v}")
    return "vs the paper: " + ", ".join(said) if said else ""


def conditions(runs: pd.DataFrame, dev: str) -> str:
    """The device's measurement conditions once, over its runs with an iteration time
    (``ok`` and ``unstable``): the range of the load average, of other processes' share of
    the CPU, the OpenMP wait policies, the CPU clock and temperature ranges (start and end
    readings), and how many runs were unstable; '' when nothing was recorded."""
    r = runs[(runs["device"] == dev) & runs["status"].isin(["ok", "unstable"])]
    parts = []
    for col, name, fmt in (("load_avg_1m", "load average", lambda x: f"{x:.2g}"),
                           ("other_cpu_share", "other processes' share of the CPU", w.pct)):
        v = pd.to_numeric(r[col], errors="coerce").dropna() if col in r else pd.Series([])
        if len(v):
            parts.append(f"{name} {_range(v, fmt)}")
    if "omp_wait_policy" in r and r["omp_wait_policy"].notna().any():
        parts.append("OMP_WAIT_POLICY " + "/".join(sorted(set(r["omp_wait_policy"].dropna()))))
    for a, b, name, unit in (("cpu_mhz_start", "cpu_mhz_end", "CPU clock", " MHz"),
                             ("temperature_c_start", "temperature_c_end", "temperature", " C")):
        v = pd.concat([pd.to_numeric(r[c], errors="coerce") for c in (a, b) if c in r] or
                      [pd.Series([], dtype=float)]).dropna()
        if len(v):
            parts.append(f"{name} {_range(v, lambda x: f'{x:.0f}')}{unit}")
    n = int((r["status"] == "unstable").sum())
    if n:
        parts.append(f"{n} of {len(r)} run(s) unstable (see Unstable runs)")
    return "; ".join(parts)


def _range(v: pd.Series, fmt) -> str:
    lo, hi = float(v.min()), float(v.max())
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)} to {fmt(hi)}"


def answers(tables: dict[str, pd.DataFrame],
            glance_rows: dict[str, list[glance.GlanceRow]]) -> list[Answer]:
    """Takes the tables of :func:`phonetrain.report.build.load_tables` and the at-a-glance
    rows of the same tables; returns one :class:`Answer` per device of ``glance_rows``, in
    its order."""
    runs = tables["runs"]
    best = fd.best_pairs(fd.gpu_cpu_pairs(runs))
    out = []
    for dev, rows in glance_rows.items():
        b = best[best["device"] == dev]
        if len(b):
            lead, by, contended = _by(b.sort_values("ratio"))
        else:
            mine = runs[runs["device"] == dev]
            lead, by, contended = _no_pair(mine), "", False
        why, why_contended = _why(runs, dev)
        out.append(Answer(dev, lead, by, why, _paper(rows), contended or why_contended,
                          conditions(runs, dev)))
    return out


def _no_pair(runs: pd.DataFrame) -> str:
    """The lead of a device without a CPU run and an OpenCL run of one model to compare."""
    timed = runs[runs["status"].isin(["ok", "unstable"])]
    if timed.empty:
        return "no answer: no run of this device has an iteration time"
    kinds = {"CPU" if c else "OpenCL" for c in is_cpu(timed)}
    if kinds == {"CPU"}:
        return "no answer: only CPU-backend runs (add an OpenCL backend to the sweep)"
    if kinds == {"OpenCL"}:
        return "no answer: no CPU-backend run to compare with (add backend cpu to the sweep)"
    return "no answer: no model has both a CPU and an OpenCL run with an iteration time"
