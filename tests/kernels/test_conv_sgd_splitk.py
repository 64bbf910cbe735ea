"""The split-K pairs of conv_sgd and gconv_sgd (src/kernels/README.md, "Fused kernels", split
K) through the real runner: with one chunk (S = 1), the partial-sum kernel + the finish give
the unsplit kernel's weights and momenta (and biases) bit for bit -- the same sums in the same
order -- on PoCL and on the CPU backend (its conv_sgd, summed through the GEMM engine, to
rounding); with an uneven last chunk, the same step to rounding.
The kernels against the oracle at more shapes are in tests/helpers/kernel_cases.py ("fused")
and kernel_cases_bn.py ("fused_bn")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phonetrain import runner as runner_api
from phonetrain.kernels import (KERNEL_ARGS, bind_args, geometry, kernel_flops,
                                kernels_mentioned, load_version, stage_kernels)
from phonetrain.plan import Plan, Program, Step, Tensor

VERSION = "fused"
HYPER = [0.05, 0.9, 5e-4]
# Per family: the unsplit kernel, the pair, the sizes (LeNet-5's conv1 at batch 2: 1568
# products per sum; a grouped 3x3 convolution, 2 groups: 162), the state it steps.
FAMILIES = {
    "conv": ("conv_sgd", "conv_wgrad_partial", "conv_sgd_finish",
             [2, 1, 28, 28, 6, 5, 5, 1, 2, 28, 28], ("weight", "V", "bias", "Vb")),
    "gconv": ("gconv_sgd", "gconv_wgrad_partial", "gconv_sgd_finish",
              [2, 4, 9, 9, 6, 3, 3, 1, 1, 9, 9, 2], ("weight", "V")),
}


def _arrays(family: str) -> dict[str, np.ndarray]:
    dims, state = FAMILIES[family][3], FAMILIES[family][4]
    B, C, H, W, OC, KH, KW, _, _, OH, OW = dims[:11]
    groups = dims[11] if len(dims) > 11 else 1
    rng = np.random.default_rng(7)
    r = lambda k: rng.uniform(-1, 1, k).astype(np.float32)  # noqa: E731
    n = OC * C // groups * KH * KW
    out = {"X": r(B * C * H * W), "dY": r(B * OC * OH * OW), "weight": r(n), "V": r(n)}
    if "bias" in state:
        out.update(bias=r(OC), Vb=r(OC))
    return out


def _plan(root: Path, backend: str, family: str, S: int) -> Plan:
    """Two copies of one layer's state on the same X and dY: copy ``a`` stepped by the unsplit
    kernel, copy ``b`` by the partial sums (``S`` chunks) + the finish; both copies dumped."""
    unsplit, partial, finish, dims, state = FAMILIES[family]
    (root / "tensors").mkdir(parents=True, exist_ok=True)
    kv = load_version(VERSION)
    data = _arrays(family)
    tensors: list[Tensor] = []

    def tensor(name: str, arr: np.ndarray) -> int:
        (root / "tensors" / f"{name}.bin").write_bytes(arr.astype("<f4").tobytes())
        tensors.append(Tensor(id=len(tensors), name=name, shape=[arr.size], role="scratch",
                              home="device" if backend == "opencl" else "host",
                              init={"kind": "file", "path": f"tensors/{name}.bin"}))
        return len(tensors) - 1

    x, dy = tensor("X", data["X"]), tensor("dY", data["dY"])
    a = [tensor(f"a_{k}", data[k]) for k in state]
    b = [tensor(f"b_{k}", data[k]) for k in state]
    B, C, _, _, OC, KH, KW = dims[:7]
    groups = dims[11:]   # [groups] for gconv, [] for conv
    sums = OC * (C // (groups[0] if groups else 1) * KH * KW + (0 if groups else 1))
    part = tensor("part", np.full(S * sums, np.nan, np.float32))
    calls = [(unsplit, dims + HYPER + [x, dy, *a]), (partial, dims + [S, x, dy, part]),
             (finish, [C, OC, KH, KW, *groups, S] + HYPER + [part, *b])]
    steps = []
    for name, values in calls:
        args = [{"t": v} if kind[0] in "rw" else {"f": v} if kind == "f" else {"i": v}
                for v, kind in zip(values, (s.split(":")[0] for s in KERNEL_ARGS[name]),
                                   strict=True)]
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
                    for p in sorted(staged.glob("*.cl")) if finish in kernels_mentioned(p)]
    plan = Plan(name=f"splitk/{backend}", backend=backend, tensors=tensors, steps=steps,
                programs=programs, warmup=0, iterations=1, dumps=a + b)
    plan.validate()
    return plan


def _run(request, runner, tmp_path: Path, backend: str, family: str,
         S: int) -> dict[str, np.ndarray]:
    root = tmp_path / "bundle"
    _plan(root, backend, family, S).save(root / "plan.json")
    selector = request.getfixturevalue("pocl") if backend == "opencl" else None
    runner_api.run_plan(runner, root / "plan.json", root, tmp_path / "out",
                        threads=2 if backend == "cpu" else 0, device_selector=selector)
    dumps = tmp_path / "out" / "dumps"
    return {f"{c}_{k}": np.fromfile(dumps / f"{c}_{k}.f32", dtype=np.float32)
            for c in "ab" for k in FAMILIES[family][4]}


@pytest.mark.parametrize("family,backend", [("conv", "opencl"), ("gconv", "opencl"),
                                            ("gconv", "cpu")])
def test_one_chunk_is_the_unsplit_kernel_bit_for_bit(request, runner, tmp_path, backend,
                                                     family):
    got = _run(request, runner, tmp_path, backend, family, S=1)
    for k in FAMILIES[family][4]:
        np.testing.assert_array_equal(got[f"b_{k}"], got[f"a_{k}"], err_msg=k)


def test_one_chunk_is_the_cpu_conv_sgd_to_rounding(request, runner, tmp_path):
    """The CPU backend's conv_sgd sums its weight gradient chunk of images by chunk of images
    through the GEMM engine (src/runner/cpu_fused.c), not in the partial kernel's output
    order, so with S = 1 the two agree to float32 rounding (their biases bit for bit: both
    add dY's images, then positions, in order)."""
    got = _run(request, runner, tmp_path, "cpu", "conv", S=1)
    for k in FAMILIES["conv"][4]:
        if k in ("bias", "Vb"):
            np.testing.assert_array_equal(got[f"b_{k}"], got[f"a_{k}"], err_msg=k)
        else:
            np.testing.assert_allclose(got[f"b_{k}"], got[f"a_{k}"], rtol=1e-5, atol=2e-5,
                                       err_msg=k)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_an_uneven_split_takes_the_same_step_to_rounding(request, runner, tmp_path, backend,
                                                         family):
    """S = 5: conv's 1568 products in chunks of 314 and a last one of 312, gconv's 162 in 33
    and 30; the state moved (the update is not empty) and agrees with the unsplit kernel's to
    float32 rounding."""
    got = _run(request, runner, tmp_path, backend, family, S=5)
    start = _arrays(family)
    for k in FAMILIES[family][4]:
        assert not np.array_equal(got[f"a_{k}"], start[k]), k
        np.testing.assert_allclose(got[f"b_{k}"], got[f"a_{k}"], rtol=1e-5, atol=2e-5,
                                   err_msg=k)
