"""A phone whose cool-down timed out (still hot when the transport gave up waiting) measured a
throttled phone: the train stage's verdict over its processes reads the cool-down each one
recorded (``device.json``) and calls the run unstable with the temperature and the remedy, so
the runs table and the report flag it; a cool-down that ended cool changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

from phonetrain import layout
from phonetrain.config import MeasureConfig
from phonetrain.stages.specs import MeasureSpec
from phonetrain.stages.train import judge_measurement


def _process(d: Path, timed_out: bool) -> Path:
    """A runner process folder: run.json with 20 measured iterations of about 10 ms, and the
    transport's device.json with the cool-down before it."""
    d.mkdir(parents=True)
    iters = [{"iteration": i, "warmup": i == 0, "wall_ms": 10.0 + 0.01 * i} for i in range(21)]
    (d / layout.RUN).write_text(json.dumps({"status": "ok", "iters": iters,
                                            "conditions": {"other_cpu_share": 0.0}}))
    end = 80.0 if timed_out else 40.0
    (d / layout.DEVICE_READINGS).write_text(json.dumps({"cooldown": {
        "cooldown_wait_s": 120.1 if timed_out else 2.0, "cooldown_start_c": 82.0,
        "cooldown_end_c": end, "cooldown_timed_out": float(timed_out)}}))
    return d


def _spec() -> MeasureSpec:
    m = MeasureConfig()
    return MeasureSpec(**{k: getattr(m, k) for k in MeasureSpec.__dataclass_fields__})


def test_a_timed_out_cool_down_makes_the_run_unstable(tmp_path: Path):
    dirs = [_process(tmp_path / "p0", False), _process(tmp_path / "p1", True)]
    v = judge_measurement(dirs, _spec())
    assert v["unstable"], v
    [reason] = v["reasons"]
    assert reason.startswith("the cool-down timed out before 1 of 2 processes: the device was "
                             "still hot at 80 C (over measure.cooldown_threshold_c 45 C) after "
                             "120 s"), reason
    cool = judge_measurement([_process(tmp_path / "c0", False),
                              _process(tmp_path / "c1", False)], _spec())
    assert not cool["unstable"] and not cool["reasons"], cool
