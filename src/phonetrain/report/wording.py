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
- :data:`CONTENDED_SHARE` (10%): a run measured while other processes used more of the
  device's CPU capacity than this is flagged where its figure is used;
- :data:`SURVIVES_NOISE_FACTOR` (3x): a difference involving an ``unstable`` measurement is
  stated only when it holds by more than this factor at the extremes of both intervals.

Two measurements differ only when both are usable (status ``ok``) and their intervals
separate (:func:`judge`); otherwise the verdict is ``cannot tell`` with the reason (an unstable
side and why, intervals overlap, no interval recorded, settings differ). The intervals are the
ones the measurements record with their location estimate (runs.parquet ``iteration_ms`` with
``iteration_low_ms``..``iteration_high_ms``, named by ``iteration_estimator``; GEMM
``median_ms`` with ``low_ms``..``high_ms``); a figure without one gets no verdict. An unstable
measurement's interval describes one contended process, not a rerun: two studies of identical
sources on a busy 2-core host differed 0.49x to 2.64x per run (docs/results.md), hence the
factor of :data:`SURVIVES_NOISE_FACTOR` before such a difference is stated, marked
``measured under contention`` with its conditions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

DOMINANT_SHARE = 0.5
LAUNCH_GAP_SHARE = 0.2
SMALL_TRANSFER_EFFICIENCY = 0.5
CONTENDED_SHARE = 0.1
SURVIVES_NOISE_FACTOR = 3.0
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


def size(nbytes: Any) -> str:
    """Bytes in binary units: ``512 B``, ``12.3 KiB``, ``4.56 MiB``, ``1.2 GiB`` (2^10 steps);
    ``n/a`` for null."""
    if _nan(nbytes):
        return "n/a"
    v, unit = float(nbytes), "B"
    for u in ("KiB", "MiB", "GiB"):
        if v < 1024:
            break
        v, unit = v / 1024, u
    return f"{v:.0f} {unit}" if unit == "B" or v >= 1000 else f"{v:.3g} {unit}"


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


def span(values, fmt=pct, names=None) -> str:
    """``a`` or ``a to b (median m)`` over the non-null values, each written with ``fmt``;
    ``n/a`` when none. With ``names`` (one per value, e.g. run ids) the extremes name where
    they come from: ``a (run x) to b (run y), median m``."""
    pairs = [(float(x), n) for x, n in zip(values, names if names is not None else
                                           [None] * len(values)) if not _nan(x)]
    if not pairs:
        return "n/a"
    pairs.sort(key=lambda p: p[0])
    (lo, lo_name), (hi, hi_name) = pairs[0], pairs[-1]
    if math.isclose(lo, hi, rel_tol=1e-9, abs_tol=1e-12):
        return fmt(lo)
    med = fmt(pd.Series([x for x, _ in pairs]).median())
    if names is None:
        return f"{fmt(lo)} to {fmt(hi)} (median {med})"
    return f"{fmt(lo)} ({lo_name}) to {fmt(hi)} ({hi_name}), median {med}"


CANNOT_TELL = "cannot tell"
UNDER_CONTENTION = "measured under contention"
USABLE = "ok"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: the location estimate ``value`` with its interval
    ``low``..``high`` (ms for times, any unit for rates), ``status`` (``ok`` usable;
    ``unstable``; ``wrong`` failed verification; anything else has no valid figure),
    ``reason`` (why it is not ``ok``), ``estimator`` (what ``value`` and its interval are,
    e.g. runs.parquet ``iteration_estimator``; None when not recorded), ``settings`` (name ->
    value of the settings both sides must share, e.g. threads, batch_size; None
    values are not compared) and ``conditions`` (:func:`conditions`)."""

    value: float
    low: float
    high: float
    status: str = USABLE
    reason: str = ""
    estimator: str | None = None
    settings: dict = field(default_factory=dict)
    conditions: str = ""

    @property
    def has_interval(self) -> bool:
        """True when the value and both ends of its interval are recorded."""
        return not any(_nan(x) for x in (self.value, self.low, self.high))


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`judge`: ``word`` (``faster``, ``slower``, ``cannot tell``,
    ``not valid``), ``reason`` (why it cannot tell, why it is not valid, or the caveat of a
    difference stated from an unstable side: ``measured under contention: <conditions>``) and
    ``contended`` (the difference was stated from an unstable side)."""

    word: str
    reason: str = ""
    contended: bool = False

    @property
    def stated(self) -> bool:
        """True when a difference is stated (faster or slower)."""
        return self.word in ("faster", "slower")

    def text(self, faster: str = "faster", slower: str = "slower") -> str:
        """The verdict in words, the difference named by ``faster``/``slower`` (e.g. ``GPU
        faster``), the reason in parentheses: ``cannot tell (intervals overlap)``."""
        word = {"faster": faster, "slower": slower}.get(self.word, self.word)
        return f"{word} ({self.reason})" if self.reason else word

    def __str__(self) -> str:
        return self.text()


