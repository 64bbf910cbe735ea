"""Where a run's time goes: per-iteration breakdown, data-movement share, Perfetto trace.

Input is the runner's ``trace.csv`` (one row per command execution; columns in
:data:`TRACE_COLUMNS`) and the per-iteration host wall times from ``run.json``.

Two clocks (why this module aligns them):

- device ns (``queued_ns``/``submit_ns``/``start_ns``/``end_ns``) are OpenCL profiling
  timestamps on the *device's* clock (``CL_PROFILING_COMMAND_*``); only differences between
  them are meaningful on the host side. Rows without them (``host`` rows such as the copy into
  a mapped buffer, and every row of the CPU backend) have 0 or empty there.
- host ns (``host_begin_ns``/``host_end_ns``) are the runner's monotonic clock around the
  enqueue call (and its wait, for blocking commands); the iteration wall time is on this clock.

Durations never mix clocks: a device command's duration is ``end_ns - start_ns``, a host
row's is ``host_end_ns - host_begin_ns``. Only the *union* of command intervals (to find the
time no command covers, the launch gaps) needs one clock. We map device time to host time with
one offset per run, bracketed by the enqueue calls: ``CL_PROFILING_COMMAND_QUEUED`` is taken
inside the enqueue call, so for every device row ``host_begin <= queued + offset <= host_end``.
Intersecting these brackets over all rows gives ``[lo, hi]``; we take its midpoint and report
the half-width as ``clock_offset_uncertainty_ns`` (NaN when the brackets disagree, e.g. the
device clock drifts; then each row's bracket midpoint is used). Rows without ``queued_ns``
(NVIDIA's map/unmap events carry none, and their start/end do not follow the queue's clock)
take no part in the bracket; one whose shifted interval leaves its own enqueue call is placed
at the end of that call (:func:`host_intervals`). Only when no row has ``queued_ns`` is
``start_ns`` the anchor (bracketed that way by blocking commands only).

Per iteration: ``<kind>_ms`` sums durations per command kind; ``busy_ms`` is the length of
the union of all command intervals on the host clock; ``gap_ms = max(wall_ms - busy_ms, 0)``
(launch overhead, host work between commands, waits); ``overlap_ms = sum(kinds) - busy_ms``
(near 0 on an in-order queue). ``transfer_ms`` (data movement) sums ``h2d``, ``d2h``, ``map``,
``unmap``, ``d2d`` and the ``host`` rows that copy data to/from mapped buffers (``op`` =
``map_copy``, or ``staging_copy``: the Vulkan backend's copy between a host array and its
staging buffer; for traces without ``op``: bytes > 0 and phase not ``load``), as in Das et al. 2022, where data movement is every
host<->device copy. ``data_movement_share`` of a run is the sum of ``exposed_transfer_ms``
over measured iterations divided by the sum of their ``wall_ms``, clipped to 0..1 (equal to
the ``transfer_ms`` share where nothing overlaps).
``transfer_kernel_overlap_ms`` is the time during which a data-movement command and a kernel
are both active: the length of the intersection of the union of data-movement intervals with
the union of kernel intervals (host clock; both sides carry the same device clock offset, so
their relative placement is the device's). It is 0 on one in-order queue and what the
``pipelined`` placement (transfers on a second queue) hopes to make large.
``exposed_transfer_ms = max(transfer_ms - transfer_kernel_overlap_ms, 0)`` is the data
movement no kernel hides; ``data_movement_share`` uses it, so time overlapped with compute is
not counted twice (once as kernel, once as transfer) and kernel share + movement share + gap
share stay within the iteration.
``transfer_overhead_ms`` is the part of ``gap_ms`` inside the host calls of data-movement
commands (a blocking copy's driver and synchronisation cost); ``data_movement_call_share``
adds it to ``transfer_ms``, closer to what a host-side profiler timing each copy call (MNN's,
as in the paper) reports.

Launches (:func:`launch_stats`): kernel commands per measured iteration, the median idle time
between consecutive kernels, and ``gap_ms`` per launch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from phonetrain.results import tracefile
from phonetrain.results.tracefile import (KINDS, TRACE_COLUMNS, TraceError,  # noqa: F401
                                          write_json_atomic)

MOVEMENT_KINDS = ("h2d", "d2h", "map", "unmap", "d2d")
NS_PER_MS = 1e6
_STR = pd.Series([""]).astype(str).dtype   # what ``astype(str)`` gives: a checked text column


def read_trace_csv(path: str | Path) -> pd.DataFrame:
    """Read a runner ``trace.csv`` into a DataFrame with :data:`TRACE_COLUMNS`.

    Integer ns columns stay int64 (0 where the runner had no value). Raises
    :class:`TraceError` naming the file for a missing column or an unknown ``kind``.
    """
    path = Path(path)
    try:
        df = pd.read_csv(path, keep_default_na=False, dtype={
            "name": str, "layer": str, "phase": str, "kind": str, "op": str})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise TraceError(f"{path}: cannot read the trace: {e}") from None
    return check_trace(df, str(path))


def check_trace(df: pd.DataFrame, where: str = "trace") -> pd.DataFrame:
    """Validate and normalise a trace DataFrame (see :func:`read_trace_csv`)."""
    tracefile.missing_columns(df.columns, where)
    df = df.copy()
    for c in [c for c in ("name", "layer", "phase", "kind", "op") if c in df]:
        if not (df[c].dtype == _STR and df[c].notna().all()):  # else already normalised
            df[c] = df[c].astype(object).where(df[c].notna(), "").astype(str)
    tracefile.unknown_kinds(df["kind"], where)
    for c in TRACE_COLUMNS:
        if c not in ("kind", "name", "layer", "phase") and df[c].dtype != "int64":
            df[c] = pd.to_numeric(df[c].replace("", 0), errors="raise").fillna(0).astype("int64")
    return df.sort_values(["iteration", "seq"], kind="stable").reset_index(drop=True)


def _on_device(trace: pd.DataFrame) -> pd.Series:
    return (trace["end_ns"] > 0) & (trace["start_ns"] > 0)


def clock_offset(trace: pd.DataFrame) -> tuple[pd.Series, float]:
    """Per-row offset (ns) mapping device timestamps onto the host monotonic clock, and the
    uncertainty (half-width of the bracket, ns; NaN when brackets disagree; 0 when no row has
    device timestamps). Method in the module docstring (:func:`tracefile.clock_offset`)."""
    off, unc = tracefile.clock_offset(_columns(trace))
    return pd.Series(off, index=trace.index), unc


def _columns(trace: pd.DataFrame) -> tracefile.Columns:
    return {c: trace[c].to_numpy() for c in trace.columns}


def host_intervals(trace: pd.DataFrame) -> pd.DataFrame:
    """Every command as ``[begin_ns, end_ns)`` on the host clock plus its own ``dur_ns``
    (device clock for device rows, host clock for host rows). Adds columns to a copy.

    A device row without ``queued_ns`` (NVIDIA reports none for map/unmap) whose shifted
    interval falls outside its own enqueue call is placed at the end of that call: its
    device timestamps do not follow the queue's clock, but a blocking command's work ends
    before its call returns (its duration is capped at the call's)."""
    return _placed(trace, clock_offset(trace)[0])


def _placed(trace: pd.DataFrame, off: pd.Series) -> pd.DataFrame:
    """:func:`host_intervals` of a checked ``trace`` whose clock offset is ``off``."""
    out = trace.copy()
    out["begin_ns"], out["end_ns"], out["dur_ns"] = tracefile.placed(
        _columns(trace), off.to_numpy(dtype=float))
    return out


def merge_intervals(begin: np.ndarray, end: np.ndarray) -> list[tuple[float, float]]:
    """The union of intervals ``[begin[i], end[i])`` as sorted, disjoint ``(b, e)`` pairs."""
    merged: list[tuple[float, float]] = []
    for b, e in sorted(zip(np.asarray(begin, float), np.asarray(end, float))):
        if merged and b <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((b, e))
    return merged


def union_ns(begin: np.ndarray, end: np.ndarray) -> float:
    """Total length of the union of intervals ``[begin[i], end[i])`` (same units as input)."""
    return sum(e - b for b, e in merge_intervals(begin, end))


def intersection_ns(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of the intersection of two merged interval lists (:func:`merge_intervals`)."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


# Host rows that move data: the copy into or out of a mapped buffer (OpenCL and Vulkan map
# steps) and the copy into or out of a Vulkan staging buffer around an h2d/d2h copy command.
HOST_COPY_OPS = ("map_copy", "staging_copy")


def is_movement(trace: pd.DataFrame) -> pd.Series:
    """True for rows that move data between host and device memory (module docstring)."""
    if "op" in trace:  # the host copy of a map step ("map_copy") or of a Vulkan staging
        host_copy = (trace["kind"] == "host") & trace["op"].isin(HOST_COPY_OPS)  # buffer
    else:
        host_copy = (trace["kind"] == "host") & (trace["bytes"] > 0) & (trace["phase"] != "load")
    return trace["kind"].isin(MOVEMENT_KINDS) | host_copy


def breakdown(trace: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Per-iteration time breakdown.

    ``iterations`` has one row per iteration: ``iteration`` (int), ``wall_ms`` (float, host
    clock) and ``measured`` (bool; False for warm-up). Returns those rows with added float
    columns ``kernel_ms``, ``h2d_ms``, ``d2h_ms``, ``map_ms``, ``unmap_ms``, ``d2d_ms``,
    ``host_ms``, ``busy_ms``, ``gap_ms``, ``transfer_ms``, ``overlap_ms``,
    ``transfer_kernel_overlap_ms``, ``exposed_transfer_ms`` and ``transfer_overhead_ms`` (the
    part of ``gap_ms`` spent inside data-movement calls: driver and synchronisation cost of
    the transfers) (all ms; module docstring). An iteration with no trace rows gets
    zeros and ``gap_ms = wall_ms``.
    """
    return _breakdown(host_intervals(check_trace(trace)), iterations)


def _breakdown(iv: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """:func:`breakdown` of a checked trace's :func:`host_intervals` ``iv``: each
    iteration's rows taken by position from plain arrays (a run has thousands of
    iterations x commands; the sums are of whole nanoseconds, exact in any order)."""
    at = iv.groupby("iteration", sort=False).indices if len(iv) else {}
    kind = iv["kind"].to_numpy(dtype=object)
    dur, begin, end, call_begin, call_end = (
        iv[c].to_numpy(dtype=float) for c in ("dur_ns", "begin_ns", "end_ns", "host_begin_ns",
                                              "host_end_ns"))
    moving = is_movement(iv).to_numpy(dtype=bool)
    none = np.zeros(0, dtype=np.intp)
    rows = []
    for it in iterations.itertuples(index=False):
        i = at.get(it.iteration, none)
        k, d, b, e, mv = kind[i], dur[i], begin[i], end[i], moving[i]
        row = {f"{x}_ms": float(d[k == x].sum()) / NS_PER_MS for x in KINDS}
        busy_iv = merge_intervals(b, e)
        busy = sum(q - p for p, q in busy_iv) / NS_PER_MS
        kern = k == "kernel"
        calls = merge_intervals(call_begin[i][mv], call_end[i][mv])
        row["busy_ms"] = busy
        row["gap_ms"] = max(float(it.wall_ms) - busy, 0.0)
        row["transfer_ms"] = float(d[mv].sum()) / NS_PER_MS
        row["overlap_ms"] = max(sum(row[f"{x}_ms"] for x in KINDS) - busy, 0.0)
        row["transfer_kernel_overlap_ms"] = intersection_ns(
            merge_intervals(b[mv], e[mv]), merge_intervals(b[kern], e[kern])) / NS_PER_MS
        row["exposed_transfer_ms"] = max(row["transfer_ms"] - row["transfer_kernel_overlap_ms"],
                                         0.0)
        # the time inside data-movement calls during which no command runs
        row["transfer_overhead_ms"] = (sum(q - p for p, q in calls)
                                       - intersection_ns(calls, busy_iv)) / NS_PER_MS
        rows.append(row)
    added = pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS), index=iterations.index)
    return pd.concat([iterations, added], axis=1)


BREAKDOWN_COLUMNS = tuple(f"{k}_ms" for k in KINDS) + (
    "busy_ms", "gap_ms", "transfer_ms", "overlap_ms", "transfer_kernel_overlap_ms",
    "exposed_transfer_ms", "transfer_overhead_ms")
"""The per-iteration columns :func:`breakdown` adds."""


def no_breakdown(iterations: pd.DataFrame) -> pd.DataFrame:
    """``iterations`` with every :data:`BREAKDOWN_COLUMNS` column NaN: the iterations of a
    process that recorded no per-command event (``runner run --no-profiling``), whose trace
    holds only the host's enqueue calls, no device time to break an iteration down by."""
    return iterations.assign(**{c: np.nan for c in BREAKDOWN_COLUMNS})


def transfer_kernel_overlap_ns(intervals: pd.DataFrame) -> float:
    """Time (ns) during which a data-movement command and a kernel are both active.

    ``intervals`` has ``kind``, ``begin_ns``, ``end_ns`` (one clock, e.g. from
    :func:`host_intervals`) and optionally ``movement`` (else :func:`is_movement`); the result
    is the length of (union of movement intervals) intersected with (union of kernel
    intervals), so several transfers under one kernel count once."""
    moving = intervals["movement"] if "movement" in intervals else is_movement(intervals)
    kern = intervals["kind"] == "kernel"
    a = merge_intervals(intervals.loc[moving, "begin_ns"].to_numpy(),
                        intervals.loc[moving, "end_ns"].to_numpy())
    b = merge_intervals(intervals.loc[kern, "begin_ns"].to_numpy(),
                        intervals.loc[kern, "end_ns"].to_numpy())
    return intersection_ns(a, b)


def data_movement_share(per_iteration: pd.DataFrame, with_overhead: bool = False) -> float:
    """Share (0..1) of measured wall time spent moving data (module docstring); with
    ``with_overhead`` the idle time inside data-movement calls counts too (what a host-side
    profiler timing each copy call sees). NaN when no measured iteration has wall time."""
    m = per_iteration[per_iteration["measured"]]
    wall = float(m["wall_ms"].sum())
    if not wall > 0:
        return float("nan")
    exposed = m["exposed_transfer_ms"] if "exposed_transfer_ms" in m else m["transfer_ms"]
    moved = exposed.sum() + (m["transfer_overhead_ms"].sum() if with_overhead else 0)
    return float(np.clip(moved / wall, 0.0, 1.0))


def below_resolution(trace: pd.DataFrame, per_iteration: pd.DataFrame,
                     resolution_ns: float | None) -> dict[str, object]:
    """Device-timed commands of the measured iterations shorter than the device timer's
    resolution (``CL_DEVICE_PROFILING_TIMER_RESOLUTION``, ns): such a duration is only known
    to be below it, so sums and shares built from them are upper bounds, never a measured 0.

    Returns ``{"below_resolution_commands": int, "kernel_below_resolution": bool,
    "transfer_below_resolution": bool}``: the count, and whether *every* device-timed command
    of that kind (kernels; the data-movement kinds ``h2d, d2h, map, unmap, d2d``) is below
    it. Values are None without a resolution (the CPU backend) or without such commands."""
    if resolution_ns is None or not resolution_ns > 0:
        return dict(NO_RESOLUTION)
    return _below_resolution(check_trace(trace), per_iteration, resolution_ns)


NO_RESOLUTION = {"below_resolution_commands": None, "kernel_below_resolution": None,
                 "transfer_below_resolution": None}


def _below_resolution(tr: pd.DataFrame, per_iteration: pd.DataFrame,
                      resolution_ns: float | None) -> dict[str, object]:
    """:func:`below_resolution` of a checked trace ``tr``."""
    if resolution_ns is None or not resolution_ns > 0:
        return dict(NO_RESOLUTION)
    measured = per_iteration.loc[per_iteration["measured"], "iteration"]
    tr = tr[tr["iteration"].isin(measured) & _on_device(tr)]
    short = (tr["end_ns"] - tr["start_ns"]) < resolution_ns

    def every(mask: pd.Series) -> bool | None:
        return bool(short[mask].all()) if mask.any() else None

    return {"below_resolution_commands": int(short.sum()),
            "kernel_below_resolution": every(tr["kind"] == "kernel"),
            "transfer_below_resolution": every(tr["kind"].isin(MOVEMENT_KINDS))}


def launch_stats(trace: pd.DataFrame, per_iteration: pd.DataFrame) -> dict[str, object]:
    """Kernel launches and what they cost, over the measured iterations of one run.

    ``launches_per_iteration``: median count of ``kernel`` commands per measured iteration
    (int). ``kernel_gap_median_us``: median over pairs of consecutive kernels (no other
    command between them in the plan) of ``next start - previous end`` (device clock for device
    rows, host clock for the CPU backend; :func:`host_intervals`), in us: the device's idle time
    per launch on an in-order queue. ``launch_overhead_us``: median over measured iterations
    of ``gap_ms / launches`` (the iteration time no command covers, per launch), in us. None
    where there is no measured kernel (or no consecutive pair, for the gap)."""
    if not per_iteration["measured"].any():
        return dict(NO_LAUNCHES)
    return _launch_stats(host_intervals(check_trace(trace)), per_iteration)


NO_LAUNCHES = {"launches_per_iteration": None, "kernel_gap_median_us": None,
               "launch_overhead_us": None}


def _launch_stats(iv: pd.DataFrame, per_iteration: pd.DataFrame) -> dict[str, object]:
    """:func:`launch_stats` of a checked trace's :func:`host_intervals` ``iv``."""
    none = dict(NO_LAUNCHES)
    m = per_iteration[per_iteration["measured"]]
    if m.empty:
        return none
    iv = iv[iv["iteration"].isin(m["iteration"])].sort_values(["iteration", "seq"])
    counts = iv[iv["kind"] == "kernel"].groupby("iteration").size().reindex(
        m["iteration"], fill_value=0)
    if not counts.any():
        return none
    it, kern = iv["iteration"].to_numpy(), (iv["kind"] == "kernel").to_numpy(dtype=bool)
    pair = kern[:-1] & kern[1:] & (it[:-1] == it[1:])  # a kernel, then one of its iteration
    gaps = pd.Series((iv["begin_ns"].to_numpy(dtype=float)[1:]
                      - iv["end_ns"].to_numpy(dtype=float)[:-1])[pair] / 1e3)
    per_launch = (m.set_index("iteration")["gap_ms"] * 1e3 / counts.replace(0, np.nan)).dropna()
    return {"launches_per_iteration": int(round(float(counts.median()))),
            "kernel_gap_median_us": float(gaps.median()) if len(gaps) else None,
            "launch_overhead_us": float(per_launch.median()) if len(per_launch) else None}


def command_summary(trace: pd.DataFrame, per_iteration: pd.DataFrame) -> pd.DataFrame:
    """Per (kind, name, layer, phase) over measured iterations: ``count`` (executions),
    ``per_iteration_ms`` (mean time per measured iteration), ``per_iteration_median_ms``
    (median over measured iterations of the time per iteration: robust to an iteration
    disturbed by other load), ``median_ms`` (one execution),
    ``total_ms``, ``bytes_per_iteration``, ``flops_per_iteration``, ``gflops`` (flops / time,
    kernels), ``gbps`` (bytes / time, 1e9 B/s), ``share_of_wall`` (of measured wall time)."""
    return _command_summary(host_intervals(check_trace(trace)), per_iteration)


def _group_medians(codes: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """The median of ``values`` in each group ``0..n-1`` of ``codes`` (float64, shape (n,);
    every group holds at least one value)."""
    if n == 0:
        return np.zeros(0, dtype=float)
    order = np.argsort(codes, kind="stable")
    starts = np.searchsorted(codes[order], np.arange(n))
    return np.array([np.median(v) for v in np.split(values[order], starts[1:])], dtype=float)


def _command_summary(iv: pd.DataFrame, per_iteration: pd.DataFrame) -> pd.DataFrame:
    """:func:`command_summary` of a checked trace's :func:`host_intervals` ``iv``: the
    commands numbered once by key (in order of first appearance) and every sum and median
    taken over plain arrays (a run's trace is short; pandas' group-by costs more per call than
    the arithmetic)."""
    measured = per_iteration.loc[per_iteration["measured"], "iteration"]
    n_iter = max(len(measured), 1)
    wall_ns = float(per_iteration.loc[per_iteration["measured"], "wall_ms"].sum()) * NS_PER_MS
    iv = iv[iv["iteration"].isin(measured)]
    keys = ["kind", "name", "layer", "phase"]
    codes, uniq = pd.MultiIndex.from_arrays([iv[k] for k in keys]).factorize()
    n = len(uniq)
    dur = iv["dur_ns"].to_numpy(dtype=float)
    count = np.bincount(codes, minlength=n)
    total_ns = np.bincount(codes, weights=dur, minlength=n)
    nbytes, flops = np.zeros(n, dtype="int64"), np.zeros(n, dtype="int64")
    np.add.at(nbytes, codes, iv["bytes"].to_numpy(dtype="int64"))
    np.add.at(flops, codes, iv["flops"].to_numpy(dtype="int64"))
    it_codes, it_of = np.unique(np.stack([codes, iv["iteration"].to_numpy(dtype="int64")]),
                                axis=1, return_inverse=True)
    per_it = np.bincount(it_of.ravel(), weights=dur, minlength=it_codes.shape[1])
    out = pd.DataFrame({k: uniq.get_level_values(i) for i, k in enumerate(keys)})
    out["count"] = count
    out["per_iteration_ms"] = total_ns / n_iter / NS_PER_MS
    out["per_iteration_median_ms"] = _group_medians(it_codes[0], per_it, n) / NS_PER_MS
    out["median_ms"] = _group_medians(codes, dur, n) / NS_PER_MS
    out["total_ms"] = total_ns / NS_PER_MS
    out["bytes_per_iteration"] = nbytes // n_iter
    out["flops_per_iteration"] = flops // n_iter
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(total_ns > 0, total_ns, np.nan)
        out["gflops"] = np.where(flops > 0, flops / t, np.nan)
        out["gbps"] = np.where(nbytes > 0, nbytes / t, np.nan)
    out["share_of_wall"] = total_ns / wall_ns if wall_ns > 0 else np.nan
    return out


def analyse(trace: pd.DataFrame, iterations: pd.DataFrame,
            resolution_ns: float | None) -> dict[str, object]:
    """One process's trace checked and placed on the host clock once, then analysed as
    :func:`breakdown`, :func:`below_resolution`, :func:`launch_stats` and
    :func:`command_summary` analyse it (the same values; those functions each check and place
    the trace anew): ``{"breakdown": DataFrame, "below": dict, "launches": dict, "commands":
    DataFrame, "clock_offset_uncertainty_ns": float}`` (:func:`clock_offset`'s uncertainty).
    Raises :class:`TraceError` as :func:`check_trace` does."""
    tr = check_trace(trace)
    off, uncertainty = clock_offset(tr)
    iv = _placed(tr, off)
    b = _breakdown(iv, iterations)
    return {"breakdown": b, "below": _below_resolution(tr, b, resolution_ns),
            "launches": _launch_stats(iv, b), "commands": _command_summary(iv, b),
            "clock_offset_uncertainty_ns": uncertainty}


def perfetto_trace(trace: pd.DataFrame, iterations: pd.DataFrame | None = None, *,
                   device: str = "device", title: str = "") -> dict:
    """Chrome trace-event JSON (opens in https://ui.perfetto.dev and chrome://tracing).

    Tracks: process 1 = the OpenCL device (thread ``1 + queue`` = its command queues: every
    row with device timestamps, placed on the host clock by :func:`clock_offset`; queue 1
    holds the pipelined placement's transfers, a trace without a ``queue`` column has queue 0);
    process 2 = the host
    (thread 1 = the runner's thread: host rows and CPU-backend kernels; thread 2 =
    iterations, each spanning its commands, named with wall time and warm-up flag). ``ts`` and
    ``dur`` are microseconds from the first event (format: "Trace Event Format", Google, 2016).
    ``args`` carry bytes, flops, layer, phase, seq, iteration and the raw device/host ns.
    """
    walls = None if iterations is None else {
        int(i): (float(w), bool(m)) for i, w, m in
        zip(iterations["iteration"], iterations["wall_ms"], iterations["measured"])}
    return tracefile.perfetto_trace(_columns(check_trace(trace)), walls, device=device,
                                    title=title)
