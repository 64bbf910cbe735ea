"""Kernel versions and the kernel ABI table: signatures, FLOP rules, launch geometry.

A kernel version is a folder ``src/kernels/<version>/`` of ``.cl`` files plus an optional
``version.yaml``::

    inherits: baseline          # another version supplies the files this one lacks
    build_options: "-cl-fast-relaxed-math"
    defines: {TS: 16}           # passed as -DTS=16
    local_sizes: {gemm_nn: [16, 16]}

A version's ``.cl`` file replaces the inherited file of the same name. Launch geometry
(global/local NDRange per kernel) is pluggable: :func:`register_geometry` installs a rule for
a version (inherited by versions that inherit it); the default rule is the ABI's baseline of
one work-item per output (``src/kernels/README.md``).
"""

from __future__ import annotations

import hashlib
import math
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from phonetrain.errors import PhonetrainError


KERNELS_ROOT = Path(__file__).resolve().parents[2] / "kernels"

# Kernel ABI (src/kernels/README.md): argument names in order. Prefix i: int, f: float,
# r: buffer read, w: buffer written, rw: buffer read and written. The C of gemm_* is "w" when
# beta == 0 (see buffer_access).
KERNEL_ARGS: dict[str, tuple[str, ...]] = {
    "gemm_nn": ("i:M", "i:N", "i:K", "f:alpha", "r:A", "r:B", "f:beta", "rw:C"),
    "gemm_nt": ("i:M", "i:N", "i:K", "f:alpha", "r:A", "r:B", "f:beta", "rw:C"),
    "gemm_tn": ("i:M", "i:N", "i:K", "f:alpha", "r:A", "r:B", "f:beta", "rw:C"),
    "bias_add": ("i:B", "i:C", "i:HW", "rw:Y", "r:bias"),
    "bias_grad": ("i:B", "i:C", "i:HW", "r:dY", "w:db"),
    "relu_fwd": ("i:n", "r:X", "w:Y"),
    "relu_bwd": ("i:n", "r:Y", "r:dY", "w:dX"),
    "im2col": ("i:B", "i:C", "i:H", "i:W", "i:KH", "i:KW", "i:stride", "i:pad", "i:OH",
               "i:OW", "r:X", "w:col"),
    "col2im": ("i:B", "i:C", "i:H", "i:W", "i:KH", "i:KW", "i:stride", "i:pad", "i:OH",
               "i:OW", "r:col", "w:dX"),
    "swap01": ("i:D0", "i:D1", "i:D2", "r:X", "w:Y"),
    "maxpool_fwd": ("i:B", "i:C", "i:H", "i:W", "i:K", "i:stride", "i:OH", "i:OW", "r:X",
                    "w:Y", "w:argmax"),
    "maxpool_bwd": ("i:B", "i:C", "i:H", "i:W", "i:K", "i:stride", "i:OH", "i:OW", "r:dY",
                    "r:argmax", "w:dX"),
    "softmax_xent": ("i:B", "i:C", "r:logits", "r:labels", "w:dlogits", "w:row_loss"),
    "mean": ("i:n", "r:X", "w:out"),
    "sgd_update": ("i:n", "f:lr", "f:momentum", "f:weight_decay", "rw:W", "r:dW", "rw:V"),
    "fill": ("i:n", "f:value", "w:X"),
    "copy": ("i:n", "r:X", "w:Y"),
}


def bind_args(name: str, args: list[dict]) -> dict[str, object]:
    """Map a plan's positional kernel args to ABI names: ``{"M": 32, ..., "A": tensor_id}``.

    Raises ``ValueError`` naming the kernel on an unknown name or a wrong count/kind.
    """
    if name not in KERNEL_ARGS:
        raise ValueError(f"kernel {name!r} is not in the kernel ABI (src/kernels/README.md)")
    spec = KERNEL_ARGS[name]
    if len(args) != len(spec):
        raise ValueError(f"kernel {name}: {len(args)} args, the ABI has {len(spec)}")
    out: dict[str, object] = {}
    for a, s in zip(args, spec):
        kind, aname = s.split(":")
        key = kind if kind in ("i", "f") else "t"
        if key not in a:
            raise ValueError(f"kernel {name}: argument {aname} must be {{{key!r}: ...}}, got {a}")
        out[aname] = a[key]
    return out


