"""benchmarks/bench_runner_ab.py's kernel-variant arms: ``KEY=VALUE`` items parsed into
defines, local sizes and split K; a variant plan rebuilt with the changed build options and
launch geometry of the named kernels only, the lowered plan left as it was."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("bench_runner_ab",
                                                  REPO / "benchmarks" / "bench_runner_ab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_variant_items_parse_and_a_malformed_one_is_named():
    ab = _module()
    assert ab.parse_variant("LIN_TK=32,local.linear_fwd=8x4,splitk=1024,NAME=x") == {
        "defines": {"LIN_TK": 32, "NAME": "x"}, "local": {"linear_fwd": [8, 4]},
        "splitk": 1024}
    with pytest.raises(ValueError, match="'LIN_TK'"):
        ab.parse_variant("LIN_TK")


def test_a_variant_plan_changes_only_the_named_kernels_and_the_options(tmp_path):
    ab = _module()
    from phonetrain.plan import Plan
    a = argparse.Namespace(placement="resident-copy", backend="opencl", kernel="fused",
                           warmup=1, iterations=2)
    _, pdir = ab.lower("mlp_784_256_128_16", a, tmp_path)
    before = (pdir / "plan.json").read_text()
    dest = tmp_path / "variant"
    ab.variant_plan(pdir, "fused", ab.parse_variant("LIN_TK=32,local.linear_fwd=8x8"), dest)
    assert (pdir / "plan.json").read_text() == before          # the lowered plan untouched
    old, new = Plan.load(pdir / "plan.json"), Plan.load(dest / "plan.json")
    assert all("-DLIN_TK=32" in p.options and "-DLIN_TK=64" not in p.options
               for p in new.programs if p.options)
    changed = [(o, n) for o, n in zip(old.steps, new.steps)
               if (o.global_size, o.local_size) != (n.global_size, n.local_size)]
    assert changed and all(n.name == "linear_fwd" and n.local_size == [8, 8]
                           and all(g % 8 == 0 for g in n.global_size) for _, n in changed)
    assert len([s for s in new.steps if s.name == "linear_fwd"]) == len(changed)


def test_a_vulkan_variant_plan_takes_specialization_constants(tmp_path):
    """A Vulkan plan's variant gets the changed defines as the specialization-constant
    options of its programs (the version's defines that the Vulkan ABI knows), not OpenCL
    build options."""
    ab = _module()
    from phonetrain.plan import Plan
    a = argparse.Namespace(placement="resident-copy", backend="vulkan", kernel="fused",
                           warmup=1, iterations=2)
    _, pdir = ab.lower("mlp_784_256_128_16", a, tmp_path)
    dest = tmp_path / "variant"
    ab.variant_plan(pdir, "fused", ab.parse_variant("LIN_TK=32,local.linear_fwd=8x8"), dest)
    new = Plan.load(dest / "plan.json")
    assert {p.options for p in new.programs} == {"-DLIN_T=16 -DLIN_TK=32 -DLOSS_WG=64"}
    assert all(s.local_size == [8, 8] for s in new.steps if s.name == "linear_fwd")
