"""A plan file edited or damaged by hand: Plan.load raises one PlanError naming the file and
what is wrong, and says the lower stage writes plans (delete the folder and rerun)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from phonetrain.lowering import LowerSpec, lower
from phonetrain.plan import Plan, PlanError


@pytest.fixture(scope="module")
def plan_doc() -> dict:
    """A real plan (the smallest MLP on the CPU backend) as its JSON document."""
    return lower(LowerSpec(model="mlp_16_16", batch_size=4, backend="cpu")).to_json()


@pytest.mark.parametrize("edit, needles", [
    (lambda d: d.pop("tensors"), ["key 'tensors' is missing"]),
    (lambda d: d.__setitem__("iterations", -1), ["iterations -1", ">= 1 measured"]),
    (lambda d: d.__setitem__("warmup", -2), ["warmup -2"]),
    (lambda d: d["steps"][0].__setitem__("op", "gemmz"), ["steps[0].op 'gemmz'"]),
    (lambda d: d.__setitem__("plan_version", 9), ["plan_version 9", "re-lower"]),
], ids=["no-tensors", "iterations", "warmup", "op", "version"])
def test_an_edited_plan_is_named_with_what_to_do(tmp_path: Path, plan_doc, edit, needles):
    doc = json.loads(json.dumps(plan_doc))
    edit(doc)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanError) as e:
        Plan.load(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and all(n in msg for n in needles), msg
    assert "lower" in msg, msg


def test_a_truncated_plan_says_not_json(tmp_path: Path, plan_doc):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_doc)[:200])
    with pytest.raises(PlanError) as e:
        Plan.load(path)
    msg = str(e.value)
    assert f"{path}: not JSON" in msg and "delete its folder and rerun" in msg, msg
