"""No run trains with settings other than those it records, whatever Snakemake's metadata says:
every output records the settings it was made with (phonetrain.stages.stamp) and the check at
the workflow's start moves aside one made under other settings. Planted: the tiny study's
results folder moved (Snakemake's records are kept per path as spelled, so none apply) or
``.snakemake/`` deleted, then rerun with another learning rate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.workflow import TINY, clone_workspace, snakemake

EXP = "mlp_16_16.cpu.none"


def sgd_lrs(plan_json: Path) -> set[float]:
    """The learning rates of a plan's SGD update steps (their second argument)."""
    plan = json.loads(plan_json.read_text())
    return {s["args"][1]["f"] for s in plan["steps"] if s.get("name") == "sgd_update"}


@pytest.mark.parametrize("how", ["moved", "metadata deleted"])
def test_a_run_trains_with_the_learning_rate_it_records(completed_workspace: Path,
                                                         tmp_path: Path, how: str):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    results = "results"
    if how == "moved":
        results = "results-moved"
        (ws / "results").rename(ws / results)
    else:
        shutil.rmtree(ws / ".snakemake")
    R = ws / results
    assert sgd_lrs(R / "runs" / "host" / EXP / "plan.json") == {0.05}
    over = TINY + [f"results_dir={results}", "model.lr=0.07"]
    p = snakemake(ws, f"{results}/runs/host/{EXP}/run.json", overrides=over)
    assert p.returncode == 0, p.stderr[-5000:]
    # the plan lowered with lr 0.05 was moved aside, naming the setting, and lowered again
    assert (f"moved aside {results}/plans/{EXP} -> " in p.stderr
            and "lr: 0.05 recorded, 0.07 now" in p.stderr), p.stderr[-5000:]
    run = R / "runs" / "host" / EXP
    assert sgd_lrs(run / "plan.json") == {0.07}
    assert sgd_lrs(R / "plans" / EXP / "plan.json") == {0.07}
    assert json.loads((run / "verify.json").read_text())["ok"]
    moved = list((R / "quarantine").glob(f"*/plans/{EXP}"))
    assert len(moved) == 1 and sgd_lrs(moved[0] / "plan.json") == {0.05}
