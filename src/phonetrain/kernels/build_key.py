"""Whether two kernel builds compile to the same program, known from their sources.

:func:`build_key` hashes what an OpenCL compiler's front end sees of a build: the assembled
sources (``common.cl`` and the version's file, :func:`phonetrain.kernels.stage_kernels`)
after translation phase 3 of the C standard (ISO/IEC 9899:2011 5.1.1.2, which OpenCL C 1.2
inherits: each comment is replaced by one space), with each line's horizontal white space
collapsed to one space, empty lines and ``#line`` directives left out, and the build options.
Equal keys mean equal preprocessing-token sequences per directive line and equal options,
hence the same program on the same compiler and runner: a sufficient (not necessary)
criterion, exact for every device. Line numbers are left out because they reach the program
only through ``__LINE__``/``__FILE__`` (and diagnostics); a source that spells either is
hashed as it is.

:func:`spirv_key` is the Vulkan counterpart: it hashes the SPIR-V modules themselves, the
exact bytes a Vulkan driver compiles, and the programs' options (the specialization
constants' values). Equal keys mean equal driver input, hence the same pipelines: exact, not
merely sufficient for the shaders' GLSL. glslc runs without ``-g``
(:data:`phonetrain.kernels.spirv.GLSLC_FLAGS`), so the modules carry neither the source
text nor line numbers (``OpSource`` without text, no ``OpLine``): an edit of comments or
white space leaves the bytes as they were.
"""

from __future__ import annotations

import hashlib
import re
from typing import Mapping, Sequence

_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                     re.DOTALL)
_SPACE = re.compile(r"[ \t\f\v]+")
_LINE_DIRECTIVE = re.compile(r"^#\s*line\b")


def strip_comments(text: str) -> str:
    """``text`` with each comment replaced by one space (phase 3: a block comment over
    several lines joins them, as the compiler sees it); string and character literals
    untouched. Backslash-newline splices are joined first (phase 2)."""
    text = text.replace("\\\n", "")
    return _TOKENS.sub(lambda m: " " if m.group(0)[0] == "/" else m.group(0), text)


def normalized(text: str) -> str:
    """The compiler-relevant text of one OpenCL C source: :func:`strip_comments`, each
    line's horizontal white space collapsed and trimmed, empty lines and ``#line`` directives
    dropped; a source that uses ``__LINE__`` or ``__FILE__`` is returned as it is (any edit then counts)."""
    if "__LINE__" in text or "__FILE__" in text:
        return text
    lines = [_SPACE.sub(" ", ln).strip() for ln in strip_comments(text).split("\n")]
    return "\n".join(ln for ln in lines if ln and not _LINE_DIRECTIVE.match(ln))


def build_key(sources: Mapping[str, str], options: Sequence[str]) -> str:
    """sha256 (hex) over each source's file name and :func:`normalized` text (sorted by name)
    and the build options of each program (in order, white space collapsed)."""
    h = hashlib.sha256()
    for name in sorted(sources):
        h.update(name.encode() + b"\0" + normalized(sources[name]).encode() + b"\0")
    for opt in options:
        h.update(b"opt\0" + " ".join(str(opt).split()).encode() + b"\0")
    return h.hexdigest()


def spirv_key(modules: Mapping[str, bytes], options: Sequence[str]) -> str:
    """sha256 (hex) over each SPIR-V module's file name and bytes (sorted by name) and the
    options of each program (in order, white space collapsed)."""
    h = hashlib.sha256(b"spirv\0")
    for name in sorted(modules):
        h.update(name.encode() + b"\0" + hashlib.sha256(modules[name]).digest())
    for opt in options:
        h.update(b"opt\0" + " ".join(str(opt).split()).encode() + b"\0")
    return h.hexdigest()
