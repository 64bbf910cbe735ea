"""Launch geometry of the optimized GEMM kernel versions (``tiled``, ``regblock``, ``image``).

Registered with :func:`phonetrain.kernels.register_geometry`, so every version inheriting one
of these gets its rule too. Each rule reads the version's merged ``defines`` (from
``version.yaml``, or the tuned values of ``tuning.json``), rounds the global size up to whole
tiles and returns the tile's work-group as the local size. Non-GEMM kernels fall through to the
baseline rule (return ``None``).

Formulas (kernel sources document the same):

- tiled:    local = [TSN/WPTN, TSM/WPTM];  global = [ceil(N/TSN)*TSN/WPTN, ceil(M/TSM)*TSM/WPTM]
- regblock: local = local_sizes[gemm_*] (default [8, 8]);
            global = [ceil(ceil(N/RN)/LX)*LX, ceil(ceil(M/RM)/LY)*LY]
- image:    the regblock rule with RN = 4 (one RGBA pixel of columns per work-item).

The ``image`` version also reads GEMM operand B through an image2d_t: :func:`image_width4`
gives the width of the runner's image view of a tensor (plan argument
``{"t": id, "image_width4": W}``, see :mod:`phonetrain.plan`).
"""

from __future__ import annotations

from typing import Callable

from phonetrain.kernels import KernelVersion, register_geometry

GEMM_KERNELS = ("gemm_nn", "gemm_nt", "gemm_tn")
IMAGE_VERSION = "image"       # versions inheriting it read GEMM operand B as an image
IMAGE_MAX_WIDTH4 = 1024       # pixels per image row: 4096 floats; 8192 (the OpenCL 1.2 full
                              # profile's minimum image2d height) rows hold 32 Mi floats


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _ints(version: KernelVersion, keys: tuple[str, ...]) -> list[int]:
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


@register_geometry("tiled")
def tiled_geometry(name: str, dims: dict, version: KernelVersion
                   ) -> tuple[list[int], list[int]] | None:
    """Work-group = one TSM x TSN tile of C; each work-item owns WPTM x WPTN outputs."""
    if name not in GEMM_KERNELS:
        return None
    tsm, tsn, wptm, wptn = _ints(version, ("TSM", "TSN", "WPTM", "WPTN"))
    if tsm % wptm or tsn % wptn:
        raise ValueError(f"kernel version {version.name}: TSM={tsm} must be a multiple of "
                         f"WPTM={wptm} and TSN={tsn} of WPTN={wptn}")
    local = [tsn // wptn, tsm // wptm]
    return [_cdiv(int(dims["N"]), tsn) * local[0], _cdiv(int(dims["M"]), tsm) * local[1]], local


@register_geometry("regblock")
def regblock_geometry(name: str, dims: dict, version: KernelVersion
                      ) -> tuple[list[int], list[int]] | None:
    """One work-item per RM x RN block of C; work-group from ``local_sizes`` (default 8x8)."""
    if name not in GEMM_KERNELS:
        return None
    rm, rn = _ints(version, ("RM", "RN"))
    local = [int(x) for x in version.local_sizes.get(name, [8, 8])]
    glob = [_cdiv(_cdiv(int(dims["N"]), rn), local[0]) * local[0],
            _cdiv(_cdiv(int(dims["M"]), rm), local[1]) * local[1]]
    return glob, local


@register_geometry("image")
def image_geometry(name: str, dims: dict, version: KernelVersion
                   ) -> tuple[list[int], list[int]] | None:
    """The regblock rule; ``RN`` must be 4 (the kernel reads one RGBA pixel of columns)."""
    if name in GEMM_KERNELS and int(version.defines.get("RN", 4)) != 4:
        raise ValueError(f"kernel version {version.name}: define RN={version.defines['RN']} "
                         f"must be 4 (src/kernels/image/README.md)")
    return regblock_geometry(name, dims, version)


def image_width4(numel: int) -> int:
    """Pixels per row of the image view of a tensor of ``numel`` floats (4 floats a pixel):
    ``min(ceil(numel / 4), IMAGE_MAX_WIDTH4)``. The runner pads the tensor's buffer to whole
    rows (zeros)."""
    return max(1, min(_cdiv(int(numel), 4), IMAGE_MAX_WIDTH4))


def reads_image(name: str, version: KernelVersion) -> bool:
    """True when ``version``'s kernel ``name`` takes operand B as an image2d_t."""
    return name in GEMM_KERNELS and IMAGE_VERSION in version.chain


def mark_image_args(name: str, args: list[dict], version: KernelVersion,
                    numel: Callable[[int], int]) -> None:
    """Add ``image_width4`` to the plan argument of GEMM operand B (position 5 of the ABI's
    ``M, N, K, alpha, A, B, beta, C``) when ``version`` reads it as an image; ``numel(tensor
    id)`` gives the tensor's element count. Other kernels and versions are left unchanged."""
    if reads_image(name, version):
        b = args[5]
        b["image_width4"] = image_width4(numel(int(b["t"])))
