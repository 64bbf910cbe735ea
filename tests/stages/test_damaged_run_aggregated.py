"""Aggregating a study with a damaged run folder (its ``run.json`` cut short, or a file of the
runner's ledger changed in place) says so on stderr: one line per damaged run naming its
folder, what is damaged and the remedy (``phonetrain refresh``, which moves it aside), from
``phonetrain aggregate`` and from the workflow's aggregate (``aggregate_study`` with its
``COMPLETE`` marker). The run folders are hand-built (helpers.results.write_run) with the tiny
sweep's run params, so no job runs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.results import write_run
from helpers.workflow import TINY
from phonetrain.cli import main
from phonetrain.config import CONF_DIR, compose_sweep
from phonetrain.errors import StageError
from phonetrain.io import sha256_file
from phonetrain.layout import Layout
from phonetrain.stages.aggregate import aggregate_study
from phonetrain.stages.params import expected_files, job_params, summary_outputs

DAMAGED = ("host", "mlp_16_16.cpu.none")


def _cut_run_json(d: Path) -> str:
    (d / "run.json").write_text((d / "run.json").read_text()[:100])
    return f"{d / 'run.json'}: cannot read JSON"


def _change_ledger_file(d: Path) -> str:
    """Record trace.csv in run.json's ledger as the runner does, then change one byte of it
    in place (same size: only its SHA-256 tells)."""
    trace = d / "trace.csv"
    run = json.loads((d / "run.json").read_text())
    run["files"] = {"trace.csv": {"size_bytes": trace.stat().st_size,
                                  "sha256": sha256_file(trace)}}
    (d / "run.json").write_text(json.dumps(run))
    data = bytearray(trace.read_bytes())
    i = data.index(b"gemm_0")
    data[i:i + 6] = b"gemm_9"
    trace.write_bytes(bytes(data))
    return f"{trace}: content differs from what the runner wrote"


def _study(R: Path, damage) -> tuple:
    """The tiny sweep's run folders under ``R``, each with the params the workflow gives,
    the run ``DAMAGED`` damaged by ``damage``: (sweep, layout, its folder, the problem)."""
    sweep = compose_sweep([*TINY, f"results_dir={R}"], CONF_DIR)
    L = Layout(sweep.results_dir)
    for (device, exp), p in job_params(sweep)["run"].items():
        model, backend, kernel = exp.split(".")
        d = write_run(R / "runs", model=model, device=device, backend=backend, kernel=kernel)
        (d / "params.json").write_text(json.dumps(p, default=str))
    rdir = Path(L.run_dir(*DAMAGED))
    return sweep, L, rdir, damage(rdir)


def _the_line(stderr: str, rdir: Path, problem: str) -> str:
    lines = [x for x in stderr.splitlines() if "damaged" in x]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    [line] = lines
    assert line.startswith(f"phonetrain: aggregate: {rdir}: damaged, not a measurement: "), line
    assert problem in line, line
    return line


@pytest.mark.parametrize("damage", [_cut_run_json, _change_ledger_file],
                         ids=["run-json-cut", "ledger-file-changed"])
def test_phonetrain_aggregate_names_each_damaged_run_on_stderr(tmp_path: Path, damage):
    R = tmp_path / "results"
    _, _, rdir, problem = _study(R, damage)
    res = CliRunner().invoke(main, ["aggregate", *TINY, "--results", str(R)])
    assert res.exit_code == 0, res.output
    line = _the_line(res.stderr, rdir, problem)
    # the remedy it names is a command that works: the folder is moved aside
    refresh = line.split("; ")[-1].split(" moves it aside")[0]
    assert refresh == f"phonetrain refresh host/{DAMAGED[1]} --results {R}", line
    moved = CliRunner().invoke(main, shlex.split(refresh)[1:])
    assert moved.exit_code == 0 and not rdir.exists(), moved.output
    assert "snakemake all" in line.split(refresh)[1], line


def test_the_workflow_aggregate_names_the_damaged_run_before_refusing_complete(
        tmp_path: Path, capsys):
    R = tmp_path / "results"
    sweep, L, rdir, problem = _study(R, _cut_run_json)
    with pytest.raises(StageError, match="no COMPLETE marker"):
        aggregate_study(job_params(sweep), L, expected_files(sweep), summary_outputs(sweep),
                        L.summary_complete())
    _the_line(capsys.readouterr().err, rdir, problem)
    assert not Path(L.summary_complete()).exists()
