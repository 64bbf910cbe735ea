"""Values from the environment (``${oc.env:VAR}``) are accepted, recorded with their variable,
and refused when they differ between two invocations of one study: a per-session variable
(SSH_TTY, SSH_CONNECTION) that no list of refused names covers is caught by its value, at
composition (`phonetrain run`) and at the workflow's start (a dry run too), before anything
is written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.workflow import SNAKEMAKE, env, make_workspace
from phonetrain.cli import main
from phonetrain.config import compose_one, compose_sweep
from phonetrain.layout import Layout
from phonetrain.results import environment


def test_every_value_from_the_environment_is_named_with_its_variable(monkeypatch):
    monkeypatch.setenv("SSH_TTY", "/dev/pts/3")
    monkeypatch.delenv("PHONETRAIN_NO_SUCH_VAR", raising=False)
    sweep = compose_sweep(["sweep=test", "report.title=${sweep.name} on ${oc.env:SSH_TTY}",
                           "results_dir=res-${oc.env:PHONETRAIN_NO_SUCH_VAR,x}"])
    assert sweep.environment == {"report.title": {"SSH_TTY": "/dev/pts/3"},
                                 "results_dir": {"PHONETRAIN_NO_SUCH_VAR": None}}
    assert sweep.results_dir == "res-x"
    one, exp = compose_one(["report.title=${oc.env:SSH_TTY}"])
    assert one.environment == {"report.title": {"SSH_TTY": "/dev/pts/3"}}
    # the record is beside the config, not in it: the config hash does not move
    assert exp.config_hash == compose_one([])[1].config_hash


def test_a_value_that_differs_from_the_studys_record_is_refused(tmp_path: Path):
    L = Layout(str(tmp_path / "results"))
    environment.check(L, {"report.title": {"SSH_TTY": "/dev/pts/3"}})  # nothing recorded yet
    environment.record(L, {"report.title": {"SSH_TTY": "/dev/pts/3"}})
    environment.check(L, {"report.title": {"SSH_TTY": "/dev/pts/3"}})  # the same value
    with pytest.raises(environment.EnvironmentChanged) as e:
        environment.check(L, {"report.title": {"SSH_TTY": "/dev/pts/7"}})
    msg = str(e.value)
    assert "key 'report.title' reads ${oc.env:SSH_TTY}, which is '/dev/pts/7' now and was " \
           "'/dev/pts/3'" in msg and L.environment_record() in msg, msg
    assert "write the value itself" in msg and f"delete {L.environment_record()}" in msg
    environment.record(L, {"dataset.path": {"DATA": "/d"}})   # a one-off run's key: merged
    assert environment.recorded(L) == {"report.title": {"SSH_TTY": "/dev/pts/3"},
                                       "dataset.path": {"DATA": "/d"}}


def test_phonetrain_run_refuses_a_per_session_value_before_writing(tmp_path: Path,
                                                                   monkeypatch):
    R = tmp_path / "results"
    L = Layout(str(R))
    environment.record(L, {"report.title": {"SSH_CONNECTION": "10.0.0.1 50000 10.0.0.2 22"}})
    monkeypatch.setenv("SSH_CONNECTION", "10.0.0.1 50123 10.0.0.2 22")
    res = CliRunner().invoke(main, ["run", "model=mlp_16_16", "backend=cpu",
                                    f"results_dir={R}", "report.title=${oc.env:SSH_CONNECTION}"])
    assert res.exit_code == 1, res.output
    assert "${oc.env:SSH_CONNECTION}, which is '10.0.0.1 50123 10.0.0.2 22' now" in res.output
    assert sorted(p.name for p in R.iterdir()) == ["environment.json"]


def test_the_workflow_records_and_a_dry_run_refuses_a_changed_value(tmp_path: Path):
    """An invocation that executes jobs (here of one cheap target) records the value; a
    later invocation in another session is refused at parse time, a dry run too."""
    ws = make_workspace(tmp_path / "ws")
    over = ["sweep=test", "sweep.models=[mlp_16_16]", "sweep.backends=[cpu]",
            "report.title=${oc.env:SSH_TTY}"]
    cfg = f"overrides={json.dumps(over)}"
    first = subprocess.run([str(SNAKEMAKE), "--cores", "1", "results/build/gemm_shapes.json",
                            "--config", cfg], cwd=ws, env=env(ws) | {"SSH_TTY": "/dev/pts/3"},
                           capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((ws / "results/environment.json").read_text()) == {
        "values": {"report.title": {"SSH_TTY": "/dev/pts/3"}}}
    later = subprocess.run([str(SNAKEMAKE), "--cores", "1", "-n", "all", "--config", cfg],
                           cwd=ws, env=env(ws) | {"SSH_TTY": "/dev/pts/9"},
                           capture_output=True, text=True, timeout=900)
    assert later.returncode != 0, later.stdout[-2000:]
    assert "${oc.env:SSH_TTY}, which is '/dev/pts/9' now and was '/dev/pts/3'" in later.stderr


@pytest.mark.parametrize("text", ["{", '{"values": [1, 2]}', '{"values": {"report.title": 3}}'])
def test_a_damaged_record_names_the_file_and_says_to_delete_it(tmp_path: Path, text):
    """A record that is not ``{"values": {key: {variable: value}}}`` (truncated, hand-edited):
    one error naming it and what to do (delete it: it is written again), no traceback, and
    nothing is measured under a record that cannot be compared."""
    L = Layout(str(tmp_path / "results"))
    Path(L.root).mkdir()
    Path(L.environment_record()).write_text(text)
    with pytest.raises(environment.ResultsFileError) as e:
        environment.check(L, {"report.title": {"SSH_TTY": "/dev/pts/3"}})
    for needle in (L.environment_record(), "no record of the config values",
                   f"delete {L.environment_record()}", "records them again"):
        assert needle in str(e.value), str(e.value)
    res = CliRunner().invoke(main, ["run", "model=mlp_16_16", "backend=cpu",
                                    f"results_dir={L.root}"])
    assert res.exit_code == 1 and f"delete {L.environment_record()}" in res.output, res.output
    assert sorted(p.name for p in Path(L.root).iterdir()) == ["environment.json"]
