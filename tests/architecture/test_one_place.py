"""Each concern in one place: one module starts the runner, one module spells the results
layout, one default per setting."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

PKG = REPO / "src" / "phonetrain"
RESULT_DIRS = ("runs", "build", "plans", "summary", "report", "gemm", "peaks", "bandwidth",
               "deploy", "logs", "stage")
RUNNER_MODES = ("bench-gemm", "bench-peak", "bench-bandwidth")


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a Python file (documentation strings, i.e. string statements,
    left out), with its line."""
    tree = ast.parse(path.read_text())
    docs = {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _modules(exclude: set[str]) -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py")) if p.relative_to(PKG).as_posix() not in exclude]


def test_results_paths_are_spelled_in_layout_only():
    pattern = re.compile(rf"(^|/)({'|'.join(RESULT_DIRS)})/")
    found = [f"{p.relative_to(PKG)}:{line}: {s!r}" for p in _modules({"layout.py"})
             for line, s in _strings(p) if pattern.search(s)]
    assert found == []


def test_rules_take_paths_from_the_layout():
    """Rule files other than common.smk hold no path literal: every pattern is a Layout call."""
    found = []
    for smk in sorted((REPO / "rules").glob("*.smk")):
        if smk.name == "common.smk":
            continue
        for i, line in enumerate(smk.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for lit in re.findall(r'"([^"]*)"', code):
                if "/" in lit and not lit.startswith("captions/"):
                    found.append(f"{smk.name}:{i}: {lit}")
    assert found == []


def test_only_the_runner_driver_starts_the_runner():
    """The runner's modes are named, and device commands are run, in phonetrain/runner.py only
    (the transports under devices/ carry them out)."""
    found = []
    for p in _modules({"runner.py"}):
        rel = p.relative_to(PKG).as_posix()
        for line, s in _strings(p):
            if s in RUNNER_MODES or s == "--plan":
                found.append(f"{rel}:{line}: {s!r}")
        if rel.startswith("devices/"):
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "run" and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == "transport"):
                found.append(f"{rel}:{node.lineno}: transport.run")
    assert found == []


def test_config_yaml_restates_no_default():
    """Defaults live in the structured config (phonetrain.config); conf/config.yaml only picks
    the group members."""
    import yaml
    doc = yaml.safe_load((REPO / "conf" / "config.yaml").read_text())
    assert set(doc) == {"defaults"}


def test_the_cpu_backends_gemm_series_has_one_name():
    """The GEMM study's series of the runner's CPU backend is named by
    :data:`phonetrain.stages.specs.CPU_VERSION`; the report (which imports no stage) reads
    gemm.parquet with its own copy, which must agree."""
    from phonetrain.report.analysis import CPU_KERNEL
    from phonetrain.stages.specs import CPU_VERSION
    assert CPU_KERNEL == CPU_VERSION
