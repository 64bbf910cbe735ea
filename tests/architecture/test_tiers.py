"""The test tiers (tests/helpers/tiers.py): what a test's code reads decides its tier, and a
``unit`` test that starts a process anyway is stopped."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import tiers
from helpers.workflow import snakemake
from phonetrain.cli import main


def _pure():
    return sum(range(3))


def _imports_subprocess_inside():
    import subprocess as sp  # noqa: F401  (imported inside: read from the bytecode)
    return sp.run(["true"])


def _imports_a_browser_inside():
    from playwright.sync_api import sync_playwright  # noqa: F401
    return sync_playwright


def _runs_the_workflow(ws):
    return snakemake(ws, "all")


def _calls_a_helper_that_runs_the_workflow(ws):
    return _runs_the_workflow(ws)


def _spells_snakemake():
    return [sys.executable, "-m", "snakemake", "--dry-run"]


RUN = ["run", "model=mlp_16_16", "backend=cpu"]


def _cli_run():
    from click.testing import CliRunner
    return CliRunner().invoke(main, RUN)


def _cli_compare():
    from click.testing import CliRunner
    return CliRunner().invoke(main, ["compare", "a", "b"])


@pytest.mark.parametrize("funcs, fixtures, expected", [
    ([_pure], set(), "unit"),
    ([_pure], {"runner"}, "runner"),
    ([_pure], {"completed_workspace"}, "workflow"),
    ([_imports_subprocess_inside], set(), "runner"),
    ([_imports_a_browser_inside], set(), "runner"),
    ([_runs_the_workflow], set(), "workflow"),
    ([_calls_a_helper_that_runs_the_workflow], set(), "workflow"),
    ([_pure, _spells_snakemake], set(), "workflow"),   # a fixture's function counts too
    ([_cli_run], set(), "runner"),
    ([_cli_compare], set(), "unit"),
], ids=lambda v: getattr(v[0], "__name__", None) if isinstance(v, list) else None)
def test_a_tests_code_decides_its_tier(funcs, fixtures, expected):
    assert tiers.tier_of(funcs, fixtures) == expected


def test_the_tier_rules_are_themselves_unit_tests(request):
    assert request.node.get_closest_marker("unit") is not None


def test_a_unit_test_that_starts_a_process_is_stopped(monkeypatch):
    tiers.refuse_processes(monkeypatch)
    with pytest.raises(AssertionError, match="unit-tier test started a process"):
        subprocess.Popen(["true"])


def test_the_longest_files_named_first_are_test_files():
    """tiers.LONGEST_FIRST orders files within their tier: each is a test file here, so a
    renamed or moved file is not silently dropped from the front."""
    from helpers import REPO
    for f in tiers.LONGEST_FIRST:
        assert (REPO / f).is_file() and f.startswith("tests/") and f.endswith(".py"), f
    assert len(set(tiers.LONGEST_FIRST)) == len(tiers.LONGEST_FIRST)
