"""Looking after every pair does not turn a tie into a change: planted ties with a
launch-bound run's two-mode spread, replayed through the stopping rule many times with a fixed
seed, end ``faster``/``slower`` rarely; a planted 1.3x still ends ``slower``; a tie with a
steady spread still ends ``no change``."""

from __future__ import annotations

import random

import pytest

from phonetrain.results.paired import CONFIDENCE, LOOK_CONFIDENCE, paired_verdict, until_decisive

RERUNS = 300


def two_modes(rng: random.Random) -> float:
    """One process's median step (ms) of a launch-bound run: half the processes near 0.08 ms,
    half near 0.14 ms (the modes of ``mlp_16_16`` on a 2-core host), each +-10%."""
    return rng.choice((0.08, 0.14)) * rng.lognormvariate(0, 0.1)


def verdicts(ratio: float, draw, confidence: float, first: int = 2, most: int = 12) -> dict:
    rng = random.Random(11)
    out: dict[str, int] = {}
    for _ in range(RERUNS):
        doc = until_decisive(lambda k: (draw(rng), ratio * draw(rng)), first=first,
                             max_pairs=most, budget_s=float("inf"), confidence=confidence)
        out[doc["verdict"]] = out.get(doc["verdict"], 0) + 1
    return out


def false_share(v: dict) -> float:
    return (v.get("faster", 0) + v.get("slower", 0)) / RERUNS


def test_a_two_mode_tie_is_rarely_called_a_change():
    assert false_share(verdicts(1.0, two_modes, LOOK_CONFIDENCE)) <= 0.05


def test_a_95_percent_look_after_every_pair_calls_the_same_tie_a_change_too_often():
    # the condition the per-look correction exists for: the uncorrected rule fails it
    assert false_share(verdicts(1.0, two_modes, CONFIDENCE)) > 0.08


def test_a_planted_1_3x_with_a_steady_spread_is_still_slower():
    v = verdicts(1.3, lambda rng: rng.lognormvariate(0, 0.1), LOOK_CONFIDENCE, first=3, most=16)
    assert v.get("slower", 0) / RERUNS >= 0.95, v


def test_a_steady_tie_still_reaches_no_change():
    v = verdicts(1.0, lambda rng: rng.lognormvariate(0, 0.03), LOOK_CONFIDENCE)
    assert v.get("no change", 0) / RERUNS >= 0.5 and false_share(v) <= 0.02, v


def test_no_change_uses_its_own_interval():
    pairs = [(1.0, 1.0 + d) for d in (0.01, -0.01, 0.012, -0.008)]
    strict = paired_verdict(pairs, confidence=0.9999)
    split = paired_verdict(pairs, confidence=0.9999, no_change_confidence=0.95)
    assert strict["verdict"] == "cannot tell"
    assert split["verdict"] == "no change" and split["confidence"] == 0.95
    assert split["high"] < strict["high"]


@pytest.mark.parametrize("ratio,verdict", [(1.5, "slower"), (1 / 1.5, "faster")])
def test_a_difference_needs_the_stricter_interval(ratio, verdict):
    pairs = [(1.0, ratio * (1 + d)) for d in (0.02, -0.02, 0.01)]
    assert paired_verdict(pairs, confidence=LOOK_CONFIDENCE)["verdict"] == verdict
