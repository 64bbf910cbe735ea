"""The guideline report: summary tables -> report.html, report.md and figures/.

Modules, each importing only those after it: :mod:`~phonetrain.report.build` (tables, template
context, rendering), :mod:`~phonetrain.report.figures` and :mod:`~phonetrain.report.findings`,
:mod:`~phonetrain.report.analysis` (the computations both share),
:mod:`~phonetrain.report.paper` (the seed paper's figures). Of the rest of the package the
report imports only :mod:`phonetrain.results.schema`.
"""

from phonetrain.report.build import build_report, load_tables

__all__ = ["build_report", "load_tables"]
