# Shared by every rule: the composed sweep, each job's params, the results layout, the stage
# command line, and every input function.
#
# The sweep is composed with Hydra (phonetrain.config), from conf/ beside this workflow and the
# override strings of `--config overrides=[...]`, with each job's params and the tables below;
# an invocation whose config files, sources, overrides and environment are those of an earlier
# one reads them from its cache instead (phonetrain.stages.study_cache). A bad config stops
# here, before any job, with a message naming the file and key.
# Each job receives, as Snakemake `params`, its spec: exactly what its result depends on
# (phonetrain.stages.params.job_params, phonetrain.stages.specs), paths relative to the
# results folder; Snakemake's `params` rerun trigger then reruns exactly the jobs whose
# settings changed. Run-time knobs (timeout, progress) and the results folder as spelled now
# reach the jobs through the environment (phonetrain.stages.job.Runtime), so changing them
# reruns nothing.
# Every path comes from phonetrain.layout.Layout; stages take their files by name.
import functools
import json
import os
import re
import sys
import time
from pathlib import Path

from snakemake.exceptions import WorkflowError

from phonetrain import layout
from phonetrain.config import NO_KERNEL
from phonetrain.errors import PhonetrainError
from phonetrain.kernels import load_version, source_files, tuning
from phonetrain.report.registry import FIGURES
from phonetrain.io import write_text
from phonetrain.stages import cost
from phonetrain.stages.job import PYTHON_ENV, ok_line
from phonetrain.stages.specs import CPU_VERSION, as_json
from phonetrain.stages.start import executes_jobs, start
from phonetrain.stages.stamp import check_inputs, params_stamp, write_stamp
from phonetrain.stages import schedule

STUDY_START_S = cost.process_start_s()   # this invocation's start: its wall time
# Every parse-time action -- composing the sweep, the owner lock, moving aside what must be
# made again, the environment the jobs read, the scheduling resources -- is
# phonetrain.stages.start.start; this file only names what it returns.
STUDY = start(workflow, config, sys.argv)
BASE = Path(workflow.basedir)
SWEEP, JP, L = STUDY.sweep, STUDY.job_params, STUDY.layout
OUTPUTS, EXPECT, OWNER_LOCK = STUDY.outputs, STUDY.expect, STUDY.owner_lock
HOST_SHARES, ON_HOST_CPU = STUDY.host_shares, STUDY.on_host_cpu
COMPOSED = STUDY.composed   # phonetrain.stages.study_cache.Composed: the tables below
AGGREGATE_PARAMS = COMPOSED.aggregate_params   # the aggregate's and report's params
REPORT_PARAMS = COMPOSED.report_params
EXPERIMENTS = SWEEP.experiments
MEASURE = SWEEP.root["measure"]
EXPECTED = COMPOSED.expected   # phonetrain.stages.params.expected_files
SUMMARY = COMPOSED.summary   # phonetrain.stages.params.summary_outputs
FIG_EXT = SWEEP.root["report"]["figure_format"]
REPORT_FILES = [L.report_html(), L.report_md(), L.report_complete()]

wildcard_constraints:
    device="[A-Za-z0-9_-]+",
    kernel="[A-Za-z0-9_-]+",
    exp="[A-Za-z0-9_-]+(\\.b[0-9]+)?\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+",
    ddir="data/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+",  # a batch folder: layout.batch_dir_rel


def stage(module, name, inputs=(), outputs=()):
    """Shell command of one stage: `"$PHONETRAIN_PYTHON" -m phonetrain.stages.MODULE NAME --log
    LOG --params JSON --input NAME=PATH... --output NAME=PATH...` (phonetrain.stages.job). The
    interpreter is the one that parsed this workflow, named by a variable: Snakemake compares
    the command text to decide what reruns, and a venv's path in it would rerun every job of
    a moved checkout. Shell jobs run from Snakemake's own process; a `run:` job would re-parse
    the workflow (seconds per job)."""
    words = [f'"${PYTHON_ENV}" -m phonetrain.stages.{module} {name} --log {{log:q}} '
             "--params {params.p:q}"]
    words += [f"--input {k}={{input.{k}:q}}" for k in inputs]
    words += [f"--output {k}={{output.{k}:q}}" for k in outputs]
    if inputs:
        words.append("--expect {params.expect:q}")
    return " ".join(words)


