"""The controls record: the job that makes a device's control subjects measure again.

A comparison of two measurements of one host gauges the host's drift between them on the
subjects nothing changed for (:mod:`phonetrain.report.drift`). A rerun after an edit measures
only what the edit touched, so it would leave nothing unchanged measured on both sides. The
``controls`` rule (rules/controls.smk) runs whenever the sources or plans of the device's
other measuring jobs are newer than its record; the record is an input of the control
subjects' own jobs (the device's CPU-backend runs and CPU GEMM sweep:
:func:`phonetrain.stages.params.control_subjects`), so Snakemake measures them again in the
same invocation, and the next aggregation records their new measurements beside the edited
ones.
"""

from __future__ import annotations

import sys
import time

from phonetrain.io import write_json
from phonetrain.stages.job import Job, main
from phonetrain.stages.specs import ControlsSpec, to_params


def controls(job: Job) -> dict:
    """Write the device's controls record (JSON: the spec's ``device``, ``runs`` and
    ``gemm``, and ``written_s``, Unix time) to ``output.record``, atomically."""
    s = job.spec(ControlsSpec)
    doc = {**to_params(s), "written_s": round(time.time(), 3)}
    write_json(doc, job.output.record)
    print(f"phonetrain: controls of {s.device}: measuring again {len(s.runs)} CPU run(s) "
          f"and the {', '.join(s.gemm)} GEMM sweep beside the jobs re-measured now",
          file=sys.stderr)
    return doc


STAGES = {"controls": controls}

if __name__ == "__main__":
    sys.exit(main(STAGES, sys.argv[1:]))
