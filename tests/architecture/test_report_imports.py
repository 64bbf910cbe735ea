"""The report package's imports point one way: build -> answer -> glance -> findings ->
{analysis, wording} -> paper (figures and changes beside findings, changes -> drift -> wording;
inside the findings package: its face -> each topic -> base), module-level only, no other module's
private names, and of the rest of phonetrain only phonetrain.results.schema,
phonetrain.results.history (what a measurement is, for comparing two folders) and the bottom
floor's io and errors."""

from __future__ import annotations

import ast
from pathlib import Path

import phonetrain.report

PKG = Path(phonetrain.report.__file__).parent
FINDINGS_TOPICS = ("gpu_cpu", "time_split", "transfers", "gemm", "bandwidth_sweep",
                   "batch_memory", "accuracy", "energy_use")
RANK = {"registry": 0, "paper": 0, "analysis": 1, "wording": 1, "drift": 1.5, "figures": 2,
        "findings.base": 2, **{f"findings.{t}": 2.1 for t in FINDINGS_TOPICS}, "findings": 2.2,
        "changes": 2, "glance": 3, "answer": 3.5, "build": 4, "__init__": 5}


def _modules() -> list[tuple[Path, str]]:
    """(file, rank key) of every module of the report package: ``figures``, ``findings``
    (the findings package's face), ``findings.gemm``."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG).with_suffix("").parts
        if len(parts) > 1 and parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((path, ".".join(parts)))
    return out


def _imports(tree: ast.Module) -> list[tuple[ast.stmt, str, list[str]]]:
    """(node, imported module, imported names) for every import in the parsed file."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node, a.name, []) for a in node.names]
    return out


def _targets(module: str, names: list[str]) -> list[str]:
    """The report modules an import reaches (``from phonetrain.report import figures``
    reaches figures)."""
    if module.startswith("phonetrain.report"):
        base = module[len("phonetrain.report."):] if module != "phonetrain.report" else ""
        if base and base in RANK:
            return [base] + [f"{base}.{n}" for n in names if f"{base}.{n}" in RANK]
        return [n for n in names if n in RANK]
    return []


def test_every_report_module_is_ranked():
    assert {key for _, key in _modules()} == set(RANK)


def test_report_imports_point_down_at_module_level_only():
    for path, key in _modules():
        tree = ast.parse(path.read_text())
        top = {id(n) for n in tree.body}
        for node, module, names in _imports(tree):
            where = f"{path.relative_to(PKG)}:{node.lineno} imports {module}"
            if module.startswith("phonetrain"):
                assert id(node) in top, f"{where} inside a function"
            if module.startswith("phonetrain") and not module.startswith("phonetrain.report"):
                assert module in ("phonetrain.results.schema", "phonetrain.results.history",
                                  "phonetrain.io", "phonetrain.errors") or (
                    module == "phonetrain.results" and names in (["schema"], ["history"])), where
            for target in _targets(module, names):
                assert RANK[target] < RANK[key], f"{where}: {target} is not below"
            if module.startswith("phonetrain.report"):
                assert not any(n.startswith("_") for n in names), f"{where}: a private name"


def test_report_analysis_draws_and_renders_nothing():
    tree = ast.parse((PKG / "analysis.py").read_text())
    mods = {m.split(".")[0] for _, m, _ in _imports(tree)}
    assert not mods & {"matplotlib", "jinja2"}


def test_report_package_exports_build_report_and_load_tables():
    assert phonetrain.report.__all__ == ["build_report", "load_tables"]
    from phonetrain.report import build
    assert phonetrain.report.build_report is build.build_report
    assert phonetrain.report.load_tables is build.load_tables


def test_the_figure_registry_loads_no_drawing_library():
    """The workflow reads the registry while it is parsed: it and the package's __init__
    import nothing of the report's (build's pandas and matplotlib load on first use)."""
    for name in ("registry.py", "__init__.py"):
        mods = {m for _, m, _ in _imports(ast.parse((PKG / name).read_text()))}
        assert not {m for m in mods if m.startswith("phonetrain")}, (name, mods)
