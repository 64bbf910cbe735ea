"""One experiment end to end without Snakemake (``phonetrain run``): the workflow's stages, in
order, with the workflow's files (:mod:`phonetrain.layout`) and the same job params.

Every stage is redone (this path is for one-off runs; Snakemake does the incremental
bookkeeping). A tuned configuration the workflow left for the device (``tuning.json``) is
used, as in the workflow; none is made here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phonetrain import layout
from phonetrain.config import Experiment, Sweep
from phonetrain.kernels import resolve_sources, tuning
from phonetrain.layout import Layout
from phonetrain.stages import build, deploy, train
from phonetrain.stages.job import Job, Runtime, files, run
from phonetrain.stages.params import job_params


def _job(params: dict[str, Any], log: str, runtime: Runtime, inputs: dict[str, Any] | None = None,
         outputs: dict[str, Any] | None = None) -> Job:
    return Job(files(inputs or {}), files(outputs or {}), params, Path(log), runtime)


def run_single(sweep: Sweep, exp: Experiment) -> Path:
    """Build, lower, deploy, run and verify one experiment of ``sweep``; returns its run
    folder. Raises :class:`~phonetrain.errors.StageError` naming the stage that failed."""
    L = Layout(sweep.results_dir)
    jp = job_params(sweep)
    ms = sweep.root["measure"]
    rt = Runtime(timeout_s=ms["timeout_s"], progress=ms["progress"])
    d, e = exp.device, exp.id
    run(build.build_runner, _job({**jp["device"][d], "cache": L.runner_cache()},
                                 L.log("build_runner", d), rt, outputs={"runner": L.runner(d)}),
        "build-runner")
    sources = [str(p) for p in resolve_sources(exp.kernel).values()] if exp.is_opencl else []
    tuned = []
    if exp.is_opencl:
        run(build.build_kernels, _job(jp["kernel"][(d, exp.kernel)],
                                      L.log("build_kernels", d, exp.kernel), rt,
                                      {"runner": L.runner(d), "sources": sources},
                                      {"build": L.kernel_build(d, exp.kernel)}), "build-kernels")
        t = L.tuning(d, exp.kernel)
        tuned = [t] if tuning.tunable(exp.kernel) and Path(t).exists() else []
    pc = jp["plan"][e]
    run(train.write_data, _job(jp["data"][pc["data_dir"]], L.log(pc["data_dir"]), rt,
                               outputs={"dir": L.data_dir(pc["data_dir"])}), "data")
    run(train.lower, _job(pc, L.log("lower", e), rt, outputs={"dir": L.plan_dir(e)}), "lower")
    rp = jp["run"][(d, e)]
    run(deploy.deploy, _job(rp, L.log("deploy", d, e), rt,
                            {"runner": L.runner(d), "plan_dir": L.plan_dir(e),
                             "data": L.data_dir(pc["data_dir"]), "sources": sources,
                             "tuning": tuned},
                            {"manifest": L.deploy_manifest(d, e),
                             "plan": L.run_file(d, e, layout.PLAN)}), "deploy")
    run(train.train, _job(rp, L.log("train", d, e), rt,
                          {"manifest": L.deploy_manifest(d, e),
                           "plan": L.run_file(d, e, layout.PLAN), "plan_dir": L.plan_dir(e),
                           "data": L.data_dir(pc["data_dir"])},
                          {"run": L.run_file(d, e, layout.RUN),
                           "trace": L.run_file(d, e, layout.TRACE),
                           "verify": L.run_file(d, e, layout.VERIFY)}), "train")
    return Path(L.run_dir(d, e))