def expect_inputs(wildcards, input):
    """A job's `--expect`, params.expect of each stage with inputs. For each input made by
    another job, the settings hash it must record (phonetrain.stages.current.expected_hashes). It
    takes `input`, so Snakemake counts it as derived from the inputs and leaves it out of its
    params trigger: it changes only with its producers' params, which rerun those producers."""
    return json.dumps(EXPECT(input), sort_keys=True)


def consumer_check(input):
    """The same check for a `run:` rule (aggregate, report) before it reads its inputs."""
    try:
        check_inputs(EXPECT(input))
    except PhonetrainError as e:
        raise WorkflowError(f"phonetrain: {e}") from None


def rel(path):
    """A source path relative to the working directory: the same files give the same input
    set wherever the checkout lives (Snakemake's `input` rerun trigger compares paths)."""
    return os.path.relpath(path)


RUNNER_SOURCES = sorted(rel(p) for p in (BASE / "src" / "runner").glob("*.[ch]"))


def version_sources(kernel):
    """A kernel version's .cl files (src/kernels/common.cl and the resolved files) and the
    version.yaml files of its chain: only these feed that version's builds and runs."""
    return list(_version_sources(kernel))


@functools.lru_cache(maxsize=None)
def _version_sources(kernel):
    # once per version and parse (every deploy, build, tune and GEMM job asks); the sweep's
    # versions come composed (Composed.kernel_files), any other is resolved here
    files = COMPOSED.kernel_files.get(kernel)
    if files is None:
        files = [str(p) for p in source_files(kernel)]
        files += [str(y) for v in load_version(kernel).chain
                  if (y := BASE / "src" / "kernels" / v / "version.yaml").exists()]
    return tuple(rel(p) for p in files)


def kernel_sources(wc):
    """version_sources for a rule with a {kernel} wildcard."""
    return version_sources(wc.kernel)


EXP_KERNEL = {e.id: e.kernel for e in EXPERIMENTS}   # the sweep's cells carry their kernel


def exp_kernel(exp_id):
    """The kernel version whose build an experiment runs (None for the CPU backend's
    NO_KERNEL; its plan is lowered with the baseline's ops but runs the runner's C kernels):
    no id is parsed."""
    k = EXP_KERNEL[exp_id]
    return None if k == NO_KERNEL else k


RUN_CLASSES = COMPOSED.run_classes  # exp id -> the GEMM tuning classes its plan uses
GEMM_CLASSES = COMPOSED.gemm_classes  # the classes of the GEMM study's model shapes
VERSION_CLASSES = COMPOSED.version_classes  # tunable version -> its tune job's classes


def tune_rule(kernel):
    """The name of a version's tune rule: `tune_<version>` (non-word characters as _)."""
    word = re.sub(r"\W", "_", kernel)
    return f"tune_{word}"


def tune_params(kernel):
    """The params function of a version's tune job (TuneVersionSpec): the version on the
    job's device, its classes, the GEMM sweep's square sizes and the tuning settings."""
    return lambda wc: COMPOSED.tune_json[(wc.device, kernel)]


# The Vulkan tune jobs: versions whose shaders have tuning candidates, for their Vulkan runs
VK_RUN_CLASSES = COMPOSED.vk_run_classes  # exp id -> the classes of its Vulkan plan
VK_VERSION_CLASSES = COMPOSED.vk_version_classes  # version -> its Vulkan tune job's classes


def vk_tune_rule(kernel):
    """The name of a version's Vulkan tune rule: `tune_vulkan_<version>`."""
    name = re.sub(r"\W", "_", kernel)
    return f"tune_vulkan_{name}"


