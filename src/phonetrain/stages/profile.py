"""Profile stage: the host<->device bandwidth sweep per device; and a run's Chrome/Perfetto
trace of its commands (:mod:`phonetrain.results.profiling`), which the train job writes as
soon as the run is in its folder (:func:`write_perfetto`).

- ``bandwidth`` (params :class:`~phonetrain.stages.specs.BandwidthSpec`; input ``runner``;
  outputs ``csv``, ``bench``): runner ``bench-bandwidth`` up to ``bandwidth_max_bytes``.
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
from phonetrain.stages.specs import BandwidthSpec


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


def write_perfetto(run_json: str | Path, trace_csv: str | Path, out: str | Path, *,
                   title: str, device: str) -> Path:
    """A run's command trace (its ``run.json`` and ``trace.csv``) as Chrome/Perfetto
    trace-event JSON in ``out``, titled ``title`` (the run id) and naming ``device``: from the
    run's ``events/`` process where its step time came from processes without per-command
    events; a skipped run (nothing ran) gets a valid trace with no events. Reads the trace
    without pandas (:mod:`phonetrain.results.tracefile`). Raises
    :class:`~phonetrain.errors.StageError` when the run folder is damaged."""
    from phonetrain.results import tracefile
    from phonetrain.results.folders import folder_problems, traced_process

    out, rdir = Path(out), Path(run_json).parent
    run = read_json(run_json)
    if run.get("status") in ("skipped", "oom"):   # nothing was measured
        tracefile.write_json_atomic({"traceEvents": [], "displayTimeUnit": "ns",
                            "otherData": {"title": title, "device": device,
                                          "skipped": run.get("reason") or "skipped"}}, out)
        return out
    problems = folder_problems(rdir)
    if problems:  # a trace cut short would be drawn as a run with idle gaps
        raise StageError(f"{rdir} is damaged: {'; '.join(problems)}")
    traced = traced_process(rdir)
    if traced != rdir:   # the step ran without events: their process
        run = read_json(traced / layout.RUN)
        cols = tracefile.read_columns(traced / layout.TRACE)
    else:
        cols = tracefile.read_columns(trace_csv)
    tracefile.write_json_atomic(tracefile.perfetto_trace(cols, tracefile.iteration_walls(run),
                                                title=title, device=device), out)
    return out


STAGES = {"bandwidth": bandwidth}

if __name__ == "__main__":
    sys.exit(main(STAGES, sys.argv[1:]))
