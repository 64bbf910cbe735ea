"""What a study costs and what of it measures, read back from the job logs.

Each stage job's log (:func:`phonetrain.stages.job.run`) holds its span, ``<stage>: ok in S s
(from A to B s, Unix time)``, and one line per wait (a device lock, a cool-down) and per
runner process it started (:mod:`phonetrain.spans`). Measuring time is the wall time of the
runner processes that measure (:data:`phonetrain.runner.MEASURING_MODES`: the training runs,
the GEMM sweeps and tuning, the bandwidth sweeps and the peaks), each with its own process
start and OpenCL set-up.

:func:`closing_line` is the line every ``snakemake all`` ends with (rules/common.smk);
``benchmarks/bench_study_cost.py`` adds Snakemake's own job records for the per-rule table.
Reads only logs: cheap enough for every invocation (no file is hashed, no table opened).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from phonetrain import spans

OK_LINE = re.compile(r"^\S+: ok in [0-9.]+ s \(from ([0-9.]+) to ([0-9.]+) s, Unix time\)",
                     re.M)
SPAN_LINE = re.compile(rf"^({spans.WAIT}|{spans.MEASURE}|{spans.RUNNER}) (.+) from ([0-9.]+) to ([0-9.]+) s "
                       r"\(Unix time\)$", re.M)
FINISHED = re.compile(r"^Finished jobid: \d+ \(Rule: ([A-Za-z0-9_]+)\)", re.M)


@dataclass(frozen=True)
class JobCost:
    """One finished stage job: its rule (the log's first folder under ``logs/``), its log,
    its span (Unix seconds, from the stage's start after the imports to its end) and its
    waits and runner processes."""

    rule: str
    log: str
    from_s: float
    to_s: float
    spans: tuple[spans.Span, ...]

    @property
    def wait_s(self) -> float:
        return sum(s.to_s - s.from_s for s in self.spans if s.kind == spans.WAIT)

    def measuring_s(self) -> dict[str, float]:
        """Seconds of measuring runner processes by runner mode."""
        out: dict[str, float] = {}
        for s in self.spans:
            if s.kind == spans.MEASURE:
                out[s.what] = out.get(s.what, 0.0) + s.to_s - s.from_s
        return out


def read_job(log: Path, logs_root: Path) -> JobCost | None:
    """The :class:`JobCost` of one job log, or None when it records no finished job (failed,
    or written by something other than :func:`phonetrain.stages.job.run`)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    m = OK_LINE.search(text)
    if not m:
        return None
    parts = log.relative_to(logs_root).parts
    rule = parts[0] if len(parts) > 1 else log.stem
    found = tuple(spans.Span(k, w, float(a), float(b)) for k, w, a, b in SPAN_LINE.findall(text))
    return JobCost(rule, str(log), float(m.group(1)), float(m.group(2)), found)


def jobs_since(logs_root: str | Path, since_s: float = 0.0) -> list[JobCost]:
    """The finished stage jobs whose logs under ``logs_root`` were written at or after
    ``since_s`` (Unix seconds) and that started then or later: the jobs of one invocation."""
    root, out = Path(logs_root), []
    if not root.is_dir():
        return out
    for log in sorted(root.rglob("*.log")):
        try:
            if log.stat().st_mtime < since_s:
                continue
        except OSError:
            continue
        job = read_job(log, root)
        if job is not None and job.from_s >= since_s:
            out.append(job)
    return out


def measuring_s(jobs: Iterable[JobCost]) -> dict[str, float]:
    """Summed measuring seconds by runner mode, largest first."""
    out: Counter = Counter()
    for j in jobs:
        out.update(j.measuring_s())
    return dict(out.most_common())


def finished_rules(snakemake_logs: Iterable[str | Path]) -> Counter:
    """Jobs by rule that Snakemake's own log reports finished (``Finished jobid: N (Rule:
    X)``), the target rule ``all`` aside."""
    out: Counter = Counter()
    for p in snakemake_logs:
        try:
            out.update(FINISHED.findall(Path(p).read_text(errors="replace")))
        except OSError:
            continue
    out.pop("all", None)
    return out


def process_start_s() -> float:
    """Unix time this process started (Linux: ``/proc/self/stat``'s start time, in clock
    ticks after boot, read against ``CLOCK_BOOTTIME``: 10 ms resolution); where that cannot be
    read, now."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])   # field 22, starttime
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()


def closing_line(wall_s: float, jobs_run: int, jobs: list[JobCost]) -> str:
    """``phonetrain: study: wall W s, N jobs run, measuring M s (run .. s, bench-gemm .. s,
    ...; P% of wall)``: the line every ``snakemake all`` ends with (measuring by runner
    mode)."""
    by = measuring_s(jobs)
    total = sum(by.values())
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in by.items())
    share = f"; {100 * total / wall_s:.0f}% of wall" if wall_s > 0 else ""
    return (f"phonetrain: study: wall {wall_s:.0f} s, {jobs_run} jobs run, measuring "
            f"{total:.0f} s ({parts or 'nothing measured'}{share})")


def bounds_line(measure: dict) -> str:
    """What one invocation may spend measuring, from the ``measure`` settings
    (phonetrain.config.MeasureConfig): per run its runner processes (``repeats`` per attempt,
    at most ``max_attempts`` attempts (none after an attempt that ends contended), one more
    recording events with ``events_apart``,
    exactly ``iterations`` unless ``events_adaptive``), each process's warm-up and adaptive
    stop, and the measured seconds that implies per run at most; the GEMM sweep's sizes,
    calibration, launch limit, the seconds of a shape's timed repeats
    (``gemm_max_shape_s``) and the squares' plateau stop (``gemm_plateau_gain``); a tuning
    trial's calibration and its screening pass
    (``tune_finalists``); the bandwidth sweep's cap; the cool-down. Printed at the start of
    every invocation that executes jobs (rules/common.smk) and by
    ``benchmarks/bench_study_cost.py``."""
    m = measure
    procs = m["repeats"] * m["max_attempts"]
    events = ""
    if m.get("events_apart"):
        events = (" (+1 recording events, OpenCL" + (")" if m.get("events_adaptive") else
                                                     f", {m['iterations']} iterations)"))
    if m["ci_target"]:
        stop = (f"{m['iterations']}..{max(m['max_iterations'], m['iterations'])} iterations, "
                f"stopping at +-{100 * m['ci_target']:g}% or after {m['max_seconds']:g} s")
        cap = (f" (<= {procs * m['max_seconds']:g} s of timed iterations per run, "
               "warm-ups and process starts aside)")
    else:
        stop, cap = f"{m['iterations']} iterations", ""
    sizes = m["gemm_sizes"]
    shape = m.get("gemm_max_shape_s")
    gemm = (f"GEMM sizes {min(sizes)}..{max(sizes)}, {m['gemm_min_time_ms']:g} ms per timed "
            f"repeat, launches <= {m['gemm_max_launch_s']:g} s"
            + (f", 3-5 repeats in ~{shape:g} s per shape" if shape else "")
            + (f", squares until 2 in a row gain < {100 * m['gemm_plateau_gain']:g}%"
               if m.get("gemm_plateau_gain") else "")) \
        if sizes else "no GEMM sizes"
    tune = f"tuning {m['tune_min_time_ms']:g} ms per trial" if m["tune"] else "no tuning"
    if m["tune"] and m.get("tune_finalists"):
        tune += (f" x 3 for each class's {m['tune_finalists']} finalists after a "
                 f"{m.get('tune_screen_min_time_ms', 5.0):g} ms screen of every candidate")
    return (f"phonetrain: measuring bounds: per run {m['repeats']} runner processes per "
            f"attempt, <= {m['max_attempts']} attempts (none after one that ends with the "
            f"host contended){events}, each warm-up {m['warmup']} + "
            f"{stop}{cap}; {gemm}; {tune}; bandwidth <= "
            f"{m['bandwidth_max_bytes'] / 2**20:g} MiB; cool-down {m['cooldown_s']:g} s "
            "before each process")
