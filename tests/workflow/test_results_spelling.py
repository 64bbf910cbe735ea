"""The study's jobs do not depend on how its results folder is spelled or where it lies: job
params hold paths relative to the results folder (:mod:`phonetrain.stages.specs`)."""

from __future__ import annotations

from pathlib import Path

from helpers.workflow import TINY, clone_workspace, planned


def test_a_moved_study_or_the_other_spelling_of_its_results_folder_plans_nothing(
        completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "moved")  # the study, moved
    assert planned(ws) == {}
    assert planned(ws, TINY + [f"results_dir={ws / 'results'}"]) == {}
