"""Kernel versions: a folder ``src/kernels/<version>/`` of ``.cl`` files plus an optional
``version.yaml`` that states everything else the version is.

Keys of ``version.yaml`` (the table in ``src/kernels/README.md`` documents each one)::

    inherits: regblock            # the version supplying the files and keys this one lacks
    build_options: "-cl-fast-relaxed-math"
    defines: {RM: 4, RN: 4}       # the defaults, passed as -DRM=4 -DRN=4
    local_sizes: {gemm_nn: [8, 8], gemm_nt: [8, 8], gemm_tn: [8, 8]}
    geometry: image               # launch-geometry rule (phonetrain.kernels.launch.RULES)
    requires: [images]            # what the device must offer (REQUIREMENTS)
    gemm_library: null            # gemm_* routed to a library (GEMM_LIBRARIES) instead of .cl
    image_operand: B              # the GEMM operand read through an image2d_t
    lowering: fused_step          # the step's kernel sequence (LOWERINGS)
    tuning:
      candidates:                 # tried after the defaults, in this order
        - {defines: {RM: 8}, local: [8, 8]}
      constraints: ["RN == 4", "LX * LY <= 256"]

A version's ``.cl`` file replaces the inherited file of the same name. ``defines`` and
``local_sizes`` merge along the chain (the child's entries win); every other key, and each of
``tuning.candidates`` / ``tuning.constraints``, is taken whole from the nearest version that
sets it. The tuning space (:attr:`KernelVersion.candidates`) is the defaults followed by the
listed candidates; :func:`load_version` checks every constraint on each of them.

Only PyYAML is needed (no omegaconf), so bare benchmark hosts can load versions.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import operator
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


from ..errors import PhonetrainError
from ..io import make_temp_dir
from ..layout import device_kernels
from .abi import GEMM_KERNELS, KERNEL_ARGS, read_only_buffers
from .launch import RULES

KERNELS_ROOT = Path(__file__).resolve().parents[2] / "kernels"
# The shared helpers beside the version folders, assembled in front of every program.
COMMON_FILE = "common.cl"

# What a version may require of the device (key ``requires``): name -> meaning.
REQUIREMENTS: dict[str, str] = {
    "clblast": "the runner can load libclblast (CLBlast's shared library)",
    "images": "the OpenCL device supports images (CL_DEVICE_IMAGE_SUPPORT)",
}

# Libraries a version may route gemm_nn/gemm_nt/gemm_tn to (key ``gemm_library``): name ->
# meaning. The name is also the reserved plan program source the runner recognizes
# (``{"name": "gemm", "source": <name>, "options": ""}``, :mod:`phonetrain.plan`).
GEMM_LIBRARIES: dict[str, str] = {
    "clblast": "CLBlast's CLBlastSgemm, dlopened by the runner",
}

# How a training step lowers to kernels (key ``lowering``): name -> meaning. The lowering
# (phonetrain.lowering.build) picks its step sequence from this value, never from a version name.
LOWERINGS: dict[str, str] = {
    "per_layer": "one kernel sequence per layer: GEMM, bias, ReLU, swap01, im2col, sgd_update ...",
    "fused_step": "the fused kernels: bias, ReLU, layout changes, the loss mean and the SGD update "
             "folded into the GEMM-like kernels (src/kernels/README.md, Fused kernels); batch "
             "norm, ReLU6 and residual adds into the convolution units of batch-norm models "
             "(Fused batch-norm kernels)",
}
DEFAULT_LOWERING = "per_layer"

VERSION_KEYS = ("inherits", "build_options", "defines", "local_sizes", "geometry", "requires",
                "gemm_library", "image_operand", "tuning", "lowering")
TUNING_KEYS = ("candidates", "constraints")
CANDIDATE_KEYS = ("defines", "local")
DEFAULT_GEOMETRY = "baseline"
# Names a constraint may use besides the defines: the candidate's work-group size.
LOCAL_NAMES = ("LX", "LY")


class KernelVersionError(PhonetrainError, ValueError):
    """A kernel version folder or its version.yaml is unusable; the message names the file
    and the key."""


@dataclass
class KernelVersion:
    """A resolved kernel version (see the module docstring for the keys).

    ``chain`` lists the version then its ancestors. ``tuning_candidates`` are the
    ``tuning.candidates`` of ``version.yaml`` (``{"defines": {...}, "local": [LX, LY] | None}``),
    without the defaults; :attr:`candidates` is the whole tuning space.
    """

    name: str
    inherits: str | None = None
    build_options: str = ""
    defines: dict[str, object] = field(default_factory=dict)
    local_sizes: dict[str, list[int]] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    root: Path = KERNELS_ROOT
    geometry: str = DEFAULT_GEOMETRY
    requires: list[str] = field(default_factory=list)
    gemm_library: str | None = None
    image_operand: str | None = None
    lowering: str = DEFAULT_LOWERING
    tuning_candidates: list[dict[str, Any]] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)

    @property
    def options(self) -> str:
        """OpenCL build options: ``build_options`` then ``-DKEY=VALUE`` per define (sorted)."""
        parts = [self.build_options] if self.build_options else []
        parts += [f"-D{k}={v}" for k, v in sorted(self.defines.items())]
        return " ".join(parts)

    def tuned_defines(self) -> list[str]:
        """Names of the defines the tuning candidates set, in first-seen order."""
        return list(dict.fromkeys(k for c in self.tuning_candidates
                                  for k in (c.get("defines") or {})))

    def gemm_local(self) -> list[int] | None:
        """The GEMM work-group ``[LX, LY]`` of ``local_sizes`` (that of ``gemm_nn``, else of the
        first GEMM kernel that has one), or ``None`` when no GEMM kernel has one."""
        for k in GEMM_KERNELS:
            if k in self.local_sizes:
                return [int(x) for x in self.local_sizes[k]]
        return None

    def default_candidate(self) -> dict[str, Any]:
        """The defaults as a tuning candidate: ``defines`` = the version's values of
        :meth:`tuned_defines`; ``local`` = :meth:`gemm_local` when some candidate sets a local
        size, else ``None`` (the geometry rule derives it)."""
        tuned_local = any(c.get("local") for c in self.tuning_candidates)
        return {"defines": {k: self.defines[k] for k in self.tuned_defines()
                            if k in self.defines},
                "local": self.gemm_local() if tuned_local else None}

    @property
    def candidates(self) -> list[dict[str, Any]]:
        """The tuning space: :meth:`default_candidate` first, then ``tuning_candidates`` in
        file order (copies)."""
        return [self.default_candidate()] + copy.deepcopy(self.tuning_candidates)


# ---------------------------------------------------------------- constraints

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge}


def parse_constraint(text: str) -> ast.expr:
    """Parse one constraint: a comparison (``TSM % WPTM == 0``, ``LX * LY <= 256``) or such
    comparisons joined by ``and``/``or``, over names, integer constants and ``+ - * / // %``
    (unary ``-``/``+`` too). Nothing is evaluated here. Raises ``ValueError`` describing the
    first construct outside that language."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{text!r} is not a non-empty string")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"{text!r} is not an expression ({e.msg})") from None

    def check(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.BoolOp):
            for v in node.values:
                check(v, True)
        elif isinstance(node, ast.Compare):
            if not all(type(op) in _COMPARE for op in node.ops):
                raise ValueError(f"{text!r}: only == != < <= > >= compare")
            for v in (node.left, *node.comparators):
                check(v, False)
        elif top:
            raise ValueError(f"{text!r} must be a comparison (or comparisons joined by "
                             "and/or), e.g. 'TSM % WPTM == 0'")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS:
                raise ValueError(f"{text!r}: operator {type(node.op).__name__} is not allowed "
                                 "(use + - * / // %)")
            check(node.left, False)
            check(node.right, False)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            check(node.operand, False)
        elif isinstance(node, ast.Name):
            pass
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            pass
        else:
            raise ValueError(f"{text!r}: {ast.unparse(node)!r} is not allowed (only names, "
                             "integer constants, arithmetic, comparisons, and/or)")
    check(tree, True)
    return tree


