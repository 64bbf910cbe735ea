"""Compiler messages of a kernel build, pointed back at the sources under ``src/kernels``.

The device compiles an assembled file (:func:`~phonetrain.kernels.versions.assemble_source`:
``common.cl`` and the version's file, each after a ``#line 1 "<file>"`` directive) staged under
a temporary or device folder. A compiler that honours ``#line`` (PoCL, clang) already names the
original file and line; one that does not names the staged file, its own temporary file
(PoCL's cache, ``<source>``, ``input.cl``) and the assembled file's line numbers.
:func:`explain` rewrites such locations through the ``#line`` directives, so every message
reads ``src/kernels/<version>/<file>.cl:LINE:COL``.
"""

from __future__ import annotations

import re

LINE_DIRECTIVE = re.compile(r'^\s*#\s*line\s+(\d+)\s+"([^"]+)"')
# file:line:col (clang, PoCL) or file:line (some vendor compilers); a file is a path ending in
# .cl, or a bracketed name such as <source> or <built-in>
LOCATION = re.compile(r'(?P<file>(?:[^\s:"\']+\.cl|<[^>\s]+>)):(?P<line>\d+)(?::(?P<col>\d+))?')


def line_table(assembled: str) -> list[tuple[str, int]]:
    """Takes an assembled source; returns, for each of its lines (index 0 = line 1), the
    (file name, line number) it came from per its ``#line`` directives; lines before the
    first directive map to ``("", their own number)``."""
    out: list[tuple[str, int]] = []
    name, offset = "", 0    # line n of the assembled file is line n - offset of `name`
    for n, text in enumerate(assembled.splitlines(), start=1):
        m = LINE_DIRECTIVE.match(text)
        out.append((name, n - offset))
        if m:   # the next line is line int(m[1]) of m[2]
            name, offset = m.group(2), n + 1 - int(m.group(1))
    return out


def explain(log: str, table: list[tuple[str, int]]) -> str:
    """Takes a compiler log of one program and the :func:`line_table` of the source it
    compiled; returns the log with every ``file:line[:col]`` that does not already name a
    file of the table replaced by the original file and line (columns kept)."""
    named = {f for f, _ in table if f}

    def fix(m: re.Match) -> str:
        if m.group("file") in named or not table:
            return m.group(0)
        n = int(m.group("line"))
        if not 1 <= n <= len(table) or not table[n - 1][0]:
            return m.group(0)
        f, line = table[n - 1]
        return f"{f}:{line}" + (f":{m.group('col')}" if m.group("col") else "")

    return LOCATION.sub(fix, log)


def compiler_messages(log: str, limit: int = 40) -> str:
    """The lines of a compiler log that carry a diagnosis (``error``, ``warning``, ``note``
    or a location), at most ``limit`` of them; the whole log when none match."""
    keep = [ln for ln in log.splitlines()
            if re.search(r"\b(error|warning|note)\b", ln, re.I) or LOCATION.search(ln)]
    keep = [ln for ln in keep if not ln.startswith("runner: kernel build failed")]
    return "\n".join(keep[:limit]) if keep else log.strip()
