"""Measurement statistics and the measurement verdict of a run.

The location estimate every comparison uses (:data:`ESTIMATOR`) is the lower quartile
(:data:`ESTIMATE_QUANTILE`) of the measured iteration times of all the run's runner processes
pooled. Timing noise on a shared machine only adds time, so a low quantile moves little under it
(Chen and Revels, "Robust benchmarking in noisy environments", arXiv 1608.04295, 2016, take the
minimum, as BenchmarkTools.jl does; a quartile keeps a bootstrap interval that is not degenerate
with a few dozen iterations). One process's interval does not describe a rerun (pyperf samples
several worker processes for that reason), so the interval is the union of two 95% percentile
bootstraps of that quantile: over the pooled iterations (the noise within processes), and over
the processes, each resample drawing the run's processes with replacement and keeping each one's
iterations (the first-stage resampling of hierarchical data: Davison and Hinkley, "Bootstrap
Methods and their Application", 1997, sec. 3.8; the variation between processes). With two
processes it reaches about both processes' own estimates; more processes (``measure.repeats``)
narrow it. With one process it is :func:`quantile_ci` exactly.

- :func:`quantile_ci`: a quantile of measured iteration times and its 95% percentile-bootstrap
  confidence interval, exactly as the runner computes it for its adaptive stop rule
  (``src/runner/stats.c``): resample ``b``'s draw ``j`` is element
  ``splitmix64(seed, b * n + j) mod n``, each resample's quantile (linear interpolation at rank
  ``q * (n - 1)`` of the sorted values; q = 0.5 is the median), and the 2.5th and 97.5th
  percentiles of the sorted resample quantiles at rank ``p * (resamples - 1)`` (Efron and
  Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13). :func:`median_ci` is q = 0.5.
- :func:`judge`: a run is *unstable* (measured, verified, but not a number to build a guideline
  on) only when the host was contended, a reason whose remedy the verdict names: the host ran
  slower than its own quiet figure (the runner's calibration probe before or after the
  measured iterations against the fastest probe on record for the device; remedy: measure
  again when it is quieter, ``phonetrain refresh --unstable``), or the cgroup CPU quota held
  the runner back (``cgroup_throttled_s``; remedy: the quota, not a quieter host), or a
  phone's cool-down timed out before it measured (remedy: a longer or cooler wait). Other
  processes' CPU share
  (``other_cpu_share``, recorded by the runner from ``/proc/stat``) and the load are recorded
  and named with a slow probe; alone they judge only a run measured without a probe
  (``measure.max_other_cpu_share``). Contention biases a number (noise only adds time); a wide
  interval does not: an interval wider than ``measure.ci_target`` makes the train job measure
  more processes, and is then kept as it is (``wide_interval``, with a note), usable, since
  every comparison carries the interval and states a difference only when intervals separate
  (a precise enough number is the comparison's question, not the run's).
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

import numpy as np

BOOTSTRAP_SEED = 0x5EED   # src/runner/stats.h
# The location estimate every comparison uses (runs.parquet ``iteration_ms`` with its interval
# ``iteration_low_ms``..``iteration_high_ms``), named in ``iteration_estimator``.
ESTIMATE_QUANTILE = 0.25  # src/runner/stats.h
ESTIMATOR = ("p25 of the measured iterations of all processes; 95% interval: the union of the "
             "percentile bootstraps over the pooled iterations and over the processes")
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


def quantile_ci(values: Sequence[float], q: float, resamples: int = 1000,
                seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """``(quantile, ci_low, ci_high)`` of ``values`` (ms, or any unit) at ``q`` (0..1): the
    module docstring's bootstrap. One value gives ``(x, x, x)``; none gives NaNs."""
    x = np.asarray(list(values), np.float64)
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan
    v = np.sort(x)
    est = float(_median_sorted(v)) if q == 0.5 else _percentile_sorted(v, q)
    if n == 1 or resamples < 2:
        return est, float(x[0]), float(x[0])
    idx = (_splitmix64(seed, resamples * n) % np.uint64(n)).astype(np.int64)
    qs = np.sort(_quantile_rows(np.sort(x[idx.reshape(resamples, n)], axis=1), q))
    return est, _percentile_sorted(qs, 0.025), _percentile_sorted(qs, 0.975)


