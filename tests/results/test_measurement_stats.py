"""The measurement verdict: the low-quantile estimate and its bootstrap interval (the runner's
own, reproduced) joined with the bootstrap over processes, and what makes a run unstable -- a
host slower than its quiet probe figure, or (without a probe) other processes taking the CPU --
each reason naming its remedy; a wide interval is noted, not unstable."""

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
    assert not ok["unstable"] and ok["reasons"] == [] and not ok["wide_interval"]
    assert ok["notes"] == []
    assert ok["ci_low_ms"] <= ok["median_ms"] <= ok["ci_high_ms"]
    assert ok["omp_wait_policy"] == "ACTIVE" and ok["load_avg_1m"] == 1.5

    noisy = [1.0, 50.0, 3.0, 200.0, 2.0, 90.0, 1.5, 300.0]
    wide = stats.judge(noisy, [_cond(0.02)], ci_target=0.05, max_other_cpu_share=0.25)
    # a wide interval is not contention: usable, with a note saying how wide
    assert not wide["unstable"] and wide["reasons"] == [] and wide["wide_interval"]
    assert "interval" in wide["notes"][0] and "usable" in wide["notes"][0]
    assert wide["low_ms"] <= wide["estimate_ms"] <= wide["high_ms"]
    # a target of 0 judges no width
    none = stats.judge(noisy, [_cond(0.02)], ci_target=0, max_other_cpu_share=1)
    assert not none["unstable"] and not none["wide_interval"] and none["notes"] == []

    busy = stats.judge(steady, [_cond(0.02), _cond(0.6)], ci_target=0.05,
                       max_other_cpu_share=0.25)
    assert busy["unstable"] and busy["other_cpu_share"] == 0.6
    assert "other processes used 60%" in busy["reasons"][0]
    # an unreadable share (null) judges nothing
    assert not stats.judge(steady, [_cond(None)], ci_target=0.05,
                           max_other_cpu_share=0.25)["unstable"]


def test_the_estimate_is_a_low_quantile_that_positive_noise_barely_moves():
    """Planted timings: the same quiet iterations, then with 3 of every 5 delayed 2-5x (noise
    that only adds time, more than half the iterations): the median reports the noise, the
    estimate moves by under 10%."""
    rng = np.random.default_rng(1)
    quiet = list(rng.normal(10, 0.1, 60))
    noisy = [v * (rng.uniform(2, 5) if i % 5 < 3 else 1) for i, v in enumerate(quiet)]
    q_est = stats.estimate_ci([quiet])[0]
    n_est, n_lo, n_hi = stats.estimate_ci([noisy])
    assert q_est == pytest.approx(np.quantile(quiet, 0.25), rel=1e-12)
    assert abs(n_est / q_est - 1) < 0.1 and n_lo <= n_est <= n_hi
    assert np.median(noisy) / np.median(quiet) > 1.2


def test_the_interval_covers_two_processes_that_differ():
    """Two processes whose iterations sit at 10 and 13 ms (the variation between processes one
    process's interval cannot show): the interval spans both processes' own estimates."""
    a, b = [10.0 + 0.01 * i for i in range(20)], [13.0 + 0.01 * i for i in range(20)]
    est, lo, hi = stats.estimate_ci([a, b])
    assert lo <= np.quantile(a, 0.25) and hi >= np.quantile(b, 0.25) and lo <= est <= hi
    one = stats.quantile_ci(a + b, stats.ESTIMATE_QUANTILE)
    assert hi - lo > one[2] - one[1]   # wider than the pooled bootstrap alone
    v = stats.judge(a + b, [_cond(0.0)] * 2, ci_target=0.05, max_other_cpu_share=0.25,
                    process_walls_ms=[a, b])
    assert not v["unstable"] and v["wide_interval"] and v["processes"] == 2
    assert "over 2 processes" in v["notes"][0] and "measure.repeats" in v["notes"][0]
    assert (v["estimate_ms"], v["low_ms"], v["high_ms"]) == (est, lo, hi)


def test_more_processes_narrow_the_interval():
    """Processes whose levels spread evenly over 9..11 ms (planted, 30 iterations each): the
    interval of all 16 is far narrower than that of the two extreme ones, and narrower than the
    spread of the processes' own estimates: raising measure.repeats, the remedy the verdict
    names, narrows it."""
    rng = np.random.default_rng(7)
    procs = [list(level + rng.normal(0, 0.05, 30)) for level in np.linspace(9, 11, 16)]
    own = [np.quantile(p, 0.25) for p in procs]
    _, lo2, hi2 = stats.estimate_ci([procs[0], procs[-1]])
    est, lo16, hi16 = stats.estimate_ci(procs)
    assert lo2 < 9.1 and hi2 > 10.9          # two processes: both ends
    assert lo16 <= est <= hi16
    assert hi16 - lo16 < 0.6 * (hi2 - lo2) and hi16 - lo16 < 0.6 * (max(own) - min(own))


