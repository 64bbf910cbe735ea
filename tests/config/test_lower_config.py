"""``lower.reuse_buffers``: off by default and then absent from every experiment's config,
plan spec and run params (hashes unchanged); on, it reaches the plan spec, the run params
and the lowered plan."""

from __future__ import annotations

from phonetrain.config import compose_sweep
from phonetrain.stages.params import plan_spec, run_params
from phonetrain.stages.specs import parse_plan, plan_params


def test_reuse_buffers_is_recorded_only_when_on():
    off = compose_sweep().experiments[0]
    on = compose_sweep(overrides=["lower.reuse_buffers=true"]).experiments[0]
    assert "lower" not in off.config and on.config["lower"] == {"reuse_buffers": True}
    assert off.config_hash != on.config_hash
    assert "reuse_buffers" not in plan_params(plan_spec(off), "data/x")
    assert "reuse_buffers" not in run_params(off)
    assert run_params(on)["reuse_buffers"] is True
    assert plan_params(plan_spec(on), "data/x")["reuse_buffers"] is True
    assert parse_plan(plan_params(plan_spec(on), "data/x"), "lower").reuse_buffers is True
    assert parse_plan(plan_params(plan_spec(off), "data/x"), "lower").reuse_buffers is False
