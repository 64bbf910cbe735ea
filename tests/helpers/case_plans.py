"""Plan steps that run the kernel cases of :mod:`helpers.kernel_cases` (each case once, on its
own tensors loaded from files, every output dumped) and the check of the dumps against each
case's numpy oracle: shared by the OpenCL/CPU kernel tests and the Vulkan shader tests, which
differ only in their programs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from helpers.kernel_cases import Case
from phonetrain.kernels import KernelVersion, bind_args, geometry, kernel_flops, mark_image_args
from phonetrain.plan import Step, Tensor

# The explicit local size of a "padded" launch, by NDRange dimensions: each global size is
# rounded up to a multiple of it, so work-items past the edge must return early.
PADDED_LOCAL = {1: [32], 2: [8, 4]}


def case_arg(a: object, ids: dict[str, int]) -> dict:
    """A plan argument of a case argument: a tensor's name (its id from ``ids``), a float or
    an int."""
    if isinstance(a, str):
        return {"t": ids[a]}
    return {"f": float(a)} if isinstance(a, float) else {"i": int(a)}


def case_steps(cases: list[Case], root: Path, kv: KernelVersion, home: str, padded: bool,
               image_args: bool = False) -> tuple[list[Tensor], list[Step], list[int]]:
    """(tensors, steps, dump ids) running every case once: its arrays written to
    ``root/tensors/c<i>_<name>.bin`` (little-endian) and loaded from there into tensors of
    ``home`` ("device" or "host"), one forward kernel step per case at the version's launch
    geometry (``padded``: a multiple of :data:`PADDED_LOCAL`), every output dumped.
    ``image_args``: GEMM operands the version reads as an image2d_t are marked so."""
    (root / "tensors").mkdir(parents=True, exist_ok=True)
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
                                  dtype="i32" if arr.dtype == np.int32 else "f32", home=home,
                                  init={"kind": "file", "path": f"tensors/{tname}.bin"}))
        args = [case_arg(a, ids) for a in case.args]
        if image_args:
            mark_image_args(case.kernel, args, kv, lambda t: tensors[t].numel)
        bound = bind_args(case.kernel, args)
        glob, local = geometry(case.kernel, bound, kv)
        if padded:
            local = PADDED_LOCAL[len(glob)]
            glob = [-(-g // ls) * ls for g, ls in zip(glob, local)]
        steps.append(Step(op="kernel", name=case.kernel, args=args, global_size=glob,
                          local_size=local, flops=kernel_flops(case.kernel, bound),
                          layer=case.label, phase="forward"))
        dumps += [ids[o] for o in case.outputs]
    return tensors, steps, dumps


def read_dumps(cases: list[Case], out: Path) -> dict[tuple[int, str], np.ndarray]:
    """``{(case index, output name): array}`` from a run's ``out/dumps`` folder."""
    return {(ci, o): np.fromfile(out / "dumps" / f"c{ci}_{o}.f32", dtype=case.expected[o].dtype)
            for ci, case in enumerate(cases) for o in case.outputs}


def mismatches(cases: list[Case], got: dict[tuple[int, str], np.ndarray]) -> list[str]:
    """One line per output that differs from the oracle beyond the case's tolerance (bit for
    bit where the case is exact)."""
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
