"""The package's imports point one way: no import circle, every import counted (also those
inside functions), and each wing imports only the wings below it."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import REPO

SRC = REPO / "src"
PKG = SRC / "phonetrain"

# Wings from the top down; a module may import its own wing and the wings below it.
LAYERS = [
    {"cli"},
    {"stages"},
    {"runner", "lowering", "kernels", "results", "config", "reference", "report"},
    {"devices", "plan", "models", "data", "io", "layout", "errors", "spans"},
]
# Imports allowed between wings of one floor (the bottom floor's leaves may use each other).
SAME_FLOOR = {"lowering": {"kernels"}, "reference": {"kernels"}, "config": {"kernels"},
              "report": {"results"}}


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        name = ".".join(p.with_suffix("").relative_to(SRC).parts)
        out[name.removesuffix(".__init__")] = p
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every project module that ``name`` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    state, stack, found = {}, [], []

    def visit(u: str) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(g[u]):
            if state.get(v) == 1:
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    return found


def wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_circle():
    assert cycles(graph()) == []


def test_a_circle_is_detected():
    """The check itself: a hand-made circle is reported."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]


def test_wings_import_only_downwards():
    floor = {w: i for i, ws in enumerate(LAYERS) for w in ws}
    bad = []
    for m, deps in graph().items():
        a = wing(m)
        for d in deps:
            b = wing(d)
            if a == b or b == "" or a == "":
                continue
            up = floor[b] < floor[a]
            sideways = floor[b] == floor[a] and floor[a] != len(LAYERS) - 1 and \
                b not in SAME_FLOOR.get(a, set())
            if up or sideways:
                bad.append(f"{m} -> {d}")
    assert bad == []