def eval_constraint(tree: ast.expr, names: dict[str, Any]) -> bool:
    """Value of a :func:`parse_constraint` tree with ``names`` bound. Raises ``NameError`` for
    an unbound name, ``ZeroDivisionError``/``TypeError`` from the arithmetic."""
    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.BoolOp):
            vals = (ev(v) for v in node.values)
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = ev(right_node)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise NameError(node.id)
            return names[node.id]
        return node.value  # an int constant (parse_constraint allows nothing else)
    return bool(ev(tree))


def constraint_names(version: KernelVersion, cand: dict[str, Any]) -> dict[str, Any]:
    """What a constraint sees for one candidate: the version's defines updated with the
    candidate's, plus ``LX``/``LY`` when the candidate has a local size."""
    names = {**version.defines, **(cand.get("defines") or {})}
    if cand.get("local"):
        names.update(zip(LOCAL_NAMES, cand["local"]))
    return names


# ---------------------------------------------------------------- version.yaml

def _read_version_yaml(yml: Path) -> dict:
    """A version.yaml as a dict (an empty file is ``{}``); :class:`KernelVersionError` naming
    the file when it is not valid YAML or not a mapping."""
    import yaml   # here, not at import: a stage job that reads no version.yaml skips it

    try:
        cfg = yaml.safe_load(yml.read_text())
    except UnicodeDecodeError as e:
        raise KernelVersionError(f"{yml}: not a UTF-8 text file ({e.reason} at byte "
                                 f"{e.start}); fix the file") from None
    except yaml.YAMLError as e:
        raise KernelVersionError(f"{yml}: not valid YAML ({' '.join(str(e).split())}); "
                                 "fix the file") from None
    if cfg is None:
        return {}
    if not isinstance(cfg, dict):
        raise KernelVersionError(f"{yml}: must be a mapping of {list(VERSION_KEYS)}, "
                                 f"got {type(cfg).__name__}")
    return cfg


