"""Launch geometry: the registry of named rules that give each launch its global and local
NDRange, and the helpers of the image operand.

A kernel version names its rule in ``version.yaml`` (key ``geometry``, inherited; default
``baseline``). :func:`geometry` applies that rule; a rule returns ``None`` for the kernels it
does not handle, which then get the ``baseline`` rule. Rules read the version's merged
``defines`` and ``local_sizes`` (``version.yaml``, or the tuned values of a
``tuning/<class>.json`` applied by :func:`phonetrain.kernels.tuning.candidate_version`), round
the global size up to whole work-groups and return the work-group as the local size. Every size
is in work-items, ``[dim0, dim1]`` with ``dim0`` the fastest-varying (N for GEMM).

Rules (the formulas of each kernel's banner comment and README):

- ``baseline``: the ABI's one work-item per output (:func:`phonetrain.kernels.abi.baseline_global`);
  local = ``local_sizes[kernel]`` when set (global rounded up to a multiple of it), else
  ``None`` (the driver's choice), but ``[REDUCE_LOCAL]`` for the reductions that take one
  work-group per output (:data:`phonetrain.kernels.abi.REDUCTION_KERNELS`); a reduction's
  ``local_sizes`` entry sets its work-group size, the global size keeping one work-group per
  output.
- ``tiled``: local = ``[TSN/WPTN, TSM/WPTM]``;
  global = ``[ceil(N/TSN)*TSN/WPTN, ceil(M/TSM)*TSM/WPTM]``.
- ``regblock``: local = ``local_sizes[gemm_*]`` (default ``[8, 8]``);
  global = ``[ceil(ceil(N/RN)/LX)*LX, ceil(ceil(M/RM)/LY)*LY]``.
- ``image``: the ``regblock`` rule with ``RN`` = 4 (one RGBA pixel of columns per work-item).

Image operand: a version whose ``version.yaml`` sets ``image_operand: B`` reads that GEMM
operand through an ``image2d_t``; :func:`mark_image_args` adds the width of the runner's image
view (:func:`image_width4`) to that plan argument (``{"t": id, "image_width4": W}``, see
:mod:`phonetrain.plan`).

This module knows versions only through the attributes it reads (:class:`VersionView`), so it
depends on :mod:`phonetrain.kernels.abi` alone and :mod:`phonetrain.kernels.versions` can
validate rule names against :data:`RULES`.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Protocol

from .abi import (GEMM_KERNELS, REDUCE_LOCAL, REDUCTION_KERNELS, arg_position,
                  baseline_global)

IMAGE_MAX_WIDTH4 = 1024       # pixels per image row: 4096 floats; 8192 (the OpenCL 1.2 full
                              # profile's minimum image2d height) rows hold 32 Mi floats


class VersionView(Protocol):
    """What launch geometry reads of a kernel version
    (:class:`phonetrain.kernels.versions.KernelVersion` has these attributes)."""

    name: str
    geometry: str
    defines: dict[str, object]
    local_sizes: dict[str, list[int]]
    image_operand: str | None


Launch = tuple[list[int], list[int] | None]
Rule = Callable[[str, dict, VersionView], Launch | None]

_RULES: dict[str, Rule] = {}
RULES: Mapping[str, Rule] = _RULES   # read-only view: rule name -> rule


def register_geometry(rule_name: str) -> Callable[[Rule], Rule]:
    """Decorator: register ``rule(kernel_name, dims, version) -> (global, local) | None`` under
    ``rule_name``, the value a ``version.yaml`` gives its ``geometry`` key. A rule returns
    ``None`` for kernels it does not handle (the ``baseline`` rule then applies). Registering
    an existing name replaces that rule."""
    def deco(rule: Rule) -> Rule:
        _RULES[rule_name] = rule
        return rule
    return deco


def geometry(kernel_name: str, dims: dict, version: VersionView) -> Launch:
    """Global and local NDRange of one launch (work-items per dimension; local ``None`` = the
    driver's choice): the rule ``version.geometry`` names, else the ``baseline`` rule.

    ``dims`` holds the launch's named int args (:func:`phonetrain.kernels.abi.bind_args`).
    Raises ``KeyError`` for a rule name nobody registered (``load_version`` rejects those) and
    ``ValueError`` naming the version when its defines or local sizes do not fit the rule.
    """
    rule = _RULES.get(version.geometry)
    if rule is None:
        raise KeyError(f"kernel version {version.name}: no launch-geometry rule "
                       f"{version.geometry!r} (registered: {', '.join(sorted(_RULES))})")
    got = rule(kernel_name, dims, version)
    return got if got is not None else baseline_geometry(kernel_name, dims, version)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _ints(version: VersionView, keys: tuple[str, ...]) -> list[int]:
    """The named defines as positive ints; ``ValueError`` naming the version and key."""
    out = []
    for k in keys:
        if k not in version.defines:
            raise ValueError(f"kernel version {version.name}: define {k} is missing; set it "
                             f"under defines: in src/kernels/{version.name}/version.yaml")
        v = int(version.defines[k])
        if v < 1:
            raise ValueError(f"kernel version {version.name}: define {k}={v} must be >= 1")
        out.append(v)
    return out


@register_geometry("baseline")
def baseline_geometry(name: str, dims: dict, version: VersionView) -> Launch:
    """The ABI global size; ``local`` from the version's ``local_sizes`` (global then rounded
    up to a multiple of it per dimension), else ``None``. ``ValueError`` when the local size
    has fewer dimensions than the kernel's NDRange."""
    glob = baseline_global(name, dims)
    local = version.local_sizes.get(name)
    if local is None:
        return glob, ([REDUCE_LOCAL] + [1] * (len(glob) - 1)
                      if name in REDUCTION_KERNELS else None)
    local = [int(x) for x in local][: len(glob)]
    if len(local) != len(glob):
        raise ValueError(f"kernel version {version.name}: local_sizes.{name} has "
                         f"{len(local)} dims, the kernel's NDRange has {len(glob)}")
    if name in REDUCTION_KERNELS:   # one work-group per output, whatever its size
        glob = [glob[0] // REDUCE_LOCAL * local[0], *glob[1:]]
    return [math.ceil(gs / ls) * ls for gs, ls in zip(glob, local)], local


@register_geometry("tiled")
def tiled_geometry(name: str, dims: dict, version: VersionView) -> Launch | None:
    """Work-group = one TSM x TSN tile of C; each work-item owns WPTM x WPTN outputs.
    ``ValueError`` unless TSM is a multiple of WPTM and TSN of WPTN."""
    if name not in GEMM_KERNELS:
        return None
    tsm, tsn, wptm, wptn = _ints(version, ("TSM", "TSN", "WPTM", "WPTN"))
    if tsm % wptm or tsn % wptn:
        raise ValueError(f"kernel version {version.name}: TSM={tsm} must be a multiple of "
                         f"WPTM={wptm} and TSN={tsn} of WPTN={wptn}")
    local = [tsn // wptn, tsm // wptm]
    return [_cdiv(int(dims["N"]), tsn) * local[0], _cdiv(int(dims["M"]), tsm) * local[1]], local


@register_geometry("regblock")
def regblock_geometry(name: str, dims: dict, version: VersionView) -> Launch | None:
    """One work-item per RM x RN block of C; work-group from ``local_sizes`` (default 8x8)."""
    if name not in GEMM_KERNELS:
        return None
    rm, rn = _ints(version, ("RM", "RN"))
    local = [int(x) for x in version.local_sizes.get(name, [8, 8])]
    glob = [_cdiv(_cdiv(int(dims["N"]), rn), local[0]) * local[0],
            _cdiv(_cdiv(int(dims["M"]), rm), local[1]) * local[1]]
    return glob, local


@register_geometry("image")
def image_geometry(name: str, dims: dict, version: VersionView) -> Launch | None:
    """The regblock rule; ``ValueError`` unless ``RN`` is 4 (the kernel reads one RGBA pixel
    of columns)."""
    if name in GEMM_KERNELS and int(version.defines.get("RN", 4)) != 4:
        raise ValueError(f"kernel version {version.name}: define RN={version.defines['RN']} "
                         f"must be 4 (the image rule: one RGBA pixel of columns)")
    return regblock_geometry(name, dims, version)


# ---------------------------------------------------------------- image operand

def image_width4(numel: int) -> int:
    """Pixels per row of the image view of a tensor of ``numel`` floats (4 floats a pixel):
    ``min(ceil(numel / 4), IMAGE_MAX_WIDTH4)``, at least 1. The runner pads the tensor's
    buffer to whole rows (zeros)."""
    return max(1, min(_cdiv(int(numel), 4), IMAGE_MAX_WIDTH4))


def reads_image(name: str, version: VersionView) -> bool:
    """True when ``version``'s kernel ``name`` takes a GEMM operand as an image2d_t (the
    version's ``image_operand``)."""
    return name in GEMM_KERNELS and version.image_operand is not None


def mark_image_args(name: str, args: list[dict], version: VersionView,
                    numel: Callable[[int], int]) -> None:
    """Add ``image_width4`` to the plan argument of the version's ``image_operand`` (operand
    ``B`` is position 5 of the ABI's ``M, N, K, alpha, A, B, beta, C``) when ``version`` reads
    it as an image; ``numel(tensor id)`` gives the tensor's element count. Other kernels and
    versions are left unchanged."""
    if reads_image(name, version):
        a = args[arg_position(name, str(version.image_operand))]
        a["image_width4"] = image_width4(numel(int(a["t"])))