def buffer_access(name: str, bound: dict[str, object]) -> dict[str, str]:
    """``{arg name: "r"|"w"|"rw"}`` for the buffer args of a bound kernel call."""
    out = {}
    for s in KERNEL_ARGS[name]:
        kind, aname = s.split(":")
        if kind in ("r", "w", "rw"):
            if aname == "C" and name.startswith("gemm") and bound["beta"] == 0:
                kind = "w"
            out[aname] = kind
    return out


def kernel_flops(name: str, d: dict[str, object]) -> int:
    """FLOPs of one launch (``d`` from :func:`bind_args`).

    GEMM ``2*M*N*K`` (2 x MACs); one FLOP per output for ``bias_add``, ``relu_fwd``,
    ``relu_bwd``, one per summed input for ``bias_grad``, ``mean`` and ``col2im`` (its
    ``C*KH*KW*B*OH*OW`` column entries), ``K*K`` comparisons per ``maxpool_fwd`` output, one add
    per ``maxpool_bwd`` input gradient, ``5*B*C`` for ``softmax_xent`` (README), ``sgd_update``
    ``4*n`` with momentum else ``2*n``. Pure data movement (``im2col``, ``swap01``, ``copy``,
    ``fill``) is 0.
    """
    g = lambda k: int(d[k])  # noqa: E731
    if name.startswith("gemm"):
        return 2 * g("M") * g("N") * g("K")
    if name in ("bias_add", "bias_grad"):
        return g("B") * g("C") * g("HW")
    if name in ("relu_fwd", "relu_bwd", "mean"):
        return g("n")
    if name == "col2im":
        return g("C") * g("KH") * g("KW") * g("B") * g("OH") * g("OW")
    if name == "maxpool_fwd":
        return g("B") * g("C") * g("OH") * g("OW") * g("K") * g("K")
    if name == "maxpool_bwd":
        return g("B") * g("C") * g("OH") * g("OW")
    if name == "softmax_xent":
        return 5 * g("B") * g("C")
    if name == "sgd_update":
        return (4 if float(d["momentum"]) != 0 else 2) * g("n")
    return 0


# ---------------------------------------------------------------- launch geometry

Geometry = Callable[[str, dict, "KernelVersion"], tuple[list[int], list[int] | None]]


def baseline_global(name: str, d: dict[str, object]) -> list[int]:
    """The ABI's baseline global size: one work-item per output (README's last column)."""
    g = lambda k: int(d[k])  # noqa: E731
    if name.startswith("gemm"):
        return [g("N"), g("M")]
    table = {
        "bias_add": lambda: [g("B") * g("C") * g("HW")], "bias_grad": lambda: [g("C")],
        "relu_fwd": lambda: [g("n")], "relu_bwd": lambda: [g("n")],
        "im2col": lambda: [g("B") * g("OH") * g("OW"), g("C") * g("KH") * g("KW")],
        "col2im": lambda: [g("B") * g("C") * g("H") * g("W")],
        "swap01": lambda: [g("D0") * g("D1") * g("D2")],
        "maxpool_fwd": lambda: [g("B") * g("C") * g("OH") * g("OW")],
        "maxpool_bwd": lambda: [g("B") * g("C") * g("H") * g("W")],
        "softmax_xent": lambda: [g("B")], "mean": lambda: [1],
        "sgd_update": lambda: [g("n")], "fill": lambda: [g("n")], "copy": lambda: [g("n")],
    }
    return table[name]()


