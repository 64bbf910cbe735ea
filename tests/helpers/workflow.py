"""Helpers for the workflow tests: a private copy of the workflow and real Snakemake runs.

A workspace is a temporary folder holding copies of ``Snakefile``, ``rules/``, ``conf/`` and
``src/`` (kernels, runner and the package), so a test may edit kernel sources or configs
without touching the checkout. Snakemake runs with ``PYTHONPATH=<workspace>/src`` so the copied
package (and its kernel folder) is the one imported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from helpers import REPO, STEADY
from phonetrain.layout import RUNNER_CACHE_REL

SNAKEMAKE = Path(sys.executable).with_name("snakemake")
# The tiny sweep of the tests: two small models x cpu/opencl x baseline, few iterations.
TINY = ["sweep=test", "measure.warmup=1", "measure.iterations=3", "dataset.num_batches=2",
        "measure.bandwidth_max_bytes=262144", "measure.progress=false",
        "measure.gemm_sizes=[64]", "measure.gemm_min_time_ms=1", "measure.tune_min_time_ms=1",
        *STEADY]
_IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")


def make_workspace(dest: Path, runner: Path | None = None) -> Path:
    """Copy the workflow into ``dest`` (created) and return it; with ``runner`` (the session's
    runner build), its results folder's runner compile cache holds that build
    (:func:`seed_runner_cache`)."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    for d in ("rules", "conf", "src"):
        shutil.copytree(REPO / d, dest / d, ignore=_IGNORE)
    if runner is not None:
        seed_runner_cache(dest / "results", runner)
    return dest


def seed_runner_cache(results: Path, runner: Path) -> None:
    """Put the session's runner build (the ``runner`` fixture: ``runner-<key>/runner`` of
    ``toolchains.build_runner``) into the runner compile cache of the results folder
    ``results`` (``RUNNER_CACHE_REL``). The workflow's ``build_runner`` job of a device with
    the host toolchain then finds the same key (sources, ``cc``, flags) there and installs that
    binary instead of compiling it again; an edited runner source is another key, compiled.
    For tests whose subject is not the runner's compile."""
    seed_runner_build(results / RUNNER_CACHE_REL, runner)


def seed_runner_build(build_dir: Path, runner: Path) -> None:
    """Put the session's runner build into ``build_dir``, a folder that
    ``toolchains.build_runner`` compiles into (``build_dir/runner-<key>/runner``): a build
    there with the same key (sources, ``cc``, flags) finds it and compiles nothing."""
    if not runner.parent.name.startswith("runner-"):   # $PHONETRAIN_TEST_RUNNER: no cache key
        return
    dest = build_dir / runner.parent.name
    if not dest.exists():
        shutil.copytree(runner.parent, dest)


def clone_workspace(src: Path, dest: Path) -> Path:
    """Copy a workspace with its results and Snakemake metadata, keeping mtimes."""
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("locks"))
    return dest


def env(ws: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ws / "src")
    e["PHONETRAIN_LOCK_DIR"] = str(ws / "locks")
    return e


def snakemake(ws: Path, *args: str, overrides: list[str] = TINY, cores: int = 2,
              timeout: float = 1800) -> subprocess.CompletedProcess:
    """Run Snakemake in ``ws`` with Hydra ``overrides`` (passed last, as --config takes a
    list of values); ``timeout`` (s) only catches a hang, so it leaves a host with both cores
    busy several times the quiet duration."""
    cmd = [str(SNAKEMAKE), "--cores", str(cores), *args,
           "--config", f"overrides={json.dumps(overrides)}"]
    return subprocess.run(cmd, cwd=ws, env=env(ws), capture_output=True, text=True,
                          timeout=timeout)


def planned(ws: Path, overrides: list[str] = TINY, *args: str,
            targets: tuple[str, ...] = ()) -> Counter:
    """Jobs a dry run would execute (of ``targets``, default rule ``all``), as
    ``Counter({rule: count})`` (empty: nothing to do)."""
    p = snakemake(ws, *targets, "--dry-run", "--quiet", "rules", *args, overrides=overrides)
    assert p.returncode == 0, p.stdout + p.stderr
    jobs: Counter = Counter()
    table = False
    for line in p.stdout.splitlines():
        if line.startswith("job ") and "count" in line:
            table = True
            continue
        m = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if table and m and m.group(1) != "total":
            jobs[m.group(1)] = int(m.group(2))
    return jobs


def planned_jobs(ws: Path, overrides: list[str] = TINY, *args: str) -> list[tuple[str, dict]]:
    """Jobs a dry run would execute, as ``[(rule, wildcards)]`` (``all`` included)."""
    p = snakemake(ws, "--dry-run", *args, overrides=overrides)
    assert p.returncode == 0, p.stdout + p.stderr
    jobs: list[tuple[str, dict]] = []
    for line in p.stdout.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line)
        if m:
            jobs.append((m.group(1), {}))
        m = re.match(r"^\s+wildcards: (.*)$", line)
        if m and jobs:
            jobs[-1][1].update(kv.split("=", 1) for kv in m.group(1).split(", "))
    return jobs

