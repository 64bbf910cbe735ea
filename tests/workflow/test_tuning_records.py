"""This machine's tuning records: a study in a fresh results folder on the same machine reuses
the tuning a first study measured for the same sources (the tuner's pick is a measurement, so
two tunings of identical sources could otherwise run different programs); an edited source
tunes again; a damaged record is named and tuned again. Real Snakemake on the tiny study with
the tunable ``regblock`` version."""

from __future__ import annotations

import json
import os
from pathlib import Path

import helpers.workflow as W

OVERRIDES = W.TINY + ["sweep.kernels=[regblock]", "sweep.backends=[opencl]",
                      "measure.gemm_sizes=[32]", "sweep.models=[mlp_16_16]"]
CLASS = "gemm_nt_32x16x16"


def _tune(ws: Path, results: str, runner: Path) -> dict:
    """Tune in the fresh results folder ``results`` (its runner compile cache seeded with the
    session's runner build: the tuning, not the runner's compile, is what these tests watch)."""
    target = f"{results}/build/host/kernels/regblock/tuning/{CLASS}.json"
    W.seed_runner_cache(ws / results, runner)
    p = W.snakemake(ws, target, overrides=OVERRIDES + [f"results_dir={results}"])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((ws / target).read_text())
    # a reuse is said where the job runs, naming the record
    said = "tune regblock on host: reused this machine's tuning" in p.stderr
    assert said == ("reused_from" in doc) and (not said or doc["reused_from"] in p.stderr)
    return doc


def _records() -> list[Path]:
    return sorted(Path(os.environ["PHONETRAIN_TUNING_DIR"]).glob("*.json"))


def _record(cls: str) -> Path:
    """This machine's one record of class ``cls`` (the version's tune job keeps one record
    per class it tunes)."""
    [record] = [r for r in _records() if cls in json.loads(r.read_text())["classes"]]
    return record


def test_a_fresh_study_reuses_the_machine_tuning_and_an_edit_tunes_again(tmp_path, runner):
    """Reused by a fresh study and after a comment edit; a damaged record (its keys right, its
    inside not) is never reused: named, tuned again, replaced; an edit of what is compiled
    tunes again beside the first record."""
    ws = W.make_workspace(tmp_path / "ws")
    first = _tune(ws, "results_a", runner)
    assert "reused_from" not in first and first["trials"]
    record, made = _record(CLASS), len(_records())
    # planted: a choice no tuning of this host would make; a reuse carries it
    kept = json.loads(record.read_text())
    kept["classes"][CLASS]["gflops_geomean"] = 12345.0
    record.write_text(json.dumps(kept))
    second = _tune(ws, "results_b", runner)
    assert second["reused_from"] == str(record)
    assert second["classes"][CLASS]["gflops_geomean"] == 12345.0
    assert second["classes"][CLASS]["defines"] == first["classes"][CLASS]["defines"]
    # a comment edit compiles to the same program: the same build hash, the record reused
    gemm = ws / "src/kernels/regblock/gemm.cl"
    gemm.write_text(gemm.read_text() + "\n// edited\n")
    commented = _tune(ws, "results_c", runner)
    assert commented["reused_from"] == str(record)
    assert commented["kernel_hash"] == first["kernel_hash"]
    # a record whose class is not a tuning (its keys right, its inside not) for the same build
    # hash: named, tuned again, replaced. The comment-edit study's tuning file is removed, so
    # its tune job runs again on the same build (the kernel build stays: it is up to date)
    doc = json.loads(record.read_text())
    record.write_text(json.dumps(doc | {"classes": {CLASS: 5}}))
    target = f"results_c/build/host/kernels/regblock/tuning/{CLASS}.json"
    (ws / target).unlink()
    p = W.snakemake(ws, target, overrides=OVERRIDES + ["results_dir=results_c"])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "tuning again" in p.stderr and str(record) in p.stderr, p.stderr[-3000:]
    assert f"class '{CLASS}' has no 'defines' object" in p.stderr
    again = json.loads((ws / target).read_text())
    assert "reused_from" not in again and again["trials"]
    assert json.loads(record.read_text())["classes"][CLASS]["defines"]   # replaced
    assert len(_records()) == made
    # an edit of what is compiled is another build hash: measured, kept beside the first record
    gemm.write_text(gemm.read_text() + "#define PHONETRAIN_EDITED 1\n")
    third = _tune(ws, "results_d", runner)
    assert "reused_from" not in third and third["kernel_hash"] != first["kernel_hash"]
    assert len(_records()) == 2 * made


def test_an_unwritable_record_folder_is_named_and_the_tuning_kept(tmp_path, monkeypatch,
                                                                 runner):
    """PHONETRAIN_TUNING_DIR names a file, not a folder: the tune job still writes the study's
    tuning (nothing measured is lost) and names the folder and what to do."""
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    monkeypatch.setenv("PHONETRAIN_TUNING_DIR", str(blocker / "tuning"))
    ws = W.make_workspace(tmp_path / "ws")
    target = f"results_a/build/host/kernels/regblock/tuning/{CLASS}.json"
    W.seed_runner_cache(ws / "results_a", runner)
    p = W.snakemake(ws, target, overrides=OVERRIDES + ["results_dir=results_a"])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "cannot keep this machine's tuning record" in p.stderr
    assert "PHONETRAIN_TUNING_DIR" in p.stderr
    assert json.loads((ws / target).read_text())["trials"]