def _positive_ints(v: Any, n: int | None = None) -> bool:
    return isinstance(v, list) and (n is None or len(v) == n) and len(v) > 0 and \
        all(type(x) is int and x >= 1 for x in v)


def _scalar(v: Any) -> bool:
    return isinstance(v, (int, float, str)) and not isinstance(v, bool)


def _check_layer(yml: Path, cfg: dict) -> None:
    """Key-by-key checks of one version.yaml (before merging); :class:`KernelVersionError`
    naming the file and key."""
    bad = set(cfg) - set(VERSION_KEYS)
    if bad:
        raise KernelVersionError(f"{yml}: unknown key(s) {sorted(bad)}; "
                                 f"allowed: {sorted(VERSION_KEYS)}")

    def fail(key: str, msg: str) -> None:
        raise KernelVersionError(f"{yml}: key '{key}' {msg}")

    parent = cfg.get("inherits")
    if parent is not None and (not isinstance(parent, str) or parent in ("", ".", "..") or
                               "/" in parent or "\\" in parent):
        fail("inherits", f"is {parent!r}; name one version (a folder name beside this one's, "
             "e.g. baseline) or remove the key")
    if "build_options" in cfg and cfg["build_options"] is not None and \
            not isinstance(cfg["build_options"], str):
        fail("build_options", f"is {cfg['build_options']!r}; give one string of options")
    defines = cfg.get("defines")
    if defines is not None:
        if not isinstance(defines, dict):
            fail("defines", f"is {defines!r}; give a mapping NAME: value")
        for k, v in defines.items():
            if not isinstance(k, str):
                fail(f"defines.{k}", "is not a name; a define's name is a C identifier (TSM)")
            if not _scalar(v):
                fail(f"defines.{k}", f"is {v!r}; give a number or string")
    local_sizes = cfg.get("local_sizes")
    if local_sizes is not None:
        if not isinstance(local_sizes, dict):
            fail("local_sizes", f"is {local_sizes!r}; give a mapping kernel: [LX, LY]")
        for k, v in local_sizes.items():
            if k not in KERNEL_ARGS:
                fail(f"local_sizes.{k}", "names no kernel of the ABI "
                     "(src/kernels/README.md)")
            if not _positive_ints(v):
                fail(f"local_sizes.{k}", f"is {v!r}; give a list of positive ints")
    if "geometry" in cfg and (not isinstance(cfg["geometry"], str) or
                              cfg["geometry"] not in RULES):
        fail("geometry", f"is {cfg['geometry']!r}, not a launch-geometry rule; known rules: "
             f"{', '.join(sorted(RULES))}")
    if "requires" in cfg:
        req = cfg["requires"]
        if req is None:
            req = []
        if not isinstance(req, list):
            fail("requires", f"is {req!r}; give a list, e.g. [images]")
        for r in req:
            if not isinstance(r, str) or r not in REQUIREMENTS:
                fail("requires", f"names {r!r}, not a known requirement; known: "
                     f"{', '.join(sorted(REQUIREMENTS))}")
    lib = cfg.get("gemm_library")
    if lib is not None and (not isinstance(lib, str) or lib not in GEMM_LIBRARIES):
        fail("gemm_library", f"is {cfg['gemm_library']!r}, not a known GEMM library; known: "
             f"{', '.join(sorted(GEMM_LIBRARIES))} (or null)")
    if cfg.get("image_operand") is not None:
        operands = sorted(set.intersection(*(set(read_only_buffers(k)) for k in GEMM_KERNELS)))
        if not isinstance(cfg["image_operand"], str) or cfg["image_operand"] not in operands:
            fail("image_operand", f"is {cfg['image_operand']!r}; give a read-only GEMM operand "
                 f"({', '.join(operands)}) or null")
    if "lowering" in cfg and (not isinstance(cfg["lowering"], str) or
                              cfg["lowering"] not in LOWERINGS):
        fail("lowering", f"is {cfg['lowering']!r}, not a known lowering; known: "
             f"{', '.join(sorted(LOWERINGS))}")
    if "tuning" in cfg:
        _check_tuning(yml, cfg["tuning"], fail)


