"""The guideline report: summary tables -> report.html, report.md and figures/."""

from phonetrain.report.build import *  # noqa: F401,F403
from phonetrain.report.build import _bandwidth_row, _data_uri, _fmt, _str  # noqa: F401
