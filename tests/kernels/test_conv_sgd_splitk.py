"""conv_sgd's split-K pair (src/kernels/README.md, "Fused kernels", split K) through the real
runner: with one chunk (S = 1), conv_wgrad_partial + conv_sgd_finish give conv_sgd's
weights, momenta and biases bit for bit (the same sums in the same order) on PoCL and on the
CPU backend; with an uneven last chunk, the same step to rounding. The kernels against the
oracle at more shapes are in tests/helpers/kernel_cases.py ("fused" group)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phonetrain import runner as runner_api
from phonetrain.kernels import (KERNEL_ARGS, bind_args, geometry, kernel_flops,
                                kernels_mentioned, load_version, stage_kernels)
from phonetrain.plan import Plan, Program, Step, Tensor

VERSION = "fused"
# LeNet-5's conv1 at batch 2 (B*OH*OW = 1568 products per sum), lr, momentum, weight decay
DIMS = [2, 1, 28, 28, 6, 5, 5, 1, 2, 28, 28]
HYPER = [0.05, 0.9, 5e-4]
STATE = ("weight", "V", "bias", "Vb")


def _arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    B, C, H, W, OC, KH, KW, _, _, OH, OW = DIMS
    n = OC * C * KH * KW
    r = lambda k: rng.uniform(-1, 1, k).astype(np.float32)  # noqa: E731
    return {"X": r(B * C * H * W), "dY": r(B * OC * OH * OW), "weight": r(n), "V": r(n),
            "bias": r(OC), "Vb": r(OC)}


def _plan(root: Path, backend: str, S: int) -> Plan:
    """Two copies of one layer's state on the same X and dY: copy ``a`` stepped by conv_sgd,
    copy ``b`` by conv_wgrad_partial (``S`` chunks) + conv_sgd_finish; both copies dumped."""
    (root / "tensors").mkdir(parents=True, exist_ok=True)
    kv = load_version(VERSION)
    data = _arrays(np.random.default_rng(7))
    tensors: list[Tensor] = []

    def tensor(name: str, arr: np.ndarray) -> int:
        (root / "tensors" / f"{name}.bin").write_bytes(arr.astype("<f4").tobytes())
        tensors.append(Tensor(id=len(tensors), name=name, shape=[arr.size], role="scratch",
                              home="device" if backend == "opencl" else "host",
                              init={"kind": "file", "path": f"tensors/{name}.bin"}))
        return len(tensors) - 1

    x, dy = tensor("X", data["X"]), tensor("dY", data["dY"])
    a = [tensor(f"a_{k}", data[k]) for k in STATE]
    b = [tensor(f"b_{k}", data[k]) for k in STATE]
    B, C, _, _, OC, KH, KW = DIMS[:7]
    part = tensor("part", np.full(S * OC * (C * KH * KW + 1), np.nan, np.float32))
    calls = [("conv_sgd", DIMS + HYPER + [x, dy, *a]),
             ("conv_wgrad_partial", DIMS + [S, x, dy, part]),
             ("conv_sgd_finish", [C, OC, KH, KW, S] + HYPER + [part, *b])]
    steps = []
    for name, values in calls:
        args = [{"t": v} if kind[0] in "rw" else {"f": v} if kind == "f" else {"i": v}
                for v, kind in zip(values, (s.split(":")[0] for s in KERNEL_ARGS[name]))]
        bound = bind_args(name, args)
        glob, local = geometry(name, bound, kv)
        steps.append(Step(op="kernel", name=name, args=args, global_size=glob,
                          local_size=local, flops=kernel_flops(name, bound), layer=name,
                          phase="update"))
    programs = []
    if backend == "opencl":
        staged = stage_kernels(VERSION, root)
        programs = [Program(name=p.stem, source=f"kernels/{VERSION}/{p.name}",
                            options=kv.options)
                    for p in sorted(staged.glob("*.cl"))
                    if {"conv_sgd", "conv_sgd_finish"} <= kernels_mentioned(p)]
    plan = Plan(name=f"splitk/{backend}", backend=backend, tensors=tensors, steps=steps,
                programs=programs, warmup=0, iterations=1, dumps=a + b)
    plan.validate()
    return plan


def _run(request, runner, tmp_path: Path, backend: str, S: int) -> dict[str, np.ndarray]:
    root = tmp_path / "bundle"
    _plan(root, backend, S).save(root / "plan.json")
    selector = request.getfixturevalue("pocl") if backend == "opencl" else None
    runner_api.run_plan(runner, root / "plan.json", root, tmp_path / "out",
                        threads=2 if backend == "cpu" else 0, device_selector=selector)
    dumps = tmp_path / "out" / "dumps"
    return {f"{c}_{k}": np.fromfile(dumps / f"{c}_{k}.f32", dtype=np.float32)
            for c in "ab" for k in STATE}


@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_one_chunk_is_conv_sgd_bit_for_bit(request, runner, tmp_path, backend):
    got = _run(request, runner, tmp_path, backend, S=1)
    for k in STATE:
        np.testing.assert_array_equal(got[f"b_{k}"], got[f"a_{k}"], err_msg=k)


@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_an_uneven_split_takes_conv_sgd_step_to_rounding(request, runner, tmp_path, backend):
    """S = 5: chunks of 314 products and a last one of 312; the weights moved (the update is
    not empty) and agree with conv_sgd's to float32 rounding of 1568-term sums."""
    got = _run(request, runner, tmp_path, backend, S=5)
    start = _arrays(np.random.default_rng(7))
    for k in STATE:
        assert not np.array_equal(got[f"a_{k}"], start[k]), k
        np.testing.assert_allclose(got[f"b_{k}"], got[f"a_{k}"], rtol=1e-5, atol=2e-5,
                                   err_msg=k)
