"""A device's runner timing a kernel version's Vulkan GEMM shaders: the Vulkan counterpart of
the tune stage's bench-gemm runner (:class:`phonetrain.stages.gemm._Bench`).

The version's GEMM shaders are compiled on this host (glslc) and pushed once
(``spirv/<version>/``); each Vulkan bench-gemm spec (:func:`phonetrain.kernels.gemm.gemm_spec`
with ``backend="vulkan"``) becomes one plan (:func:`phonetrain.kernels.vk_gemm.gemm_plan`),
pushed to the device's ``specs/`` folder and run by the runner's ``run`` mode; the result is
bench-gemm's ``gemm.json`` layout (:func:`phonetrain.kernels.vk_gemm.gemm_document`). A
configuration that does not fit the device (``vk/tuning.yaml`` ``device_constraints`` over the
limits the device's first run reported, :func:`phonetrain.kernels.spirv.device_misfit`) is
refused before it runs: past the shared-memory limit a pipeline is invalid usage.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from phonetrain import layout
from phonetrain.errors import StageError
from phonetrain.kernels import GEMM_KERNELS, vk_gemm
from phonetrain.kernels.spirv import ShaderError, device_misfit, stage_spirv
from phonetrain.runner import BadInputError, Runner, read_dump


def options_defines(options: str) -> dict[str, int]:
    """``{"TSM": 64, ...}`` of program options ``-DTSM=64 ...`` (:func:`spec_options`' form)."""
    out = {}
    for tok in options.split():
        name, _, value = tok[2:].partition("=")
        out[name] = int(value)
    return out


class VkBench:
    """One device's runner with ``version``'s GEMM shaders deployed, running Vulkan bench-gemm
    specs (:meth:`spec`) into a temporary folder; ``device``: the run.json device document of
    the last run (its limits), empty before the first."""

    def __init__(self, runner: Runner, runner_binary: str | Path, version: str):
        self.r = runner
        self.version = version
        self.tmp = tempfile.TemporaryDirectory(prefix="phonetrain-vk-gemm-")
        self.n = 0
        self.device: dict[str, Any] = {}
        self.r.push_runner(runner_binary)
        try:
            spv = stage_spirv(version, Path(self.tmp.name), kernels=set(GEMM_KERNELS))
        except ShaderError as e:
            raise StageError(str(e), "fix the shader; glslc's message names the file and "
                                     "line") from None
        self.r.transport.push(spv, layout.device_spirv(version))

    def out(self) -> Path:
        self.n += 1
        return Path(self.tmp.name) / f"out-{self.n}"

    def spec(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Run one Vulkan bench-gemm spec as a plan and return its ``gemm.json`` document.
        Raises :class:`~phonetrain.runner.BadInputError` for a configuration that does not
        fit the device, else the runner's error (a tuning trial records either)."""
        if self.device:
            why = device_misfit(self.version, options_defines(spec["options"]), self.device)
            if why:
                raise BadInputError(f"{self.version} {spec['options']}: {why}")
        out = self.out()
        name = f"{out.name}-{self.tmp.name.rsplit('-', 1)[-1]}"
        plan_dir = Path(self.tmp.name) / "plans" / name
        vk_gemm.gemm_plan(spec, f"vk-gemm/{self.version}/{name}").save(plan_dir / layout.PLAN)
        remote = layout.device_spec(name)
        self.r.transport.push(plan_dir, remote)
        run = self.r.run(f"{remote}/{layout.PLAN}", out, profiling=True)
        self.device = run.get("device") or self.device
        doc = vk_gemm.gemm_document(spec, run, out / layout.TRACE,
                                    lambda t: read_dump(out, t))
        shutil.rmtree(out, ignore_errors=True)   # C of every case: up to 64 MiB at 4096
        return doc