def _quantile_rows(v: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile of each row of ``v`` (rows sorted), as ``percentile_sorted`` in
    ``src/runner/stats.c``."""
    n = v.shape[-1]
    pos = q * (n - 1)
    i = int(math.floor(pos))
    if i >= n - 1:
        return v[:, -1]
    return v[:, i] + (pos - i) * (v[:, i + 1] - v[:, i])


def median_ci(values: Sequence[float], resamples: int = 1000,
              seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """``(median, ci_low, ci_high)``: :func:`quantile_ci` at 0.5."""
    return quantile_ci(values, 0.5, resamples, seed)


def estimate_ci(processes: Sequence[Sequence[float]], resamples: int = 1000,
                seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of :data:`ESTIMATOR` from each runner process's measured
    iteration times (ms): the :data:`ESTIMATE_QUANTILE` of all of them pooled, and the union
    of two 95% percentile-bootstrap intervals of it (the module docstring): over the pooled
    iterations (:func:`quantile_ci`: the noise within processes) and over the processes
    (``resamples`` draws of the processes with replacement, numpy's PCG64 seeded with
    ``seed``: the variation between them). One process with values: exactly
    :func:`quantile_ci`, the runner's own figure. NaNs when there is no value."""
    procs = [np.asarray(list(p), np.float64) for p in processes]
    procs = [p for p in procs if p.size]
    pooled = quantile_ci(np.concatenate(procs) if procs else [], ESTIMATE_QUANTILE, resamples,
                         seed)
    if len(procs) < 2 or resamples < 2:
        return pooled
    est, lo, hi = pooled
    sizes = np.array([p.size for p in procs])
    padded = np.full((len(procs), sizes.max()), np.inf)   # +inf sorts after every time
    for row, p in zip(padded, procs):
        row[:p.size] = p
    drawn = np.random.default_rng(seed).integers(0, len(procs), (resamples, len(procs)))
    rows = np.sort(padded[drawn].reshape(resamples, -1), axis=1)
    rank = ESTIMATE_QUANTILE * (sizes[drawn].sum(axis=1) - 1)   # as _percentile_sorted
    i = np.floor(rank).astype(np.int64)
    at, upper = np.arange(resamples), np.minimum(i + 1, rows.shape[1] - 1)
    qs = np.sort(rows[at, i] + (rank - i) * (rows[at, upper] - rows[at, i]))
    return est, min(lo, _percentile_sorted(qs, 0.025)), max(hi, _percentile_sorted(qs, 0.975))


def probe_slowdown(conditions: Sequence[dict[str, Any]], quiet_ms: float | None
                   ) -> float | None:
    """How much slower than ``quiet_ms`` (the device's quiet probe figure) the slowest
    calibration probe of the run's processes was (``probe_before_ms``/``probe_after_ms`` in
    their conditions), e.g. 1.8; None without a quiet figure or a probe reading."""
    got = [c.get(k) for c in conditions for k in ("probe_before_ms", "probe_after_ms")]
    got = [g for g in got if g is not None and g > 0]
    if not got or not quiet_ms or not quiet_ms > 0:
        return None
    return max(got) / quiet_ms


# A measurement during which the cgroup CPU quota held the runner back for more than this
# share of its wall time is unstable: throttling stops every thread for the rest of a quota
# period (100 ms by default), whatever the rest of the host does.
MAX_THROTTLED_SHARE = 0.01


def quota_throttling(conditions: Sequence[dict[str, Any]]) -> str | None:
    """The unstable reason of a measurement that the cgroup CPU quota throttled (the
    runner's ``cgroup_throttled_s`` over its ``wall_s``, all processes, above
    :data:`MAX_THROTTLED_SHARE`), naming the quota and what lifts it; None otherwise or when
    unrecorded. A quieter host does not help here: the quota holds the runner back whatever
    the other processes of the host do."""
    got = [(c.get("cgroup_throttled_s"), c.get("wall_s")) for c in conditions]
    got = [(t, w) for t, w in got if t is not None and w and not math.isnan(t)]
    wall = sum(w for _, w in got)
    held = sum(t for t, _ in got)
    if not wall or held / wall <= MAX_THROTTLED_SHARE:
        return None
    quotas = [c.get("cpu_quota_cpus") for c in conditions if c.get("cpu_quota_cpus")]
    quota = f" ({min(quotas):g} CPUs)" if quotas else ""
    most = f"; measure.threads {math.floor(min(quotas))} or fewer" if quotas and \
        min(quotas) >= 1 else ""
    return (f"the cgroup CPU quota{quota} throttled the runner for {held:.3g} s of the "
            f"{wall:.3g} s measured ({100 * held / wall:.0f}%), however quiet the host: "
            "raise or lift the quota (docker --cpus, systemd CPUQuota=, the cluster job's CPUs), "
            f"or give it less to do at once (fewer jobs in that cgroup{most})")


def still_hot(conditions: Sequence[dict[str, Any]]) -> str | None:
    """The unstable reason of a measurement started after a cool-down that timed out (a
    process's ``cooldown_timed_out``, from the device's readings: the hottest sensor still
    above ``cooldown_threshold_c`` after ``cooldown_wait_s``), naming the temperature and
    what to do; None when every cool-down ended cool or none was recorded. A phone that hot
    lowers its clocks, so the figures are a throttled phone's."""
    hot = [c for c in conditions if c.get("cooldown_timed_out")]
    if not hot:
        return None
    worst = max(hot, key=lambda c: c.get("cooldown_end_c") or -math.inf)
    end, limit = worst.get("cooldown_end_c"), worst.get("cooldown_threshold_c")
    temp = f" at {end:g} C" if end is not None else ""
    over = f" (over measure.cooldown_threshold_c {limit:g} C)" if limit is not None else ""
    return (f"the cool-down timed out before {len(hot)} of {len(conditions)} processes: the "
            f"device was still hot{temp}{over} after {worst.get('cooldown_wait_s', 0):.0f} s, "
            "so its clocks may have been throttled: give it longer "
            "(measure.cooldown_limit_s), a cooler place or no case, then measure it again "
            "(phonetrain refresh --unstable)")


def rel_half_width(median: float, low: float, high: float) -> float:
    """``max(median - low, high - median) / median`` (inf when the median is not positive)."""
    if not median > 0:
        return math.inf
    return max(median - low, high - median) / median


def judge(walls_ms: Iterable[float], conditions: Sequence[dict[str, Any]], *, ci_target: float,
          max_other_cpu_share: float, resamples: int = 1000,
          process_walls_ms: Sequence[Sequence[float]] | None = None,
          quiet_probe_ms: float | None = None, max_probe_slowdown: float = 1.5
          ) -> dict[str, Any]:
    """The measurement verdict of a run's measured iteration times (all repeats pooled;
    ``process_walls_ms`` the same per runner process, when known) and the runner's
    ``conditions`` of each repeat (``run.json``, with its calibration probe as
    ``probe_before_ms``/``probe_after_ms``), against the device's quiet probe figure
    ``quiet_probe_ms`` (ms; None: unknown).

    Returns ``{"unstable": bool (the host was busier than quiet: a slow probe, or other
    processes' share without a probe), "reasons": [...] (each naming its remedy),
    "wide_interval": bool (the estimate's interval wider than ``ci_target``), "notes": [...]
    (saying so, and what narrows it), "median_ms",
    "ci_low_ms", "ci_high_ms" (the median and its bootstrap interval), "estimate_ms", "low_ms",
    "high_ms" (the location estimate by :data:`ESTIMATOR` and its interval: what comparisons
    use), "estimator", "processes", "ci_rel_half_width" (of the estimate's interval),
    "ci_target", "probe_slowdown", "quiet_probe_ms", "max_probe_slowdown", "other_cpu_share"
    (the largest over repeats; None when unreadable), "max_other_cpu_share", "load_avg_1m",
    "omp_wait_policy", "cpu_mhz_start", "cpu_mhz_end", "temperature_c_start",
    "temperature_c_end"}``. At most one reason, the first that holds: the cgroup CPU quota
    throttled the runner (:func:`quota_throttling`), a cool-down timed out
    (:func:`still_hot`), a slow probe, (without a probe reading)
    other processes over ``max_other_cpu_share``. ``ci_target`` 0 judges no
    interval width; ``max_other_cpu_share`` 1 and ``max_probe_slowdown`` 0 judge no
    contention.
    """
    walls = list(walls_ms)
    procs = [list(p) for p in process_walls_ms] if process_walls_ms is not None else [walls]
    med, clo, chi = median_ci(walls, resamples)
    est, lo, hi = estimate_ci(procs, resamples)
    half = rel_half_width(est, lo, hi)
    shares = [c.get("other_cpu_share") for c in conditions if c.get("other_cpu_share") is not None]
    share = max(shares) if shares else None
    slow = probe_slowdown(conditions, quiet_probe_ms)
    loads = [c.get("load_avg_1m_end") for c in conditions if c.get("load_avg_1m_end") is not None]
    busy = (f"other processes used {100 * share:.0f}% of the CPU" if share is not None
            else "other processes' CPU share unreadable")
    reasons = []
    throttled = quota_throttling(conditions)
    hot = still_hot(conditions)
    if throttled:
        reasons.append(throttled)
    elif hot:
        reasons.append(hot)
    elif slow is not None and max_probe_slowdown > 0 and slow > max_probe_slowdown:
        reasons.append(f"the host ran {slow:.2f}x slower than its quiet figure (calibration probe "
                       f"{slow * quiet_probe_ms:.3g} ms against {quiet_probe_ms:.3g} ms, over "
                       f"measure.max_probe_slowdown {max_probe_slowdown:g}; {busy}): measure it "
                       "again when the host is quieter (phonetrain refresh --unstable)")
    elif slow is None and share is not None and share > max_other_cpu_share:
        reasons.append(f"other processes used {100 * share:.0f}% of the CPU during the "
                       f"measurement (over measure.max_other_cpu_share "
                       f"{100 * max_other_cpu_share:g}%; no calibration probe to tell whether "
                       "that slowed it): measure it again when the host is quieter "
                       "(phonetrain refresh --unstable)")
    wide = ci_target > 0 and not half <= ci_target
    notes = [f"the estimate's 95% interval is +-{100 * half:.1f}% over {len(procs)} processes, "
             f"wider than +-{100 * ci_target:g}% (measure.ci_target): usable, compared with "
             "its interval; raise measure.repeats, measure.max_attempts or measure.max_seconds "
             "for a narrower one"] if wide else []
    first, last = (conditions[0], conditions[-1]) if conditions else ({}, {})
    return {"unstable": bool(reasons), "reasons": reasons, "wide_interval": wide,
            "notes": notes, "median_ms": med, "ci_low_ms": clo,
            "ci_high_ms": chi, "estimate_ms": est, "low_ms": lo, "high_ms": hi,
            "estimator": ESTIMATOR, "processes": len(procs), "ci_rel_half_width": half,
            "ci_target": ci_target, "probe_slowdown": slow, "quiet_probe_ms": quiet_probe_ms,
            "max_probe_slowdown": max_probe_slowdown,
            "other_cpu_share": share, "max_other_cpu_share": max_other_cpu_share,
            "load_avg_1m": max(loads) if loads else None,
            "omp_wait_policy": first.get("omp_wait_policy"),
            "cpu_mhz_start": first.get("cpu_mhz_start"), "cpu_mhz_end": last.get("cpu_mhz_end"),
            "temperature_c_start": first.get("temperature_c_start"),
            "temperature_c_end": last.get("temperature_c_end")}
