"""The measurement settings: defaults in one place, bad values named before any job, and
which of them reach a run's params (a change re-measures) or the plan (a change relowers)."""

from __future__ import annotations

import pytest

from phonetrain.config import ConfigError, MeasureConfig, compose_sweep, plan_config
from phonetrain.stages.params import run_params


def test_defaults():
    m = MeasureConfig()
    assert (m.ci_target, m.max_iterations, m.max_seconds, m.max_other_cpu_share) == \
        (0.05, 60, 1.5, 0.25)
    assert (m.repeats, m.max_attempts, m.max_probe_slowdown) == (2, 3, 1.5)
    assert m.checkpoints == [0, 1, -2, -1] and m.bootstrap_resamples == 1000
    assert m.bandwidth_max_bytes == 1 << 30 and m.tune_max_launch_s == 0.1


@pytest.mark.parametrize("override, needles", [
    ("measure.max_iterations=5", ["measure.max_iterations", "below measure.iterations"]),
    ("measure.max_other_cpu_share=1.5", ["measure.max_other_cpu_share", "0..1"]),
    ("measure.ci_target=-0.1", ["measure.ci_target", ">= 0"]),
    ("measure.bootstrap_resamples=1", ["measure.bootstrap_resamples", ">= 2"]),
    ("measure.tune_max_launch_s=0", ["measure.tune_max_launch_s", "> 0"]),
    ("measure.checkpoints=[first]", ["measure.checkpoints"]),
    ("measure.eval_every=-1", ["measure.eval_every", "is -1", ">= 0"]),
    ("measure.max_attempts=0", ["measure.max_attempts", ">= 1"]),
    ("measure.max_probe_slowdown=-1", ["measure.max_probe_slowdown", ">= 0"]),
])
def test_bad_measure_settings_are_named(override, needles):
    with pytest.raises(ConfigError) as e:
        compose_sweep([override])
    for n in needles:
        assert n in str(e.value), str(e.value)


def test_settings_reach_runs_and_plans():
    base = compose_sweep(["sweep.models=[mlp_16_16]", "sweep.backends=[cpu]"]).experiments[0]
    other = compose_sweep(["sweep.models=[mlp_16_16]", "sweep.backends=[cpu]",
                           "measure.ci_target=0.1", "measure.checkpoints=[0,1]"]).experiments[0]
    assert run_params(base)["measure"]["ci_target"] == 0.05
    assert run_params(base)["config_hash"] != run_params(other)["config_hash"]
    assert plan_config(base)["measure"]["checkpoints"] == [0, 1, -2, -1]
    assert plan_config(other)["measure"]["checkpoints"] == [0, 1]


def test_eval_every_makes_its_iterations_checkpoints_only_when_on():
    sel = ["sweep.models=[mlp_16_16]", "sweep.backends=[cpu]", "measure.warmup=2",
           "measure.iterations=10", "measure.max_iterations=20"]
    off = compose_sweep(sel).experiments[0]
    zero = compose_sweep(sel + ["measure.eval_every=0"]).experiments[0]
    on = compose_sweep(sel + ["measure.eval_every=5"]).experiments[0]
    assert plan_config(off) == plan_config(zero)
    assert run_params(off)["config_hash"] == run_params(zero)["config_hash"]
    assert run_params(off)["measure"]["eval_every"] == 0
    # adaptive (ci_target > 0): up to max_iterations measured; warm-up 2 shifts them
    assert plan_config(on)["measure"]["checkpoints"] == [0, 1, -2, -1, 6, 11, 16, 21]
    assert run_params(on)["measure"]["eval_every"] == 5
    assert run_params(on)["config_hash"] != run_params(off)["config_hash"]
    fixed = compose_sweep(sel + ["measure.eval_every=5", "measure.ci_target=0"]).experiments[0]
    assert plan_config(fixed)["measure"]["checkpoints"] == [0, 1, -2, -1, 6, 11]


def test_data_params_name_the_heldout_rule_where_it_cuts_training():
    from phonetrain.data import HELDOUT_FRACTION, HELDOUT_SEED
    from phonetrain.stages.params import job_params
    digits = job_params(compose_sweep(["sweep.models=[mlp_784_256_128_16]",
                                       "sweep.backends=[cpu]"]))["data"]
    assert [d["heldout"] for d in digits.values()] == \
        [{"fraction": HELDOUT_FRACTION, "seed": HELDOUT_SEED}]
    synth = job_params(compose_sweep(["sweep.models=[mlp_16_16]", "sweep.backends=[cpu]"]))
    assert [d["heldout"]["seed"] for d in synth["data"].values()] == [HELDOUT_SEED]