def test_one_process_is_the_runners_own_interval():
    x = [10.0 + 0.1 * ((7 * i) % 13) for i in range(40)]
    assert stats.estimate_ci([x]) == stats.quantile_ci(x, stats.ESTIMATE_QUANTILE)
    assert stats.estimate_ci([x, []]) == stats.quantile_ci(x, stats.ESTIMATE_QUANTILE)
    assert all(math.isnan(v) for v in stats.estimate_ci([]))


def _probed(share, before, after):
    return _cond(share) | {"probe_before_ms": before, "probe_after_ms": after}


def test_a_probe_slower_than_quiet_makes_it_unstable_and_names_the_remedy():
    steady = [10.0 + 0.01 * i for i in range(20)]
    slow = stats.judge(steady, [_probed(0.7, 1.0, 1.6)], ci_target=0.05,
                       max_other_cpu_share=0.25, quiet_probe_ms=1.0, max_probe_slowdown=1.25)
    assert slow["unstable"] and slow["probe_slowdown"] == pytest.approx(1.6)
    assert "1.60x slower than its quiet figure" in slow["reasons"][0]
    assert "other processes used 70%" in slow["reasons"][0]
    assert "phonetrain refresh --unstable" in slow["reasons"][0]


def test_contention_with_a_probe_at_its_quiet_figure_is_recorded_not_judged():
    """A busy host whose probe still runs at its quiet speed (the run kept its cores): the
    share is recorded, the run is usable."""
    steady = [10.0 + 0.01 * i for i in range(20)]
    v = stats.judge(steady, [_probed(0.6, 1.05, 1.1)], ci_target=0.05,
                    max_other_cpu_share=0.25, quiet_probe_ms=1.0, max_probe_slowdown=1.25)
    assert not v["unstable"] and v["other_cpu_share"] == 0.6
    assert v["probe_slowdown"] == pytest.approx(1.1)


def test_a_quota_that_throttled_the_runner_is_named_not_other_processes():
    """Under a cgroup CPU quota the probe is slow and the host may look busy, but a quieter
    host would not help: the reason names the quota and what lifts it."""
    steady = [10.0 + 0.01 * i for i in range(20)]
    held = _probed(0.78, 1.0, 1.9) | {"cgroup_throttled_s": 0.4, "wall_s": 1.0,
                                      "cpu_quota_cpus": 1.5}
    v = stats.judge(steady, [held, held], ci_target=0.05, max_other_cpu_share=0.25,
                    quiet_probe_ms=1.0, max_probe_slowdown=1.25)
    [reason] = v["reasons"]
    assert v["unstable"] and reason.startswith("the cgroup CPU quota (1.5 CPUs) throttled the "
                                               "runner for 0.8 s of the 2 s measured (40%)")
    assert "quieter" not in reason and "other processes used" not in reason, reason
    assert "raise or lift the quota" in reason and "measure.threads 1 or fewer" in reason
    # throttling within the tolerance, or unrecorded (null), leaves the other reasons
    for t in (0.005, None):
        v = stats.judge(steady, [held | {"cgroup_throttled_s": t}], ci_target=0.05,
                        max_other_cpu_share=0.25, quiet_probe_ms=1.0, max_probe_slowdown=1.25)
        assert v["reasons"][0].startswith("the host ran 1.90x slower"), v["reasons"]


def test_a_cool_down_that_timed_out_makes_the_run_unstable():
    """A phone still at 80 C when its cool-down gave up (the transport's device.json): the
    verdict says so with the temperature and the remedy, not only the device readings."""
    steady = [10.0 + 0.01 * i for i in range(20)]
    cool = _probed(0.0, 1.0, 1.0) | {"cooldown_timed_out": 0.0, "cooldown_end_c": 40.0,
                                     "cooldown_wait_s": 3.0, "cooldown_threshold_c": 45.0}
    hot = cool | {"cooldown_timed_out": 1.0, "cooldown_end_c": 80.0, "cooldown_wait_s": 120.2}
    v = stats.judge(steady, [cool, hot], ci_target=0.05, max_other_cpu_share=0.25,
                    quiet_probe_ms=1.0, max_probe_slowdown=1.25)
    assert v["unstable"] and v["reasons"] == [
        "the cool-down timed out before 1 of 2 processes: the device was still hot at 80 C "
        "(over measure.cooldown_threshold_c 45 C) after 120 s, so its clocks may have been "
        "throttled: give it longer (measure.cooldown_limit_s), a cooler place or no case, "
        "then measure it again (phonetrain refresh --unstable)"]
    v = stats.judge(steady, [cool, cool], ci_target=0.05, max_other_cpu_share=0.25,
                    quiet_probe_ms=1.0, max_probe_slowdown=1.25)
    assert not v["unstable"], v["reasons"]
