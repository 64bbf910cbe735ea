"""Small functions: no Python function or method of the project (package, benchmarks, tests,
CI scripts) is longer than :data:`MAX_LINES` lines, from its ``def`` (decorators excluded)
to its last line, docstring and comments included."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

MAX_LINES = 80
ROOTS = ("src", "benchmarks", "tests", ".ci")


def long_functions(source: str, filename: str = "<planted>",
                   limit: int = MAX_LINES) -> list[str]:
    """``file:line name (N lines)`` of every function of ``source`` over ``limit`` lines,
    nested ones included."""
    return [f"{filename}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(ast.parse(source))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > limit]


def _python_files() -> list[Path]:
    return [p for root in ROOTS for p in sorted((REPO / root).rglob("*.py"))
            if ".venv" not in p.parts and "egg-info" not in str(p)]


def test_the_scan_finds_a_planted_long_function():
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_LINES))
    planted = f"def short():\n    return 1\n\n\nclass A:\n    def long(self):\n{body}\n"
    assert long_functions(planted) == [f"<planted>:6 long ({MAX_LINES + 1} lines)"]
    assert long_functions(planted, limit=MAX_LINES + 1) == []


def test_no_function_is_longer_than_the_limit():
    files = _python_files()
    assert len(files) > 100
    found = [hit for p in files
             for hit in long_functions(p.read_text(), str(p.relative_to(REPO)))]
    assert not found, f"functions over {MAX_LINES} lines (split them):\n" + "\n".join(found)