def _check_tuning(yml: Path, tuning: Any, fail: Callable[[str, str], None]) -> None:
    if tuning is None:
        return
    if not isinstance(tuning, dict):
        fail("tuning", f"is {tuning!r}; give a mapping with {list(TUNING_KEYS)}")
    bad = set(tuning) - set(TUNING_KEYS)
    if bad:
        fail("tuning", f"has unknown key(s) {sorted(bad)}; allowed: {list(TUNING_KEYS)}")
    cands = tuning.get("candidates")
    if cands is not None:
        if not isinstance(cands, list):
            fail("tuning.candidates", f"is {cands!r}; give a list of "
                 "{defines: {...}, local: [LX, LY] | null}")
        for i, c in enumerate(cands):
            key = f"tuning.candidates[{i}]"
            if not isinstance(c, dict) or set(c) - set(CANDIDATE_KEYS):
                fail(key, f"is {c!r}; give {{defines: {{NAME: value}}, local: [LX, LY] | null}}")
            d = c.get("defines")
            if d is not None and (not isinstance(d, dict) or
                                  not all(isinstance(k, str) and _scalar(v)
                                          for k, v in d.items())):
                fail(f"{key}.defines", f"is {d!r}; give a mapping NAME: value")
            if c.get("local") is not None and not _positive_ints(c["local"], 2):
                fail(f"{key}.local", f"is {c['local']!r}; give [LX, LY] (positive ints) or null")
    cons = tuning.get("constraints")
    if cons is not None:
        if not isinstance(cons, list):
            fail("tuning.constraints", f"is {cons!r}; give a list of expressions")
        for i, text in enumerate(cons):
            try:
                parse_constraint(text)
            except ValueError as e:
                fail(f"tuning.constraints[{i}]", f"is malformed: {e}")