def _settings_differ(a: Side, b: Side) -> list[str]:
    """``name A vs B`` for every setting (and the estimator) both sides record differently."""
    out = []
    if a.estimator and b.estimator and a.estimator != b.estimator:
        out.append(f"estimator {a.estimator!r} vs {b.estimator!r}")
    for k in sorted(set(a.settings) & set(b.settings)):
        x, y = a.settings[k], b.settings[k]
        if not _nan(x) and not _nan(y) and x != y:
            out.append(f"{k} {_setting(x)} vs {_setting(y)}")
    return out


def _setting(x: Any) -> str:
    """A setting's value as written: whole floats (a nullable integer column) as integers."""
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


def _unusable(side: Side) -> str:
    return f"unstable: {side.reason}" if side.reason else "unstable"


def judge(before: Side, after: Side, lower_is_better: bool = True,
          factor: float = SURVIVES_NOISE_FACTOR) -> Verdict:
    """Whether ``after`` differs from ``before`` (times: ``lower_is_better``; rates: False).

    ``not valid`` when a side failed verification (``wrong``) or has no valid figure;
    ``cannot tell`` with the reason when an interval is missing (``no interval recorded``),
    the settings or estimators differ (``settings differ: threads 2 vs 4``) or the intervals
    overlap; ``faster``/``slower`` when both sides are ``ok`` and the intervals separate. With
    an ``unstable`` side the difference is stated only when it holds by more than ``factor``
    at the extremes of both intervals (the far side's low end over the near side's high end),
    marked ``measured under contention`` with the unstable sides' conditions; otherwise
    ``cannot tell (unstable: <reason>)``."""
    sides = (before, after)
    if any(s.status == "wrong" for s in sides):
        return Verdict("not valid", "failed verification")
    bad = [s.status for s in sides if s.status not in (USABLE, "unstable")]
    if bad:
        return Verdict("not valid", f"status {bad[0]}")
    if not all(s.has_interval for s in sides):
        return Verdict(CANNOT_TELL, "no interval recorded")
    differ = _settings_differ(before, after)
    if differ:
        return Verdict(CANNOT_TELL, "settings differ: " + ", ".join(differ))
    unstable = [s for s in sides if s.status == "unstable"]
    if after.low <= before.high and before.low <= after.high:
        return Verdict(CANNOT_TELL, _unusable(unstable[0]) if unstable else "intervals overlap")
    lower = after.high < before.low
    word = "faster" if lower == lower_is_better else "slower"
    if not unstable:
        return Verdict(word)
    hi, lo = (before, after) if lower else (after, before)
    if lo.high > 0 and hi.low / lo.high > factor:
        cond = "; ".join(c for c in dict.fromkeys(s.conditions for s in unstable) if c)
        return Verdict(word, UNDER_CONTENTION + (f": {cond}" if cond else ""), True)
    return Verdict(CANNOT_TELL, _unusable(unstable[0]))


def gpu_vs_cpu_text(v: Verdict) -> str:
    """An OpenCL-over-CPU :class:`Verdict` (the OpenCL run as ``after``, the CPU run as
    ``before``) in words: ``GPU faster``, ``GPU slower``, or ``cannot tell (<reason>)``."""
    return v.text("GPU faster", "GPU slower")


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


def widened_share(share: float, factor: float = SURVIVES_NOISE_FACTOR) -> tuple[float, float]:
    """The range of shares (fractions in [0, 1]) that a ``share`` measured under contention
    may stand for. A share is ``cost / (cost + rest)``; its odds ``cost / rest`` are a ratio of
    two times measured in the same contended iterations, each of which the host may have
    slowed by up to ``factor`` (:data:`SURVIVES_NOISE_FACTOR`, the factor a ratio of two
    unstable times is widened by before a difference is stated). So the odds are divided and
    multiplied by ``factor`` and turned back into shares. Raises ValueError for a share
    outside [0, 1] or a factor below 1."""
    if not 0.0 <= share <= 1.0 or factor < 1.0:
        raise ValueError(f"widened_share: share {share} must lie in [0, 1] and factor "
                         f"{factor} be >= 1")
    if share in (0.0, 1.0):
        return share, share
    odds = share / (1.0 - share)
    return (odds / factor) / (1.0 + odds / factor), (odds * factor) / (1.0 + odds * factor)


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
