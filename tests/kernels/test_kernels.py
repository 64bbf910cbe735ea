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

import pytest

from helpers.case_plans import case_arg, case_steps, mismatches, read_dumps
from helpers.kernel_cases import GROUPS, Case, group_cases
from phonetrain import reference
from phonetrain import runner as runner_api
from phonetrain.kernels import kernels_mentioned, load_version, resolve_sources, stage_kernels
from phonetrain.plan import Plan, Program

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


def build_plan(cases: list[Case], backend: str, version: str, root: Path,
               launch: str = "version") -> Plan:
    """One plan running every case once (no warm-up), each on its own tensors, loaded from
    files in ``root/tensors``; every output tensor is dumped. OpenCL tensors live on the
    device (uploaded at set-up, dumped from the device copy). ``launch="padded"`` rounds each
    global size up to a multiple of :data:`helpers.case_plans.PADDED_LOCAL` and sets that
    local size."""
    kv = load_version(version)
    opencl = backend == "opencl"   # the image version reads GEMM operand B as an image2d_t
    tensors, steps, dumps = case_steps(cases, root, kv, "device" if opencl else "host",
                                       launch == "padded", image_args=opencl)
    programs = []
    if opencl:
        staged = stage_kernels(version, root)
        wanted = {c.kernel for c in cases}
        programs = [Program(name=p.stem, source=f"kernels/{version}/{p.name}", options=kv.options)
                    for p in sorted(staged.glob("*.cl")) if wanted & kernels_mentioned(p)]
    plan = Plan(name=f"kernels/{version}/{backend}", backend=backend, tensors=tensors,
                steps=steps, programs=programs, warmup=0, iterations=1, dumps=dumps)
    plan.validate()
    return plan


@pytest.mark.parametrize("backend,version,group,launch", PARAMS)
def test_kernels_match_numpy(request, runner, tmp_path, backend, version, group, launch):
    cases = group_cases(group)
    root = tmp_path / "bundle"
    plan = build_plan(cases, backend, version, root, launch)
    plan.save(root / "plan.json")
    selector = request.getfixturevalue("pocl") if backend == "opencl" else None
    runner_api.run_plan(runner, root / "plan.json", root, tmp_path / "out",
                        threads=2 if backend == "cpu" else 0, device_selector=selector)
    failures = mismatches(cases, read_dumps(cases, tmp_path / "out"))
    assert not failures, f"{backend}/{version}: " + "\n".join(failures)


@pytest.mark.parametrize("group", list(GROUPS))
def test_reference_agrees_with_oracle(group):
    """phonetrain.reference (the verifier of every run) implements the same ABI semantics."""
    cases = group_cases(group)
    got = {}
    for ci, case in enumerate(cases):
        arrays = {k: v.copy() for k, v in case.arrays.items()}
        names = list(arrays)
        args = [case_arg(a, {n: i for i, n in enumerate(names)}) for a in case.args]
        reference.run_kernel(case.kernel, args, [arrays[n] for n in names])
        got.update({(ci, out): arrays[out] for out in case.outputs})
    failures = mismatches(cases, got)
    assert not failures, "reference: " + "\n".join(failures)
