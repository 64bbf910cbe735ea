"""The workflow's parse-time actions live in phonetrain.stages.start: which invocations may
take and move things, and the Snakemake scheduler method it patches for the pinned version."""

from __future__ import annotations

from importlib.metadata import version
from types import SimpleNamespace

import pytest
from packaging.specifiers import SpecifierSet
from packaging.requirements import Requirement

from helpers import REPO
from phonetrain.stages.start import NO_JOBS_OPTIONS, executes_jobs


def _workflow(main=True, dryrun=False, cores=2, nodes=None):
    return SimpleNamespace(is_main_process=main, output_settings=SimpleNamespace(dryrun=dryrun),
                           resource_settings=SimpleNamespace(cores=cores, nodes=nodes))


@pytest.mark.parametrize("wf,argv,runs", [
    (_workflow(), ["snakemake", "--cores", "2", "all"], True),
    (_workflow(cores=None, nodes=4), ["snakemake", "--jobs", "4", "all"], True),
    (_workflow(cores=None), ["snakemake", "all"], False),   # Snakemake stops after parsing
    (_workflow(dryrun=True), ["snakemake", "-n", "all"], False),
    (_workflow(main=False), ["snakemake", "--cores", "2"], False),   # a job's sub-invocation
    (_workflow(), ["snakemake", "--cores", "2", "--summary"], False),
    (_workflow(), ["snakemake", "--cores", "2", "--report=r.html"], False),
    (_workflow(), ["snakemake", "--cores", "2", "-pS"], True),   # -S only alone
])
def test_only_an_invocation_that_runs_jobs_may_take_or_move_anything(wf, argv, runs):
    assert executes_jobs(wf, argv) is runs


def test_the_listing_options_are_snakemakes_own():
    """Every option named is one Snakemake's parser knows (a renamed option would make a
    listing invocation move folders)."""
    from snakemake.cli import get_argument_parser
    known = {o for a in get_argument_parser()._actions for o in a.option_strings}
    assert sorted(NO_JOBS_OPTIONS - known) == []


def test_the_patched_scheduler_method_exists_in_the_pinned_snakemake():
    """schedule.one_reevaluation_timer replaces JobScheduler._schedule_reevalutation; the
    installed Snakemake is within pyproject's pin and has that method."""
    from snakemake.scheduling.job_scheduler import JobScheduler
    pin = next(Requirement(r) for r in _dependencies() if r.startswith("snakemake>"))
    assert version("snakemake") in SpecifierSet(str(pin.specifier))
    assert callable(getattr(JobScheduler, "_schedule_reevalutation", None))


def _dependencies() -> list[str]:
    import tomllib
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
