"""glslc's SPIR-V of the checkout's shaders compiled once per test module, not once per test.

A Vulkan bundle (:func:`phonetrain.lowering.write_bundle`) compiles every shader of its
version (32-49 glslc processes, 3-5 CPU s on a 2-core host); tests that build many bundles of
the same versions would compile the same files again each time. :func:`compile_once` wraps
:func:`phonetrain.kernels.spirv.compile_shader`: a shader of the checkout's kernels folder is
compiled by the real glslc the first time and its ``.spv`` copied after that. The key is the
shader's path and bytes with glslc's flags; the files it includes are the checkout's, which a
test run never edits (tests edit copies, in their own kernels folder, which are compiled
every time, as is every failing shader)."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from phonetrain.kernels import spirv

Compile = Callable[..., None]


def compile_once(cache: Path, compile_shader: Compile = spirv.compile_shader) -> Compile:
    """``compile_shader(src, out, kernels_root)`` whose outputs for shaders under the
    checkout's kernels folder (``spirv.KERNELS_ROOT``) are kept in ``cache`` (a folder,
    created) and copied to ``out`` on a later call with the same shader."""
    cache.mkdir(parents=True, exist_ok=True)
    checkout = Path(spirv.KERNELS_ROOT).resolve()

    def compile_or_copy(src: Path, out: Path, kernels_root: Path = spirv.KERNELS_ROOT) -> None:
        src = Path(src)
        if Path(kernels_root).resolve() != checkout:
            return compile_shader(src, out, kernels_root)
        h = hashlib.sha256(" ".join(spirv.GLSLC_FLAGS).encode())
        h.update(str(src.resolve()).encode() + b"\0" + src.read_bytes())
        kept = cache / f"{h.hexdigest()}.spv"
        if not kept.is_file():
            tmp = kept.with_suffix(".tmp")
            compile_shader(src, tmp, kernels_root)
            tmp.replace(kept)
        shutil.copyfile(kept, out)

    return compile_or_copy
