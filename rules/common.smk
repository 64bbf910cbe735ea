# Shared by every rule: the composed sweep, each job's params, path helpers.
#
# The sweep is composed once per Snakemake invocation with Hydra (phonetrain.config), from
# conf/ beside this workflow and the override strings of `--config overrides=[...]`. A bad
# config stops here, before any job, with a message naming the file and key.
# Each job receives, as Snakemake `params`, a dict of exactly what its result depends on
# (phonetrain.experiment.job_params); Snakemake's `params` rerun trigger then reruns exactly
# the jobs whose settings changed. Run-time knobs (timeout, progress) are not params.
import json
import os
import shlex
import sys
from pathlib import Path

from phonetrain import experiment as X
from phonetrain.config import ConfigError, compose_sweep
from phonetrain.kernels import KernelVersionError, load_version, resolve_sources

BASE = Path(workflow.basedir)
_PKG = Path(X.__file__).resolve().parent
if (BASE / "src" / "phonetrain").is_dir() and _PKG != (BASE / "src" / "phonetrain").resolve():
    sys.exit(f"phonetrain: configuration error: this workflow is {BASE} but Python imports "
             f"phonetrain from {_PKG}, whose stages and kernels would run instead; run with "
             f"PYTHONPATH={BASE / 'src'} or install this checkout (pip install -e {BASE})")
if set(config) - {"overrides"}:  # a typo'd --config key would be ignored silently
    sys.exit(f"phonetrain: configuration error: unknown --config key(s) "
             f"{sorted(set(config) - {'overrides'})}; settings are Hydra override strings "
             "under the one key 'overrides', e.g. "
             "--config 'overrides=[\"measure.iterations=20\"]' (README.md, Overrides)")
try:
    SWEEP = compose_sweep(config.get("overrides"), conf_dir=BASE / "conf")
    JP = X.job_params(SWEEP)
except (ConfigError, KernelVersionError) as e:
    sys.exit(f"phonetrain: configuration error: {e}")

R = SWEEP.results_dir
PY = shlex.quote(sys.executable)
RQ = shlex.quote(R)  # the results folder as a shell word
EXPERIMENTS = SWEEP.experiments
TIMEOUT_S = SWEEP.root["measure"]["timeout_s"]
PROGRESS = SWEEP.root["measure"]["progress"]


def rel(path):
    """A source path relative to the working directory: the same files give the same input
    set wherever the checkout lives (Snakemake's `input` rerun trigger compares paths)."""
    return os.path.relpath(path)


RUNNER_SOURCES = sorted(rel(p) for p in (BASE / "src" / "runner").glob("*.[ch]"))

wildcard_constraints:
    device="[A-Za-z0-9_-]+",
    kernel="[A-Za-z0-9_-]+",
    exp="[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+",


def stage(name, *args):
    """Shell command of one stage: `python -m phonetrain.experiment NAME LOG ARGS`. Shell
    jobs run from Snakemake's own process, whereas a `run:` job is a new Snakemake process
    that re-parses the workflow (seconds per job). Dict params go as shell-quoted JSON."""
    return f"{PY} -m phonetrain.experiment {name} {{log:q}} " + " ".join(args)


def as_json(d):
    """A job's params dict as canonical JSON (what the `params` rerun trigger compares)."""
    return json.dumps(d, sort_keys=True)


def version_sources(kernel):
    """A kernel version's resolved .cl files and the version.yaml files of its chain: only
    these feed that version's builds and runs."""
    files = [rel(p) for p in resolve_sources(kernel).values()]
    for v in load_version(kernel).chain:
        y = BASE / "src" / "kernels" / v / "version.yaml"
        if y.exists():
            files.append(rel(y))
    return files


def kernel_sources(wc):
    """version_sources for a rule with a {kernel} wildcard."""
    return version_sources(wc.kernel)


def exp_kernel(exp_id):
    k = exp_id.split(".")[2]
    return None if k == "none" else k


def run_files(e, names=("run.json", "trace.csv", "verify.json")):
    return [f"{R}/runs/{e.device}/{e.id}/{n}" for n in names]


# Written last by the aggregate and report rules, removed by partial_report: a summary or
# report made after a failure lacks it, so the next run redoes the missing jobs (Snakemake
# does not rerun jobs for missing inputs when their outputs already exist).
SUMMARY_COMPLETE = f"{R}/summary/COMPLETE"
REPORT_COMPLETE = f"{R}/report/COMPLETE"


def mark_complete(path):
    Path(path).write_text("written by the workflow after a complete stage; absent after a "
                          "failed run (partial summary/report)\n")


def partial_report():
    """On a failed workflow (e.g. a kernel that does not compile, under --keep-going): write
    the summary and report from what exists, each missing run marked failed. The COMPLETE
    markers go first, so the next `snakemake all` reruns what is missing."""
    for marker in (SUMMARY_COMPLETE, REPORT_COMPLETE):
        Path(marker).unlink(missing_ok=True)
    try:
        aggregate_now()
        report_now()
        print(f"phonetrain: partial report written to {R}/report/ (missing runs are marked)",
              file=sys.stderr)
    except Exception as e:  # the workflow already failed; say why the report could not follow
        print(f"phonetrain: no partial report: {e}", file=sys.stderr)
