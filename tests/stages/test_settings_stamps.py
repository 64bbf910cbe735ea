"""Every output records the settings it was made with (phonetrain.stages.stamp): where the
record lives, what the check says of an output made under other settings, and a job that
refuses an input whose record differs from the settings the workflow expects."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from phonetrain.errors import StageError
from phonetrain.io import short_hash, write_json
from phonetrain.stages import job as jobs
from phonetrain.stages.current import expected_hashes, output_findings
from phonetrain.stages.stamp import (STAMP, check_inputs, files_record, not_current,
                                     read_stamp, stamp, stamp_path, write_stamp)

PLAN = {"id": "m.cpu.none", "lr": 0.05, "seed": 0, "measure": {"warmup": 1}}


def made(path: Path, params: dict, folder: bool = True) -> Path:
    """An output made by a job with ``params``: a folder (plans/...) or a JSON document."""
    st = stamp(SimpleNamespace(params=params, input=SimpleNamespace()))
    if folder:
        path.mkdir(parents=True)
        (path / "plan.json").write_text("{}")
        write_stamp(path, st)
    else:
        write_json({"rows": [], STAMP: st}, path)
    return path


def test_where_each_kind_of_output_keeps_its_record(tmp_path):
    folder = made(tmp_path / "plans" / "m.cpu.none", PLAN)
    doc = made(tmp_path / "build.json", PLAN, folder=False)
    binary = tmp_path / "runner"
    binary.write_bytes(b"\x7fELF")
    write_stamp(binary, {"params_hash": "x", "params": {}})
    assert stamp_path(folder) == folder / "inputs.json"
    assert stamp_path(doc) == doc
    assert stamp_path(binary) == tmp_path / "runner.inputs.json"
    for out in (folder, doc):
        assert read_stamp(out)["params_hash"] == short_hash(PLAN)
        assert not_current(out, PLAN) is None
    assert read_stamp(tmp_path / "absent") is None


def test_an_output_made_under_other_settings_names_what_differs(tmp_path):
    plan = made(tmp_path / "plans" / "m.cpu.none", PLAN)
    now = {**PLAN, "lr": 0.07, "measure": {"warmup": 2}}
    why = not_current(plan, now)
    assert "lr: 0.05 recorded, 0.07 now" in why and "measure.warmup: 1 recorded, 2 now" in why
    assert not_current(tmp_path / "plans" / "other", now) is None   # absent: Snakemake makes it
    (plan / "inputs.json").unlink()   # an older phonetrain's output: no record
    assert "no record of the settings" in not_current(plan, PLAN)
    found = output_findings({str(plan): PLAN, str(tmp_path / "missing"): PLAN})
    assert [f.path for f in found] == [str(plan)]


def test_expected_hashes_match_inputs_however_spelled(tmp_path):
    outputs = {"results/plans/m.cpu.none": PLAN, "results/build/host/runner": {"d": 1}}
    expect = expected_hashes(outputs)
    got = expect(["./results/plans/m.cpu.none", "results/data/x", "results/build/host/runner"])
    assert got == {"./results/plans/m.cpu.none": short_hash(PLAN),
                   "results/build/host/runner": short_hash({"d": 1})}


def test_a_job_refuses_an_input_made_under_other_settings(tmp_path, capsys):
    plan = made(tmp_path / "plans" / "m.cpu.none", PLAN)
    want = short_hash({**PLAN, "lr": 0.07})
    with pytest.raises(StageError) as e:
        check_inputs({str(plan): want})
    msg = str(e.value)
    assert str(plan) in msg and short_hash(PLAN) in msg and want in msg
    ran = []
    log = tmp_path / "deploy.log"
    argv = ["deploy", "--log", str(log), "--params", "{}", "--input", f"plan_dir={plan}",
            "--expect", json.dumps({str(plan): want})]
    assert jobs.main({"deploy": ran.append}, argv) == 1
    assert ran == []   # the stage never started
    err = capsys.readouterr().err
    assert short_hash(PLAN) in err and want in err
    assert log.read_text().startswith("deploy: FAILED")
    argv[-1] = json.dumps({str(plan): short_hash(PLAN)})
    assert jobs.main({"deploy": ran.append}, argv) == 0 and len(ran) == 1


def test_a_plan_edited_by_hand_is_made_again(tmp_path):
    """The lower stage records plan.json's size and SHA-256: the workflow's start (sizes)
    and ``phonetrain check`` (SHA-256 too) find a hand edit and name the file."""
    plan = tmp_path / "plans" / "m.cpu.none"
    plan.mkdir(parents=True)
    (plan / "plan.json").write_text('{"iterations": 10}')
    st = stamp(SimpleNamespace(params=PLAN, input=SimpleNamespace()))
    write_stamp(plan, st | {"files": files_record(plan, ["plan.json"])})
    assert not_current(plan, PLAN) is None and not_current(plan, PLAN, hashes=True) is None
    (plan / "plan.json").write_text('{"iterations": 99}')   # same size: only the hash sees it
    assert not_current(plan, PLAN) is None
    why = not_current(plan, PLAN, hashes=True)
    assert "plan.json differs from what its job wrote" in why, why
    (plan / "plan.json").write_text('{"iterations": 5, "x": 1}')
    assert [f.path for f in output_findings({str(plan): PLAN})] == [str(plan)]
    (plan / "plan.json").unlink()
    assert "plan.json missing" in not_current(plan, PLAN)
