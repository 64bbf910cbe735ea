"""The measurement verdict: the median's bootstrap interval (the runner's own, reproduced),
and what makes a run unstable -- an interval wider than the target, or other processes taking
the CPU during the measurement."""

from __future__ import annotations

import math

import numpy as np
import pytest

from phonetrain.results import stats


def test_median_ci_brackets_the_median_and_narrows_with_more_iterations():
    rng = np.random.default_rng(0)
    few = rng.normal(10, 1, 8)
    many = rng.normal(10, 1, 200)
    m1, lo1, hi1 = stats.median_ci(few)
    m2, lo2, hi2 = stats.median_ci(many)
    assert lo1 <= m1 <= hi1 and lo2 <= m2 <= hi2
    assert (hi2 - lo2) < (hi1 - lo1) / 2
    assert stats.median_ci([3.0]) == (3.0, 3.0, 3.0)
    assert all(math.isnan(v) for v in stats.median_ci([]))


def test_median_ci_is_deterministic_and_even_medians_average():
    x = [4.0, 1.0, 3.0, 2.0]
    assert stats.median_ci(x)[0] == 2.5
    assert stats.median_ci(x) == stats.median_ci(list(reversed(x)))


def test_rel_half_width():
    assert stats.rel_half_width(10, 9, 10.5) == pytest.approx(0.1)
    assert stats.rel_half_width(0, -1, 1) == math.inf


def _cond(share):
    return {"other_cpu_share": share, "load_avg_1m_end": 1.5, "omp_wait_policy": "ACTIVE",
            "cpu_mhz_start": 2000.0, "cpu_mhz_end": 1990.0, "temperature_c_start": None,
            "temperature_c_end": None}


def test_judge_stable_wide_and_contended():
    steady = [10.0 + 0.01 * i for i in range(20)]
    ok = stats.judge(steady, [_cond(0.02)], ci_target=0.05, max_other_cpu_share=0.25)
    assert not ok["unstable"] and ok["reasons"] == []
    assert ok["ci_low_ms"] <= ok["median_ms"] <= ok["ci_high_ms"]
    assert ok["omp_wait_policy"] == "ACTIVE" and ok["load_avg_1m"] == 1.5

    noisy = [1.0, 50.0, 3.0, 200.0, 2.0, 90.0, 1.5, 300.0]
    wide = stats.judge(noisy, [_cond(0.02)], ci_target=0.05, max_other_cpu_share=0.25)
    assert wide["unstable"] and "interval" in wide["reasons"][0]
    # a target of 0 judges no width
    assert not stats.judge(noisy, [_cond(0.02)], ci_target=0, max_other_cpu_share=1)["unstable"]

    busy = stats.judge(steady, [_cond(0.02), _cond(0.6)], ci_target=0.05,
                       max_other_cpu_share=0.25)
    assert busy["unstable"] and busy["other_cpu_share"] == 0.6
    assert "other processes used 60%" in busy["reasons"][0]
    # an unreadable share (null) judges nothing
    assert not stats.judge(steady, [_cond(None)], ci_target=0.05,
                           max_other_cpu_share=0.25)["unstable"]
