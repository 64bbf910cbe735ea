"""The settings each output of a study must record, and the outputs that do not record them.

:func:`study_outputs` maps every output a study's jobs make (except run folders and per-run
Perfetto traces) to the params its job has now; an existing output whose stamp
(:mod:`phonetrain.stages.stamp`) records other settings is a finding of the check at the
workflow's start, like a run measured under other settings
(:func:`phonetrain.results.check.findings`), and is moved aside by the same
:func:`phonetrain.results.check.quarantine`, so that Snakemake makes it again.
:func:`expected_hashes` gives a job the hashes of its inputs (its ``--expect``).

A run folder records its whole params (``params.json``) and is checked by
:mod:`phonetrain.results.check`; a Perfetto trace has no settings beyond its path (device,
experiment) and is re-made whenever its run is (by the same train job).
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from phonetrain.io import short_hash
from phonetrain.layout import Layout
from phonetrain.results.check import Finding, findings
from phonetrain.stages.stamp import not_current

if TYPE_CHECKING:
    from phonetrain.config import Sweep
# The params, tuning and schema modules (lowering, pyarrow) are imported where the study is
# composed (study_outputs and the rules' params), not by the check at every workflow start.


def aggregate_params() -> dict[str, Any]:
    """The ``aggregate`` rule's params: the summary tables' schema fingerprint."""
    from phonetrain.results.schema import fingerprint

    return {"schema": fingerprint()}


def report_params(sweep: Sweep) -> dict[str, Any]:
    """The ``report`` rule's params: the ``report`` section and the devices' facts."""
    from phonetrain.stages.params import facts

    return {"report": sweep.root["report"], "facts": facts(sweep)}


def study_outputs(sweep: Sweep, jp: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Output path (as the study's layout spells it) -> the params its job has now, for every
    output that records a stamp: runners, batch folders, plans, the GEMM shape list, kernel
    builds, tuning files (OpenCL's and the Vulkan tune jobs'), GEMM sweeps, peaks, bandwidth
    sweeps (``bench.json``), deploy manifests, and the summary's and report's COMPLETE
    markers (:func:`aggregate_params`, :func:`report_params`). ``jp``:
    :func:`phonetrain.stages.params.job_params`."""
    from phonetrain.kernels import tuning
    from phonetrain.stages.params import (gemm_job, gemm_versions, squares_job, tune_job,
                                          version_tuning_classes, vk_version_tuning_classes)

    L = Layout(sweep.results_dir)
    out: dict[str, dict[str, Any]] = {L.gemm_shapes(): jp["shapes"]}
    classes = version_tuning_classes(sweep)
    vk_classes = vk_version_tuning_classes(sweep)
    for d in sweep.devices:
        out[L.runner(d)] = jp["runner"][d]
        out[L.peaks(d)] = jp["device"][d]
        out[L.bandwidth_bench(d)] = jp["bandwidth"][d]
        for v in gemm_versions(sweep):
            out[L.gemm(d, v)] = gemm_job(jp, d, v)
        for k in sweep.kernels:
            out[L.kernel_build(d, k)] = jp["kernel"][(d, k)]
            for c in classes.get(k, ()):
                out[L.tuning(d, k, c)] = tune_job(jp, d, k, c)
            if k in classes:
                out[L.tuning(d, k, tuning.SQUARES)] = squares_job(jp, d, k)
            for c in vk_classes.get(k, ()):
                out[L.vk_tuning(d, k, c)] = tune_job(jp, d, k, c, "vulkan")
            if k in vk_classes:
                out[L.vk_tuning(d, k, tuning.SQUARES)] = squares_job(jp, d, k, "vulkan")
    for ddir, p in jp["data"].items():
        out[L.data_dir(ddir)] = p
    for exp, p in jp["plan"].items():
        out[L.plan_dir(exp)] = p
    for (d, exp), p in jp["run"].items():
        out[L.deploy_manifest(d, exp)] = p
    out[L.summary_complete()] = aggregate_params()
    out[L.report_complete()] = report_params(sweep)
    return out


def output_findings(outputs: Mapping[str, Mapping[str, Any]],
                    hashes: bool = False) -> list[Finding]:
    """The outputs of ``outputs`` (:func:`study_outputs`) that exist but do not record the
    settings their job has now, or whose recorded files changed since (by size, and with
    ``hashes`` by SHA-256: :func:`phonetrain.stages.stamp.not_current`), in its order."""
    out = []
    for path, params in outputs.items():
        why = not_current(path, params, hashes)
        if why:
            out.append(Finding(path, why))
    return out


def study_findings(run_params: Mapping[tuple[str, str], Mapping[str, Any]], L: Layout,
                   outputs: Mapping[str, Mapping[str, Any]], *,
                   hashes: bool = True) -> list[Finding]:
    """Everything the check moves aside: the run folders of
    :func:`phonetrain.results.check.findings`, then the outputs of :func:`output_findings`."""
    return findings(run_params, L, hashes=hashes) + output_findings(outputs, hashes)


def expected_hashes(outputs: Mapping[str, Mapping[str, Any]]):
    """A function ``files -> {path: settings hash}`` giving, for the files of a job's input
    that other jobs make (:func:`study_outputs`), the hash each must record: the job's
    ``--expect``."""
    norm = {os.path.normpath(p): p for p in outputs}

    @functools.lru_cache(maxsize=None)
    def hash_of(path: str) -> str:
        return short_hash(dict(outputs[path]))

    def expect(files: Iterable[str]) -> dict[str, str]:
        got = {}
        for f in files:
            key = norm.get(os.path.normpath(str(f)))
            if key is not None:
                got[str(f)] = hash_of(key)
        return got
    return expect
