"""The runner's ``trace.csv`` as numpy columns, the commands placed on the host clock, and a
run's Chrome/Perfetto trace, without pandas: the train job converts its run's trace, and a
pandas import would cost it more than the conversion. :mod:`phonetrain.results.profiling`
analyses the same trace with pandas through :func:`clock_offset` and :func:`placed` here (the
method is in its docstring).

Columns: a dict of equal-length numpy arrays, one per :data:`TRACE_COLUMNS` (text columns of
``str`` objects, the others int64 with 0 where the runner wrote none) and ``queue`` where the
trace has one, rows in (``iteration``, ``seq``) order."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from phonetrain.errors import PhonetrainError

TRACE_COLUMNS = ("iteration", "seq", "kind", "name", "layer", "phase", "bytes", "flops",
                 "queued_ns", "submit_ns", "start_ns", "end_ns", "host_begin_ns", "host_end_ns")
KINDS = ("kernel", "h2d", "d2h", "map", "unmap", "d2d", "host")
TEXT_COLUMNS = ("name", "layer", "phase", "kind", "op")
Columns = dict[str, np.ndarray]


class TraceError(PhonetrainError, ValueError):
    """A trace that cannot be analysed; the message names the file or column."""


def missing_columns(names, where: str) -> None:
    """Raise :class:`TraceError` when a :data:`TRACE_COLUMNS` column is not in ``names``."""
    missing = [c for c in TRACE_COLUMNS if c not in names]
    if missing:
        raise TraceError(f"{where}: missing trace columns {missing} (runner outputs changed? "
                         "rebuild the runner and rerun)")


def unknown_kinds(kinds, where: str) -> None:
    """Raise :class:`TraceError` for a command kind outside :data:`KINDS`."""
    bad = sorted(set(kinds) - set(KINDS))
    if bad:
        raise TraceError(f"{where}: unknown command kinds {bad}; expected one of {KINDS}")


def read_columns(path: str | Path) -> Columns:
    """A ``trace.csv`` as columns (module docstring). Raises :class:`TraceError` naming the
    file when it cannot be read, lacks a column, has an unknown kind or a number that is
    not one."""
    path = Path(path)
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace: {e}") from None
    if not rows:
        raise TraceError(f"{path}: cannot read the trace: no header")
    head, body = rows[0], rows[1:]
    missing_columns(head, str(path))
    keep = [c for c in TRACE_COLUMNS if c not in TEXT_COLUMNS] + \
        (["queue"] if "queue" in head else [])
    cols: Columns = {}
    for c in [c for c in TEXT_COLUMNS if c in head] + keep:
        i = head.index(c)
        vals = [r[i] if i < len(r) else "" for r in body]
        cols[c] = np.array(vals, dtype=object) if c in TEXT_COLUMNS else _ints(vals, c, path)
    unknown_kinds(cols["kind"], str(path))
    order = np.lexsort((cols["seq"], cols["iteration"]))   # stable
    return {c: v[order] for c, v in cols.items()}


def _ints(vals: list[str], col: str, path: Path) -> np.ndarray:
    try:
        return np.array([int(float(v)) if v else 0 for v in vals], dtype=np.int64)
    except ValueError as e:
        raise TraceError(f"{path}: column {col}: {e}") from None


def on_device(c: Columns) -> np.ndarray:
    """Rows with device timestamps (bool)."""
    return (c["end_ns"] > 0) & (c["start_ns"] > 0)


def clock_offset(c: Columns) -> tuple[np.ndarray, float]:
    """Per-row offset (ns, float) mapping device timestamps onto the host monotonic clock, and
    the uncertainty (half-width of the bracket, ns; NaN when brackets disagree; 0 when no row
    has device timestamps); :mod:`phonetrain.results.profiling` gives the method."""
    n, dev = len(c["kind"]), on_device(c)
    if not dev.any():
        return np.zeros(n), 0.0
    anchored = dev & (c["queued_ns"] > 0)
    rows = anchored if anchored.any() else dev
    anchor = np.where(anchored, c["queued_ns"], c["start_ns"])
    lo = (c["host_begin_ns"] - anchor)[rows].astype(float)
    hi = (c["host_end_ns"] - anchor)[rows].astype(float)
    if lo.max() <= hi.min():
        return np.full(n, (lo.max() + hi.min()) / 2), (hi.min() - lo.max()) / 2
    mid = (lo + hi) / 2
    off = np.full(n, float(np.median(mid)))
    off[rows] = mid
    return off, float("nan")


def placed(c: Columns, off: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every command as ``[begin_ns, end_ns)`` on the host clock and its own ``dur_ns``
    (float arrays) given the clock offset ``off``: a device row without ``queued_ns`` whose
    shifted interval leaves its own enqueue call is placed at the end of that call, its
    duration capped at the call's."""
    dev = on_device(c)
    hb, he = c["host_begin_ns"], c["host_end_ns"]
    dur = np.where(dev, c["end_ns"] - c["start_ns"], he - hb).astype(float)
    begin = np.where(dev, c["start_ns"] + off, hb).astype(float)
    end = np.where(dev, c["end_ns"] + off, he).astype(float)
    stray = dev & (c["queued_ns"] <= 0) & ((begin < hb) | (end > he))
    dur = np.where(stray, np.minimum(dur, (he - hb).astype(float)), dur)
    end = np.where(stray, he, end)
    begin = np.where(stray, end - dur, begin)
    return begin, end, dur


