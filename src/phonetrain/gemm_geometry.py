"""Launch geometry of the optimized GEMM kernel versions (``tiled``, ``regblock``).

Registered with :func:`phonetrain.kernels.register_geometry`, so every version inheriting one
of these gets its rule too. Each rule reads the version's merged ``defines`` (from
``version.yaml``, or the tuned values of ``tuning.json``), rounds the global size up to whole
tiles and returns the tile's work-group as the local size. Non-GEMM kernels fall through to the
baseline rule (return ``None``).

Formulas (kernel sources document the same):

- tiled:    local = [TSN/WPTN, TSM/WPTM];  global = [ceil(N/TSN)*TSN/WPTN, ceil(M/TSM)*TSM/WPTM]
- regblock: local = local_sizes[gemm_*] (default [8, 8]);
            global = [ceil(ceil(N/RN)/LX)*LX, ceil(ceil(M/RM)/LY)*LY]
"""

from __future__ import annotations

from phonetrain.kernels import KernelVersion, register_geometry

GEMM_KERNELS = ("gemm_nn", "gemm_nt", "gemm_tn")


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