def baseline_geometry(name: str, dims: dict, version: KernelVersion
                      ) -> tuple[list[int], list[int] | None]:
    """Baseline rule: the ABI global size; ``local`` from the version's ``local_sizes`` (global
    then rounded up to a multiple of it per dimension), else ``None`` (driver's choice)."""
    glob = baseline_global(name, dims)
    local = version.local_sizes.get(name)
    if local is None:
        return glob, None
    local = [int(x) for x in local][: len(glob)]
    if len(local) != len(glob):
        raise ValueError(f"kernel version {version.name}: local_sizes.{name} has "
                         f"{len(local)} dims, the kernel's NDRange has {len(glob)}")
    return [math.ceil(gs / ls) * ls for gs, ls in zip(glob, local)], local


_GEOMETRY: dict[str, Geometry] = {}

# Modules that register geometry rules for the versions under src/kernels; imported on the
# first geometry() call so a plan never silently falls back to the baseline rule.
GEOMETRY_MODULES = ("phonetrain.kernels.gemm_geometry",)
_loaded = False


def _load_rule_modules() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib
        for mod in GEOMETRY_MODULES:
            importlib.import_module(mod)


def register_geometry(version_name: str) -> Callable[[Geometry], Geometry]:
    """Decorator: use the decorated ``rule(kernel_name, dims, version) -> (global, local)``
    for ``version_name`` and the versions inheriting it. A rule may return ``None`` for
    kernels it does not handle; the baseline rule then applies."""
    def deco(rule: Geometry) -> Geometry:
        _GEOMETRY[version_name] = rule
        return rule
    return deco


def geometry(kernel_name: str, dims: dict, version: KernelVersion | str
             ) -> tuple[list[int], list[int] | None]:
    """Global and local NDRange of one launch: the nearest registered rule along the
    inheritance chain, else :func:`baseline_geometry`. ``dims`` holds the launch's named
    int args (:func:`bind_args`); ``version`` a :class:`KernelVersion` or a version name."""
    _load_rule_modules()
    if isinstance(version, str):
        version = load_version(version)
    for vname in version.chain:
        rule = _GEOMETRY.get(vname)
        if rule is not None:
            got = rule(kernel_name, dims, version)
            if got is not None:
                return got
    return baseline_geometry(kernel_name, dims, version)


# ---------------------------------------------------------------- versions and sources

class KernelVersionError(PhonetrainError, ValueError):
    """A kernel version folder or its version.yaml is unusable; the message names it."""


@dataclass
class KernelVersion:
    """A resolved kernel version. ``chain`` lists the version then its ancestors;
    ``build_options`` and ``defines`` are merged along the chain (the child wins)."""

    name: str
    inherits: str | None = None
    build_options: str = ""
    defines: dict[str, object] = field(default_factory=dict)
    local_sizes: dict[str, list[int]] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    root: Path = KERNELS_ROOT

    @property
    def options(self) -> str:
        """OpenCL build options: ``build_options`` then ``-DKEY=VALUE`` per define."""
        parts = [self.build_options] if self.build_options else []
        parts += [f"-D{k}={v}" for k, v in sorted(self.defines.items())]
        return " ".join(parts)


_VERSION_KEYS = {"inherits", "build_options", "defines", "local_sizes"}


def _read_version_yaml(yml: Path) -> dict:
    """A version.yaml as a dict; :class:`KernelVersionError` naming the file when it is not
    valid YAML or not a mapping."""
    import yaml  # here, so geometry works with numpy alone
    from omegaconf import OmegaConf
    try:
        cfg = OmegaConf.to_container(OmegaConf.load(yml)) or {}
    except yaml.YAMLError as e:
        raise KernelVersionError(f"{yml}: not valid YAML ({' '.join(str(e).split())}); "
                                 "fix the file") from None
    if not isinstance(cfg, dict):
        raise KernelVersionError(f"{yml}: must be a mapping of {sorted(_VERSION_KEYS)}, "
                                 f"got {type(cfg).__name__}")
    return cfg