def _check_space(version: KernelVersion, where: dict[str, Path]) -> None:
    """Checks of the resolved tuning space: every tuned define has a default, the GEMM
    kernels share one local size when candidates tune it, and the defaults and every
    candidate satisfy every constraint. ``where[key]`` is the file that set ``key``."""
    for i, c in enumerate(version.tuning_candidates):
        for k in c.get("defines") or {}:
            if k not in version.defines:
                raise KernelVersionError(
                    f"{where['candidates']}: key 'tuning.candidates[{i}].defines.{k}' tunes a "
                    f"define the version has no default for; set {k} under defines:")
    if any(c.get("local") for c in version.tuning_candidates):
        locals_ = {k: version.local_sizes.get(k) for k in GEMM_KERNELS}
        if len({tuple(v) if v else None for v in locals_.values()}) > 1:
            raise KernelVersionError(
                f"{where.get('local_sizes', where['candidates'])}: key 'local_sizes': the "
                f"candidates tune one GEMM work-group, so gemm_nn/gemm_nt/gemm_tn need the "
                f"same local size (got {locals_})")
    trees = [(i, text, parse_constraint(text)) for i, text in enumerate(version.constraints)]
    defaults = version.default_candidate()
    labelled = [(where.get("defines", where.get("constraints")),
                 "defines, local_sizes" if defaults["local"] else "defines", "the defaults",
                 defaults)]
    labelled += [(where.get("candidates"), f"tuning.candidates[{i}]", f"candidate {i}", c)
                 for i, c in enumerate(version.tuning_candidates)]
    for yml, key, label, cand in labelled:
        names = constraint_names(version, cand)
        for i, text, tree in trees:
            ckey = f"tuning.constraints[{i}]"
            try:
                ok = eval_constraint(tree, names)
            except NameError as e:
                raise KernelVersionError(
                    f"{where['constraints']}: key '{ckey}' ({text!r}) uses {e.args[0]}, which "
                    f"{label} {cand} does not define (names: the defines, and "
                    f"{'/'.join(LOCAL_NAMES)} when the candidate has a local size)") from None
            except (ArithmeticError, TypeError) as e:
                raise KernelVersionError(
                    f"{where['constraints']}: key '{ckey}' ({text!r}) cannot be evaluated for "
                    f"{label} {cand}: {e}") from None
            if not ok:
                raise KernelVersionError(
                    f"{yml}: key '{key}': {label} {cand} violates constraint {text!r} "
                    f"(key '{ckey}' of {where['constraints']})")


def load_version(version_name: str, kernels_root: Path = KERNELS_ROOT) -> KernelVersion:
    """Read ``kernels_root/<version>/version.yaml`` (optional) and its ancestors' and resolve
    them (module docstring).

    Raises :class:`KernelVersionError`, naming the file and key, for a missing folder, an
    inheritance cycle, invalid YAML, an unknown key, an unknown geometry rule, requirement,
    GEMM library or lowering, a malformed value or constraint, a tuned define without a default, and
    defaults or a candidate violating a constraint.
    """
    kernels_root = Path(kernels_root)
    chain: list[str] = []
    name: str | None = version_name
    layers: list[tuple[Path, dict]] = []
    parent_yml: Path | None = None  # the version.yaml whose `inherits` named `name`
    while name is not None:
        folder = kernels_root / name
        if name in chain:
            raise KernelVersionError(f"{parent_yml}: key 'inherits' names {name!r}, closing the "
                                     f"inheritance cycle {' -> '.join(chain + [name])}; "
                                     "make one of them inherit from another version or "
                                     "nothing")
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
            _check_layer(yml, cfg)
        layers.append((yml, cfg))
        name = cfg.get("inherits")
        parent_yml = yml
    v = KernelVersion(name=version_name, root=kernels_root, chain=chain,
                      inherits=layers[0][1].get("inherits"))
    where: dict[str, Path] = {}
    for yml, cfg in reversed(layers):  # ancestors first, so the child overrides
        if cfg.get("build_options"):
            v.build_options = str(cfg["build_options"])
        if cfg.get("defines"):
            v.defines.update(cfg["defines"])
            where["defines"] = yml
        if cfg.get("local_sizes"):
            v.local_sizes.update({k: list(x) for k, x in cfg["local_sizes"].items()})
            where["local_sizes"] = yml
        if "geometry" in cfg:
            v.geometry = cfg["geometry"]
        if "requires" in cfg:
            v.requires = list(cfg["requires"] or [])
        if "gemm_library" in cfg:
            v.gemm_library = cfg["gemm_library"]
        if "image_operand" in cfg:
            v.image_operand = cfg["image_operand"]
        if "lowering" in cfg:
            v.lowering = cfg["lowering"]
        tuning = cfg.get("tuning") or {}
        if "candidates" in tuning:
            v.tuning_candidates = [{"defines": dict(c.get("defines") or {}),
                                    "local": list(c["local"]) if c.get("local") else None}
                                   for c in tuning["candidates"] or []]
            where["candidates"] = yml
        if "constraints" in tuning:
            v.constraints = list(tuning["constraints"] or [])
            where["constraints"] = yml
    _check_space(v, where)
    return v


# ---------------------------------------------------------------- sources

def resolve_sources(version_name: str, kernels_root: Path = KERNELS_ROOT) -> dict[str, Path]:
    """``{filename: path}`` of the ``.cl`` files a version uses: its own files plus every
    inherited file it does not replace (the nearest version in the chain wins)."""
    version = load_version(version_name, kernels_root)
    out: dict[str, Path] = {}
    for vname in version.chain:
        for p in sorted((Path(kernels_root) / vname).glob("*.cl")):
            out.setdefault(p.name, p)
    return dict(sorted(out.items()))


