"""A stage job imports only what it uses: the modules the rules run as processes
(``stage("<module>", ...)`` in rules/*.smk, ``python -m phonetrain.stages.<module>``) load no
pandas, pyarrow, matplotlib or numpy when imported -- each job is a new process, and those
libraries cost more start-up than most jobs work (numpy alone about 0.1 s of CPU on the 2-core
host, every job). A stage function that needs one imports it inside (e.g. the perfetto job's
trace reading, the lower job's lowering, the train job's statistics).

Two checks: the import statements that run at import time, followed through the package
(names the chain that reaches a library), and the modules a fresh interpreter really holds
after importing each stage module (also what a third-party library pulls in)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO

SRC = REPO / "src"
HEAVY = ("pandas", "pyarrow", "matplotlib", "numpy")


def stage_modules() -> list[str]:
    """The stage modules the rules start as processes."""
    text = "".join(p.read_text() for p in sorted((REPO / "rules").glob("*.smk")))
    return sorted({f"phonetrain.stages.{m}" for m in re.findall(r'stage\("(\w+)"', text)})


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def import_time_names(tree: ast.Module, name: str, is_pkg: bool) -> set[str]:
    """Modules (and ``module.name`` candidates) the import statements run at import time
    name: module-level statements, inside module-level ``if``/``try`` blocks (not ``if
    TYPE_CHECKING:``), never inside a function or class."""
    found: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if is_pkg else name.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.If) and not _is_type_checking(node):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
            for h in node.handlers:
                todo += h.body
    return found


def package_modules(src: Path) -> dict[str, Path]:
    out = {}
    for p in (src / "phonetrain").rglob("*.py"):
        out[".".join(p.with_suffix("").relative_to(src).parts).removesuffix(".__init__")] = p
    return out


def heavy_chain(start: str, src: Path, heavy=HEAVY) -> list[str] | None:
    """The shortest chain of import-time imports from the module ``start`` to a library of
    ``heavy`` (``[start, ..., "pandas"]``), or None. Importing ``a.b.c`` also runs ``a`` and
    ``a.b``."""
    mods = package_modules(src)
    prev: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        m = queue.pop(0)
        path = mods[m]
        names = import_time_names(ast.parse(path.read_text()), m, path.name == "__init__.py")
        targets = set()
        for n in names:
            top = n.split(".")[0]
            if top in heavy:
                chain = [n.split(".")[0], m]
                while prev[chain[-1]] is not None:
                    chain.append(prev[chain[-1]])
                return chain[::-1]
            parts = n.split(".")
            targets |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} & set(mods)
        for t in sorted(targets - set(prev)):
            prev[t] = m
            queue.append(t)
    return None


def test_the_rules_start_stage_modules():
    assert {"phonetrain.stages.train", "phonetrain.stages.gemm",
            "phonetrain.stages.deploy"} <= set(stage_modules())


@pytest.mark.parametrize("module", stage_modules())
def test_a_stage_module_imports_no_heavy_library_at_import_time(module):
    assert heavy_chain(module, SRC) is None, \
        f"{' -> '.join(heavy_chain(module, SRC))}: import it inside the function that needs it"


def test_the_chain_check_finds_a_planted_import(tmp_path):
    """The check itself: a package whose stage reaches pandas through two modules, a package
    __init__ and a module-level ``try``, and one that imports it only inside a function or for
    type checking."""
    pkg = tmp_path / "phonetrain"
    for rel, text in {
        "__init__.py": "",
        "stages/__init__.py": "",
        "stages/heavy.py": "from phonetrain.results import runs\n",
        "stages/light.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    import pandas\ndef f():\n    import matplotlib\n"),
        "results/__init__.py": "try:\n    import pyarrow.parquet\nexcept ImportError:\n    pass\n",
        "results/runs.py": "import pandas as pd\n",
    }.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    assert heavy_chain("phonetrain.stages.heavy", tmp_path) == [
        "phonetrain.stages.heavy", "phonetrain.results", "pyarrow"]
    assert heavy_chain("phonetrain.stages.heavy", tmp_path, ("pandas",)) == [
        "phonetrain.stages.heavy", "phonetrain.results.runs", "pandas"]
    assert heavy_chain("phonetrain.stages.light", tmp_path) is None


def loaded_heavy(module: str) -> list[str]:
    """The libraries of HEAVY a fresh interpreter holds after ``import module``."""
    probe = (f"import sys, {module}; "
             f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, cwd=REPO)
    return out.stdout.split()


def test_stage_processes_load_no_heavy_library():
    """What a job's interpreter really holds, also through third-party libraries; the same
    probe sees pandas where a module does import it."""
    assert "pandas" in loaded_heavy("phonetrain.results.runs")
    bad = {m: got for m in stage_modules() if (got := loaded_heavy(m))}
    assert bad == {}, f"stage modules that load {HEAVY} at import: {bad}"


# Libraries a stage job loads only where its work uses them: YAML (a kernel version's
# version.yaml or vk/tuning.yaml, read by the functions that load them), filelock (a device's
# host lock, taken by a measuring job) and ctypes (finding the OpenCL library). Each costs a
# few ms of every job's start on the 2-core host; together about 0.03 s of CPU.
AT_WORK = ("yaml", "filelock", "ctypes")


def test_stage_processes_load_yaml_filelock_ctypes_only_at_work():
    """A fresh interpreter's modules after importing each stage module: none of
    :data:`AT_WORK`; the same probe sees yaml where a module does import it."""
    probe = ("import sys, {m}; print(' '.join(x for x in {libs!r} if x in sys.modules))")
    run = lambda m: subprocess.run(  # noqa: E731
        [sys.executable, "-c", probe.format(m=m, libs=AT_WORK)], capture_output=True,
        text=True, check=True, cwd=REPO).stdout.split()
    assert "yaml" in run("phonetrain.config.compose")
    bad = {m: got for m in stage_modules() if (got := run(m))}
    assert bad == {}, f"stage modules that load {AT_WORK} at import (import it inside the " \
        f"function that uses it): {bad}"