def load_version(version_name: str, kernels_root: Path = KERNELS_ROOT) -> KernelVersion:
    """Read ``kernels_root/<version>/version.yaml`` (optional) and its ancestors.

    Raises :class:`KernelVersionError` for a missing folder, an unknown key, or an
    inheritance cycle.
    """
    kernels_root = Path(kernels_root)
    chain: list[str] = []
    merged = KernelVersion(name=version_name, root=kernels_root)
    name: str | None = version_name
    layers: list[dict] = []
    parent_yml: Path | None = None  # the version.yaml whose `inherits` named `name`
    while name is not None:
        folder = kernels_root / name
        if name in chain:
            raise KernelVersionError(f"kernel version {version_name}: inheritance cycle "
                                     f"{' -> '.join(chain + [name])}")
        if not folder.is_dir():
            known = sorted(p.name for p in kernels_root.iterdir() if p.is_dir()) \
                if kernels_root.is_dir() else []
            where = f"{parent_yml}: key 'inherits' names " if parent_yml else ""
            raise KernelVersionError(f"{where}kernel version {name!r}: no folder {folder} "
                                     f"(known versions: {', '.join(known) or 'none'})")
        chain.append(name)
        cfg: dict = {}
        yml = folder / "version.yaml"
        if yml.exists():
            cfg = _read_version_yaml(yml)
            bad = set(cfg) - _VERSION_KEYS
            if bad:
                raise KernelVersionError(f"{yml}: unknown key(s) {sorted(bad)}; "
                                         f"allowed: {sorted(_VERSION_KEYS)}")
        layers.append(cfg)
        name = cfg.get("inherits")
        parent_yml = yml
    merged.chain = chain
    merged.inherits = layers[0].get("inherits")
    for cfg in reversed(layers):  # ancestors first, so the child overrides
        if cfg.get("build_options"):
            merged.build_options = str(cfg["build_options"])
        merged.defines.update(cfg.get("defines") or {})
        merged.local_sizes.update(cfg.get("local_sizes") or {})
    return merged


def resolve_sources(version_name: str, kernels_root: Path = KERNELS_ROOT) -> dict[str, Path]:
    """``{filename: path}`` of the ``.cl`` files a version uses: its own files plus every
    inherited file it does not replace (the nearest version in the chain wins)."""
    version = load_version(version_name, kernels_root)
    out: dict[str, Path] = {}
    for vname in version.chain:
        for p in sorted((Path(kernels_root) / vname).glob("*.cl")):
            out.setdefault(p.name, p)
    return dict(sorted(out.items()))


def source_hash(version_name: str, kernels_root: Path = KERNELS_ROOT) -> str:
    """sha256 (hex) over the resolved files' names and bytes and the build options: changes
    exactly when what the device compiles changes."""
    h = hashlib.sha256()
    for fname, path in resolve_sources(version_name, kernels_root).items():
        h.update(fname.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(load_version(version_name, kernels_root).options.encode())
    return h.hexdigest()


def kernels_mentioned(path: Path, names=None) -> set[str]:
    """ABI kernel names (or ``names``) that occur as whole words in one ``.cl`` file: a
    superset of what it defines, robust to macro-generated kernels."""
    words = set(re.findall(r"\w+", path.read_text()))
    return words & set(names if names is not None else KERNEL_ARGS)


def stage_kernels(version_name: str, dest_root: Path,
                  kernels_root: Path = KERNELS_ROOT) -> Path:
    """Copy the resolved sources to ``dest_root/kernels/<version>/`` (replacing the folder
    atomically: files go to a temp folder that is then renamed) and return that folder."""
    sources = resolve_sources(version_name, kernels_root)
    dest = Path(dest_root) / "kernels" / version_name
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version_name}.", dir=dest.parent))
    for fname, path in sources.items():
        shutil.copyfile(path, tmp / fname)
    if dest.exists():  # move the old folder aside (a unique name: stagers may race)
        old = Path(tempfile.mkdtemp(prefix=f".{version_name}.old.", dir=dest.parent))
        dest.rename(old / version_name)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(dest)
    return dest