def common_source(kernels_root: Path = KERNELS_ROOT) -> Path | None:
    """``kernels_root/common.cl``, the helpers staged in front of every version's files
    (:func:`assemble_source`), or None when the root has none. It is a file beside the
    version folders, never a version nor a version's file."""
    p = Path(kernels_root) / COMMON_FILE
    return p if p.is_file() else None


def source_files(version_name: str, kernels_root: Path = KERNELS_ROOT) -> list[Path]:
    """Every ``.cl`` file a version's programs are assembled from: ``common.cl`` (where the
    root has one) and the resolved files. What decides rebuilds and reruns."""
    common = common_source(kernels_root)
    return ([common] if common else []) + list(resolve_sources(version_name, kernels_root).values())


def _line_name(path: Path) -> str:
    """The file name a ``#line`` directive gives ``path``: relative to the checkout for the
    checkout's own kernels (``src/kernels/fused/fused.cl``), else the absolute path."""
    path = Path(path).resolve()
    try:
        return path.relative_to(KERNELS_ROOT.resolve().parents[1]).as_posix()
    except ValueError:
        return path.as_posix()


def assemble_source(path: Path, kernels_root: Path = KERNELS_ROOT) -> str:
    """The OpenCL source the device compiles for one resolved ``.cl`` file: ``common.cl``
    then the file, each after a ``#line 1 "<file>"`` directive, so compiler messages name the
    original file and its own line numbers. A root without ``common.cl`` gives the file as
    it is."""
    common = common_source(kernels_root)
    text = Path(path).read_text()
    if common is None:
        return text
    parts = []
    for p, body in ((common, common.read_text()), (Path(path), text)):
        parts.append(f'#line 1 "{_line_name(p)}"\n' + body + ("" if body.endswith("\n") else "\n"))
    return "".join(parts)


def source_hash(version_name: str, kernels_root: Path = KERNELS_ROOT) -> str:
    """sha256 (hex) over the resolved files' names and bytes, ``common.cl``'s bytes and the
    build options: changes exactly when what the device compiles changes."""
    h = hashlib.sha256()
    common = common_source(kernels_root)
    if common is not None:
        h.update(COMMON_FILE.encode() + b"\0" + common.read_bytes() + b"\0")
    for fname, path in resolve_sources(version_name, kernels_root).items():
        h.update(fname.encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(load_version(version_name, kernels_root).options.encode())
    return h.hexdigest()


def build_hash(version_name: str, kernels_root: Path = KERNELS_ROOT) -> str:
    """sha256 (hex) of what the device compiles for a version, as
    :func:`phonetrain.kernels.build_key.build_key` sees it: the assembled sources
    (:func:`assemble_source`) without comments or white space, and the build options. An edit
    of comments or white space keeps it (:func:`source_hash` changes with any byte)."""
    from phonetrain.kernels.build_key import build_key
    sources = {fname: assemble_source(path, kernels_root)
               for fname, path in resolve_sources(version_name, kernels_root).items()}
    return build_key(sources, [load_version(version_name, kernels_root).options])


def stage_kernels(version_name: str, dest_root: Path,
                  kernels_root: Path = KERNELS_ROOT) -> Path:
    """Write the resolved sources, each assembled with ``common.cl`` in front
    (:func:`assemble_source`), to ``dest_root/kernels/<version>/`` (replacing the folder
    atomically: files go to a temp folder that is then renamed) and return that folder."""
    sources = resolve_sources(version_name, kernels_root)
    dest = Path(dest_root) / device_kernels(version_name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(dest.parent, f".{version_name}.")
    for fname, path in sources.items():
        (tmp / fname).write_text(assemble_source(path, kernels_root))
    return swap_in(tmp, dest)


def swap_in(tmp: Path, dest: Path) -> Path:
    """Put the finished folder ``tmp`` at ``dest`` (a sibling path), replacing any folder
    there: the old one is first renamed into a uniquely named folder beside it (stagers of
    one device may race) and removed after the rename. Returns ``dest``."""
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
        dest.rename(old / dest.name)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(dest)
    return dest
