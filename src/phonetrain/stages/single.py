"""One experiment end to end without Snakemake (``phonetrain run``): the workflow's stages, in
order, with the workflow's job params.

A one-off run never disturbs the workflow's files: Snakemake decides what to rerun from its
own records of each job's params, so a runner, kernel build, data folder or plan rewritten
behind its back would either rerun other runs needlessly (a newer file) or, worse, be taken
as current although made with other settings. So the one-off run makes its runner, data, plan
and deploy manifest under the results folder's ``oneoff/`` (:meth:`Layout.oneoff`), reuses the
workflow's kernel build when that build is current for the same runner and settings
(:func:`phonetrain.stages.stamp.made_from`), and writes only its run folder
(``runs/<device>/<experiment>/``, the one the workflow uses for that experiment). When that
folder then holds a measurement under other settings than the study's, the next ``snakemake
all`` moves it aside and re-measures it (:mod:`phonetrain.results.check`). A tuned
configuration the workflow left for the device (the tuning files of every GEMM class of the
plan, ``tuning/<class>.json``, made with the study's settings now) is used, as in the
workflow; none is made here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phonetrain import layout
from phonetrain.config import Experiment, Sweep
from phonetrain.io import read_json
from phonetrain.kernels import source_files
from phonetrain.kernels.spirv import shader_files
from phonetrain.layout import Layout
from phonetrain.stages import build, deploy, train
from phonetrain.stages.stamp import made_from, not_current
from phonetrain.stages.job import Job, Runtime, files, run
from phonetrain.stages.params import job_params, tune_job, tuning_classes


def _job(params: dict[str, Any], log: str, runtime: Runtime, inputs: dict[str, Any] | None = None,
         outputs: dict[str, Any] | None = None) -> Job:
    return Job(files(inputs or {}), files(outputs or {}), params, Path(log), runtime)


def reusable_build(L: Layout, device: str, kernel: str, params: dict[str, Any],
                   runner: str) -> str | None:
    """The workflow's kernel build of ``kernel`` on ``device`` when it was made with
    ``params`` and the runner binary ``runner`` (the one-off run needs no rebuild), else
    None."""
    path = Path(L.kernel_build(device, kernel))
    if not path.is_file():
        return None
    doc = read_json(path)
    if not made_from(doc, params, runner):
        return None
    return str(path)


def run_single(sweep: Sweep, exp: Experiment) -> Path:
    """Build, lower, deploy, run and verify one experiment of ``sweep``; returns its run
    folder. Raises :class:`~phonetrain.errors.StageError` naming the stage that failed."""
    L = Layout(sweep.results_dir)
    O = L.oneoff()
    jp = job_params(sweep)
    ms = sweep.root["measure"]
    rt = Runtime(timeout_s=ms["timeout_s"], progress=ms["progress"],
                 results_dir=sweep.results_dir)
    d, e = exp.device, exp.id
    runner = O.runner(d)
    run(build.build_runner, _job(jp["runner"][d], O.log("build_runner", d), rt,
                                 outputs={"runner": runner}),
        "build-runner")
    sources = [str(p) for p in source_files(exp.kernel)] if exp.is_opencl else \
        [str(p) for p in shader_files(exp.kernel)] if exp.is_vulkan else []
    tuned = []
    if exp.is_opencl:
        kp = jp["kernel"][(d, exp.kernel)]
        if reusable_build(L, d, exp.kernel, kp, runner) is None:
            run(build.build_kernels, _job(kp, O.log("build_kernels", d, exp.kernel), rt,
                                          {"runner": runner, "sources": sources},
                                          {"build": O.kernel_build(d, exp.kernel)}),
                "build-kernels")
        classes = tuning_classes(sweep).get(e, [])
        tuned = [L.tuning(d, exp.kernel, c) for c in classes]
        if not all(Path(t).exists() and not_current(t, tune_job(jp, d, exp.kernel, c)) is None
                   for t, c in zip(tuned, classes)):   # not all tuned, or not for these settings
            tuned = []
    pc = jp["plan"][e]
    run(train.write_data, _job(jp["data"][pc["data_dir"]], O.log(pc["data_dir"]), rt,
                               outputs={"dir": O.data_dir(pc["data_dir"])}), "data")
    run(train.lower, _job(pc, O.log("lower", e), rt, outputs={"dir": O.plan_dir(e)}), "lower")
    rp = jp["run"][(d, e)]
    manifest = O.deploy_manifest(d, e)
    run(deploy.deploy, _job(rp, O.log("deploy", d, e), rt,
                            {"runner": runner, "plan_dir": O.plan_dir(e),
                             "data": O.data_dir(pc["data_dir"]), "sources": sources,
                             "tuning": tuned},
                            {"manifest": manifest, "plan": L.run_file(d, e, layout.PLAN)}),
        "deploy")
    run(train.train_and_trace, _job(rp, O.log("train", d, e), rt,
                                    {"manifest": manifest, "plan": L.run_file(d, e, layout.PLAN),
                                     "plan_dir": O.plan_dir(e),
                                     "data": O.data_dir(pc["data_dir"])},
                                    {name: L.run_file(d, e, f) for name, f in (
                                        ("run", layout.RUN), ("trace", layout.TRACE),
                                        ("verify", layout.VERIFY),
                                        ("perfetto", layout.PERFETTO))}), "train")
    return Path(L.run_dir(d, e))
