"""The verdict on a change from a side-by-side measurement: previous and new build measured
side by side on one device, each pair giving one figure per build -- a training run's pair is
one runner process holding both plans, their iterations alternating (each side's median step
time), a GEMM shape's pair is one process that times both builds with alternating repeats
(each build's median call).

Each pair (both builds, adjacent in time) gives the ratio new / previous; the
verdict comes from the Student t interval of the mean of the ratios' logarithms (the paired
t interval: Student 1908; the design of pyperf's ``compare_to`` and of Google Benchmark's
``compare.py``, which compare interleaved repetitions), returned as a ratio with its
interval. Whatever the host does during a pair falls on both of its sides; what it does
between pairs widens the interval instead of moving the estimate. A difference is stated only
when the whole interval lies beyond the minimum effect :data:`MIN_EFFECT`.

How many pairs: :func:`until_decisive` adds one pair at a time after a first look until the
interval is decisive (beyond the minimum effect on one side, or inside the band), within a
stated most pairs and time budget -- pyperf and Google Benchmark likewise add repetitions
until a result is stable, within a bound. Looking after every pair (optional stopping) makes
a decisive interval likelier than a single look's confidence says: with 95% intervals at each
of up to 11 looks, a planted tie with the spread of a launch-bound run's processes (0.09-0.22
ms, two modes) was called ``faster`` or ``slower`` in 13.8% of simulated reruns
(``benchmarks/bench_sequential.py``). A difference is therefore stated only from a
:data:`LOOK_CONFIDENCE` interval at every look, a constant per-look level as in Pocock's
group-sequential design (Pocock 1977, Biometrika 64(2): 191-199: a constant nominal level at
every look, chosen so that the error over all looks is the stated one); ``no change`` keeps
the 95% interval inside the band (a false ``no change`` needs a real change past the band, which
the band's margin already makes rare). The benchmark prints the false-verdict rates and the
pairs a planted change needs.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence


MIN_EFFECT = 0.05
"""The smallest change stated: ``slower`` needs the interval's low end at or above 1.05x,
``faster`` its high end at or below 1/1.05x; an interval within 1/1.05x..1.05x is ``no
change``."""
CONFIDENCE = 0.95
"""The confidence of one interval computed once (:func:`paired_verdict`'s default)."""
LOOK_CONFIDENCE = 0.99
"""The confidence of the interval that states a difference at each look of
:func:`until_decisive`. Simulated with ``benchmarks/bench_sequential.py`` (a planted tie,
600 reruns), the share called ``faster`` or ``slower`` over all looks: a launch-bound run's
two-mode spread 13.8% with 0.95 at every look, 3.5% with 0.99; a GEMM shape's steady spread
(log-normal, 0.1) 3.3% and 1.5%. The price: a planted 1.3x needs a median 6 pairs instead of
4 at the steady spread. Pocock's constant for 10 looks at an overall 5% is a per-look 1.06%
(Pocock 1977)."""
MIN_PAIRS = 2


def paired_verdict(pairs: Sequence[tuple[float, float]], *, min_effect: float = MIN_EFFECT,
                   confidence: float = CONFIDENCE,
                   no_change_confidence: float | None = None) -> dict[str, Any]:
    """The verdict from ``pairs`` of (previous, new) step times in ms (one per pair of
    processes; non-positive or non-finite pairs are left out).

    Returns ``{"verdict": "faster" | "slower" | "no change" | "cannot tell", "reason",
    "ratio", "low", "high"`` (new / previous: the geometric mean of the pairs' ratios and its
    t interval), ``"pairs"``, ``"min_effect"``, ``"confidence"}`` (the level of the interval
    returned); ``slower``/``faster`` when the ``confidence`` interval lies beyond a
    ``min_effect`` boundary, ``no change`` when the ``no_change_confidence`` interval (default:
    ``confidence``) lies within the band; ``cannot tell`` otherwise or when fewer than
    :data:`MIN_PAIRS` pairs are usable."""
    logs = [math.log(b / a) for a, b in pairs
            if a and b and a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)]
    doc: dict[str, Any] = {"pairs": len(logs), "min_effect": min_effect,
                           "confidence": confidence, "ratio": None, "low": None, "high": None}
    if len(logs) < MIN_PAIRS:
        return doc | {"verdict": "cannot tell",
                      "reason": f"{len(logs)} usable pair(s), {MIN_PAIRS} needed"}
    up, down = 1 + min_effect, 1 / (1 + min_effect)
    band = f"{down:.3g}x-{up:.3g}x"
    ratio, low, high = _interval(logs, confidence)
    doc |= {"ratio": ratio, "low": low, "high": high}
    span = f"interval {low:.3g}x-{high:.3g}x"
    if low >= up:
        return doc | {"verdict": "slower", "reason": f"{span}, above {up:.3g}x"}
    if high <= down:
        return doc | {"verdict": "faster", "reason": f"{span}, below {down:.3g}x"}
    nc = confidence if no_change_confidence is None else no_change_confidence
    _, low2, high2 = _interval(logs, nc)
    if down <= low2 and high2 <= up:
        return doc | {"verdict": "no change", "low": low2, "high": high2, "confidence": nc,
                      "reason": f"interval {low2:.3g}x-{high2:.3g}x, within {band}"}
    return doc | {"verdict": "cannot tell",
                  "reason": f"{span} reaches past the minimum effect ({band}): "
                            f"the pairs disagree; more pairs would narrow it"}


