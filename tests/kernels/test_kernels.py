"""Every kernel of the ABI (src/kernels/README.md) on both runner backends against numpy.

Each test runs one group of cases (tests/helpers/kernel_cases.py: random data, sizes 1, 3, 16, 17,
31, 784 and other non-multiples of any tile, every GEMM transpose, alpha/beta != 1/0, conv
shapes with stride and padding, pool windows) as a single plan: one runner invocation per
backend x kernel version x group. Outputs come back as dumps and are compared with the
oracle; data-movement kernels must match bit for bit.

To test another kernel version, add its name to :data:`VERSIONS`: its OpenCL programs run the
groups of every ``.cl`` file it defines itself (inherited files are covered by their owner).
The CPU backend has no kernel versions and runs once.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers.kernel_cases import GROUPS, Case, group_cases
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import (bind_args, geometry, kernel_flops, kernels_mentioned,
                                load_version, mark_image_args, resolve_sources, stage_kernels)
from phonetrain.plan import Plan, Program, Step, Tensor

VERSIONS = ["baseline", "tiled", "regblock", "image", "fused"]


def _own_groups(version: str) -> list[str]:
    """Groups whose kernels live in a .cl file the version defines itself."""
    sources = resolve_sources(version)
    own = {k for p in sources.values() if p.parent.name == version for k in kernels_mentioned(p)}
    return [g for g in GROUPS if own & {c.kernel for c in group_cases(g)}]


def _owner(group: str) -> str:
    """The first version of :data:`VERSIONS` that has every kernel of the group."""
    wanted = {c.kernel for c in group_cases(group)}
    return next(v for v in VERSIONS if wanted <= {k for p in resolve_sources(v).values()
                                                  for k in kernels_mentioned(p)})


# Launches: "version" = the version's own geometry; "padded" = global rounded up to a
# multiple of an explicit local size (work-items past the edge must return early).
PARAMS = [pytest.param("cpu", "baseline", g, "version", id=f"cpu-{g}") for g in GROUPS] + [
    pytest.param("opencl", v, g, "version", id=f"opencl-{v}-{g}")
    for v in VERSIONS for g in _own_groups(v)] + [
    pytest.param("opencl", _owner(g), g, "padded", id=f"opencl-{_owner(g)}-{g}-padded")
    for g in GROUPS]
PADDED_LOCAL = {1: [32], 2: [8, 4]}


def _arg(a: object, ids: dict[str, int]) -> dict:
    if isinstance(a, str):
        return {"t": ids[a]}
    return {"f": float(a)} if isinstance(a, float) else {"i": int(a)}


def build_plan(cases: list[Case], backend: str, version: str, root: Path,
               launch: str = "version") -> Plan:
    """One plan running every case once (no warm-up), each on its own tensors, loaded from
    files in ``root/tensors``; every output tensor is dumped. OpenCL tensors live on the
    device (uploaded at set-up, dumped from the device copy). ``launch="padded"`` rounds each
    global size up to a multiple of :data:`PADDED_LOCAL` and sets that local size."""
    (root / "tensors").mkdir(parents=True, exist_ok=True)
    kv = load_version(version)
    tensors: list[Tensor] = []
    steps: list[Step] = []
    dumps: list[int] = []
    for ci, case in enumerate(cases):
        ids = {}
        for name, arr in case.arrays.items():
            tname = f"c{ci}_{name}"
            (root / "tensors" / f"{tname}.bin").write_bytes(
                arr.astype(arr.dtype.newbyteorder("<")).tobytes())
            ids[name] = len(tensors)
            tensors.append(Tensor(id=len(tensors), name=tname, shape=[arr.size], role="scratch",
                                  dtype="i32" if arr.dtype == np.int32 else "f32",
                                  home="device" if backend == "opencl" else "host",
                                  init={"kind": "file", "path": f"tensors/{tname}.bin"}))
        args = [_arg(a, ids) for a in case.args]
        if backend == "opencl":   # the image version reads GEMM operand B as an image2d_t
            mark_image_args(case.kernel, args, kv, lambda t: tensors[t].numel)
        bound = bind_args(case.kernel, args)
        glob, local = geometry(case.kernel, bound, kv)
        if launch == "padded":
            local = PADDED_LOCAL[len(glob)]
            glob = [-(-g // ls) * ls for g, ls in zip(glob, local)]
        steps.append(Step(op="kernel", name=case.kernel, args=args, global_size=glob,
                          local_size=local, flops=kernel_flops(case.kernel, bound),
                          layer=case.label, phase="forward"))
        dumps += [ids[o] for o in case.outputs]
    programs = []
    if backend == "opencl":
        staged = stage_kernels(version, root)
        wanted = {c.kernel for c in cases}
        programs = [Program(name=p.stem, source=f"kernels/{version}/{p.name}", options=kv.options)
                    for p in sorted(staged.glob("*.cl")) if wanted & kernels_mentioned(p)]
    plan = Plan(name=f"kernels/{version}/{backend}", backend=backend, tensors=tensors,
                steps=steps, programs=programs, warmup=0, iterations=1, dumps=dumps)
    plan.validate()
    return plan


def _mismatches(cases: list[Case], got: dict[tuple[int, str], np.ndarray]) -> list[str]:
    """One line per output that differs from the oracle beyond the case's tolerance."""
    failures = []
    for ci, case in enumerate(cases):
        for out in case.outputs:
            want = case.expected[out]
            try:
                if case.exact:
                    np.testing.assert_array_equal(got[ci, out], want)
                else:
                    np.testing.assert_allclose(got[ci, out], want, rtol=case.rtol, atol=case.atol)
            except AssertionError as e:
                failures.append(f"{case.label} ({out}): {str(e).strip().splitlines()[:4]}")
    return failures


@pytest.mark.parametrize("backend,version,group,launch", PARAMS)
def test_kernels_match_numpy(request, runner, tmp_path, backend, version, group, launch):
    cases = group_cases(group)
    root = tmp_path / "bundle"
    plan = build_plan(cases, backend, version, root, launch)
    plan.save(root / "plan.json")
    selector = request.getfixturevalue("pocl") if backend == "opencl" else None
    runner_api.run_plan(runner, root / "plan.json", root, tmp_path / "out",
                        threads=2 if backend == "cpu" else 0, device_selector=selector)
    dumps = tmp_path / "out" / "dumps"
    got = {(ci, out): np.fromfile(dumps / f"c{ci}_{out}.f32", dtype=case.expected[out].dtype)
           for ci, case in enumerate(cases) for out in case.outputs}
    failures = _mismatches(cases, got)
    assert not failures, f"{backend}/{version}: " + "\n".join(failures)


@pytest.mark.parametrize("group", list(GROUPS))
def test_reference_agrees_with_oracle(group):
    """phonetrain.reference (the verifier of every run) implements the same ABI semantics."""
    cases = group_cases(group)
    got = {}
    for ci, case in enumerate(cases):
        arrays = {k: v.copy() for k, v in case.arrays.items()}
        names = list(arrays)
        args = [_arg(a, {n: i for i, n in enumerate(names)}) for a in case.args]
        reference.run_kernel(case.kernel, args, [arrays[n] for n in names])
        got.update({(ci, out): arrays[out] for out in case.outputs})
    failures = _mismatches(cases, got)
    assert not failures, "reference: " + "\n".join(failures)