_META = [
    {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": None}},
    {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "command queue"}},
    {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "transfer queue (1)"}},
    {"ph": "M", "pid": 2, "tid": 0, "name": "process_name", "args": {"name": "host"}},
    {"ph": "M", "pid": 2, "tid": 1, "name": "thread_name", "args": {"name": "runner thread"}},
    {"ph": "M", "pid": 2, "tid": 2, "name": "thread_name", "args": {"name": "iterations"}},
]


def perfetto_trace(c: Columns, walls: dict[int, tuple[float, bool]] | None = None, *,
                   device: str = "device", title: str = "") -> dict:
    """Chrome trace-event JSON of the columns ``c``; ``walls``: iteration -> (wall_ms,
    measured) from ``run.json``. The tracks are :func:`phonetrain.results.profiling
    .perfetto_trace`'s."""
    off, unc = clock_offset(c)
    begin, end, dur = placed(c, off)
    dev = on_device(c)
    t0 = float(begin.min()) if len(begin) else 0.0
    events = [dict(e, args={"name": device}) if e["args"]["name"] is None else dict(e)
              for e in _META]
    queues = c["queue"] if "queue" in c else np.zeros(len(begin), np.int64)
    for i in range(len(begin)):
        args = {k: int(c[k][i]) for k in ("bytes", "flops")}
        args.update(layer=c["layer"][i], phase=c["phase"][i], seq=int(c["seq"][i]),
                    iteration=int(c["iteration"][i]))
        if dev[i]:   # end_ns: the placed end (host clock), as the trace has always given it
            args.update({k: int(c[k][i]) for k in ("queued_ns", "submit_ns", "start_ns")},
                        end_ns=int(end[i]))
        args.update(host_begin_ns=int(c["host_begin_ns"][i]), host_end_ns=int(c["host_end_ns"][i]))
        events.append({"ph": "X", "pid": 1 if dev[i] else 2,
                       "tid": 1 + int(queues[i]) if dev[i] else 1,
                       "name": c["name"][i] or c["kind"][i], "cat": c["kind"][i],
                       "ts": (float(begin[i]) - t0) / 1e3, "dur": max(float(dur[i]), 0.0) / 1e3,
                       "args": args})
    for it in np.unique(c["iteration"]):
        sel = c["iteration"] == it
        b, e = float(begin[sel].min()), float(end[sel].max())
        wall, measured = (walls or {}).get(int(it), (float("nan"), True))
        label = f"iteration {it}" + ("" if measured else " (warm-up)")
        events.append({"ph": "X", "pid": 2, "tid": 2, "name": label, "cat": "iteration",
                       "ts": (b - t0) / 1e3, "dur": (e - b) / 1e3,
                       "args": {"wall_ms": None if np.isnan(wall) else float(wall),
                                "measured": bool(measured)}})
    meta = {"title": title, "clock": "host monotonic; device rows shifted by one offset",
            "clock_offset_uncertainty_ns": None if np.isnan(unc) else float(unc)}
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": meta}


def iteration_walls(run: dict) -> dict[int, tuple[float, bool]]:
    """``run.json``'s iterations as iteration -> (wall_ms, measured): its ``"iters"`` records
    (``iteration``, ``warmup``, ``wall_ms``), or parallel ``"wall_ms"`` with ``"warmup"`` (a
    count, warm-up first). Empty when it has neither."""
    recs = run.get("iters", run.get("iterations"))
    if isinstance(recs, list):
        has_warmup = any("warmup" in r for r in recs)
        out = {}
        for k, r in enumerate(recs):
            it = int(r.get("iteration", k))
            warm = bool(r.get("warmup", float("nan"))) if has_warmup else \
                it < int(run.get("warmup", 0))
            w = r.get("wall_ms")
            out[it] = (float("nan") if w is None else float(w), not warm)
        return out
    if isinstance(run.get("wall_ms"), list):
        n0 = int(run.get("warmup", 0))
        return {k: (float("nan") if w is None else float(w), k >= n0)
                for k, w in enumerate(run["wall_ms"])}
    return {}


def write_json_atomic(obj: object, path: str | Path) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (temp file in the same folder, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(obj, allow_nan=False))
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
