"""Profile stage: the host<->device bandwidth sweep per device, and per run the
Chrome/Perfetto trace of its commands (:mod:`phonetrain.results.profiling`).

- ``bandwidth`` (params :class:`~phonetrain.stages.specs.BandwidthSpec`; input ``runner``;
  outputs ``csv``, ``bench``): runner ``bench-bandwidth`` up to ``bandwidth_max_bytes``;
- ``perfetto`` (params :class:`~phonetrain.stages.specs.PerfettoSpec`; inputs ``run``,
  ``trace``; output ``json``): from the run's ``events/`` process where its step time came
  from processes without per-command events.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from phonetrain import layout
from phonetrain.errors import StageError
from phonetrain.io import read_json, write_bytes, write_json
from phonetrain.runner import Runner, RunnerError
from phonetrain.stages.stamp import STAMP, stamp
from phonetrain.stages.job import Job, main
from phonetrain.stages.specs import BandwidthSpec, PerfettoSpec


def bandwidth(job: Job) -> Path:
    """Host<->device bandwidth sweep on one device -> ``output.csv`` and ``output.bench``
    (launch latency, settings)."""
    s = job.spec(BandwidthSpec)
    dev = s.device_config
    r = Runner.for_device(dev, job.runtime.at(s.stage_root), timeout_s=job.runtime.timeout_s)
    with tempfile.TemporaryDirectory(prefix="phonetrain-bw-") as tmp, r.lock():
        r.push_runner(job.input.runner)
        try:
            csv = r.bench_bandwidth(Path(tmp) / "bw", max_bytes=s.bandwidth_max_bytes)
        except RunnerError as e:
            raise StageError(f"device '{dev['name']}': runner bench-bandwidth: {e}") from None
        bench = read_json(csv.with_name("bench.json"))
        write_json({**bench, STAMP: stamp(job)}, job.output.bench)
        write_bytes(job.output.csv, csv.read_bytes())  # last: the rule's completion mark
    return Path(job.output.csv)


def perfetto(job: Job) -> Path:
    """A run's command trace as Chrome/Perfetto trace-event JSON; a skipped run (nothing ran)
    gets a valid trace with no events. The only job of this module that reads a trace
    with pandas: the bandwidth job does not import it."""
    from phonetrain.results import profiling
    from phonetrain.results.runs import folder_problems, run_iterations, traced_process

    s, out = job.spec(PerfettoSpec), Path(job.output.json)
    run = read_json(job.input.run)
    if run.get("status") in ("skipped", "oom"):   # nothing was measured
        profiling.write_json_atomic({"traceEvents": [], "displayTimeUnit": "ns",
                                     "otherData": {"title": s.title, "device": s.device,
                                                   "skipped": run.get("reason") or "skipped"}},
                                    out)
        return out
    problems = folder_problems(Path(job.input.run).parent)
    if problems:  # a trace cut short would be drawn as a run with idle gaps
        raise StageError(f"{Path(job.input.run).parent} is damaged: {'; '.join(problems)}")
    traced = traced_process(Path(job.input.run).parent)
    if traced != Path(job.input.run).parent:   # the step ran without events: their process
        run = read_json(traced / layout.RUN)
        tr = profiling.read_trace_csv(traced / layout.TRACE)
    else:
        tr = profiling.read_trace_csv(job.input.trace)
    it = run_iterations(run, str(traced / layout.RUN))
    profiling.write_json_atomic(profiling.perfetto_trace(tr, it, title=s.title,
                                                         device=s.device), out)
    return out


STAGES = {"bandwidth": bandwidth, "perfetto": perfetto}

if __name__ == "__main__":
    sys.exit(main(STAGES, sys.argv[1:]))
