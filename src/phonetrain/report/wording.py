"""How the report words a number: units, the measure it uses, timer-resolution caveats, and the
verdicts whose thresholds it crosses.

Every verdict a guideline prints comes from one function here, applied to the figure the
guideline states, so the words cannot contradict the number. The thresholds are this report's
rules, not published ones:

- :data:`DOMINANT_SHARE` (50%): a cost "dominates" an iteration when it takes more than half;
- :data:`LAUNCH_GAP_SHARE` (20%): launch gaps are worth attacking (fewer, larger kernels) when
  they take more than a fifth of an iteration;
- :data:`SMALL_TRANSFER_EFFICIENCY` (50%): per-call overhead "dominates small transfers" when
  the smallest transfer reaches less than half of its kind's peak bandwidth;
- :data:`GEMM_NO_DIFFERENCE` (5%): the GEMM sweep records one median per shape and no spread,
  so two GEMM figures closer than 5% read as "no difference";
- :data:`CONTENDED_SHARE` (10%): a run measured while other processes used more of the
  device's CPU capacity than this is flagged where its figure is used.

Two measured figures differ only when their intervals do not overlap (:func:`change`); the
intervals are the runs' 95% confidence intervals of the median where recorded, else their
interquartile ranges (:func:`phonetrain.report.analysis.interval`).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

DOMINANT_SHARE = 0.5
LAUNCH_GAP_SHARE = 0.2
SMALL_TRANSFER_EFFICIENCY = 0.5
GEMM_NO_DIFFERENCE = 0.05
CONTENDED_SHARE = 0.1
OVERLAP_MIN_SHARE = 0.05   # transfer/kernel overlap below this share of transfer time: none

EVENTS = "device events"
CALLS = "call time"
HOST_CLOCK = "host clock"
BELOW = "< resolution"


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or bool(pd.isna(x))


def num(x: Any, spec: str = ".3g") -> str:
    """``x`` formatted with ``spec``; ``n/a`` for null."""
    return "n/a" if _nan(x) else format(float(x), spec)


def ms(x: Any, below: Any = None) -> str:
    """Milliseconds: ``1.23 ms``. ``below`` True (every command summed was shorter than the
    device timer's resolution) makes the figure an upper bound: ``<= 1.23 ms (< resolution)``,
    or ``< resolution`` when it is 0."""
    if _nan(x):
        return "n/a"
    if below is True:
        return BELOW if float(x) == 0 else f"<= {float(x):.3g} ms ({BELOW})"
    return f"{float(x):.3g} ms"


def pct(x: Any, below: Any = None) -> str:
    """A share as a percentage: ``12.3%``; with ``below`` True an upper bound,
    ``<= 12.3% (< resolution)``, or ``< resolution`` when it is 0."""
    if _nan(x):
        return "n/a"
    if below is True:
        return BELOW if float(x) == 0 else f"<= {float(x):.1%} ({BELOW})"
    return f"{float(x):.1%}"


def times(q: Any, lo: Any = None, hi: Any = None) -> str:
    """A ratio: ``1.64x``, with its interval ``1.64x [1.52-1.80]`` when both ends are known."""
    if _nan(q):
        return "n/a"
    if _nan(lo) or _nan(hi):
        return f"{float(q):.3g}x"
    return f"{float(q):.3g}x [{float(lo):.3g}-{float(hi):.3g}]"


def ms_interval(med: Any, lo: Any, hi: Any) -> str:
    """A median with its interval: ``1.23 ms [1.20-1.30]``."""
    if _nan(med):
        return "n/a"
    if _nan(lo) or _nan(hi):
        return f"{float(med):.3g} ms"
    return f"{float(med):.3g} ms [{float(lo):.3g}-{float(hi):.3g}]"


def span(values, fmt=pct) -> str:
    """``a`` or ``a to b (median m)`` over the non-null values, each written with ``fmt``;
    ``n/a`` when none."""
    v = sorted(float(x) for x in values if not _nan(x))
    if not v:
        return "n/a"
    lo, hi = v[0], v[-1]
    if math.isclose(lo, hi, rel_tol=1e-9, abs_tol=1e-12):
        return fmt(lo)
    return f"{fmt(lo)} to {fmt(hi)} (median {fmt(pd.Series(v).median())})"


def change(before: tuple[float, float], after: tuple[float, float],
           lower_is_better: bool = True) -> str:
    """``faster``, ``slower`` or ``no difference`` between two intervals (low, high) of a
    time (``lower_is_better``) or of a rate: no difference when they overlap; ``n/a`` when an
    end is missing."""
    (blo, bhi), (alo, ahi) = before, after
    if any(_nan(x) for x in (blo, bhi, alo, ahi)):
        return "n/a"
    if alo <= bhi and blo <= ahi:
        return "no difference"
    lower = ahi < blo
    return "faster" if lower == lower_is_better else "slower"


def relative_change(before: float, after: float, lower_is_better: bool = True,
                    tolerance: float = GEMM_NO_DIFFERENCE) -> str:
    """:func:`change` for figures with no interval: ``no difference`` within ``tolerance``
    (relative), else faster or slower."""
    if _nan(before) or _nan(after) or before <= 0:
        return "n/a"
    q = after / before
    if abs(q - 1) <= tolerance:
        return "no difference"
    return "faster" if (q < 1) == lower_is_better else "slower"


def gpu_vs_cpu_verdict(no_difference: bool, ratio: float) -> str:
    """The verdict of one OpenCL-over-CPU time ratio: ``no difference`` when the two runs'
    intervals overlap, else ``GPU faster`` (ratio < 1) or ``GPU slower``."""
    if no_difference:
        return "no difference"
    return "GPU faster" if ratio < 1 else "GPU slower"


def dominates(share: Any, threshold: float = DOMINANT_SHARE) -> str:
    """``dominates`` when ``share`` exceeds ``threshold`` (:data:`DOMINANT_SHARE`), else
    ``does not dominate``; ``n/a`` for null."""
    if _nan(share):
        return "n/a"
    return "dominates" if float(share) > threshold else "does not dominate"


def dominance(shares, threshold: float = DOMINANT_SHARE) -> str:
    """Over several runs' shares: ``it dominates`` (every run above ``threshold``), ``it does
    not dominate`` (none) or ``it dominates in k of n runs``; ``n/a`` when there is none."""
    v = [float(x) for x in shares if not _nan(x)]
    k = sum(x > threshold for x in v)
    if not v:
        return "n/a"
    return ("it dominates" if k == len(v) else "it does not dominate" if k == 0 else
            f"it dominates in {k} of {len(v)} runs")


def count_verdict(agree: list[bool], what: str) -> str:
    """``agrees`` when every item agrees, ``differs`` when none does, else
    ``differs (k of n <what> agree)``."""
    k = sum(agree)
    if k == len(agree):
        return "agrees"
    return "differs" if k == 0 else f"differs ({k} of {len(agree)} {what} agree)"


def overlap_verdict(lo: float, hi: float, paper_lo: float | None,
                    paper_hi: float | None) -> str:
    """``agrees`` when the study's interval [lo, hi] overlaps the paper's range
    [paper_lo, paper_hi] (an open end is unbounded), else ``differs``; ``not measured``
    when the study's interval is missing."""
    if _nan(lo) or _nan(hi):
        return "not measured"
    plo = -math.inf if paper_lo is None else paper_lo
    phi = math.inf if paper_hi is None else paper_hi
    return "agrees" if lo <= phi and plo <= hi else "differs"


def conditions(r: pd.Series | dict) -> str:
    """The measurement conditions a run row records, as one phrase: load average, the share
    of CPU capacity other processes used, the OpenMP wait policy, CPU clock and temperature
    at start -> end; the parts not recorded are left out ('' when none is)."""
    g = r.get
    parts = []
    if not _nan(g("load_avg_1m")):
        parts.append(f"load {float(g('load_avg_1m')):.2g}")
    if not _nan(g("other_cpu_share")):
        parts.append(f"other processes {float(g('other_cpu_share')):.0%} of CPU")
    if g("omp_wait_policy") and not _nan(g("omp_wait_policy")):
        parts.append(f"OMP_WAIT_POLICY {g('omp_wait_policy')}")
    for a, b, unit, spec in (("cpu_mhz_start", "cpu_mhz_end", " MHz", ".0f"),
                             ("temperature_c_start", "temperature_c_end", " C", ".0f")):
        if not _nan(g(a)) or not _nan(g(b)):
            parts.append(f"{num(g(a), spec)}->{num(g(b), spec)}{unit}")
    return ", ".join(parts)


def contended(r: pd.Series | dict, share: float = CONTENDED_SHARE) -> bool:
    """True when the run row records that other processes used more than ``share`` of the
    device's CPU capacity during its measured iterations (``other_cpu_share``)."""
    v = r.get("other_cpu_share")
    return not _nan(v) and float(v) > share


def overlap_measured(overlap_ms: Any, transfer_ms: Any, resolution_ns: Any = None) -> bool:
    """True when a run's ``transfer_kernel_overlap_ms`` shows overlap: at least
    :data:`OVERLAP_MIN_SHARE` of its ``transfer_ms`` and above the device timer's resolution
    (ns; ignored when unknown). Devices that serialize their queues measure about 0."""
    if _nan(overlap_ms) or _nan(transfer_ms) or not float(transfer_ms) > 0:
        return False
    floor = 0.0 if _nan(resolution_ns) else float(resolution_ns) / 1e6
    return float(overlap_ms) >= max(OVERLAP_MIN_SHARE * float(transfer_ms), floor) \
        and float(overlap_ms) > 0


def overlap_text(overlap_ms: Any, transfer_ms: Any, resolution_ns: Any = None) -> str:
    """``overlap: 0.12 ms of 0.40 ms data movement under kernels (30.0%)``, or ``no overlap
    measured (0.001 ms of 0.40 ms)`` when :func:`overlap_measured` is False."""
    if _nan(overlap_ms) or _nan(transfer_ms):
        return "n/a"
    share = float(overlap_ms) / float(transfer_ms) if float(transfer_ms) > 0 else float("nan")
    if overlap_measured(overlap_ms, transfer_ms, resolution_ns):
        return f"overlap: {ms(overlap_ms)} of {ms(transfer_ms)} data movement under kernels " \
               f"({pct(share)})"
    return f"no overlap measured ({ms(overlap_ms)} of {ms(transfer_ms)})"
