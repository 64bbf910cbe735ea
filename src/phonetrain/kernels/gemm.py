"""GEMM calls and the runner's ``bench-gemm`` spec for a kernel version.

:func:`gemm_spec` turns a kernel version and a list of :class:`GemmShape` into the runner's
bench-gemm spec (launch geometry from :func:`phonetrain.kernels.launch.geometry`, so tuned
defines and local sizes apply exactly as in training plans). The runner driver runs it
(:meth:`phonetrain.runner.Runner.bench_gemm`); the method (checked launch, warm-up,
calibration to ``min_time_ms``, median of repeats, host clock around whole calls) is documented
in ``src/runner/bench_gemm.c``. Only PyYAML is needed (no Hydra), so the GEMM benchmark runs on
bare hosts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from .abi import GEMM_KERNELS
from .launch import IMAGE_MAX_WIDTH4, geometry
from .spirv import spec_options
from .versions import KERNELS_ROOT, KernelVersion, KernelVersionError


@dataclass(frozen=True)
class GemmShape:
    """One GEMM call: ``kernel`` in :data:`GEMM_KERNELS`, C is ``M x N``, inner size ``K``."""

    kernel: str
    M: int
    N: int
    K: int

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K


def square_shapes(sizes: Iterable[int], kernels: Iterable[str] = ("gemm_nn",)) -> list[GemmShape]:
    """``M = N = K = n`` shapes for each size and kernel."""
    return [GemmShape(k, n, n, n) for n in sizes for k in kernels]


def plan_shapes(plan) -> list[GemmShape]:
    """The distinct GEMM calls of a lowered :class:`~phonetrain.plan.Plan`, in plan order."""
    out: list[GemmShape] = []
    for s in plan.steps:
        if s.op == "kernel" and s.name in GEMM_KERNELS:
            m, n, k = (int(a["i"]) for a in s.args[:3])
            g = GemmShape(s.name, m, n, k)
            if g not in out:
                out.append(g)
    return out


def gemm_spec(version: KernelVersion | None, shapes: list[GemmShape], *, source: str = "",
              backend: str = "opencl", min_time_ms: float = 100, repeats: int = 5,
              threads: int = 0, seed: int = 1) -> dict[str, Any]:
    """The runner's bench-gemm spec (JSON layout: ``src/runner/bench_gemm.c``).

    ``version`` None with ``backend="cpu"`` benchmarks the runner's CPU GEMM; with
    ``backend="vulkan"`` ``source`` is the folder of the version's SPIR-V as the runner will
    see it and ``options`` its specialization constants
    (:func:`phonetrain.kernels.spirv.spec_options`): a spec that
    :func:`phonetrain.kernels.vk_gemm.gemm_plan` turns into a plan (the runner's bench-gemm
    mode has no Vulkan path); a version with a ``gemm_library`` routes to that library (the
    spec's ``source`` is the library's reserved name, no build options); otherwise
    ``source`` is the path of the version's ``gemm.cl`` as the runner will see it. A version
    whose ``image_operand`` is B reads B through an
    image2d_t (``b_image_width4``: the view's maximum width, pixels). Raises ``ValueError``
    when the version's defines do not fit its geometry rule or its image operand is not B.
    """
    if backend == "cpu" or version is None:
        return {"backend": "cpu", "threads": threads, "source": "", "options": "",
                "min_time_ms": min_time_ms, "repeats": repeats, "seed": seed,
                "cases": [{"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K} for g in shapes]}
    library = version.gemm_library
    image = version.image_operand is not None
    if image and version.image_operand != "B":
        raise ValueError(f"kernel version {version.name}: image_operand "
                         f"{version.image_operand}: bench-gemm binds only operand B as an image")
    cases = []
    for g in shapes:
        glob, local = geometry(g.kernel, {"M": g.M, "N": g.N, "K": g.K}, version)
        cases.append({"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "global": glob,
                      "local": local})
    if backend == "vulkan":
        return {"backend": "vulkan", "source": source, "options": spec_options(version),
                "min_time_ms": min_time_ms, "repeats": repeats, "seed": seed, "cases": cases}
    return {"backend": "opencl", "source": library or source,
            "options": "" if library else version.options, "min_time_ms": min_time_ms,
            "repeats": repeats, "seed": seed, "cases": cases,
            **({"b_image_width4": IMAGE_MAX_WIDTH4} if image else {})}


def gemm_source(version: KernelVersion, kernels_root: Path = KERNELS_ROOT) -> Path:
    """The version's ``gemm.cl``: the nearest one along its inheritance chain. Raises
    :class:`~phonetrain.kernels.versions.KernelVersionError` when none has one."""
    for v in version.chain:
        p = Path(kernels_root) / v / "gemm.cl"
        if p.exists():
            return p
    raise KernelVersionError(f"kernel version {version.name}: no gemm.cl in {version.chain}")
