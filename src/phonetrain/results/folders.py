"""Whether a run folder holds a whole measurement, read without pandas: its runner processes
(the timed ones and the ``events/`` one), the one whose trace the Perfetto trace shows, and
what makes a finished folder unusable (:func:`folder_problems`). The train job checks its
folder before it converts the trace, and :mod:`phonetrain.results.runs` (the tables, with
pandas) reads every folder through the same functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from phonetrain import layout
from phonetrain.errors import ResultsFileError
from phonetrain.io import read_json, sha256_file


def _repeat_dirs(run_dir: Path) -> list[Path]:
    extra = sorted((p for p in run_dir.glob("repeat_*") if p.is_dir()),
                   key=lambda p: int(p.name.split("_")[1]) if p.name[7:].isdigit() else 0)
    return [run_dir] + extra



def traced_process(run_dir: str | Path) -> Path:
    """The folder of a run whose ``trace.csv`` holds per-command device times, for the
    Perfetto trace: ``events/`` where the step's processes recorded no event, else the run
    folder itself."""
    events = Path(run_dir) / layout.EVENTS
    return events if (events / layout.RUN).is_file() else Path(run_dir)



def processes(run_dir: Path) -> list[tuple[Path, str]]:
    """Every runner process of a run folder with its role: the timed processes (run folder,
    ``repeat_<k>``) ``step`` and the ``events/`` process ``breakdown`` where the folder has
    one, else each ``both`` (its iterations give the step time and the breakdown)."""
    events = run_dir / layout.EVENTS
    apart = events.is_dir()
    return [(d, "step" if apart else "both") for d in _repeat_dirs(run_dir)] + \
        ([(events, "breakdown")] if apart else [])



EVAL_COLUMNS = ("heldout_loss", "heldout_accuracy")
EVAL_POINT_KEYS = ("iteration", "cumulative_wall_ms", *EVAL_COLUMNS, "n_heldout")


def eval_points(run_dir: str | Path) -> list[dict[str, Any]]:
    """``eval.json``'s points (each with :data:`EVAL_POINT_KEYS`), in order; empty when the
    folder has none. Raises :class:`ResultsFileError` naming a damaged file."""
    p = Path(run_dir) / layout.EVAL
    if not p.exists():
        return []
    pts = read_json(p).get("points")
    cols = list(EVAL_POINT_KEYS)
    if not isinstance(pts, list) or any(not isinstance(q, dict) or
                                         any(c not in q for c in cols) for q in pts):
        raise ResultsFileError(f"{p}: 'points' must be a list of objects with {cols}")
    return pts


def _eval_expected(params: Mapping[str, Any]) -> bool:
    """Whether the run evaluated: ``measure.eval_every`` of its ``params.json`` (a run spec;
    in a folder written before run specs, under ``config``)."""
    measure = params.get("measure") or (params.get("config") or {}).get("measure") or {}
    return bool(measure.get("eval_every"))



def folder_problems(run_dir: str | Path, *, hashes: bool = True) -> list[str]:
    """What makes a finished run folder (its ``run.json`` says ``ok``) unusable as a
    measurement, per repeat: a ``run.json`` that cannot be read, a ``trace.csv`` whose data rows
    differ from the ``trace_rows`` the runner recorded (cut short, or grown), a file the
    runner's ledger lists (``files``: ``size_bytes``, ``sha256``; src/runner/ledger.c) that is
    missing or differs in size or content, a dump the runner listed that is missing or empty.
    An empty list when the folder is whole (or is not a finished, ok run: failed and skipped
    runs have nothing to check). ``hashes`` False skips every SHA-256 (contents are then
    checked by size and row counts only)."""
    run_dir = Path(run_dir)
    if not (run_dir / layout.RUN).exists() or (run_dir / layout.FAILED).exists():
        return []
    problems, measured = [], False
    for d, _ in processes(run_dir):
        try:
            run = read_json(d / layout.RUN)
        except ResultsFileError as e:
            problems.append(e.message)
            continue
        if run.get("status", "ok") != "ok":
            continue
        measured = True
        problems += _record_problems(d / layout.RUN, run)
        trace = d / layout.TRACE
        rows = _data_rows(trace)
        if rows is None:
            problems.append(f"{trace}: missing")
        elif "trace_rows" in run and rows != int(run["trace_rows"]):
            problems.append(f"{trace}: {rows} rows, the runner wrote {run['trace_rows']}")
        problems += _ledger_problems(d, run.get("files") or {}, hashes)
        for rel in run.get("dumps", []):
            f = d / rel
            if not f.is_file() or f.stat().st_size == 0:
                problems.append(f"{f}: missing or empty")
    if measured:
        problems += _companion_problems(run_dir, hashes)
    return list(dict.fromkeys(problems))


RUN_KEYS = ("iters", "warmup", "iterations")
"""Keys of the runner's ``run.json`` of an ok run that a measurement cannot be read without
(``trace_rows`` and ``files`` are checked where present)."""


def _record_problems(path: Path, run: dict[str, Any]) -> list[str]:
    """A ``run.json`` that is not the runner's whole record (it is written last and cannot
    list its own hash): keys missing, per-iteration records that do not add up to the warm-up
    and measured counts, or measured wall times whose median is not the one the runner
    computed from them (``measurement.median_ms``)."""
    missing = [k for k in RUN_KEYS if k not in run]
    if missing:
        return [f"{path}: lacks {missing}, not the runner's complete record"]
    iters = run["iters"]
    want = int(run["warmup"]) + int(run["iterations"])
    if not isinstance(iters, list) or len(iters) != want:
        n = len(iters) if isinstance(iters, list) else "no"
        return [f"{path}: {n} iteration records, the runner ran {want}"]
    median = (run.get("measurement") or {}).get("median_ms")
    walls = [float(i.get("wall_ms", float("nan"))) for i in iters if not i.get("warmup")]
    if median is not None and walls:
        got = float(np.median(walls))
        if not np.isclose(got, float(median), rtol=1e-4, atol=1e-9):
            return [f"{path}: measured wall times have median {got:.6g} ms, the runner "
                    f"recorded {float(median):.6g} ms"]
    return []


def _companion_problems(run_dir: Path, hashes: bool = True) -> list[str]:
    """The files the train stage writes beside a measurement: ``params.json`` (the settings
    measured), ``verify.json`` (the verdict), ``measurement.json`` (the measurement verdict;
    a folder without one is judged on its iterations, one that cannot be read is damaged),
    ``eval.json`` when the settings evaluate (``measure.eval_every`` > 0) and ``plan.json``
    (the plan that ran: equal to the SHA-256 the verdict recorded, when it recorded one)."""
    out, docs = [], {}
    for name in (layout.PARAMS, layout.VERIFY):
        try:
            docs[name] = read_json(run_dir / name)
        except ResultsFileError as e:
            out.append(e.message if (run_dir / name).exists() else f"{run_dir / name}: missing")
    if (run_dir / layout.MEASUREMENT).exists():
        try:
            read_json(run_dir / layout.MEASUREMENT)
        except ResultsFileError as e:
            out.append(e.message)
    if _eval_expected(docs.get(layout.PARAMS, {})):   # measure.eval_every > 0: eval.json too
        try:
            if not eval_points(run_dir):
                out.append(f"{run_dir / layout.EVAL}: missing or without points "
                           "(measure.eval_every > 0)")
        except ResultsFileError as e:
            out.append(e.message)
    want = docs.get(layout.VERIFY, {}).get("plan_sha256")
    plan = run_dir / layout.PLAN
    if want and (not plan.is_file() or (hashes and sha256_file(plan) != want)):
        out.append(f"{plan}: not the plan this run measured (changed since, e.g. by a run "
                   "that did not finish)")
    return out


def _ledger_problems(folder: Path, ledger: dict[str, Any], hashes: bool = True) -> list[str]:
    """Files of the runner's ledger that are missing, or differ in size or SHA-256."""
    out = []
    for rel, entry in ledger.items():
        f = folder / rel
        if not f.is_file():
            out.append(f"{f}: missing")
        elif f.stat().st_size != int(entry.get("size_bytes", -1)):
            out.append(f"{f}: {f.stat().st_size} bytes, the runner wrote {entry.get('size_bytes')}")
        elif hashes and entry.get("sha256") and sha256_file(f) != entry["sha256"]:
            out.append(f"{f}: content differs from what the runner wrote (SHA-256)")
    return out


def _data_rows(csv: Path) -> int | None:
    """Lines after the header of a CSV file; None when it is missing."""
    try:
        with open(csv, "rb") as f:
            return max(sum(1 for _ in f) - 1, 0)
    except OSError:
        return None
