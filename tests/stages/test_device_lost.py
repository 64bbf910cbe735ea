"""A phone lost while its run is under way (the connection dropped mid-run, its adb server
stopped) leaves the run's failure record: ``failed.json`` naming the cause, the settings that
failed, and nothing that looks complete; an earlier measurement is moved into quarantine/, not
left beside the record nor deleted. The summary row (what the partial report lists) gives the
cause, not a damaged folder or a missing run.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner

from helpers import REPO, STEADY
from helpers.adb import (connect_vdev, disconnect_vdev, free_port, listening,
                         stop_stray_server)
from phonetrain.cli import main
from phonetrain.results.runs import read_run

EXP = "mlp_16_16.cpu.none"
BASE = ["run", "model=mlp_16_16", "device=vphone", "backend=cpu", "model.batch_size=8",
        "measure.warmup=1", "measure.iterations=2", "measure.progress=false",
        "measure.cooldown_limit_s=5", *STEADY]
COMPLETE_LOOKING = ("run.json", "trace.csv", "verify.json", "measurement.json", "device.json")


def conf_with_phone(tmp_path: Path, serial: str, adb_port: int | None = None) -> Path:
    """A copy of conf/ with the device ``vphone``: the adb phone ``serial`` on the server at
    ``adb_port`` (None: the default one)."""
    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf)
    host = yaml.safe_load((REPO / "conf/device/host.yaml").read_text())
    cfg = dict(host, name="vphone", transport="adb", serial=serial, toolchain="host",
               adb_port=adb_port)
    (conf / "device/vphone.yaml").write_text(yaml.safe_dump(cfg))
    return conf


def run(conf: Path, results: Path):
    return CliRunner().invoke(main, [*BASE, f"results_dir={results}", "--conf", str(conf)])


def test_connection_lost_mid_run_leaves_failed_json_and_nothing_complete(adb_server,
                                                                          tmp_path,
                                                                          seeded_results):
    vd = connect_vdev(adb_server, tmp_path / "phone")
    try:
        conf, R = conf_with_phone(tmp_path, vd.serial), seeded_results
        res = run(conf, R)
        assert res.exit_code == 0, res.output
        rdir = R / "runs" / "vphone" / EXP
        measured = (rdir / "measurement.json").read_bytes()

        vd.faults.drop_on = r"runner run"  # the cable is pulled while the runner measures
        res = run(conf, R)
        assert res.exit_code != 0
        failed = json.loads((rdir / "failed.json").read_text())
        assert "vphone" in failed["reason"] and EXP in failed["reason"]
        assert "connection lost while running a command" in failed["reason"]
        left = [n for n in COMPLETE_LOOKING if (rdir / n).exists()]
        assert left == [], f"{left} of the earlier measurement sit beside failed.json"
        assert json.loads((rdir / "params.json").read_text())["run_id"] == EXP
        moved = list(R.glob(f"quarantine/*/runs/vphone/{EXP}/measurement.json"))
        assert len(moved) == 1 and moved[0].read_bytes() == measured
        note = json.loads(next(R.glob(f"quarantine/*/runs/vphone/{EXP}.why.json")).read_text())
        assert "connection lost" in note["why"]
        row = read_run(rdir)["runs"].iloc[0]
        assert row["status"] == "failed" and "connection lost" in row["status_reason"]
    finally:
        disconnect_vdev(adb_server, vd)


def test_a_stopped_adb_server_is_the_reason_given(tmp_path, seeded_results):
    port = free_port()  # the phone's own server, stopped: nothing listens there
    conf, R = conf_with_phone(tmp_path, "127.0.0.1:17301", adb_port=port), seeded_results
    try:
        res = run(conf, R)
        assert not listening(port), f"an adb server was started on the configured port {port}"
    finally:
        stop_stray_server(port)
    assert res.exit_code != 0
    at = f"adb server unreachable at 127.0.0.1:{port}"
    assert at in res.output
    rdir = R / "runs" / "vphone" / EXP
    assert at in json.loads((rdir / "failed.json").read_text())["reason"]
    row = read_run(rdir)["runs"].iloc[0]
    assert row["status"] == "failed" and at in row["status_reason"]
    assert "plan.json" not in row["status_reason"] and "no run.json" not in row["status_reason"]


def test_a_kernel_build_behind_a_stopped_server_records_why(tmp_path, seeded_results):
    """An OpenCL run's first job on the phone is its kernel build: the build's failed.json
    (which the summary gives for the version's builds and runs) names the server."""
    port = free_port()
    conf, R = conf_with_phone(tmp_path, "127.0.0.1:17301", adb_port=port), seeded_results
    try:
        res = CliRunner().invoke(main, [*BASE, "backend=opencl", "kernel=baseline",
                                        f"results_dir={R}", "--conf", str(conf)])
    finally:
        stop_stray_server(port)
    at = f"adb server unreachable at 127.0.0.1:{port}"
    assert res.exit_code != 0 and at in res.output
    failed = R / "oneoff/build/vphone/kernels/baseline/failed.json"
    assert at in json.loads(failed.read_text())["reason"]
