"""Deploy stage: the plan made for the device, and everything a run needs put on the device.

Stage ``deploy`` (params :class:`~phonetrain.stages.specs.RunSpec`):

- inputs ``runner``, ``plan_dir`` (the lowered, device-independent plan and its tensors),
  ``data`` (the batch folder), and for OpenCL runs ``sources`` (the version's resolved
  ``.cl`` files) and ``tuning`` (where the version is tunable: the device's tuning files of
  the classes the plan's GEMM calls belong to, ``tuning/<class>.json``);
- outputs ``plan`` (the plan that runs on this device: the lowered plan with the device's tuned
  GEMM configuration applied, kept in the run folder and verified against), ``manifest``
  (what was sent, and the settings of the deploy: :mod:`phonetrain.stages.stamp`; the run
  checks them before it measures).

Pushes skip files already on the device unchanged (the transports compare content hashes).
A device that cannot be reached (a lost connection, a stopped adb server, a full phone) leaves
the run's failure record (:mod:`phonetrain.stages.failed`) with the transport's reason.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from phonetrain import layout
from phonetrain.devices.base import TransportError
from phonetrain.errors import StageError
from phonetrain.io import write_json
from phonetrain.kernels import load_version, stage_kernels, tuning
from phonetrain.kernels.spirv import ShaderError, stage_spirv
from phonetrain.plan import Plan
from phonetrain.runner import Runner
from phonetrain.stages.failed import record_failure
from phonetrain.stages.job import Job, main
from phonetrain.stages.specs import RunSpec, to_params
from phonetrain.stages.stamp import STAMP, stamp


def device_plan(plan_json: str | Path, kernel: str | None,
                tuning_json: str | Path | list[str | Path] | None, *,
                every_class: bool = False) -> tuple[Plan, str | None]:
    """The lowered plan as it runs on a device: with ``tuning_json`` (a tunable OpenCL
    version: its tuning files, one or a list, merged), the device's tuned configuration of
    :func:`phonetrain.kernels.tuning.tune_plan` applied to its programs' build options and
    GEMM launch sizes. Returns (plan, the shape class used, or None). With ``every_class``
    (the deploy stage: the workflow gives exactly the plan's classes) raises
    :class:`~phonetrain.errors.StageError` when the files lack a class of the plan's GEMM
    calls; without, such a plan takes the tuning's default class. A class whose configuration
    breaks the version's constraints (:func:`phonetrain.kernels.tuning.class_misfit`) raises
    :class:`~phonetrain.errors.StageError` naming the files."""
    plan = Plan.load(plan_json)
    paths = tuning_json if isinstance(tuning_json, list) else [tuning_json] if tuning_json \
        else []
    if not kernel or not paths:
        return plan, None
    tuned = tuning.load_tunings(paths)
    missing = [c for c in tuning.plan_classes(plan) if c not in tuned["classes"]]
    if every_class and tuned["classes"] and missing:
        raise StageError(f"the tuning files given ({', '.join(map(str, paths))}) lack the "
                         f"plan's GEMM class(es) {', '.join(missing)}")
    version = load_version(kernel)
    for cls, cand in tuned["classes"].items():
        why = tuning.class_misfit(version, cand, plan.backend)
        if why:
            raise StageError(f"the tuning files given ({', '.join(map(str, paths))}): class "
                             f"{cls}: {why}", "delete the file(s) and rerun the tune job")
    return tuning.tune_plan(plan, version, tuned)


def _push_spirv(r: Runner, kernel: str, plan: Plan) -> int:
    """Compile the plan's Vulkan shaders with glslc on this host and push the SPIR-V to the
    device (``spirv/<version>/``); a shader that does not compile raises
    :class:`~phonetrain.errors.StageError` with glslc's file:line messages."""
    with tempfile.TemporaryDirectory(prefix="phonetrain-spirv-") as tmp:
        try:
            out = stage_spirv(kernel, Path(tmp), kernels={p.name for p in plan.programs})
        except ShaderError as e:   # glslc missing (what to do is in the message) or a shader
            compiled = "does not compile" in e.message
            raise StageError(str(e), "fix the shader; glslc's message names the file and "
                                     "line" if compiled else "") from None
        return r.transport.push(out, layout.device_spirv(kernel))


def deploy(job: Job) -> dict[str, Any]:
    """Make the device's plan, push the runner, the plan (with its tensors), the data and the
    kernel sources to the device's staging root, and write the manifest."""
    s = job.spec(RunSpec)
    dev, exp, kernel = s.device_config, s.run_id, s.kernel
    plan_dir = Path(job.input.plan_dir)
    plan, cls = device_plan(plan_dir / layout.PLAN, kernel, job.many("tuning"),
                            every_class=True)
    plan.save(Path(job.output.plan))
    r = Runner.for_device(dev, job.runtime.at(s.stage_root), timeout_s=job.runtime.timeout_s)
    sent: dict[str, int] = {}
    remote_plan = layout.plan_dir_rel(exp)
    try:
        with r.lock():
            sent["runner"] = r.push_runner(job.input.runner)
            sent["plan"] = r.transport.push(plan_dir, remote_plan)
            sent["plan"] += r.transport.push(Path(job.output.plan), f"{remote_plan}/{layout.PLAN}")
            sent["data"] = r.transport.push(Path(job.input.data), s.data_dir)
            if kernel and plan.backend == "vulkan":
                sent["kernels"] = _push_spirv(r, kernel, plan)
            elif kernel:
                with tempfile.TemporaryDirectory(prefix="phonetrain-kernels-") as tmp:
                    src = stage_kernels(kernel, Path(tmp))
                    sent["kernels"] = r.transport.push(src, layout.device_kernels(kernel))
    except TransportError as e:  # the phone or its adb server is gone: the run's record
        reason = f"device '{dev['name']}', run {exp}: {e}"
        record_failure(Path(job.output.plan).parent, to_params(s), reason)
        raise StageError(reason) from None
    doc = {"device": dev["name"], "run_id": exp, "files_sent": sent,
           "plan": f"{remote_plan}/{layout.PLAN}", "data": s.data_dir, "tuned_class": cls,
           STAMP: stamp(job)}
    write_json(doc, job.output.manifest)
    return doc


STAGES = {"deploy": deploy}

if __name__ == "__main__":
    sys.exit(main(STAGES, sys.argv[1:]))
