"""The verdict on a change from a side-by-side measurement: previous and new build measured in
alternating processes on one device, each process giving one figure (its median step time).

Each pair (one process of each build, adjacent in time) gives the ratio new / previous; the
verdict comes from the Student t interval of the mean of the ratios' logarithms (the paired
t interval: Student 1908; the design of pyperf's ``compare_to`` and of Google Benchmark's
``compare.py``, which compare interleaved repetitions), returned as a ratio with its
interval. Whatever the host does during a pair falls on both of its processes; what it does
between pairs widens the interval instead of moving the estimate. A difference is stated only
when the whole interval lies beyond the minimum effect :data:`MIN_EFFECT`.
"""

from __future__ import annotations

import math
from typing import Any, Sequence


MIN_EFFECT = 0.05
"""The smallest change stated: ``slower`` needs the interval's low end at or above 1.05x,
``faster`` its high end at or below 1/1.05x; an interval within 1/1.05x..1.05x is ``no
change``."""
CONFIDENCE = 0.95
MIN_PAIRS = 2


def paired_verdict(pairs: Sequence[tuple[float, float]], *, min_effect: float = MIN_EFFECT,
                   confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The verdict from ``pairs`` of (previous, new) step times in ms (one per pair of
    processes; non-positive or non-finite pairs are left out).

    Returns ``{"verdict": "faster" | "slower" | "no change" | "cannot tell", "reason",
    "ratio", "low", "high"`` (new / previous: the geometric mean of the pairs' ratios and its
    ``confidence`` t interval), ``"pairs"``, ``"min_effect"``, ``"confidence"}``; ``cannot
    tell`` when fewer than :data:`MIN_PAIRS` pairs are usable or the interval reaches both
    sides of a ``min_effect`` boundary."""
    logs = [math.log(b / a) for a, b in pairs
            if a and b and a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)]
    doc: dict[str, Any] = {"pairs": len(logs), "min_effect": min_effect,
                           "confidence": confidence, "ratio": None, "low": None, "high": None}
    if len(logs) < MIN_PAIRS:
        return doc | {"verdict": "cannot tell",
                      "reason": f"{len(logs)} usable pair(s), {MIN_PAIRS} needed"}
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    from scipy import stats as sps   # scipy only where a verdict is computed: jobs start light
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    ratio, low, high = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    doc |= {"ratio": ratio, "low": low, "high": high}
    up, down = 1 + min_effect, 1 / (1 + min_effect)
    band = f"{down:.3g}x-{up:.3g}x"
    span = f"interval {low:.3g}x-{high:.3g}x"
    if low >= up:
        return doc | {"verdict": "slower", "reason": f"{span}, above {up:.3g}x"}
    if high <= down:
        return doc | {"verdict": "faster", "reason": f"{span}, below {down:.3g}x"}
    if down <= low and high <= up:
        return doc | {"verdict": "no change", "reason": f"{span}, within {band}"}
    return doc | {"verdict": "cannot tell",
                  "reason": f"{span} reaches past the minimum effect ({band}): "
                            f"the pairs disagree; more pairs would narrow it"}
