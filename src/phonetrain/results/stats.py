"""Measurement statistics and the measurement verdict of a run.

- :func:`median_ci`: the median of measured iteration times and its 95% percentile-bootstrap
  confidence interval, exactly as the runner computes it for its adaptive stop rule
  (``src/runner/stats.c``): resample ``b``'s draw ``j`` is element
  ``splitmix64(seed, b * n + j) mod n``, each resample's median (the mean of the two middle
  values for even ``n``), and the 2.5th and 97.5th percentiles of the sorted medians by linear
  interpolation at rank ``p * (resamples - 1)`` (Efron and Tibshirani, "An Introduction to the
  Bootstrap", 1993, ch. 13).
- :func:`judge`: a run is *unstable* (measured, verified, but not a number to build a guideline
  on) when the interval's relative half-width exceeds the target, or when other processes took
  more than a set share of the device's CPU capacity during the measured iterations
  (``other_cpu_share``, recorded by the runner from ``/proc/stat``).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

BOOTSTRAP_SEED = 0x5EED   # src/runner/stats.h
# The location estimate every comparison uses (runs.parquet ``iteration_ms`` with its interval
# ``iteration_low_ms``..``iteration_high_ms``), named in ``iteration_estimator``.
ESTIMATOR = "median of the measured iterations, 95% percentile-bootstrap CI"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(seed: int, count: int) -> np.ndarray:
    """Outputs ``0..count-1`` of splitmix64 seeded with ``seed`` (as
    :func:`phonetrain.plan.uniform_fill`), uint64."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(count, dtype=np.uint64) + np.uint64(1)) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _median_sorted(v: np.ndarray) -> np.ndarray:
    """Median along the last axis of arrays sorted along it."""
    n = v.shape[-1]
    return v[..., n // 2] if n % 2 else 0.5 * (v[..., n // 2 - 1] + v[..., n // 2])


def _percentile_sorted(v: np.ndarray, p: float) -> float:
    pos = p * (len(v) - 1)
    i = int(math.floor(pos))
    if i >= len(v) - 1:
        return float(v[-1])
    return float(v[i] + (pos - i) * (v[i + 1] - v[i]))


def median_ci(values: Sequence[float], resamples: int = 1000,
              seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """``(median, ci_low, ci_high)`` of ``values`` (ms, or any unit): the module docstring's
    bootstrap. One value gives ``(x, x, x)``; none gives NaNs."""
    x = np.asarray(list(values), np.float64)
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan
    med = float(_median_sorted(np.sort(x)))
    if n == 1 or resamples < 2:
        return med, float(x[0]), float(x[0])
    idx = (_splitmix64(seed, resamples * n) % np.uint64(n)).astype(np.int64)
    meds = np.sort(_median_sorted(np.sort(x[idx.reshape(resamples, n)], axis=1)))
    return med, _percentile_sorted(meds, 0.025), _percentile_sorted(meds, 0.975)


def rel_half_width(median: float, low: float, high: float) -> float:
    """``max(median - low, high - median) / median`` (inf when the median is not positive)."""
    if not median > 0:
        return math.inf
    return max(median - low, high - median) / median


def judge(walls_ms: Iterable[float], conditions: Sequence[dict[str, Any]], *, ci_target: float,
          max_other_cpu_share: float, resamples: int = 1000) -> dict[str, Any]:
    """The measurement verdict of a run's measured iteration times (all repeats pooled) and
    the runner's ``conditions`` of each repeat (``run.json``).

    Returns ``{"unstable": bool, "reasons": [...], "median_ms", "ci_low_ms", "ci_high_ms",
    "estimate_ms", "low_ms", "high_ms" (the location estimate by :data:`ESTIMATOR` and its
    interval: what comparisons use), "estimator",
    "ci_rel_half_width", "ci_target", "other_cpu_share" (the largest over repeats; None when
    unreadable), "max_other_cpu_share", "load_avg_1m", "omp_wait_policy", "cpu_mhz_start",
    "cpu_mhz_end", "temperature_c_start", "temperature_c_end"}``. ``ci_target`` 0 judges no
    interval width; ``max_other_cpu_share`` 1 judges no contention.
    """
    med, lo, hi = median_ci(list(walls_ms), resamples)
    half = rel_half_width(med, lo, hi)
    shares = [c.get("other_cpu_share") for c in conditions if c.get("other_cpu_share") is not None]
    share = max(shares) if shares else None
    reasons = []
    if ci_target > 0 and not half <= ci_target:
        reasons.append(f"the median's 95% interval is +-{100 * half:.1f}%, wider than "
                       f"+-{100 * ci_target:g}% (measure.ci_target)")
    if share is not None and share > max_other_cpu_share:
        reasons.append(f"other processes used {100 * share:.0f}% of the CPU during the "
                       f"measurement (over measure.max_other_cpu_share "
                       f"{100 * max_other_cpu_share:g}%)")
    first, last = (conditions[0], conditions[-1]) if conditions else ({}, {})
    loads = [c.get("load_avg_1m_end") for c in conditions if c.get("load_avg_1m_end") is not None]
    return {"unstable": bool(reasons), "reasons": reasons, "median_ms": med, "ci_low_ms": lo,
            "ci_high_ms": hi, "estimate_ms": med, "low_ms": lo, "high_ms": hi,
            "estimator": ESTIMATOR, "ci_rel_half_width": half, "ci_target": ci_target,
            "other_cpu_share": share, "max_other_cpu_share": max_other_cpu_share,
            "load_avg_1m": max(loads) if loads else None,
            "omp_wait_policy": first.get("omp_wait_policy"),
            "cpu_mhz_start": first.get("cpu_mhz_start"), "cpu_mhz_end": last.get("cpu_mhz_end"),
            "temperature_c_start": first.get("temperature_c_start"),
            "temperature_c_end": last.get("temperature_c_end")}
