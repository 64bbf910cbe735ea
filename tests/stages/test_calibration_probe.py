"""The calibration probe against the device's quiet figure: a first run records the figure; a
run whose probe is slower than the figure on record (planted: a record far faster than this
host can be) is unstable for that reason, measured again up to measure.max_attempts, and the
record keeps the fastest figure. The machine's own record (outside any results folder) holds
the figure for a study that starts in a fresh folder on a busy host. Real runner, one-off
`phonetrain run`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from helpers.workflow import seed_runner_cache
from phonetrain import layout
from phonetrain.cli import main

MODEL = "mlp_16_16"
RUN = ["run", f"model={MODEL}", "device=host", "backend=cpu", "measure.warmup=1",
       "measure.iterations=3", "measure.ci_target=0", "measure.threads=1",
       "measure.max_other_cpu_share=1", "measure.progress=false"]


def _run(R: Path, *extra: str) -> dict:
    res = CliRunner().invoke(main, RUN + [f"results_dir={R}", *extra])
    assert res.exit_code == 0, (res.output, res.exception)
    return json.loads((R / "runs/host" / f"{MODEL}.cpu.none" / layout.MEASUREMENT).read_text())


def test_a_first_run_records_the_quiet_figure(seeded_results: Path):
    # (the probe is not judged here: this host's load may change between its two readings)
    m = _run(seeded_results, "measure.max_probe_slowdown=0")
    record = json.loads((seeded_results / "probe/host.json").read_text())
    assert record["quiet_ms"]["1"] == m["quiet_probe_ms"] > 0
    assert m["probe_slowdown"] >= 1 and m["attempts"] == 1
    assert _machine_record()["quiet_ms"]["1"] == m["quiet_probe_ms"]


def _machine_record() -> dict:
    """The one machine record in this test's $PHONETRAIN_PROBE_DIR (conftest's)."""
    records = list(Path(os.environ["PHONETRAIN_PROBE_DIR"]).glob("*.json"))
    assert len(records) == 1, records
    return json.loads(records[0].read_text())


def test_a_probe_slower_than_the_quiet_figure_is_unstable_and_kept(seeded_results: Path):
    R = seeded_results
    (R / "probe").mkdir(parents=True)
    (R / "probe/host.json").write_text(json.dumps({"quiet_ms": {"1": 1e-6}}))
    m = _run(R)
    # the closing probe of the first attempt still reads the host contended: no second one
    assert m["unstable"] and m["attempts"] == 1 and m["earlier_reasons"] == []
    assert "still contended" in m["stopped_contended"]
    assert "slower than its quiet figure" in m["reasons"][0]
    assert "phonetrain refresh --unstable" in m["reasons"][0]
    assert m["quiet_probe_ms"] == 1e-6 and m["probe_slowdown"] > 1e3
    assert json.loads((R / "probe/host.json").read_text())["quiet_ms"]["1"] == 1e-6
    # a figure planted in one results folder never reaches the machine's record
    assert _machine_record()["quiet_ms"]["1"] > 1e-6


def test_a_fresh_results_folder_on_a_busy_machine_uses_the_machine_figure(tmp_path: Path,
                                                                          runner: Path):
    """A first study in a new folder: the machine's record (planted far faster than this host
    can be) already says how fast the probe runs quiet, so the run is unstable for it."""
    for folder in ("first", "fresh"):   # fresh but for the runner build (not the subject)
        seed_runner_cache(tmp_path / folder, runner)
    _run(tmp_path / "first", "measure.max_probe_slowdown=0")
    machine = next(Path(os.environ["PHONETRAIN_PROBE_DIR"]).glob("*.json"))
    machine.write_text(json.dumps({"quiet_ms": {"1": 1e-6}}))
    m = _run(tmp_path / "fresh")
    assert m["unstable"] and "slower than its quiet figure" in m["reasons"][0]
    assert m["quiet_probe_ms"] == 1e-6
    assert json.loads(machine.read_text())["quiet_ms"]["1"] == 1e-6
    # the fresh folder's own record holds only what was measured there
    assert json.loads((tmp_path / "fresh/probe/host.json").read_text())["quiet_ms"]["1"] > 1e-6


def test_a_bad_probe_record_is_refused_before_measuring(tmp_path: Path, seeded_results: Path,
                                                        monkeypatch):
    """A machine record that is not JSON, holds no numbers or cannot be written (the probe
    folder a file): one message naming it and what to do, before the runner starts, so the
    run measured before is kept as it was."""
    R = seeded_results
    _run(R, "measure.max_probe_slowdown=0")
    kept = (R / "runs/host" / f"{MODEL}.cpu.none" / layout.MEASUREMENT).read_bytes()
    machine = next(Path(os.environ["PHONETRAIN_PROBE_DIR"]).glob("*.json"))
    for text, named in (('{"quiet_ms": {', "cannot read JSON"),
                        ('{"quiet_ms": [25.0]}', "[25.0]"),
                        ('{"quiet_ms": {"1": true}}', "true")):
        machine.write_text(text)
        res = CliRunner().invoke(main, RUN + [f"results_dir={R}"])
        assert res.exit_code == 1 and "Traceback" not in res.output, (res.output, res.exception)
        assert f"{machine}: not a calibration-probe record" in res.output and named in res.output
        assert "delete the file" in res.output and "iteration" not in res.output
    a_file = tmp_path / "probe-file"
    a_file.write_text("")
    monkeypatch.setenv("PHONETRAIN_PROBE_DIR", str(a_file))
    res = CliRunner().invoke(main, RUN + [f"results_dir={R}"])
    assert res.exit_code == 1 and "Traceback" not in res.output, (res.output, res.exception)
    assert f"PHONETRAIN_PROBE_DIR={a_file}: cannot hold" in res.output
    assert (R / "runs/host" / f"{MODEL}.cpu.none" / layout.MEASUREMENT).read_bytes() == kept
