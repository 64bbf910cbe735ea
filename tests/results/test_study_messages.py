"""What a user is told around a study: the line that ends it (where the report is, how many
runs are usable), a line before `phonetrain info`'s slow first compile, and a refusal to work
in a folder that holds no study."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from helpers import REPO
from helpers.results import report_paths, standard_study, summary_paths
from phonetrain import report
from phonetrain.cli import main
from phonetrain.layout import Layout
from phonetrain.results import aggregate
from phonetrain.stages.aggregate import study_outcome


def test_end_of_study_line_names_the_report_and_the_usable_runs(tmp_path):
    L = Layout(str(tmp_path / "results"))
    assert "no summary yet" in study_outcome(L)
    inputs = standard_study(tmp_path / "raw")
    aggregate.aggregate(inputs["runs"], summary_paths(L.summary_dir()))
    assert "no report yet" in study_outcome(L)
    report.build_report(L.summary_dir(), report_paths(Path(L.report_dir())))
    line = study_outcome(L)
    assert line.startswith(f"phonetrain: report: {L.report_html()} (and {L.report_md()}); ")
    # standard_study: cpu ok, opencl ok, opencl_staged wrong, lenet5 cpu failed
    assert ("4 runs: 2 ok (verified: usable), 0 unstable (kept out of guidelines), "
            "1 wrong (failed verification), 1 failed (missing)") in line
    assert "partial report:" in study_outcome(L, partial=True)


def _in(folder: Path, *args: str):
    old = Path.cwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(main, list(args))
    finally:
        os.chdir(old)


def test_stale_and_run_outside_a_checkout_say_so(tmp_path):
    for args in (["stale"], ["run", "model=mlp_16_16", "backend=cpu", "device=host"]):
        r = _in(tmp_path, *args)
        assert r.exit_code != 0, r.output
        assert f"{tmp_path} is not a phonetrain checkout" in r.output, r.output
        assert "--results DIR or results_dir=DIR" in r.output and "cd " in r.output
        assert "stale" not in r.output.split("Error:")[0]     # no count of "stale" runs
        assert not (tmp_path / "results").exists()


def test_a_named_results_folder_is_not_refused(tmp_path):
    r = _in(tmp_path, "stale", "--results", str(tmp_path / "R"))
    assert "not a phonetrain checkout" not in r.output


def test_info_says_so_before_compiling_the_runner(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PHONETRAIN_CACHE": str(tmp_path)}
    cmd = [sys.executable, "-m", "phonetrain.cli", "info"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert first.stderr.startswith("phonetrain info: compiling the runner with cc into "
                                   f"{tmp_path}/runner/"), first.stderr
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "compiling" not in again.stderr
