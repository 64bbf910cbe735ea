"""Side-by-side pairs are added until the verdict is decisive, within a stated most pairs and
time budget: stand-in measurements with a planted ratio (or a tie) and noise, the host's drift
falling on both processes of a pair."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from phonetrain.io import write_json
from phonetrain.results.paired import MIN_EFFECT, until_decisive
from phonetrain.stages import gemm as gemm_stage
from phonetrain.stages import paired as kept


def stand_in(ratio: float, noise: float, seed: int = 7):
    """A pair of (previous, new) step times in ms: new = ratio x previous, each process with
    its own log-normal noise of ``noise`` and the host drifting up to 3x between pairs."""
    rng = random.Random(seed)
    calls = []

    def pair(k: int) -> tuple[float, float]:
        host = 10.0 * (1 + 2 * rng.random())   # the same host state for both sides of a pair
        calls.append(k)
        return (host * rng.lognormvariate(0, noise), host * ratio * rng.lognormvariate(0, noise))
    return pair, calls


class Clock:
    """A clock that moves ``step_s`` seconds every time it is read."""

    def __init__(self, step_s: float):
        self.t, self.step_s = 0.0, step_s

    def __call__(self) -> float:
        self.t += self.step_s
        return self.t


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_planted_1_3x_is_slower_with_1_3_inside_its_interval(seed):
    pair, calls = stand_in(1.3, noise=0.12, seed=seed)
    v = until_decisive(pair, first=3, max_pairs=40, budget_s=1e9)
    assert v["verdict"] == "slower" and v["stopped"] == "decisive", v
    assert v["low"] <= 1.3 <= v["high"] and v["low"] >= 1 + MIN_EFFECT
    assert v["pairs"] == len(calls) == len(v["pairs_ms"]) and calls == list(range(len(calls)))


def test_noisier_pairs_need_more_of_them_than_the_first_look():
    pair, _ = stand_in(1.3, noise=0.25, seed=11)
    v = until_decisive(pair, first=3, max_pairs=60, budget_s=1e9)
    assert v["verdict"] == "slower" and v["pairs"] > 3, v
    assert v["low"] <= 1.3 <= v["high"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_planted_tie_is_no_change(seed):
    pair, _ = stand_in(1.0, noise=0.03, seed=seed)
    v = until_decisive(pair, first=3, max_pairs=40, budget_s=1e9)
    assert v["verdict"] == "no change" and v["stopped"] == "decisive", v
    assert 1 / (1 + MIN_EFFECT) <= v["low"] <= v["ratio"] <= v["high"] <= 1 + MIN_EFFECT


def test_a_speed_up_is_faster():
    pair, _ = stand_in(1 / 1.3, noise=0.12, seed=3)
    v = until_decisive(pair, first=3, max_pairs=40, budget_s=1e9)
    assert v["verdict"] == "faster" and v["low"] <= 1 / 1.3 <= v["high"], v


def test_pairs_that_never_agree_stop_at_the_most_pairs_and_say_so():
    # a change right at the minimum effect with wide noise: no interval clears it in 8 pairs
    pair, calls = stand_in(1 + MIN_EFFECT, noise=0.3, seed=5)
    v = until_decisive(pair, first=3, max_pairs=8, budget_s=1e9)
    assert v["verdict"] == "cannot tell" and v["stopped"] == "most pairs"
    assert len(calls) == 8 and v["max_pairs"] == 8
    assert "stopped at the most pairs, 8" in v["reason"]


def test_the_time_budget_stops_an_undecided_measurement():
    pair, calls = stand_in(1 + MIN_EFFECT, noise=0.3, seed=5)
    v = until_decisive(pair, first=3, max_pairs=100, budget_s=10.0, clock=Clock(1.0))
    assert v["verdict"] == "cannot tell" and v["stopped"] == "time budget"
    assert 3 <= len(calls) < 100 and "time budget" in v["reason"] and v["budget_s"] == 10.0


def test_a_device_that_stops_ends_the_pairs():
    def pair(k):
        return (10.0, 13.0) if k < 1 else None
    v = until_decisive(pair, first=3, max_pairs=10, budget_s=1e9)
    assert v["stopped"] == "device stopped" and v["verdict"] == "cannot tell"


def test_the_bounds_must_allow_the_first_look():
    with pytest.raises(ValueError, match="max_pairs"):
        until_decisive(lambda k: (1.0, 1.0), first=5, max_pairs=3, budget_s=1.0)


# ---------------------------------------------------------------- a GEMM shape, side by side

def _both(spec: dict, ms_of) -> dict:
    """A side-by-side process's document: ``ms_of(new)`` for each build's case."""
    def case(new: bool) -> dict:
        ms = ms_of(new)
        return {"kernel": "gemm_nn", "M": 256, "N": 256, "K": 256, "status": "ok",
                "median_ms": ms, "gflops": 2 * 256 ** 3 / ms / 1e6, "max_err": 0.0}
    assert ".previous" in spec["previous"]["source"]
    return {"status": "ok", "options": "", "cases": [dict(case(True), previous=case(False))]}


class StandInBench:
    """bench-gemm stand-in: the previous build's kernel (source under ``.previous``) takes
    ``base_ms``, the new one ``ratio`` times that, each process with noise and drift (on both
    builds alike)."""

    def __init__(self, ratio: float, seed: int = 3):
        self.rng, self.ratio, self.specs = random.Random(seed), ratio, []

    def spec(self, spec: dict) -> dict:
        self.specs.append(spec)
        host = 2.0 * (1 + self.rng.random())
        return _both(spec, lambda new: host * (self.ratio if new else 1.0) *
                     self.rng.lognormvariate(0, 0.1))


def _specs(min_time_ms: float = 1.0) -> tuple[dict, dict]:
    case = {"kernel": "gemm_nn", "M": 256, "N": 256, "K": 256, "global": [256, 256]}
    new = {"source": "kernels/baseline/gemm.cl", "min_time_ms": min_time_ms, "repeats": 5,
           "cases": [case]}
    return new, dict(new, source="kernels/baseline.previous/gemm.cl")


def test_a_gemm_shape_planted_1_3x_is_slower_with_longer_processes():
    bench = StandInBench(1.3)
    new, old = _specs()
    doc = gemm_stage._paired_shape(bench, new, old)
    v = doc["paired"]
    assert v["verdict"] == "slower" and v["low"] <= 1.3 <= v["high"], v
    assert v["max_pairs"] == gemm_stage.PAIRED_MAX and v["budget_s"] == gemm_stage.PAIRED_BUDGET_S
    assert len(bench.specs) == v["pairs"]      # one process per pair, both builds in it
    # each process: several repeats of at least the paired minimum time
    assert all(s["repeats"] == gemm_stage.PAIRED_REPEATS and
               s["min_time_ms"] == gemm_stage.PAIRED_MIN_TIME_MS for s in bench.specs)
    # alternating order: previous first in even pairs, new first in odd ones
    assert [s["previous"]["first"] for s in bench.specs] == \
        [int(k % 2 == 0) for k in range(v["pairs"])]


def test_a_gemm_shape_keeps_a_longer_minimum_time_of_its_own():
    bench = StandInBench(1.0)
    new, old = _specs(min_time_ms=100.0)
    gemm_stage._paired_shape(bench, new, old)
    assert {s["min_time_ms"] for s in bench.specs} == {100.0}


class LongCallBench:
    """bench-gemm stand-in for a long call: each process advances a planted clock by its
    2 builds x repeats x ``call_ms`` (plus 0.1 s to start) and reports a median near ``call_ms`` (the new
    build ``ratio`` times it), with per-process noise."""

    def __init__(self, ratio: float, call_ms: float, seed: int = 5):
        self.rng, self.ratio, self.call_ms = random.Random(seed), ratio, call_ms
        self.now_s, self.specs = 0.0, []

    def clock(self) -> float:
        return self.now_s

    def spec(self, spec: dict) -> dict:
        self.specs.append(spec)
        self.now_s += 0.1 + 2 * spec["repeats"] * self.call_ms / 1e3
        return _both(spec, lambda new: self.call_ms * (self.ratio if new else 1.0) *
                     self.rng.lognormvariate(0, 0.12))


def test_paired_repeats_and_budget_scale_with_the_call():
    assert gemm_stage.paired_repeats(None) == gemm_stage.PAIRED_REPEATS
    assert gemm_stage.paired_repeats(0.5) == gemm_stage.PAIRED_REPEATS
    assert gemm_stage.paired_repeats(300.0) == 4
    assert gemm_stage.paired_repeats(1770.0) == 1
    assert gemm_stage.paired_budget_s(0.5, 5) == gemm_stage.PAIRED_BUDGET_S
    assert gemm_stage.paired_budget_s(1770.0, 1) == pytest.approx(
        gemm_stage.PAIRED_BUDGET_PAIRS * 2 * 1.77)


@pytest.mark.parametrize("scaled", [False, True])
def test_a_long_call_gets_enough_pairs_to_decide(monkeypatch, scaled: bool):
    """A planted 1.3x on a 1.77 s call: five repeats per process spend the 15 s budget before
    the first look can narrow (the 1024^3 shape's undecided row); repeats and budget scaled to
    the call decide it within the time of 8 pairs."""
    bench = LongCallBench(1.3, 1770.0)
    monkeypatch.setattr(gemm_stage, "until_decisive",
                        lambda *a, **k: until_decisive(*a, clock=bench.clock, **k))
    new, old = _specs()
    doc = gemm_stage._paired_shape(bench, new, old, call_ms=1770.0 if scaled else None)
    v = doc["paired"]
    if not scaled:
        assert v["stopped"] == "time budget" and v["pairs"] == gemm_stage.PAIRED_FIRST, v
        return
    assert {s["repeats"] for s in bench.specs} == {1}
    assert v["verdict"] == "slower" and v["low"] <= 1.3 <= v["high"], v
    assert bench.now_s <= v["budget_s"] + 2 * (0.1 + 1.77), (bench.now_s, v)


# ---------------------------------------------------------------- a run, side by side

def test_a_run_adds_pairs_of_processes_until_decisive(tmp_path: Path):
    """Each pair is one process (one call) measuring both sides into their own folders."""
    rng = random.Random(9)
    calls = []

    def measure(manifest: dict, into: Path, previous: tuple[str, Path]) -> Path:
        calls.append((manifest["plan"], previous[0]))
        host = 5.0 * (1 + rng.random())       # one process: the host's state falls on both
        for d, f in ((into, 2.0), (previous[1], 1.0)):
            walls = [host * f * rng.lognormvariate(0, 0.05) for _ in range(3)]
            write_json({"iters": [{"wall_ms": w} for w in walls]}, d / "run.json")
        return into

    got = kept.pairs_until_decisive(measure, {"plan": "new.json"}, "old.json", tmp_path,
                                    first=2)
    pairs, v = got
    assert v["verdict"] == "slower" and v["low"] <= 2.0 <= v["high"]
    assert len(pairs) == v["pairs"] == len(calls) >= 2 and v["max_pairs"] == kept.RUN_MAX_PAIRS
    assert set(calls) == {("new.json", "old.json")}
    assert all(a.name.startswith("previous_") and b.name.startswith("process_") for a, b in pairs)


def test_a_pair_counts_only_the_rounds_both_sides_ran(tmp_path: Path):
    """The side that went on alone after the other stopped ran through a planted 10x drift
    that the other side never saw: its lone iterations are not part of the pair."""
    old, new = tmp_path / "previous_0", tmp_path / "process_0"
    warm = [{"wall_ms": 50.0, "warmup": True}]
    write_json({"iters": warm + [{"wall_ms": w} for w in (1.0, 1.2, 1.1)]}, old / "run.json")
    write_json({"iters": warm + [{"wall_ms": w} for w in (2.0, 2.4, 2.2)]
                + [{"wall_ms": 20.0}] * 5}, new / "run.json")
    assert kept.side_medians(old, new) == (1.1, 2.2)
    assert kept.side_medians(new, old) == (2.2, 1.1)