def _interval(logs: list[float], confidence: float) -> tuple[float, float, float]:
    """(geometric mean ratio, low, high): the Student t interval of the mean of ``logs``."""
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    from scipy import stats as sps   # scipy only where a verdict is computed: jobs start light
    half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


Pair = Callable[[int], "tuple[float | None, float | None] | None"]
Pairs = Callable[[int, list], "dict[Any, tuple[float | None, float | None] | None]"]


def until_decisive(pair: Pair, *, first: int, max_pairs: int, budget_s: float,
                   clock: Callable[[], float] = time.monotonic,
                   min_effect: float = MIN_EFFECT,
                   confidence: float = LOOK_CONFIDENCE) -> dict[str, Any]:
    """Measure pairs until the verdict is decisive: ``pair(k)`` measures pair ``k`` (0, 1,
    ...) and returns its (previous, new) figures in ms, or None when the device cannot go on
    (the caller keeps why). The first look comes after ``first`` pairs (at least
    :data:`MIN_PAIRS`); then one more pair while :func:`paired_verdict` is ``cannot tell``,
    fewer than ``max_pairs`` pairs ran and less than ``budget_s`` seconds (``clock``) passed
    since the first pair began. At every look ``faster``/``slower`` need the ``confidence``
    interval (:data:`LOOK_CONFIDENCE`: corrected for looking after every pair) beyond the
    minimum effect; ``no change`` needs the :data:`CONFIDENCE` interval within it.

    Returns :func:`paired_verdict`'s document with ``pairs_ms`` (the figures), ``max_pairs``,
    ``budget_s``, ``elapsed_s`` and ``stopped`` (``decisive``, ``most pairs``, ``time
    budget``, ``device stopped``); an undecided verdict's reason ends with the bound that
    stopped it. Raises ValueError for ``max_pairs`` < ``first``."""
    return many_until_decisive(lambda k, active: {0: pair(k)}, [0], first=first,
                               max_pairs=max_pairs, budget_s=budget_s, clock=clock,
                               min_effect=min_effect, confidence=confidence)[0]


def many_until_decisive(pairs: Pairs, keys: list, *, first: int, max_pairs: int,
                        budget_s: float, clock: Callable[[], float] = time.monotonic,
                        min_effect: float = MIN_EFFECT,
                        confidence: float = LOOK_CONFIDENCE) -> dict[Any, dict[str, Any]]:
    """:func:`until_decisive` for several subjects measured in the same processes (a GEMM
    sweep's shapes, each a case of one bench-gemm process per build): ``pairs(k, active)``
    measures pair ``k`` of the still undecided subjects ``active`` (a list of ``keys``) and
    returns ``{key: (previous ms, new ms) or None}`` (None: that subject cannot go on). Each
    subject has its own looks and stop, as :func:`until_decisive`'s one subject; the time
    budget ``budget_s`` is the group's, from its first pair. Returns ``{key: document}``
    (:func:`until_decisive`'s). Raises ValueError for ``max_pairs`` < ``first``."""
    first = max(first, MIN_PAIRS)
    if max_pairs < first:
        raise ValueError(f"max_pairs {max_pairs} < the first look's {first} pairs")
    t0 = clock()
    figs: dict[Any, list] = {k: [] for k in keys}
    out: dict[Any, dict[str, Any]] = {}
    k = 0
    while len(out) < len(keys):
        active = [key for key in keys if key not in out]
        got = pairs(k, active)
        k += 1
        over = clock() - t0 >= budget_s
        for key in active:
            one = got.get(key)
            if one is None:
                out[key] = _closed(figs[key], "device stopped", t0, clock, max_pairs,
                                   budget_s, min_effect, confidence)
                continue
            figs[key].append(one)
            if len(figs[key]) < first:
                continue
            doc = paired_verdict(figs[key], min_effect=min_effect, confidence=confidence,
                                 no_change_confidence=CONFIDENCE)
            stop = ("decisive" if doc["verdict"] != "cannot tell" else
                    "most pairs" if len(figs[key]) >= max_pairs else
                    "time budget" if over else None)
            if stop is not None:
                out[key] = _closed(figs[key], stop, t0, clock, max_pairs, budget_s,
                                   min_effect, confidence)
    return out


def _closed(figs: list, stop: str, t0: float, clock: Callable[[], float], max_pairs: int,
            budget_s: float, min_effect: float, confidence: float) -> dict[str, Any]:
    """One subject's final document of :func:`many_until_decisive`, stopped by ``stop``."""
    doc = paired_verdict(figs, min_effect=min_effect, confidence=confidence,
                         no_change_confidence=CONFIDENCE)
    elapsed = clock() - t0
    if doc["verdict"] == "cannot tell" and stop != "decisive":
        bound = {"most pairs": f"stopped at the most pairs, {max_pairs}",
                 "time budget": f"stopped at the time budget, {elapsed:.0f} s of "
                                f"{budget_s:g} s",
                 "device stopped": "the device stopped"}[stop]
        doc["reason"] = f"{doc['reason']}; {bound}"
    return doc | {"pairs_ms": list(figs), "max_pairs": max_pairs, "budget_s": budget_s,
                  "elapsed_s": round(elapsed, 3), "stopped": stop}
