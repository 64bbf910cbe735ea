"""fused linear_fwd's split sum (LIN_SX x LIN_SY outputs per work-item, each summing its
LIN_SX*LIN_SY-th of every slice; src/kernels/fused/fused.cl) through the real runner on PoCL:
against the float64 oracle at odd sizes and the MLP's fc1 (32 x 256 x 784), at work-groups of
8 x 8 and 16 x 16 and at splits along O, along B and both; and run to run the same bits."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from phonetrain import runner as runner_api
from phonetrain.kernels import load_version
from helpers.kernel_cases import Case, fused_cases
from test_kernels import _mismatches, build_plan

VARIANTS = [(2, 2, [8, 8]), (2, 2, [16, 16]), (4, 1, [16, 8]), (1, 4, [8, 8])]


def _cases() -> list[Case]:
    rng = np.random.default_rng(41)
    out = [c for c in fused_cases(rng) if c.kernel == "linear_fwd"]
    B, O, I = 32, 256, 784   # the MLP's fc1: 13 slices, the last one 16 deep
    out.append(Case("linear_fwd", [B, O, I, 1, "X", "W", "bias", "Y"],
                    {"X": rng.uniform(-1, 1, B * I).astype(np.float32),
                     "W": rng.uniform(-1, 1, O * I).astype(np.float32),
                     "bias": rng.uniform(-1, 1, O).astype(np.float32),
                     "Y": np.full(B * O, np.nan, np.float32)},
                    ("Y",), label="linear_fwd fc1", atol=1e-6 * I + 1e-5))
    return out


def _run(runner, pocl, tmp_path, kv, cases, tag):
    root = tmp_path / tag
    plan = build_plan(cases, "opencl", "fused", root, kv=kv)
    plan.save(root / "plan.json")
    runner_api.run_plan(runner, root / "plan.json", root, tmp_path / f"out_{tag}",
                        device_selector=pocl)
    dumps = tmp_path / f"out_{tag}" / "dumps"
    return {(ci, o): np.fromfile(dumps / f"c{ci}_{o}.f32", dtype=np.float32)
            for ci, c in enumerate(cases) for o in c.outputs}


@pytest.mark.parametrize("sx,sy,local", VARIANTS, ids=lambda v: str(v))
def test_split_sum_matches_the_oracle_and_repeats(runner, pocl, tmp_path, sx, sy, local):
    kv = copy.deepcopy(load_version("fused"))
    kv.defines.update(LIN_SX=sx, LIN_SY=sy)
    kv.local_sizes["linear_fwd"] = local
    cases = _cases()
    got = _run(runner, pocl, tmp_path, kv, cases, "a")
    failures = _mismatches(cases, got)
    assert not failures, "\n".join(failures)
    again = _run(runner, pocl, tmp_path, kv, cases, "b")
    assert all(np.array_equal(got[k], again[k]) for k in got), "not the same bits run to run"