def vk_tune_params(kernel):
    """The params function of a version's Vulkan tune job (TuneVersionSpec, api vulkan)."""
    return lambda wc: COMPOSED.vk_tune_json[(wc.device, kernel)]


@functools.lru_cache(maxsize=None)
def tunable(kernel):
    """tuning.tunable, composed for the sweep's versions (once per parse for any other)."""
    got = COMPOSED.tunable.get(kernel)
    return tuning.tunable(kernel) if got is None else got


def tuning_files(device, kernel, classes):
    """The tuning files of `classes` of a version on a device ([] if untunable): a run's
    deploy takes its own plan's classes only, so adding models changes none of its inputs."""
    if kernel and kernel != CPU_VERSION and tunable(kernel):
        return [L.tuning(device, kernel, c) for c in classes]
    return []


def deploy_inputs(wc):
    pc = JP["plan"][wc.exp]
    d = {"runner": L.runner(wc.device), "plan_dir": L.plan_dir(wc.exp),
         "data": L.data_dir(pc["data_dir"]), "sources": [], "tuning": []}
    k = exp_kernel(wc.exp)
    if k and pc["backend"] == "vulkan":   # SPIR-V compiled by the deploy itself (glslc)
        d["sources"] = [rel(p) for p in COMPOSED.shader_files[k]]
        # the Vulkan tune job's files of its plan's classes, ancient() as OpenCL's below
        d["tuning"] = [ancient(L.vk_tuning(wc.device, k, c))
                       for c in VK_RUN_CLASSES.get(wc.exp, [])]
    elif k:
        d["build"] = L.kernel_build(wc.device, k)
        d["sources"] = version_sources(k)
        # ancient: a tune job rerun for classes the study gained leaves these files as they
        # were (rules/gemm.smk), so it reruns no deploy of a run already measured
        d["tuning"] = [ancient(f) for f in tuning_files(wc.device, k,
                                                         RUN_CLASSES.get(wc.exp, []))]
    return d


def gemm_inputs(wc):
    d = {"runner": L.runner(wc.device), "shapes": L.gemm_shapes(), "sources": [],
         "tuning": tuning_files(wc.device, wc.kernel, GEMM_CLASSES + [tuning.SQUARES])}
    if wc.kernel != CPU_VERSION:
        d["sources"] = version_sources(wc.kernel)
    return d


def gemm_job_params(wc):
    """A tune or GEMM sweep job's params (GemmSpec): the device, the version, the study's GEMM
    settings and its shapes' hash."""
    return COMPOSED.gemm_json[(wc.device, wc.kernel)]


def run_outputs(name):
    """A file of every run folder of the sweep."""
    return [L.run_file(e.device, e.id, name) for e in EXPERIMENTS]


def figure(name):
    """One report figure, declared with Snakemake's report() and its caption
    (rules/captions/<name>.rst) so `snakemake --report` shows it."""
    return report(L.figure(name, FIG_EXT), caption=f"captions/{name}.rst", category="Figures")


def figure_alt(name):
    """The same figure in the other format, written beside figure(name) (SVG beside PNG)."""
    return L.figure(name, {"png": "svg", "svg": "png"}[FIG_EXT])


def in_snakemake(name, log, work):
    """Run `work()`, a `run:` job's body, and write its log's first line as a stage job does
    (phonetrain.stages.job.ok_line), so the study's cost counts its time."""
    t0, started_s = time.monotonic(), time.time()
    work()
    write_text(log, ok_line(name, t0, started_s))


def aggregate_now(complete=None):
    """Aggregate whatever exists (also used by the partial report on a failed workflow)."""
    from phonetrain.stages.aggregate import aggregate_study  # pandas: only in these jobs

    aggregate_study(JP, L, EXPECTED, SUMMARY, complete)


def report_now(complete=None):
    """Write the report from the summary tables (also used by the partial report)."""
    from phonetrain.stages.aggregate import report_study  # matplotlib: only in these jobs
    from phonetrain.stages.params import facts

    report_study(L, SWEEP.root["report"], facts(SWEEP), complete)


