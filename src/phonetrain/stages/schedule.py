"""How the workflow schedules jobs around the devices (rules/common.smk declares it to
Snakemake as resources; docs/scaling.md, "Parallel jobs and the host").

- ``host_load``: a global Snakemake resource of :data:`HOST_SHARES` shares (``--cores``, or
  the CPUs this host may use when an executor sets no cores). Every job that works on this
  host's CPU takes one share; a job that *measures a device that shares this host's CPU*
  (the local device, an emulator or a virtual phone on this host: the transport's trait
  :func:`phonetrain.devices.shares_host_cpu`) in a train, GEMM sweep, tuning, bandwidth
  sweep or peaks job takes all of them, so while it measures no other job that loads this
  host runs, whatever ``--cores`` says. A GEMM sweep, tuning, bandwidth sweep or peaks job
  measuring a phone with its own CPU takes none: its work runs on the phone (the host only
  waits on adb), so such phones keep measuring in parallel with each other and with host
  jobs. A phone's train job (:data:`TRAIN`) takes one share: after its runs it verifies them
  with the numpy reference and converts the trace on this host's CPU, which must not happen
  beside a measurement of this host; up to ``--cores`` phones train at once.
- ``device_<name>``: one per device of the sweep, limit 1: a phone measures one job at a
  time; Snakemake starts no second job of a phone whose first holds it, so the device lock
  (``Transport.lock``), kept as the guard, is not waited on.

With an executor plugin that runs jobs elsewhere (``--executor slurm``, ``cluster-generic``),
the jobs it submits (runner builds, data, lowering, GEMM shapes, aggregate,
report) take no ``host_load`` share: they do not run on this host, so ``--jobs N`` runs N of
them at once beside the jobs that stay here (``localrules``: every job that talks to a
device), which keep their shares. Every rule also carries :data:`LIMITS` (``runtime`` in
minutes and ``mem_mb``), the resources executor plugins submit with
(``--set-resources RULE:mem_mb=N`` overrides one).

Each measuring job records its share in its run folder (:func:`record`, ``schedule.json``).

:func:`one_reevaluation_timer` keeps Snakemake's own scheduler from taking CPU time away from
the runs it schedules.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from typing import Any

SCHEDULE_ENV = "PHONETRAIN_SCHEDULE"   # JSON set by the workflow: host_shares, cores
HOST_LOAD = "host_load"
MEASURE, DEVICE, HOST = "measure", "device", "host"   # the kinds of work a job does
TRAIN = "train"   # measures its device, then verifies and converts the trace on this host


# Per rule: (runtime in minutes, mem_mb). Peak resident memory measured on the 2-core
# development VM (docs/notebook/2026-12-06.md): lower 126 MB (the zoo's largest models), data
# 282 MB (synthetic 3x32x32), gemm_shapes 125 MB, build_runner 102 MB (19 s under load),
# aggregate 184 MB and report 221 MB (tiny study); the limits leave several times that for
# larger studies and datasets. Jobs that talk to a device stay on this host and are never
# submitted; theirs only keep every rule's resources alike.
LIMITS = {
    "build_runner": (30, 1000), "gemm_shapes": (15, 1000), "data": (30, 2000),
    "lower": (15, 1000), "aggregate": (60, 4000),
    "report": (60, 4000),
    "build_kernels": (60, 1000), "tune": (120, 1000),
    "gemm": (120, 1000), "peaks": (60, 1000), "bandwidth": (60, 1000),
    "deploy": (60, 1000), "train": (240, 2000),
}


def limits(rule: str) -> dict[str, int]:
    """``{"runtime": minutes, "mem_mb": MB}`` of a rule (:data:`LIMITS`)."""
    runtime, mem_mb = LIMITS[rule]
    return {"runtime": runtime, "mem_mb": mem_mb}


def submitted_share(local_exec: bool) -> int:
    """``host_load`` shares of a job that works on the CPU of the host it runs on (a runner
    build, lowering, aggregation): 1 when the workflow runs jobs on this host, 0 when an
    executor plugin submits it elsewhere (``local_exec`` False)."""
    return 1 if local_exec else 0


def device_resource(device: str) -> str:
    """The Snakemake resource of one device: ``device_<name>`` (non-word characters as _)."""
    return "device_" + re.sub(r"\W", "_", device)


def host_share(work: str, on_host_cpu: bool, shares: int) -> int:
    """Shares of ``host_load`` a job takes. ``work``: :data:`MEASURE` (times something on its
    device), :data:`TRAIN` (times its device, then works on this host: verification, trace),
    :data:`DEVICE` (works on its device without timing it: a kernel build) or :data:`HOST`
    (works on this host: deploy, lowering, aggregation); ``on_host_cpu``: its device runs on
    this host's CPU (:func:`phonetrain.devices.shares_host_cpu`; ignored for HOST work);
    ``shares``: the total."""
    if work == HOST:
        return 1
    if on_host_cpu:
        return shares if work in (MEASURE, TRAIN) else 1
    return 1 if work == TRAIN else 0


def record(on_host_cpu: bool) -> dict[str, Any]:
    """How a train job on a device that does (``on_host_cpu``) or does not share this host's
    CPU was scheduled: ``host_load`` (its shares) of ``host_shares``,
    ``alone_on_host`` (it held them all: no other job loading this host ran meanwhile),
    ``snakemake_cores`` (``--cores``; None when unknown) and the ``device_resource`` it
    held; ``{"scheduler": "none"}`` outside a workflow."""
    doc = json.loads(os.environ.get(SCHEDULE_ENV) or "{}")
    if "host_shares" not in doc:
        return {"scheduler": "none"}
    share = host_share(TRAIN, on_host_cpu, doc["host_shares"])
    return {"scheduler": "snakemake", "host_load": share, "host_shares": doc["host_shares"],
            "alone_on_host": share == doc["host_shares"],
            "snakemake_cores": doc.get("cores")}


def one_reevaluation_timer() -> bool:
    """Keep at most one pending re-evaluation timer in Snakemake's job scheduler, as a daemon
    thread. Returns False (nothing changed) when the installed Snakemake has no
    ``JobScheduler._schedule_reevalutation``.

    Snakemake 9's scheduler starts, after each scheduling pass, a timer that runs another pass
    once the job-rate timespan (``--max-jobs-per-timespan``, default 1 s) has passed, and that
    pass starts the next timer; every job start or end adds one more such chain. Measured on
    the 2-core development VM during the default study (``benchmarks/bench_noise.py``): about a
    hundred chains by its middle, a hundred passes a second, the main Snakemake process at
    35-50% of a core while the runner measured alone, other processes' CPU share 20-33% and a
    calibration probe 1.4-1.9x its quiet figure; a longer timespan instead holds Snakemake's exit
    until the last non-daemon timer fires. One pending timer (a later request asks for a new
    one only when it would fire sooner) still re-runs the scheduler within the timespan of any
    pass, and a job's end wakes the scheduler by itself.
    """
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    if not hasattr(JobScheduler, "_schedule_reevalutation"):
        return False

    def _schedule_reevalutation(self, delay: float) -> None:
        due = time.monotonic() + delay
        pending = vars(self).get("_pending_reevaluation")   # None before the first
        if pending is not None and pending <= due:   # one fires in time: enough
            return

        def fire() -> None:
            if self._pending_reevaluation == due:
                self._pending_reevaluation = None   # before the pass it wakes asks again
            self._open_jobs.release()

        self._pending_reevaluation = due
        timer = threading.Timer(delay, fire)
        timer.daemon = True
        timer.start()

    JobScheduler._schedule_reevalutation = _schedule_reevalutation
    return True
