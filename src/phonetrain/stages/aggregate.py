"""Aggregate and report stages of a whole study.

:func:`aggregate_study` reads what exists of every expected run folder and per-device file
(a missing run or kernel build becomes a ``failed`` row with its reason: the compiler's, when
the version did not compile) and writes the summary tables; it writes nothing into the folders
it reads. :func:`report_study` writes the report from them. The workflow's ``aggregate`` and
``report`` rules, the partial report written when the workflow fails, and the hand-run
``phonetrain aggregate`` / ``phonetrain report`` commands all call these two functions with the
files of :func:`phonetrain.stages.params.expected_files`, so they give the same tables and the
same report; :func:`study_outcome` is the line that ends a study (where the report is, how
many runs are usable).
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from phonetrain import layout
from phonetrain.config import NO_KERNEL
from phonetrain.devices.toolchains import runner_source_hash, runner_sources
from phonetrain.errors import StageError
from phonetrain.kernels import KERNELS_ROOT, KernelVersionError, load_version, source_files
from phonetrain.io import read_json, write_text
from phonetrain.layout import Layout
from phonetrain.report import build_report
from phonetrain.report.build import OTHER_FORMAT
from phonetrain.report.registry import FIGURES
from phonetrain.results.aggregate import aggregate
from phonetrain.results.runs import DAMAGED, changed_params
from phonetrain.results.schema import read_table
from phonetrain.stages.params import kernel_hash
from phonetrain.stages.specs import CPU_VERSION

COMPLETE_TEXT = ("written by the workflow after a complete stage; absent after a failed run "
                 "(partial summary/report)\n")


def absent_runs(run_params: Mapping[tuple[str, str], dict[str, Any]], L: Layout
                ) -> dict[str, tuple[dict[str, Any], str]]:
    """The study's run folders that hold no measurement of the study's settings (no
    ``run.json`` and no failure record of their own, no ``params.json``, or a measurement
    under other settings that the check has not moved aside yet: ``phonetrain aggregate``
    by hand) -> (the run's params as the workflow gives them, why): the kernel build's
    failure (``failed.json`` of the build stage) when the version did not compile, else that
    the job did not run. Reads only; writes nothing into the run folders."""
    out = {}
    for (dev, exp), p in run_params.items():
        rdir = Path(L.run_dir(dev, exp))
        changed = changed_params(rdir, p) if (rdir / layout.RUN).exists() else []
        if changed and (rdir / layout.PARAMS).exists():
            out[str(rdir)] = (p, f"measured under other settings ({', '.join(changed)} "
                                 "differ) than the study's now; the next snakemake all moves "
                                 "it aside and measures it again")
            continue
        if (rdir / layout.PARAMS).exists() and (
                (rdir / layout.RUN).exists() or (rdir / layout.FAILED).exists()):
            continue
        failure = build_failure(L.kernel_build(dev, str(p["kernel"]))) if p["kernel"] else None
        why = (failure or {}).get("reason") or (
            "not measured: its job did not run (a job it needs failed, or the workflow was "
            "stopped, or the check moved it aside); rerun snakemake")
        out[str(rdir)] = (p, why)
    return out


def build_failure(build_json: str | Path) -> dict | None:
    """The ``failed.json`` a failed kernel build left beside its would-be ``build_json``
    (``reason``, ``log``), or None."""
    f = Path(build_json).with_name(layout.FAILED)
    return read_json(f) if f.exists() else None


def absent_builds(expected: Mapping[str, list[str]]) -> dict[str, str]:
    """The study's kernel builds without a ``build.json`` -> why: the compiler's reason and
    log (the build stage's ``failed.json``), or that the job never ran. Snakemake reruns
    them all, as their output is missing."""
    out = {}
    for b in expected["builds"]:
        if Path(b).exists():
            continue
        failure = build_failure(b)
        out[b] = ("\n".join(x for x in (failure.get("reason") or "build failed",
                                         failure.get("log") or "") if x)
                  if failure else
                  "not built: its job did not run (a job it needs failed, or the workflow "
                  "was stopped); rerun snakemake")
    return out


def _file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _rel(path: Path) -> str:
    """A source path relative to the checkout (``src/kernels/tiled/gemm.cl``)."""
    return Path(path).resolve().relative_to(KERNELS_ROOT.resolve().parents[1]).as_posix()


def _kernel_files(version: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """(kernel hash, ((path, content hash), ...)) of a version's resolved ``.cl`` files and the
    ``version.yaml`` of every version it inherits from; None for an unknown version."""
    try:
        v = load_version(version)
        files = source_files(version)
    except KernelVersionError:
        return None
    files += [p for p in (KERNELS_ROOT / n / "version.yaml" for n in v.chain) if p.exists()]
    return kernel_hash(version), tuple(sorted((_rel(p), _file_hash(p)) for p in files))


def _runner_files() -> tuple[str, tuple[tuple[str, str], ...]]:
    return runner_source_hash()[:16], tuple((_rel(p), _file_hash(p)) for p in runner_sources())


def measured_sources() -> Callable[..., dict[str, str] | None]:
    """A function ``(kind, device, kernel, kernel_hash, runner_hash) -> {path: content hash}``
    naming the source files a measurement was built from: the kernel version's files (none
    for the CPU backend) and the runner's (where the measurement records a runner hash). It
    knows them only when the sources in this checkout are the ones measured (their hashes
    equal the measurement's kernel and runner hashes) and answers None otherwise (e.g. a
    source edited since, not yet re-measured, or nothing to name).
    The checkout's files are read once per function made."""
    kernels = functools.lru_cache(maxsize=None)(_kernel_files)
    runner = functools.lru_cache(maxsize=1)(_runner_files)

    def sources(kind: str, device: str, kernel: str | None, khash: str | None,
                rhash: str | None) -> dict[str, str] | None:
        files: dict[str, str] = {}
        if kernel and kernel not in (NO_KERNEL, CPU_VERSION):
            k = kernels(kernel)
            if k is None or k[0] != khash:
                return None
            files.update(k[1])
        if rhash is not None:       # the GEMM sweep's rows record no runner hash
            rh, rfiles = runner()
            if rhash != rh:
                return None
            files.update(rfiles)
        return files or None
    return sources


def aggregate_study(jp: Mapping[str, Any] | None, L: Layout,
                    expected: Mapping[str, list[str]], outputs: Mapping[str, str],
                    complete: str | None = None) -> dict[str, Path]:
    """Aggregate every expected run folder and the expected per-device files into
    ``outputs`` (table -> path), the history merged into the study's
    ledger (``L.history_ledger()``; sources named by :func:`measured_sources`); write
    ``complete`` last when given.

    ``jp``: the study's job params (:func:`phonetrain.stages.params.job_params`), which give
    the rows of absent runs and builds (:func:`absent_runs`, :func:`absent_builds`); None
    aggregates what ``expected`` lists as found (``phonetrain aggregate --found``). Prints
    one line on stderr per run whose folder is damaged (:func:`damaged_lines`). Raises
    :class:`StageError` instead of writing ``complete`` when a run of the study has no valid
    measurement (a folder damaged since it was measured): a summary with such a row is not
    complete."""
    # the tables are about to change: neither they nor the report may look complete
    # until this aggregation has finished and judged them
    for marker in (L.summary_complete(), L.report_complete()):
        Path(marker).unlink(missing_ok=True)
    exist = lambda kind: [f for f in expected[kind] if Path(f).exists()]  # noqa: E731
    not_ok = absent_builds(expected) if jp else {}
    absent = absent_runs(jp["run"], L) if jp else {}
    builds = expected["builds"] if jp else exist("builds")
    paths = aggregate(expected["runs"], outputs, bandwidth_csvs=exist("bandwidth"),
                      build_jsons=builds, gemm_jsons=exist("gemm"),
                      peaks_jsons=exist("peaks"), ledger=L.history_ledger(),
                      sources=measured_sources(), not_ok=not_ok, absent=absent)
    runs = read_table(paths["runs"], "runs")
    for line in damaged_lines(runs):
        print(line, file=sys.stderr)
    if complete:
        bad = runs[runs["status"] == "failed"]
        if len(bad):
            raise StageError("aggregate: no COMPLETE marker: runs without a valid measurement: "
                             + "; ".join(f"{r.run_id}: {r.status_reason}"
                                         for r in bad.itertuples())
                             + "; rerun snakemake to measure them (a damaged one after the "
                             "phonetrain refresh its reason names)")
        write_text(complete, COMPLETE_TEXT)
    return paths


def damaged_lines(runs: pd.DataFrame) -> list[str]:
    """One line per run of the ``runs`` table whose folder is damaged (a ``failed`` row whose
    ``status_reason`` begins with :data:`phonetrain.results.runs.DAMAGED`): ``phonetrain:
    aggregate: <run folder>: <reason>``, the reason naming what is damaged and the remedy."""
    bad = runs[(runs["status"] == "failed")
               & runs["status_reason"].fillna("").str.startswith(DAMAGED)]
    return [f"phonetrain: aggregate: {r.run_dir}: {r.status_reason}" for r in bad.itertuples()]


def report_outputs(L: Layout, figure_format: str) -> dict[str, str]:
    """The report's files: ``html``, ``md``, one per figure of
    :data:`phonetrain.report.registry.FIGURES` in ``figure_format`` and, as ``<name>_alt``, the
    same figure in the other format (written beside it)."""
    other = OTHER_FORMAT[figure_format]
    return {"html": L.report_html(), "md": L.report_md(),
            **{n: L.figure(n, figure_format) for n in FIGURES},
            **{f"{n}_alt": L.figure(n, other) for n in FIGURES}}


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


USABLE_WORDS = {"ok": "ok (verified: usable)", "unstable": "unstable (kept out of guidelines)",
                "wrong": "wrong (failed verification)", "failed": "failed (missing)",
                "skipped": "skipped (device lacks a library)", "oom": "out of memory"}


def study_outcome(L: Layout, partial: bool = False) -> str:
    """The line that ends a study: where the report is and how many runs are usable, from
    ``runs.parquet`` of the results folder ``L``: ``phonetrain: report: <html> (and <md>);
    N runs: a ok (verified: usable), b unstable ..., c wrong ..., d failed ...`` (``skipped``
    and ``oom`` only when some are). ``partial``: the workflow failed and this is the
    partial report. Says so when the summary or the report is missing."""
    html, runs = Path(L.report_html()), Path(L.summary("runs"))
    if not runs.is_file():
        return f"phonetrain: no summary yet ({runs} is missing): rerun snakemake"
    status = read_table(runs, "runs")["status"].value_counts()
    parts = [f"{int(status.get(s, 0))} {w}" for s, w in USABLE_WORDS.items()
             if s in ("ok", "unstable", "wrong", "failed") or status.get(s, 0)]
    where = (f"{'partial ' if partial else ''}report: {html} (and {L.report_md()})"
             if html.is_file() else f"no report yet ({html} is missing)")
    return f"phonetrain: {where}; {int(status.sum())} runs: {', '.join(parts)}"
