"""A Vulkan run's rerun pairs with what the previous run kept of its build: its SPIR-V. Equal
SPIR-V (and plan, runner) is an identical build; other SPIR-V is pushed beside the new one
and the previous plan pointed at it; a previous record without SPIR-V is not paired."""

from __future__ import annotations

import json
from pathlib import Path

from phonetrain import layout
from phonetrain.stages import paired

PLAN = {"backend": "vulkan", "tensors": [{"id": 0}],
        "programs": [{"name": "gemm_nn", "source": "spirv/tiled/gemm_nn.spv", "options": ""},
                     {"name": "relu_fwd", "source": "spirv/tiled/relu_fwd.spv", "options": ""}]}


def _previous(tmp_path: Path, ran: dict) -> Path:
    prev = tmp_path / "prev"
    (prev / paired.RAN / paired.RAN_SPIRV).mkdir(parents=True)
    (prev / layout.PARAMS).write_text(json.dumps({"backend": "vulkan", "kernel_hash": "old"}))
    (prev / paired.RAN / layout.PLAN).write_text(json.dumps(PLAN))
    (prev / paired.RAN / paired.RAN_JSON).write_text(json.dumps(ran))
    for p in PLAN["programs"]:
        (prev / paired.RAN / paired.RAN_SPIRV / Path(p["source"]).name).write_bytes(b"old")
    return prev


def test_equal_spirv_is_identical_and_other_spirv_is_paired(tmp_path):
    old = {"kernel_hash": "old", "runner_sha256": "r", "build_key": "k1", "spirv": True}
    prev = _previous(tmp_path, old)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    p = {"backend": "vulkan", "kernel_hash": "new"}
    mode, why = paired.pairing(prev, p, dict(old, kernel_hash="new"), plan)
    assert mode == "identical" and "SPIR-V" in why
    assert paired.pairing(prev, p, dict(old, kernel_hash="new", build_key="k2"), plan)[0] == \
        "paired"
    # a record of OpenCL sources (kept before runs kept SPIR-V) cannot stand for the build
    (prev / paired.RAN / paired.RAN_JSON).write_text(json.dumps(dict(old, spirv=None)))
    mode, why = paired.pairing(prev, p, dict(old, kernel_hash="new"), plan)
    assert mode is None and "no SPIR-V" in why


class _Transport:
    def __init__(self):
        self.pushed = []

    def push(self, local, remote):
        self.pushed.append((Path(local), remote))
        return 1


class _Runner:
    def __init__(self):
        self.transport = _Transport()


def test_the_previous_spirv_goes_beside_the_new_and_its_plan_points_there(tmp_path):
    prev = _previous(tmp_path, {"spirv": True})
    r = _Runner()
    remote, local = paired.push_previous(r, prev, "exp1", "tiled", tmp_path / "into")
    assert r.transport.pushed[0] == (prev / paired.RAN / paired.RAN_SPIRV,
                                     "spirv/tiled.previous")
    assert remote == "plans/exp1/plan.previous.json"
    assert [p["source"] for p in json.loads(local.read_text())["programs"]] == \
        ["spirv/tiled.previous/gemm_nn.spv", "spirv/tiled.previous/relu_fwd.spv"]
