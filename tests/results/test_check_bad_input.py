"""Bad input to `phonetrain check`, `stale` and `refresh`: one clear message naming the path or
run and what to do, a non-zero exit where nothing could be done, no traceback, and no
measurement lost (a move that fails leaves the run folder where it was; one that fails after
others names those already moved). The run folders are hand-built (helpers.results.write_run)
with the tiny sweep's run params, so no job runs."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.results import write_run
from helpers.workflow import TINY
from phonetrain.cli import main
from phonetrain.config import CONF_DIR, compose_sweep
from phonetrain.layout import Layout
from phonetrain.stages.params import job_params

CUT = ("host", "mlp_16_16.cpu.none")
GARBLED = ("host", "mlp_16_16.opencl.baseline")


def _study(R: Path) -> Layout:
    """The tiny sweep's run folders under ``R``, each with the params the workflow gives."""
    sweep = compose_sweep([*TINY, f"results_dir={R}"], CONF_DIR)
    L = Layout(sweep.results_dir)
    for (device, exp), p in job_params(sweep)["run"].items():
        model, backend, kernel = exp.split(".")
        d = write_run(R / "runs", model=model, device=device, backend=backend, kernel=kernel)
        assert str(d) == L.run_dir(device, exp)
        (d / "params.json").write_text(json.dumps(p, default=str))
    return L


def _cli(*args: str):
    r = CliRunner().invoke(main, list(args))
    assert "Traceback" not in r.output and not isinstance(r.exception, (OSError, KeyError,
                                                                          AttributeError))
    return r


def test_check_of_a_missing_results_folder_fails_naming_it(tmp_path: Path):
    r = _cli("check", *TINY, "--results", str(tmp_path / "nope"))
    assert r.exit_code == 1
    assert f"{tmp_path / 'nope'}: no such results folder" in r.output


def test_a_results_folder_that_is_a_file_is_refused(tmp_path: Path):
    (tmp_path / "afile").write_text("")
    for cmd in ("check", "stale"):  # spelled as an override: --results is refused by click
        r = _cli(cmd, *TINY, f"results_dir={tmp_path / 'afile'}")
        assert r.exit_code == 1, cmd
        assert "names a file, not a folder" in r.output, r.output


def test_check_of_an_empty_results_folder_says_nothing_is_measured(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    r = _cli("check", *TINY, "--results", str(tmp_path / "empty"))
    assert r.exit_code == 0
    assert "no measured run of this study" in r.output
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.parametrize("rid", ["host", "host/", "/x", "../build/x",
                                 "host/../host/mlp_16_16.cpu.none", "host/a/b"])
def test_refresh_refuses_a_malformed_run_id_and_moves_nothing(tmp_path: Path, rid: str):
    L = _study(tmp_path / "results")
    (tmp_path / "results" / "build" / "x").mkdir(parents=True)
    (tmp_path / "results" / "build" / "x" / "run.json").write_text("{}")
    r = _cli("refresh", "--results", L.root, "host/mlp_784_256_128_16.cpu.none", rid)
    assert r.exit_code == 1
    assert f"{rid}: not a run id" in r.output and "nothing was moved" in r.output
    assert not (tmp_path / "results" / "quarantine").exists()


def test_refresh_of_a_missing_results_folder_or_run_names_it(tmp_path: Path):
    r = _cli("refresh", "--results", str(tmp_path / "nope"), "host/a.cpu.none")
    assert r.exit_code == 1 and f"{tmp_path / 'nope'}: no such results folder" in r.output
    L = _study(tmp_path / "results")
    r = _cli("refresh", "--results", L.root, "host/a.cpu.none")
    assert r.exit_code == 1 and "host/a.cpu.none: no measured run at" in r.output


def test_refresh_of_a_run_named_twice_moves_it_once(tmp_path: Path):
    L = _study(tmp_path / "results")
    rid = "/".join(CUT)
    r = _cli("refresh", "--results", L.root, rid, rid)
    assert r.exit_code == 0, r.output
    assert r.output.count("moved aside to") == 1
    assert not Path(L.run_dir(*CUT)).exists()
    assert len(list(Path(L.root, "quarantine").glob("*/runs/host/" + CUT[1]))) == 1


def test_a_quarantine_that_cannot_be_written_leaves_every_run_in_place(tmp_path: Path):
    # Root ignores a read-only mode, so the quarantine is a file where a folder must be.
    L = _study(tmp_path / "results")
    Path(L.root, "quarantine").write_text("")
    before = sorted(p for p in Path(L.root, "runs").rglob("*"))
    for args in (["refresh", "--results", L.root, "/".join(CUT)],
                 ["check", *TINY, "--results", L.root]):
        if args[0] == "check":
            (Path(L.run_dir(*CUT)) / "params.json").write_text("{")  # a finding
        r = _cli(*args)
        assert r.exit_code == 1, r.output
        assert "cannot move it aside" in r.output and "nothing was moved" in r.output
        assert f"make {Path(L.root, 'quarantine')} a folder you can write to" in r.output
        assert sorted(p for p in Path(L.root, "runs").rglob("*")) == before


def test_a_move_that_fails_after_another_names_the_one_moved(tmp_path: Path, monkeypatch):
    import phonetrain.results.check as check
    L = _study(tmp_path / "results")
    for run in (CUT, GARBLED):  # two findings
        (Path(L.run_dir(*run)) / "params.json").write_text("{not json")
    calls = []

    def replace(src, dst):  # the second run folder's move fails (notes are written too)
        if Path(src).is_dir():
            calls.append(src)
            if len(calls) == 2:
                raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        os.rename(src, dst)
    monkeypatch.setattr(check.os, "replace", replace)
    r = _cli("check", *TINY, "--results", L.root)
    assert r.exit_code == 1
    moved, failed = map(Path, calls)
    assert f"moved aside {moved} ->" in r.output  # the first move is reported
    assert f"{failed}: cannot move it aside" in r.output and "same filesystem" in r.output
    assert not moved.exists() and (failed / "run.json").exists()
    dest = next(Path(L.root, "quarantine").glob(f"*/runs/host/{moved.name}"))
    assert (dest / "run.json").exists() and dest.with_name(dest.name + ".why.json").exists()


def test_a_garbled_params_file_is_a_finding_moved_whole(tmp_path: Path):
    L = _study(tmp_path / "results")
    rdir = Path(L.run_dir(*GARBLED))
    (rdir / "params.json").write_text("{not json")
    files = sorted(p.relative_to(rdir) for p in rdir.rglob("*"))
    r = _cli("check", *TINY, "--results", L.root)
    assert r.exit_code == 0, r.output
    assert f"{rdir / 'params.json'}: cannot read JSON" in r.output
    dest = next(Path(L.root, "quarantine").glob(f"*/runs/host/{rdir.name}"))
    assert sorted(p.relative_to(dest) for p in dest.rglob("*")) == files
    assert [d.name for d in Path(L.root, "runs", "host").iterdir()].count(rdir.name) == 0
