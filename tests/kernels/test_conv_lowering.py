"""The conv lowering choice: a device's tuning.json ``conv`` section (here hand-written, as the
tuner writes it) is read back, the lowering follows it per conv shape (direct ``conv2d_fwd``
for the listed shape, im2col + GEMM for the other), and the resulting LeNet-5 training plan
runs on the CPU backend and on PoCL and matches the numpy reference step by step."""

from __future__ import annotations

import json

import pytest

from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.errors import ResultsFileError
from phonetrain.kernels import tuning
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan

CONV1 = tuning.conv_key(4, 1, 28, 28, 6, 5, 1, 2)     # LeNet-5 conv1 at batch 4
CONV2 = tuning.conv_key(4, 6, 14, 14, 16, 5, 1, 0)


def _tuning_json(tmp_path, conv: dict) -> dict:
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps({"version": "baseline", "classes": {}, "default": None,
                                "conv": conv}))
    return tuning.load_tuning(path)


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_tuned_conv_choice_is_lowered_and_matches_the_reference(runner, pocl, tmp_path,
                                                                 backend):
    doc = _tuning_json(tmp_path, {CONV1: {"lowering": "direct", "im2col_ms": 2.0,
                                          "direct_ms": 1.0},
                                  CONV2: {"lowering": "im2col", "im2col_ms": 1.0,
                                          "direct_ms": 3.0}})
    choice = tuning.conv_lowerings(doc)
    assert choice == {CONV1: "direct", CONV2: "im2col"}
    opencl = backend == "opencl"
    spec = LowerSpec(model="lenet5", batch_size=4, backend=backend,
                     placement="resident" if opencl else None, transfer="copy" if opencl else None,
                     warmup=0, iterations=2, num_batches=2, dumps="params")
    plan_path = write_bundle(spec, tmp_path, conv_lowering=choice)
    plan = Plan.load(plan_path)
    kernels = [(s.name, s.layer, s.phase) for s in plan.steps if s.op == "kernel"]
    assert ("conv2d_fwd", "conv1", "forward") in kernels
    assert ("im2col", "conv1", "backward") in kernels          # the weight gradient's columns
    assert ("im2col", "conv1", "forward") not in kernels
    assert ("im2col", "conv2", "forward") in kernels and ("conv2d_fwd", "conv2", "forward") \
        not in kernels
    out = tmp_path / "out"
    doc = runner_api.run_plan(runner, plan_path, tmp_path, out, threads=1,
                              device_selector=pocl if opencl else None)
    assert doc["status"] == "ok"
    v = reference.verify_run_dir(plan, tmp_path, out)
    assert v["ok"], (v["worst"], v["max_abs_err"])


def test_no_conv_section_lowers_every_conv_with_im2col(tmp_path):
    assert tuning.conv_lowerings(None) == {}
    doc = {"version": "baseline", "classes": {}, "default": None}
    spec = LowerSpec(model="lenet5", batch_size=4, num_batches=1)
    plan = Plan.load(write_bundle(spec, tmp_path, conv_lowering=tuning.conv_lowerings(doc)))
    assert not any(s.name == "conv2d_fwd" for s in plan.steps)


def test_a_bad_conv_entry_names_the_file_and_key(tmp_path):
    doc = _tuning_json(tmp_path, {CONV1: {"lowering": "winograd"}})
    with pytest.raises(ResultsFileError, match=f"x/tuning.json: conv.{CONV1}.lowering is "
                                               "'winograd'"):
        tuning.conv_lowerings(doc, "x/tuning.json")


def test_choose_conv_keeps_the_faster_lowering_and_im2col_when_direct_failed():
    got = tuning.choose_conv({"a": {"im2col": 2.0, "direct": 1.0},
                              "b": {"im2col": 1.0, "direct": 1.5},
                              "c": {"im2col": 1.0, "direct": None}})
    assert {k: v["lowering"] for k, v in got.items()} == {"a": "direct", "b": "im2col",
                                                          "c": "im2col"}
    with pytest.raises(ValueError, match="conv d: the im2col lowering failed"):
        tuning.choose_conv({"d": {"im2col": None, "direct": 1.0}})
