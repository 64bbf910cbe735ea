"""The guideline report: summary tables -> report.html, report.md and figures/.

Modules, each importing only those after it: :mod:`~phonetrain.report.build` (tables, template
context, rendering), :mod:`~phonetrain.report.glance` (the first screen: the paper's findings
and this study's, per device), :mod:`~phonetrain.report.findings` (the guidelines),
:mod:`~phonetrain.report.figures`, :mod:`~phonetrain.report.changes` (before/after of
re-measured runs, ``phonetrain compare``), :mod:`~phonetrain.report.analysis` (the
computations they share), :mod:`~phonetrain.report.wording` (units, measures and the
verdicts' thresholds), :mod:`~phonetrain.report.paper` (the seed paper's figures), :mod:`~phonetrain.report.registry` (the figures, written once). Of the rest
of the package the report imports only :mod:`phonetrain.results.schema` and
:mod:`phonetrain.results.history`.
"""

from importlib import import_module
from typing import Any

__all__ = ["build_report", "load_tables"]


def __getattr__(name: str) -> Any:
    """``build_report`` and ``load_tables`` from :mod:`~phonetrain.report.build`, loaded on
    first use (PEP 562): the workflow reads :mod:`~phonetrain.report.registry` while it is
    parsed, and importing the package must not load pandas and matplotlib there."""
    if name in __all__:
        return getattr(import_module("phonetrain.report.build"), name)
    raise AttributeError(f"module 'phonetrain.report' has no attribute {name!r}")
