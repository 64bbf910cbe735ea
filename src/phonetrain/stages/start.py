"""What the workflow does while Snakemake parses it, in one place: :func:`start`.

``rules/common.smk`` composes the study from what :func:`start` returns and acts on nothing
itself. In order, :func:`start`:

1. checks that Python imports this checkout's ``phonetrain`` and that ``--config`` holds only
   ``overrides``;
2. composes the sweep (:func:`phonetrain.config.compose_sweep`), each job's params and the
   tables the rules read, or reads them from the last invocation with the same inputs
   (:mod:`phonetrain.stages.study_cache`);
3. checks the config's values read from the environment against the study's record
   (:mod:`phonetrain.results.environment`);
4. takes the results folder's owner lock when this invocation executes jobs
   (:mod:`phonetrain.results.owner`) and records those values;
5. moves aside, into the quarantine folder, every output that must be made again
   (:mod:`phonetrain.stages.current`), or lists them when no job executes;
6. sets the environment the job commands read (``$PHONETRAIN_PYTHON``, the run-time knobs);
7. registers the scheduling resources (``host_load``, one ``device_<name>`` per device;
   docs/scaling.md) and keeps Snakemake's scheduler to one pending re-evaluation timer
   (:func:`phonetrain.stages.schedule.one_reevaluation_timer`).

Each failure stops the invocation with one line naming the file, key or folder
(:class:`SystemExit`), before any job runs.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from phonetrain import layout
from phonetrain.config import Sweep
from phonetrain.devices import shares_host_cpu
from phonetrain.devices.cpus import usable_cpus
from phonetrain.errors import PhonetrainError
from phonetrain.layout import Layout
from phonetrain.results import environment, owner
from phonetrain.results.check import quarantine
from phonetrain.stages import schedule
from phonetrain.stages.current import expected_hashes, study_findings
from phonetrain.stages.job import PYTHON_ENV, RUNTIME_ENV, Runtime
from phonetrain.stages.study_cache import Composed, load_or_compose

# Options under which Snakemake executes no job: the check then only reports. A dry run is
# read from Snakemake's output settings; the other modes are not known to the Snakefile while
# it is parsed, so they are read from the command line (a single-letter flag only when
# written alone, e.g. -S, not inside a group such as -pS).
NO_JOBS_OPTIONS = frozenset({
    "--dry-run", "--dryrun", "-n", "--summary", "-S", "--detailed-summary", "-D",
    "--list-changes", "--lc", "--list-input-changes", "--li", "--list-params-changes", "--lp",
    "--list-untracked", "--lu", "--list-rules", "--list", "-l",
    "--list-target-rules", "--lt", "--lint", "--dag", "--rulegraph", "--filegraph", "--d3dag",
    "--touch", "-t", "--unlock", "--cleanup-metadata", "--cm", "--report", "--archive",
    "--delete-all-output", "--delete-temp-output", "--print-compilation", "--containerize",
    "--generate-unit-tests", "--conda-create-envs-only", "--list-conda-envs",
    "--conda-cleanup-envs", "--cleanup-shadow", "--container-cleanup-images"})


@dataclass
class Study:
    """What the rules read, composed once per invocation.

    ``sweep``: the composed sweep; ``job_params``: each job's params by kind
    (:func:`phonetrain.stages.params.job_params`); ``layout``: the results folder's paths;
    ``outputs``/``expect``: every output's settings hash and the function giving a job's
    ``--expect`` (:mod:`phonetrain.stages.current`); ``owner_lock``: held while this
    invocation runs (None when it executes no job); ``host_shares``: the ``host_load`` total;
    ``cores``: ``--cores`` (None under an executor's ``--jobs`` alone); ``on_host_cpu``:
    device name -> whether it computes on this host's CPU (its transport's trait);
    ``composed``: everything composed from the config and sources
    (:class:`phonetrain.stages.study_cache.Composed`).
    """

    sweep: Sweep
    job_params: dict[str, Any]
    layout: Layout
    outputs: Any
    expect: Callable[..., Any]
    owner_lock: Any
    host_shares: int
    cores: int | None
    on_host_cpu: dict[str, bool]
    composed: Composed


def executes_jobs(workflow: Any, argv: Sequence[str]) -> bool:
    """Whether this Snakemake invocation will execute jobs: the main process (not a job's
    own sub-invocation, ``workflow.is_main_process``), no dry run, none of NO_JOBS_OPTIONS in
    ``argv``, and a limit Snakemake requires before it runs anything (``--cores``, or
    ``--jobs``: without either it stops after parsing, so nothing may be taken or moved)."""
    if not workflow.is_main_process or workflow.output_settings.dryrun:
        return False
    rs = workflow.resource_settings
    if rs.cores is None and rs.nodes is None:
        return False
    return not NO_JOBS_OPTIONS & {a.split("=", 1)[0] for a in argv[1:]}


def locked_by_another() -> bool:
    """Whether Snakemake's lock of this working directory is held (another invocation is
    running, or was killed: Snakemake then stops on the lock and names --unlock). The lock is
    taken after parsing, so a folder that invocation may be measuring is never moved."""
    return any(Path(".snakemake", "locks").glob("*"))


def check_checkout(base: Path, cli_config: dict[str, Any]) -> None:
    """Stop when Python would import another checkout's ``phonetrain`` than the workflow's
    own (its stages and kernels would run instead) or when ``--config`` holds a key other
    than ``overrides`` (a typo'd key would be ignored silently)."""
    pkg = Path(layout.__file__).resolve().parent
    if (base / "src" / "phonetrain").is_dir() and pkg != (base / "src" / "phonetrain").resolve():
        sys.exit(f"phonetrain: configuration error: this workflow is {base} but Python imports "
                 f"phonetrain from {pkg}, whose stages and kernels would run instead; run with "
                 f"PYTHONPATH={base / 'src'} or install this checkout (pip install -e {base})")
    if set(cli_config) - {"overrides"}:
        sys.exit(f"phonetrain: configuration error: unknown --config key(s) "
                 f"{sorted(set(cli_config) - {'overrides'})}; settings are Hydra override strings "
                 "under the one key 'overrides', e.g. "
                 "--config 'overrides=[\"measure.iterations=20\"]' (docs/workflow.md, Overrides)")


def take_results_folder(L: Layout, runs_jobs: bool) -> Any:
    """The results folder's owner lock, taken by an invocation that executes jobs, before
    anything in the folder is moved or written, and held until it ends; None when no job
    executes. A second workflow on the same folder stops here, naming the one that holds it."""
    if not runs_jobs:
        return None
    try:
        return owner.take(L)
    except PhonetrainError as e:
        sys.exit(f"phonetrain: {e}")


def check_run_folders(run_params: dict[str, Any], L: Layout, outputs: Any,
                      runs_jobs: bool) -> None:
    """Move aside into the quarantine folder each measured run that must be measured again
    and each output made with other settings than its job's now (by sizes and row counts: no
    file is hashed), so Snakemake reruns its job; when no job executes, or another invocation
    holds this folder, only list them."""
    found = study_findings(run_params, L, outputs, hashes=False)
    if not found:
        return
    if not runs_jobs or locked_by_another():
        for f in found:
            print(f"phonetrain: would move aside {f.path}: {f.why}", file=sys.stderr)
        return
    try:
        for f, dest in quarantine(found, L):
            print(f"phonetrain: moved aside {f.path} -> {dest}: {f.why}", file=sys.stderr)
    except PhonetrainError as e:
        sys.exit(f"phonetrain: check of the run folders: {e}")


def register_resources(workflow: Any, sweep: Sweep) -> tuple[int, int | None, dict[str, bool]]:
    """Register ``host_load`` (``--cores``; with an executor that sets no cores, the CPUs
    this host may use; ``--resources host_load=N`` overrides) and one ``device_<name>`` of
    limit 1 per device; export them for the jobs' schedule records. Returns the shares, the
    cores (None without ``--cores``) and each device's ``shares_host_cpu`` trait."""
    from snakemake.exceptions import WorkflowError

    try:
        cores = int(workflow.cores)
    except WorkflowError:   # an executor plugin's --jobs without --cores leaves no total
        cores = None
    if schedule.HOST_LOAD in workflow.global_resources:
        shares = int(workflow.global_resources[schedule.HOST_LOAD].value)
    else:
        shares = cores if cores and cores < 4096 else usable_cpus()
        workflow.register_resource(schedule.HOST_LOAD, shares)
    on_host = {d: shares_host_cpu(sweep.members["device"][d]) for d in sweep.devices}
    for d in on_host:
        if schedule.device_resource(d) not in workflow.global_resources:
            workflow.register_resource(schedule.device_resource(d), 1)
    os.environ[schedule.SCHEDULE_ENV] = json.dumps({"host_shares": shares, "cores": cores})
    return shares, cores, on_host


def start(workflow: Any, cli_config: dict[str, Any], argv: Sequence[str]) -> Study:
    """Everything the workflow does at parse time (the module docstring lists it), for the
    Snakemake ``workflow`` object, its ``--config`` dict ``cli_config`` (no ``overrides`` key:
    the composed defaults) and the command line ``argv``. Raises
    SystemExit with one line naming the file, key or folder on bad input."""
    base = Path(workflow.basedir)
    check_checkout(base, cli_config)
    try:
        composed, _ = load_or_compose(base, cli_config.get("overrides"))
    except PhonetrainError as e:
        sys.exit(f"phonetrain: configuration error: {e}")
    sweep, jp, outputs = composed.sweep, composed.job_params, composed.outputs
    L = Layout(sweep.results_dir)
    main = workflow.is_main_process
    runs_jobs = executes_jobs(workflow, argv)
    if main:
        try:
            environment.check(L, sweep.environment)
        except PhonetrainError as e:
            sys.exit(f"phonetrain: configuration error: {e}")
    lock = take_results_folder(L, runs_jobs)
    if lock is not None:
        environment.record(L, sweep.environment)
    if main:
        check_run_folders(jp["run"], L, outputs, runs_jobs)
    measure = sweep.root["measure"]
    os.environ[RUNTIME_ENV] = Runtime(measure["timeout_s"], measure["progress"],
                                      sweep.results_dir).to_env()
    os.environ[PYTHON_ENV] = sys.executable   # job commands name it, never its path
    shares, cores, on_host = register_resources(workflow, sweep)
    schedule.one_reevaluation_timer()   # Snakemake's scheduler passes stay few
    return Study(sweep, jp, L, outputs, expected_hashes(outputs), lock, shares, cores, on_host,
                 composed)