def study_outcome(L, partial=False):
    """The line that ends a study: where the report is, how many runs are usable."""
    from phonetrain.stages.aggregate import study_outcome as outcome  # pandas: only here

    return outcome(L, partial)


def start_of_study():
    """Before the first job of an invocation that executes jobs: the measuring bounds of the
    settings (phonetrain.stages.cost.bounds_line)."""
    if executes_jobs(workflow, sys.argv):
        print(cost.bounds_line(MEASURE), file=sys.stderr)


def end_of_study(log):
    """On a successful workflow that executed jobs: the report's place and the run counts
    (nothing when the target did not include the summary), then the study's cost."""
    if executes_jobs(workflow, sys.argv) and Path(L.summary("runs")).is_file():  # not after --touch
        print(study_outcome(L), file=sys.stderr)
    study_cost(log)


def study_cost(log):
    """The closing line of an invocation that executed jobs (phonetrain.stages.cost): its wall
    time, the jobs Snakemake's log (`log`: its files) reports finished, and the measuring time
    of the stage jobs that ran, read from their logs."""
    if not executes_jobs(workflow, sys.argv):
        return
    logs = [log] if isinstance(log, (str, Path)) else list(log or [])
    jobs = cost.jobs_since(L.logs(), STUDY_START_S)
    run = sum(cost.finished_rules(logs).values()) if logs else len(jobs)
    print(cost.closing_line(time.time() - STUDY_START_S, run, jobs), file=sys.stderr)


def partial_report(log):
    """On a failed workflow (e.g. a kernel that does not compile, under --keep-going): write
    the summary and report from what exists, each missing run marked failed. The COMPLETE
    markers go first, so the next `snakemake all` reruns what is missing (Snakemake does not
    rerun jobs for missing inputs when their outputs already exist)."""
    for marker in (L.summary_complete(), L.report_complete()):
        Path(marker).unlink(missing_ok=True)
    try:
        aggregate_now()
        report_now()
        print(f"{study_outcome(L, partial=True)} (missing runs are marked)", file=sys.stderr)
    except Exception as e:  # the workflow already failed; say why the report could not follow
        print(f"phonetrain: no partial report: {e}", file=sys.stderr)
    study_cost(log)


# Scheduling (phonetrain.stages.schedule; docs/scaling.md, "Parallel jobs and the host"): a global
# resource `host_load` of HOST_SHARES shares and one `device_<name>` resource of limit 1 per
# device, registered by start(). A job measuring a device that runs on this host's CPU (local,
# an emulator, a virtual phone: the transport's trait) takes every share, so it runs alone on
# this host; a job on a phone with its own CPU takes none of them and that phone's resource,
# but a phone's train job takes one (it verifies and converts its trace on this host).
# A job an executor plugin submits elsewhere takes no share (schedule.submitted_share), so
# `--jobs N` runs N of them; every rule carries runtime and mem_mb (schedule.LIMITS).


def host_job(rule):
    """Resources of a job that works on the CPU of whichever host runs it: one host_load
    share where this host runs it, none where an executor plugin submits it (read when the
    job is scheduled: the executor is not known while the workflow is parsed), and the rule's
    runtime and mem_mb."""
    return {schedule.HOST_LOAD: lambda wc: schedule.submitted_share(workflow.local_exec),
            **schedule.limits(rule)}


def device_job(work, rule):
    """Resources of a job on one device ({device} wildcard; it stays on this host): its
    host_load shares by whether the device runs on this host's CPU (schedule.host_share;
    work: schedule.MEASURE, schedule.TRAIN or schedule.DEVICE, or schedule.HOST for a
    deploy), 1 of its
    device_<name> resource, and the rule's runtime and mem_mb."""
    res = {schedule.HOST_LOAD: lambda wc: schedule.host_share(work, ON_HOST_CPU[wc.device],
                                                               HOST_SHARES),
           **schedule.limits(rule)}
    for d in ON_HOST_CPU:
        res[schedule.device_resource(d)] = lambda wc, d=d: int(wc.device == d)
    return res
