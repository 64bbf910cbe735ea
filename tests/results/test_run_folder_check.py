"""A finished run folder is checked whole wherever it is read: trace rows against the runner's
count, and every file of the runner's ledger (src/runner/ledger.c) by size and SHA-256 (by
size and row counts only in the check at workflow start); the check moves a finding aside
into quarantine/ with a note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from phonetrain.layout import Layout
from phonetrain.results.check import findings, move_aside, run_finding
from phonetrain.results.runs import folder_problems, read_run
from helpers.real_study import OK


@pytest.fixture
def run_copy(real_study, tmp_path) -> Path:
    study = real_study
    src = next(d for d in study["runs"] if d.name == OK[1])  # an OpenCL run with dumps
    return Path(shutil.copytree(src, tmp_path / src.name))


def test_a_whole_folder_has_no_problems(run_copy: Path):
    run = json.loads((run_copy / "run.json").read_text())
    assert "trace.csv" in run["files"] and any(k.startswith("dumps/") for k in run["files"])
    params = json.loads((run_copy / "params.json").read_text())
    assert folder_problems(run_copy) == [] and run_finding(run_copy, params) is None


def _edit_run(d: Path, change) -> None:
    """Change ``run.json`` in place and keep it valid JSON (damage a checksum cannot see:
    run.json is written last and cannot list its own hash)."""
    run = json.loads((d / "run.json").read_text())
    change(run)
    (d / "run.json").write_text(json.dumps(run))


def _flip_a_byte(f: Path) -> None:
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, needle", [
    (lambda d: _flip_a_byte(sorted((d / "dumps").glob("*.f32"))[0]), "content differs"),
    (lambda d: (d / "trace.csv").write_text((d / "trace.csv").read_text() + "x\n"),
     "rows, the runner wrote"),
    (lambda d: sorted((d / "dumps").glob("*.f32"))[-1].write_bytes(b"\0" * 8), "bytes, the runner"),
    (lambda d: (d / "run.json").write_text('{"status": "ok", '), "cannot read JSON"),
    (lambda d: _edit_run(d, lambda r: r["iters"].pop()), "iteration records, the runner ran"),
    (lambda d: _edit_run(d, lambda r: [i.update(wall_ms=100 * i["wall_ms"]) for i in r["iters"]]),
     "measured wall times have median"),
    (lambda d: (d / "run.json").write_text('{"status": "ok"}'), "not the runner's complete"),
    (lambda d: (d / "verify.json").unlink(), "verify.json: missing"),
    (lambda d: (d / "params.json").unlink(), "params.json: missing"),
    (lambda d: (d / "plan.json").write_text((d / "plan.json").read_text() + " "),
     "not the plan this run measured"),
    (lambda d: (d / "measurement.json").write_text((d / "measurement.json").read_text()[:200]),
     "measurement.json: cannot read JSON"),
], ids=["dump-bytes-changed", "trace-grown", "dump-replaced", "run-json-cut",
        "iteration-record-lost", "wall-times-changed", "run-json-hollow", "verdict-lost",
        "settings-lost", "plan-replaced", "measurement-verdict-cut"])
def test_damage_is_named_and_never_tabulated(run_copy: Path, damage, needle):
    damage(run_copy)
    problems = folder_problems(run_copy)
    assert any(needle in p for p in problems), problems
    assert run_finding(run_copy, {}).startswith("damaged")
    if needle != "params.json: missing":   # the row's key columns come from params.json
        row = read_run(run_copy)["runs"].iloc[0]
        assert row["status"] == "failed" and needle in row["status_reason"]


def test_the_cheap_check_hashes_nothing_but_sees_sizes(run_copy: Path):
    """At workflow start (hashes=False) a flipped byte is not seen, a cut file is."""
    _flip_a_byte(sorted((run_copy / "dumps").glob("*.f32"))[0])
    assert folder_problems(run_copy, hashes=False) == []
    assert folder_problems(run_copy)  # the full check (phonetrain check) sees it
    (run_copy / "trace.csv").write_text((run_copy / "trace.csv").read_text().splitlines()[0])
    assert any("rows, the runner wrote" in p for p in folder_problems(run_copy, hashes=False))


def test_other_settings_and_a_failure_record_are_findings_an_unstable_run_is_not(run_copy: Path):
    params = json.loads((run_copy / "params.json").read_text())
    assert run_finding(run_copy, params) is None
    ms = params["measure"]
    other = {**params, "measure": {**ms, "iterations": ms["iterations"] + 1}}
    assert "measure.iterations" in run_finding(run_copy, other)
    located = {**params, "stage_root": "/elsewhere/stage/host", "generation": 9}
    assert run_finding(run_copy, located) is None  # where it is staged is no setting
    m = json.loads((run_copy / "measurement.json").read_text())
    (run_copy / "measurement.json").write_text(json.dumps(
        {**m, "unstable": True, "reasons": ["other processes used 90% of the CPU"]}))
    assert run_finding(run_copy, params) is None   # kept: phonetrain refresh --unstable asks
    (run_copy / "failed.json").write_text(json.dumps({"reason": "runner crashed"}))
    assert "failed job's record" in run_finding(run_copy, params)


def test_a_finding_is_moved_aside_whole_with_its_note(run_copy: Path, tmp_path: Path):
    R = tmp_path / "results"
    rdir = R / "runs" / "host" / run_copy.name
    rdir.parent.mkdir(parents=True)
    run_copy.rename(rdir)
    files = sorted(p.relative_to(rdir) for p in rdir.rglob("*"))
    L = Layout(str(R))
    params = json.loads((rdir / "params.json").read_text())
    (rdir / "trace.csv").write_text((rdir / "trace.csv").read_text().splitlines()[0])
    found = findings({("host", rdir.name): params}, L)
    assert [f.path for f in found] == [L.run_dir("host", rdir.name)]
    dest = move_aside(found[0].path, found[0].why, L, "20260101T000000.000000Z")
    assert not rdir.exists()
    assert dest == R / "quarantine" / "20260101T000000.000000Z" / "runs" / "host" / rdir.name
    assert sorted(p.relative_to(dest) for p in dest.rglob("*")) == files  # nothing lost
    note = json.loads(dest.with_name(dest.name + ".why.json").read_text())
    assert note == {"why": found[0].why, "moved_at_utc": "20260101T000000.000000Z",
                    "from": f"runs/host/{rdir.name}"}
    assert findings({("host", rdir.name): params}, L) == []  # missing now: Snakemake's


def test_trace_command_refuses_a_damaged_folder(run_copy: Path):
    from click.testing import CliRunner

    from phonetrain.cli import main
    (run_copy / "trace.csv").write_text((run_copy / "trace.csv").read_text().splitlines()[0])
    (run_copy / "trace.perfetto.json").unlink(missing_ok=True)
    res = CliRunner().invoke(main, ["trace", str(run_copy)])
    assert res.exit_code == 1 and "damaged" in res.output, res.output
    assert not (run_copy / "trace.perfetto.json").exists()  # no trace drawn from a cut file


def test_refresh_unstable_names_a_run_whose_verdict_cannot_be_read(run_copy: Path,
                                                                   tmp_path: Path):
    """A damaged measurement.json leaves no verdict to keep the run by: `refresh --unstable`
    moves it aside with the file named, beside the unstable ones; a readable verdict of a
    stable run stays."""
    from click.testing import CliRunner

    from phonetrain.cli import main
    from phonetrain.results.check import unstable_runs
    R = tmp_path / "results"
    for name in ("a", "b"):
        shutil.copytree(run_copy, R / "runs" / "host" / name)
    (R / "runs" / "host" / "b" / "measurement.json").write_text('{"unstable": fal')
    found = unstable_runs(Layout(str(R)))
    assert [Path(f.path).name for f in found] == ["b"]
    assert "measurement.json: cannot read JSON" in found[0].why and "again" in found[0].why
    res = CliRunner().invoke(main, ["refresh", "--unstable", "--results", str(R)])
    assert res.exit_code == 0, res.output
    assert "host/b: moved aside" in res.output and "host/a" not in res.output
    assert (R / "runs" / "host" / "a").is_dir() and not (R / "runs" / "host" / "b").exists()


@pytest.mark.parametrize("plant, needles", [
    ({}, ["not a run folder (no run.json)", "runs/<device>/<experiment>"]),
    ({"run.json": '{"status": "skipped", "reason": "no Vulkan device"}'},
     ["no trace.csv", "'skipped'", "run.json"]),
    ({"run.json": '{"status": "failed"}', "failed.json": '{"reason": "runner crashed"}'},
     ["no trace.csv", "'failed'", "failed.json"]),
], ids=["results-folder", "skipped-run", "failed-run"])
def test_trace_command_on_a_folder_without_a_trace_says_why(tmp_path: Path, plant, needles):
    """``phonetrain trace`` given a folder that is not a run's (the results folder) or a run
    that measured nothing: one message saying so, not a missing-file error."""
    from click.testing import CliRunner

    from phonetrain.cli import main
    for name, text in plant.items():
        (tmp_path / name).write_text(text)
    res = CliRunner().invoke(main, ["trace", str(tmp_path)])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    for needle in (str(tmp_path), *needles):
        assert needle in res.output, res.output
    assert not (tmp_path / "trace.perfetto.json").exists()
