"""Aggregate and report stages of a whole study.

:func:`aggregate_study` prepares every expected run folder (its ``params.json``; the build
failure or staleness that explains a missing or outdated measurement) and writes the summary
tables; :func:`report_study` writes the report from them. The workflow's ``aggregate`` and
``report`` rules, the partial report written when the workflow fails, and the hand-run
``phonetrain aggregate`` / ``phonetrain report`` commands all call these two functions with the
files of :func:`phonetrain.stages.params.expected_files`, so they give the same tables and the
same report.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Mapping

from phonetrain import layout
from phonetrain.io import read_json, write_if_changed, write_json, write_text
from phonetrain.layout import Layout
from phonetrain.report import build_report
from phonetrain.report.build import FIGURES
from phonetrain.results.aggregate import aggregate

COMPLETE_TEXT = ("written by the workflow after a complete stage; absent after a failed run "
                 "(partial summary/report)\n")


def prepare_run_folders(run_params: Mapping[tuple[str, str], dict[str, Any]],
                        L: Layout) -> None:
    """Before aggregating: give every expected run folder its ``params.json`` and, where the
    run never happened because its kernel build failed, that build's ``failed.json``.

    A run.json measured under other params (the settings or a kernel changed, then the
    workflow failed before re-measuring it) is stale: it is kept, but ``failed.json`` says
    why, so the summary never shows it as a measurement of the current config. The
    measurement ``generation`` is no setting: it rises when a run is due for re-measurement
    (:func:`phonetrain.stages.params.measurement_generation`)."""
    for (dev, exp), p in run_params.items():
        rdir = Path(L.run_dir(dev, exp))
        rdir.mkdir(parents=True, exist_ok=True)
        old = rdir / layout.PARAMS
        measured = (rdir / layout.RUN).exists()
        stale = measured and old.exists() and \
            _settings(read_json(old)) != _settings(json.loads(json.dumps(p, default=str)))
        write_if_changed(old, p)
        build_failed = Path(L.kernel_failed(dev, str(p["kernel"])))
        if p["kernel"] and (stale or not measured) and build_failed.exists():
            shutil.copyfile(build_failed, rdir / layout.FAILED)
        elif stale:
            write_json({"reason": "not re-measured: its settings or sources changed since "
                        "run.json was measured, and the workflow stopped before rerunning it "
                        "(a job failed or was interrupted); rerun snakemake"},
                       rdir / layout.FAILED)


def _settings(params: dict[str, Any]) -> dict[str, Any]:
    """A run's params without its measurement ``generation``: a run that is due for
    re-measurement (unstable, damaged) is still a measurement of the current settings."""
    return {k: v for k, v in params.items() if k != "generation"}


def aggregate_study(run_params: Mapping[tuple[str, str], dict[str, Any]], L: Layout,
                    expected: Mapping[str, list[str]], outputs: Mapping[str, str],
                    complete: str | None = None) -> dict[str, Path]:
    """Prepare the run folders, then aggregate every expected run folder and whichever of the
    expected per-device files exist into ``outputs`` (table -> path); write ``complete``
    last when given."""
    prepare_run_folders(run_params, L)
    exist = lambda kind: [f for f in expected[kind] if Path(f).exists()]  # noqa: E731
    paths = aggregate(expected["runs"], outputs, bandwidth_csvs=exist("bandwidth"),
                      build_jsons=exist("builds"), gemm_jsons=exist("gemm"),
                      peaks_jsons=exist("peaks"))
    if complete:
        write_text(complete, COMPLETE_TEXT)
    return paths


def report_outputs(L: Layout, figure_format: str) -> dict[str, str]:
    """The report's files: ``html``, ``md`` and one per figure of
    :data:`phonetrain.report.build.FIGURES`."""
    return {"html": L.report_html(), "md": L.report_md(),
            **{n: L.figure(n, figure_format) for n in FIGURES}}


def report_study(L: Layout, settings: Mapping[str, Any], facts: list[dict[str, Any]],
                 complete: str | None = None) -> dict[str, Path]:
    """The report from the summary tables of the results folder ``L`` (``settings``: the
    ``report`` section of the config: title, paper_reference, figure_format, dpi); write
    ``complete`` last when given."""
    keys = ("title", "paper_reference", "figure_format", "dpi")
    out = build_report(L.summary_dir(), report_outputs(L, settings["figure_format"]),
                       facts=list(facts), **{k: settings[k] for k in keys if k in settings})
    if complete:
        write_text(complete, COMPLETE_TEXT)
    return out
