"""The verdict on a change from paired processes (previous, new): an estimate with an
interval, a difference only beyond the minimum effect, ``no change`` inside it."""

from __future__ import annotations

import pytest

from phonetrain.report.changes import paired_text
from phonetrain.results.paired import MIN_EFFECT, paired_verdict


def _pairs(ratios, base=10.0):
    # each pair on its own host state: the previous side's figure drifts between pairs
    return [(base * (1 + 0.3 * k), base * (1 + 0.3 * k) * q) for k, q in enumerate(ratios)]


def test_a_planted_slowdown_is_slower_with_its_ratio_inside_the_interval():
    v = paired_verdict(_pairs([1.29, 1.31, 1.30, 1.32, 1.28]))
    assert v["verdict"] == "slower" and v["pairs"] == 5
    assert v["low"] <= 1.3 <= v["high"] and v["low"] >= 1 + MIN_EFFECT


def test_the_revert_is_faster():
    v = paired_verdict(_pairs([1 / 1.29, 1 / 1.31, 1 / 1.30]))
    assert v["verdict"] == "faster" and v["high"] <= 1 / (1 + MIN_EFFECT)


def test_drift_between_pairs_does_not_make_a_difference():
    # the host got 2.5x slower across the pairs, equally for both sides of each pair
    v = paired_verdict(_pairs([1.01, 0.99, 1.00, 1.005, 0.995, 1.0]))
    assert v["verdict"] == "no change", v


def test_pairs_that_disagree_cannot_tell_and_say_why():
    v = paired_verdict(_pairs([1.4, 0.8, 1.1]))
    assert v["verdict"] == "cannot tell" and "minimum effect" in v["reason"]
    assert v["low"] < 1 < v["high"]


@pytest.mark.parametrize("pairs", [[], [(10.0, 13.0)], [(10.0, 13.0), (0.0, 12.0)]])
def test_too_few_usable_pairs_cannot_tell(pairs):
    v = paired_verdict(pairs)
    assert v["verdict"] == "cannot tell" and "pair" in v["reason"]


def test_the_change_table_says_side_by_side_and_the_pairs():
    word, how = paired_text(paired_verdict(_pairs([1.3, 1.31, 1.29])))
    assert word.startswith("slower (interval 1.") and how == "side by side, 3 pairs"
    assert paired_text({"identical_build": True})[0] == "no change (identical build)"
