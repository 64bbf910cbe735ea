"""The guideline report: summary tables -> report.html, report.md and figures/.

Modules, each importing only those after it: :mod:`~phonetrain.report.build` (tables, template
context, rendering), :mod:`~phonetrain.report.glance` (the first screen: the paper's findings
and this study's, per device), :mod:`~phonetrain.report.findings` (the guidelines),
:mod:`~phonetrain.report.figures`, :mod:`~phonetrain.report.changes` (before/after of
re-measured runs, ``phonetrain compare``), :mod:`~phonetrain.report.analysis` (the
computations they share), :mod:`~phonetrain.report.wording` (units, measures and the
verdicts' thresholds), :mod:`~phonetrain.report.paper` (the seed paper's figures). Of the rest
of the package the report imports only :mod:`phonetrain.results.schema` and
:mod:`phonetrain.results.history`.
"""

from phonetrain.report.build import build_report, load_tables

__all__ = ["build_report", "load_tables"]
