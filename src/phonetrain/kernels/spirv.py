"""A kernel version's Vulkan compute shaders: GLSL files ``src/kernels/<version>/vk/<kernel>.comp``
(one per kernel of the ABI, named after it), compiled to SPIR-V with ``glslc`` on the host.

A version has Vulkan kernels only where its folder has a ``vk/`` folder (so a version that
rewrites its OpenCL GEMM never runs the baseline shaders under its own name); that folder
inherits like the ``.cl`` files: a shader of the version replaces the inherited one of the
same name, the ``inherits`` chain supplies the others. Every shader is
compiled with ``-DPT_KERNEL_<kernel>`` and ``-I src/kernels``, so it includes the generated
interface ``vk_abi.glsl`` (:mod:`.vk_abi`: push constants, bindings, the work-group size as
specialization constants 0..2) and the shared helpers ``common.glsl``. The SPIR-V is what
a device gets (``spirv/<version>/<kernel>.spv``, :func:`phonetrain.layout.device_spirv`).

A ``vk/`` folder may also hold ``*.glsl`` bodies its shaders include (``tiled``: three
``gemm_*.comp`` include ``gemm_tiled.glsl``) and ``tuning.yaml``: the tuning candidates of the
shaders' specialization constants (:func:`shader_candidates`). A version's defines whose names
are specialization constants of the Vulkan ABI (:data:`.vk_abi.SPEC_CONSTANTS`) reach its
shaders as the program options ``-DNAME=VALUE`` (:func:`spec_options`), which the runner turns
into specialization constants: the shader's own defaults are the ``#ifndef`` defaults.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any


from ..errors import PhonetrainError
from ..io import make_temp_dir
from ..layout import device_spirv
from .versions import (KERNELS_ROOT, KernelVersion, constraint_names, eval_constraint,
                       load_version, parse_constraint, swap_in)
from .vk_abi import SPEC_CONSTANTS

SHADER_DIR = "vk"
SHADER_SUFFIX = ".comp"
# Files beside the version folders that every shader may include.
SHADER_INCLUDES = ("vk_abi.glsl", "common.glsl", "reduce.glsl")
# Bodies a version's shaders include from their own folder, and its tuning candidates.
BODY_SUFFIX = ".glsl"
SHADER_TUNING = "tuning.yaml"
# The keys of tuning.yaml: ``defaults`` a mapping, the others lists.
TUNING_FILE_KEYS = ("defaults", "candidates", "constraints", "device_constraints")
# glslc's target: Vulkan 1.0 (SPIR-V 1.0) runs on every Vulkan driver, Android's included.
GLSLC_FLAGS = ("-fshader-stage=compute", "--target-env=vulkan1.0", "-O")


class ShaderError(PhonetrainError):
    """glslc is missing, or a shader does not compile; the message holds glslc's output,
    which names the file and line."""


def resolve_shaders(version_name: str, kernels_root: Path = KERNELS_ROOT) -> dict[str, Path]:
    """``{kernel: path}`` of the version's shaders: its own ``vk/*.comp`` plus every inherited
    one it does not replace (the nearest version in the chain wins), sorted by kernel; empty
    when the version has no ``vk/`` folder of its own (:func:`has_shaders`)."""
    version = load_version(version_name, kernels_root)
    out: dict[str, Path] = {}
    if not has_shaders(version_name, kernels_root):
        return out
    for vname in version.chain:
        for p in sorted((Path(kernels_root) / vname / SHADER_DIR).glob(f"*{SHADER_SUFFIX}")):
            out.setdefault(p.stem, p)
    return dict(sorted(out.items()))


def has_shaders(version_name: str, kernels_root: Path = KERNELS_ROOT) -> bool:
    """Whether the version has Vulkan kernels: a ``vk/`` folder of its own."""
    return (Path(kernels_root) / version_name / SHADER_DIR).is_dir()


def shader_files(version_name: str, kernels_root: Path = KERNELS_ROOT) -> list[Path]:
    """Every file a version's SPIR-V is compiled from: the shared includes, the ``vk/*.glsl``
    bodies along the ``inherits`` chain, then the shaders."""
    root = Path(kernels_root)
    inc = [root / f for f in SHADER_INCLUDES if (root / f).is_file()]
    if has_shaders(version_name, kernels_root):
        for vname in load_version(version_name, kernels_root).chain:
            inc += sorted((root / vname / SHADER_DIR).glob(f"*{BODY_SUFFIX}"))
    return inc + list(resolve_shaders(version_name, kernels_root).values())


def spec_options(version: KernelVersion) -> str:
    """The Vulkan program options of a version: ``-DNAME=VALUE`` (sorted by name) for each of
    its defines that is a specialization constant of the Vulkan ABI
    (:data:`.vk_abi.SPEC_CONSTANTS`); ``""`` for a version without such defines (baseline)."""
    return " ".join(f"-D{k}={int(v)}" for k, v in sorted(version.defines.items())
                    if k in SPEC_CONSTANTS)


def shader_candidates(version_name: str, kernels_root: Path = KERNELS_ROOT) -> list[dict[str, Any]]:
    """The tuning space of a version's shaders: the defaults (:func:`shader_defaults`), then
    the ``candidates`` of its ``vk/tuning.yaml`` in file order, each ``{"defines": {...},
    "local": None}`` (the defaults updated with the candidate's; the geometry rule derives the
    work-group). Only the defaults when the file is missing. Raises :class:`ShaderError`
    naming the file for a file that is not YAML of that shape (:func:`_tuning_doc`), a
    candidate that is not ``{defines: {NAME: int}}`` (no other key) with NAME in
    :data:`.vk_abi.SPEC_CONSTANTS` or breaks one of the file's ``constraints``, or a
    constraint (``constraints``, ``device_constraints``: :func:`device_misfit`) that does not
    parse."""
    path, doc = _tuning_doc(version_name, kernels_root)
    out = [{"defines": shader_defaults(version_name, kernels_root), "local": None}]
    for i, cand in enumerate(doc.get("candidates") or []):
        extra = sorted(map(str, set(cand) - {"defines"})) if isinstance(cand, dict) else []
        if extra:   # e.g. an OpenCL candidate's `local`: the geometry rule sets work-groups
            raise ShaderError(f"{path}: candidates[{i}] has key(s) {extra}; a shader "
                              "candidate is {defines: {NAME: int}} alone (its work-group "
                              "follows from the tile)")
        defs = cand.get("defines") if isinstance(cand, dict) else cand
        try:
            out.append({"defines": shader_candidate(version_name, defs, kernels_root),
                        "local": None})
        except ShaderError as e:
            raise ShaderError(f"{path}: candidates[{i}] {e}") from None
    return out


def shader_defaults(version_name: str, kernels_root: Path = KERNELS_ROOT) -> dict[str, int]:
    """The defaults of a version's specialization constants: its defines that are
    specialization constants, plus the ``defaults`` of ``vk/tuning.yaml`` (constants of the
    shaders alone, which the version's defines lack, as the shader declares them). Raises
    :class:`ShaderError` naming the file for ``defaults`` that is not ``{NAME: int}``."""
    version = load_version(version_name, kernels_root)
    path, doc = _tuning_doc(version_name, kernels_root)
    default = {k: int(v) for k, v in version.defines.items() if k in SPEC_CONSTANTS}
    own = doc.get("defaults") or {}
    if not isinstance(own, dict) or not all(k in SPEC_CONSTANTS and type(v) is int
                                            for k, v in own.items()):
        raise ShaderError(f"{path}: defaults is {own!r}; give {{NAME: int}} with NAME among "
                          f"{', '.join(SPEC_CONSTANTS)}")
    return {**default, **{k: v for k, v in own.items() if k not in default}}


def shader_candidate(version_name: str, defines: Any,
                     kernels_root: Path = KERNELS_ROOT) -> dict[str, int]:
    """One configuration of a version's shaders: :func:`shader_defaults` updated with
    ``defines``. Raises :class:`ShaderError` (saying what to give) for ``defines`` that is not
    a mapping of ints whose names are in :data:`.vk_abi.SPEC_CONSTANTS`, or that breaks one
    of the ``constraints`` of ``vk/tuning.yaml`` (or one of those, or of its
    ``device_constraints``, does not parse)."""
    path, doc = _tuning_doc(version_name, kernels_root)
    try:
        rules = [(c, parse_constraint(c)) for c in doc.get("constraints") or []]
        for c in doc.get("device_constraints") or []:
            parse_constraint(c)
    except ValueError as e:
        raise ShaderError(f"{path}: constraints: {e}") from None
    if not isinstance(defines, dict) or not all(
            k in SPEC_CONSTANTS and type(v) is int for k, v in defines.items()):
        raise ShaderError(f"is {defines!r}; give {{defines: {{NAME: int}}}} with NAME among "
                          f"{', '.join(SPEC_CONSTANTS)}")
    merged = {**shader_defaults(version_name, kernels_root), **defines}
    names = constraint_names(load_version(version_name, kernels_root), {"defines": merged})
    broken = [c for c, tree in rules if not eval_constraint(tree, names)]
    if broken:
        raise ShaderError(f"{defines} breaks the constraint(s) {broken} of {path}; fix the "
                          "candidate")
    return merged


def _tuning_doc(version_name: str, kernels_root: Path) -> tuple[Path, dict[str, Any]]:
    """The version's ``vk/tuning.yaml`` path and contents (``{}`` when it is missing or
    empty). Raises :class:`ShaderError` naming the file when it is not YAML, not a mapping,
    has a key outside :data:`TUNING_FILE_KEYS`, or a ``candidates``/``constraints``/
    ``device_constraints`` that is not a list."""
    path = Path(kernels_root) / version_name / SHADER_DIR / SHADER_TUNING
    if not path.is_file():
        return path, {}
    import yaml   # here: a stage job that reads no tuning.yaml skips it

    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ShaderError(f"{path}: not valid YAML ({' '.join(str(e).split())}); fix the "
                          "file") from None
    doc = {} if doc is None else doc
    if not isinstance(doc, dict):
        raise ShaderError(f"{path}: must be a mapping of {list(TUNING_FILE_KEYS)}, got "
                          f"{type(doc).__name__}; fix the file")
    unknown = sorted(map(str, set(doc) - set(TUNING_FILE_KEYS)))
    if unknown:
        raise ShaderError(f"{path}: unknown key(s) {unknown}; allowed: "
                          f"{list(TUNING_FILE_KEYS)}")
    for key in TUNING_FILE_KEYS[1:]:
        if doc.get(key) is not None and not isinstance(doc[key], list):
            raise ShaderError(f"{path}: key '{key}' is {doc[key]!r}; give a list")
    return path, doc


def device_misfit(version_name: str, defines: dict[str, Any], device: dict[str, Any],
                  kernels_root: Path = KERNELS_ROOT) -> str | None:
    """Why a configuration of the version's shaders (``defines``: its specialization
    constants, over the version's defaults) does not fit a Vulkan device, or None when it
    does: the ``device_constraints`` of ``vk/tuning.yaml`` it breaks, evaluated over the
    defines and the device's limits as the runner reports them (``run.json`` ``device``:
    ``max_compute_shared_memory_bytes``, ``max_compute_work_group_invocations``, ...). A
    constraint naming a limit the device document lacks is not checked. Raises
    :class:`ShaderError` naming the file for a constraint that does not parse."""
    path, doc = _tuning_doc(version_name, kernels_root)
    version = load_version(version_name, kernels_root)
    names = {**{k: v for k, v in device.items() if type(v) is int},
             **constraint_names(version, {"defines": defines})}
    broken = []
    for text in doc.get("device_constraints") or []:
        try:
            if not eval_constraint(parse_constraint(text), names):
                broken.append(text)
        except ValueError as e:
            raise ShaderError(f"{path}: device_constraints: {e}") from None
        except NameError:
            continue
    if not broken:
        return None
    limits = ", ".join(f"{k}={v}" for k, v in sorted(device.items())
                       if k.startswith("max_") and type(v) is int)
    return f"does not fit device '{device.get('name', '?')}' ({limits}): breaks {'; '.join(broken)}"


def shader_hash(version_name: str, kernels_root: Path = KERNELS_ROOT) -> str:
    """sha256 (hex) over the names and bytes of :func:`shader_files` and glslc's flags:
    changes exactly when the compiled SPIR-V may change."""
    h = hashlib.sha256(" ".join(GLSLC_FLAGS).encode())
    for p in shader_files(version_name, kernels_root):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def glslc() -> str:
    """The glslc executable (``$GLSLC``, else ``glslc`` on PATH); :class:`ShaderError` saying
    what to install when there is none, or naming ``GLSLC`` when it names no executable."""
    given = os.environ.get("GLSLC")
    if given:
        if shutil.which(given) is None:
            raise ShaderError(f"environment variable GLSLC is {given!r}: no executable file of "
                              "that name or path; set it to glslc's path (e.g. "
                              "/usr/bin/glslc), or unset it to use glslc on PATH")
        return given
    exe = shutil.which("glslc")
    if not exe:
        raise ShaderError("glslc (the GLSL -> SPIR-V compiler) is not installed; install it "
                          "(Debian: apt-get install glslc) or set GLSLC=/path/to/glslc")
    return exe


def compile_shader(src: Path, out: Path, kernels_root: Path = KERNELS_ROOT) -> None:
    """Compile one shader to SPIR-V at ``out``, or copy the SPIR-V of an earlier compile with
    the same :func:`compile_key` from this user's cache (``<cache>/spirv/``,
    :func:`phonetrain.devices.toolchains.cache_dir`): a Vulkan run's shaders are compiled by
    its deploy and again for its record of what ran, each about 70 ms a shader. Raises
    :class:`ShaderError` with glslc's messages (``<file>:<line>: error: ...``) when it does
    not compile."""
    from ..devices.toolchains import cache_dir   # devices build on kernels, not the reverse

    src, exe = Path(src), glslc()
    cached = cache_dir() / "spirv" / f"{compile_key(src, exe, kernels_root)}.spv"
    if cached.is_file():
        shutil.copyfile(cached, out)
        return
    cmd = [exe, *GLSLC_FLAGS, f"-DPT_KERNEL_{src.stem}", "-I", str(kernels_root),
           str(src), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ShaderError(f"shader {src} does not compile (glslc):\n{proc.stderr.strip()}")
    try:   # atomically: a reader sees a whole module or none
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        shutil.copyfile(out, tmp)
        os.replace(tmp, cached)
    except OSError:
        pass   # an unwritable cache costs the next compile, nothing else


def compile_key(src: Path, exe: str, kernels_root: Path = KERNELS_ROOT) -> str:
    """sha256 (hex) of what decides a shader's SPIR-V: glslc (its resolved path, size and
    modification time), :data:`GLSLC_FLAGS`, the kernel's define, the shader's folder (its
    ``#include "x.glsl"`` looks there first) and bytes, and every file it may include (each
    ``*.glsl`` under ``kernels_root``, where :data:`SHADER_INCLUDES` and the versions' bodies
    live)."""
    real = Path(shutil.which(exe) or exe).resolve()
    st = real.stat()
    folder = src.resolve().parent
    root = Path(kernels_root).resolve()
    where = folder.relative_to(root) if folder.is_relative_to(root) else folder
    h = hashlib.sha256(f"{real}\0{st.st_size}\0{st.st_mtime_ns}\0{' '.join(GLSLC_FLAGS)}\0"
                       f"{src.stem}\0{where}\0".encode() + src.read_bytes())
    for p in sorted(Path(kernels_root).rglob(f"*{BODY_SUFFIX}")):
        h.update(b"\0" + str(p.relative_to(kernels_root)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def stage_spirv(version_name: str, dest_root: Path, kernels_root: Path = KERNELS_ROOT,
                kernels: set[str] | None = None) -> Path:
    """Compile the version's shaders (only ``kernels`` where given) into
    ``dest_root/spirv/<version>/<kernel>.spv``, replacing that folder atomically (a temp
    folder renamed into place), and return it. The first shader that fails raises
    :class:`ShaderError` and leaves the folder as it was."""
    shaders = resolve_shaders(version_name, kernels_root)
    if kernels is not None:
        shaders = {k: p for k, p in shaders.items() if k in kernels}
    dest = Path(dest_root) / device_spirv(version_name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(dest.parent, f".{version_name}.")
    try:
        for kernel, path in shaders.items():
            compile_shader(path, tmp / f"{kernel}.spv", kernels_root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return swap_in(tmp, dest)
