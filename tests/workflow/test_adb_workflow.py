"""The workflow with virtual phones over the real adb server: the default study on the host
plus a virtual device, incremental deploys, and faults that fail only the faulty device."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import REPO, STEADY
from helpers.adb import connect_vdev, disconnect_vdev
from helpers.workflow import seed_runner_cache
from phonetrain.devices.virtual import Faults

# one runner process per run (measure.repeats=1): what these tests check is per device and per
# job, never the pooling of processes (tests/workflow/test_workflow.py keeps the default 2);
# no checkpoints (the trajectory verifies each run): a phone's run pulls each checkpoint's
# tensors file by file (about 120 files a run of mlp_16_16_16_16), and the step-by-step
# verification of a phone's run is tests/workflow/test_vulkan_phone.py's
SMALL = ["sweep=test", "sweep.models=[mlp_16_16]", "model.batch_size=8", "measure.warmup=1",
         "measure.iterations=2", "measure.repeats=1", "measure.checkpoints=[]",
         "measure.progress=false", "measure.bandwidth_max_bytes=65536",
         "measure.cooldown_limit_s=5", "measure.cooldown_threshold_c=50",
         "measure.gemm_sizes=[64]", "measure.gemm_min_time_ms=1", "measure.tune=false", *STEADY]


def workspace(tmp_path: Path, devices: dict[str, str], runner: Path | None = None) -> Path:
    """A copy of the workflow (Snakefile, rules, conf; src linked) with one adb device config
    per ``{name: serial}``; with ``runner`` (the session's runner build) in its results
    folder's runner compile cache (:func:`helpers.workflow.seed_runner_cache`)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copy(REPO / "Snakefile", ws)
    shutil.copytree(REPO / "rules", ws / "rules")
    shutil.copytree(REPO / "conf", ws / "conf")
    (ws / "src").symlink_to(REPO / "src")
    host = yaml.safe_load((REPO / "conf/device/host.yaml").read_text())
    for name, serial in devices.items():
        cfg = dict(host, name=name, transport="adb", serial=serial, toolchain="host")
        (ws / "conf/device" / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    if runner is not None:
        seed_runner_cache(ws / "results", runner)
    return ws


def snakemake(ws: Path, overrides: list[str], *args: str, timeout: int = 540):
    env = dict(os.environ, PHONETRAIN_LOCK_DIR=str(ws / "locks"))
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *args,
         "--config", f"overrides={json.dumps(overrides)}"],
        cwd=ws, env=env, capture_output=True, text=True, timeout=timeout)


def fake_sysfs(root: Path) -> Path:
    z = root / "class/thermal/thermal_zone0"
    z.mkdir(parents=True)
    (z / "type").write_text("gpu\n")
    (z / "temp").write_text("38500\n")
    bat = root / "class/power_supply/battery"   # readable, but the test's runs are too short
    bat.mkdir(parents=True)
    (bat / "voltage_now").write_text("4000000\n")
    (bat / "current_now").write_text("500000\n")
    return root


@pytest.fixture(scope="module")
def study(adb_server, tmp_path_factory, runner):
    """The test sweep on the host and a virtual phone, run up to the summary tables."""
    tmp_path = tmp_path_factory.mktemp("study")
    vd = connect_vdev(adb_server, tmp_path / "phone", sysfs_root=fake_sysfs(tmp_path / "sys"))
    try:
        ws = workspace(tmp_path, {"vphone": vd.serial}, runner)
        # a sampling period far longer than the measured iterations: the battery is read at
        # their start and end only (2 samples a run), however slow the host
        over = SMALL + ["sweep.devices=[host,vphone]", "measure.power_sample_ms=600000"]
        res = snakemake(ws, over, "results/summary/runs.parquet")
        assert res.returncode == 0, res.stderr[-4000:]
        yield ws, over, vd
    finally:
        disconnect_vdev(adb_server, vd)


def test_study_runs_on_host_and_virtual_phone(study):
    ws, _, vd = study
    R = ws / "results"
    runs = pd.read_parquet(R / "summary/runs.parquet")
    phone = runs[runs.device == "vphone"]
    assert sorted(phone.backend) == ["cpu", "opencl"]
    assert (phone.status == "ok").all() and (runs[runs.device == "host"].status == "ok").all()
    # it ran on the device: the runner was pushed into the phone's sandbox and run there
    assert (vd.root / "phonetrain/runner").is_file()
    assert any((vd.root / "phonetrain/out").iterdir())
    cond = json.loads((R / "runs/vphone/mlp_16_16.cpu.none/device.json").read_text())
    assert cond["facts"]["model"] == "Phonetrain Virtual"
    assert cond["before"]["temp_c.thermal_zone0.gpu"] == 38.5
    assert cond["cooldown"]["cooldown_timed_out"] == 0.0


def test_report_shows_the_virtual_phone_as_its_own_device(study):
    ws, over, _ = study
    res = snakemake(ws, over, "all")
    assert res.returncode == 0, res.stderr[-4000:]
    runs = pd.read_parquet(ws / "results/summary/runs.parquet")
    assert runs["run_id"].is_unique  # one experiment id on two devices: <device>/<id>
    assert {"host/mlp_16_16.cpu.none", "vphone/mlp_16_16.cpu.none"} <= set(runs["run_id"])
    md = (ws / "results/report/report.md").read_text()
    for dev in ("host", "vphone"):  # each device's runs labelled with it in the runs table
        assert f"| mlp_16_16 | {dev}: cpu | ok |" in md, dev
    # the phone's battery was read (2 samples per runner process: no sampling period ends
    # within the measured iterations), too few times for an energy figure: the report says
    # what to change instead of calling it unreadable
    phone = runs[runs.device == "vphone"]
    assert (phone["power_samples"] == 2 * phone["repeats"]).all()
    assert "Not measured on vphone (battery readable, but the measured iterations were " \
        "shorter than one sampling period" in md


def test_second_deploy_pushes_nothing_unchanged(study):
    ws, over, _ = study
    again = snakemake(ws, over, "--forcerun", "deploy", "--until", "deploy")
    assert again.returncode == 0, again.stderr[-4000:]
    manifests = list((ws / "results/deploy/vphone").glob("*.json"))
    assert len(manifests) == 2
    for manifest in manifests:
        assert set(json.loads(manifest.read_text())["files_sent"].values()) == {0}


def test_faults_fail_only_the_faulty_devices_jobs(adb_server, tmp_path, runner):
    faults = {
        "v_drop": Faults(drop_after_bytes=30_000),  # cable pulled mid-push of the runner
        "v_crash": Faults(crash=r"runner run"),  # the runner dies of SIGSEGV
        "v_hang": Faults(hang=r"runner run"),  # the runner never returns
        "v_missing": Faults(hide="*/out/run-*/trace.csv"),  # an output file never written
    }
    vds = {n: connect_vdev(adb_server, tmp_path / n, f) for n, f in faults.items()}
    offline = connect_vdev(adb_server, tmp_path / "v_offline")
    offline.stop()  # unplugged: listed as offline
    try:
        serials = {n: vd.serial for n, vd in vds.items()} | {"v_offline": offline.serial}
        ws = workspace(tmp_path, serials, runner)
        # the limit applies to every runner call, the healthy devices' too: long enough for
        # them on a loaded host (one CPU run of mlp_16_16 each, under a second quiet), short
        # enough that the hung runner does not stall the test
        over = SMALL + ["sweep.backends=[cpu]", "measure.timeout_s=15",
                        f"sweep.devices=[host,{','.join(serials)}]"]
        exp = "mlp_16_16.cpu.none"
        # the training runs of every device (the report's other inputs are covered above);
        # on failure the workflow's onerror hook aggregates what exists into results/summary
        targets = [f"results/runs/{d}/{exp}/verify.json" for d in ["host", *serials]]
        res = snakemake(ws, over, *targets, "--keep-going")
        assert res.returncode != 0
        R = ws / "results"
        assert json.loads((R / f"runs/host/{exp}/verify.json").read_text())["ok"]
        for name in serials:
            assert not (R / f"runs/{name}/{exp}/run.json").exists(), name
        logs = {n: "".join(p.read_text() for p in (R / "logs").rglob("*.log") if n in str(p))
                for n in serials}
        assert "killed by SIGSEGV" in logs["v_crash"], res.stderr[-3000:]  # the signal by name
        assert "timed out after 15 s" in logs["v_hang"]
        assert "trace.csv" in logs["v_missing"] and "missing or empty" in logs["v_missing"]
        assert "v_drop" in logs["v_drop"] and ("push of" in logs["v_drop"] or
                                               "not available" in logs["v_drop"])
        assert "v_offline" in logs["v_offline"] and "not available: state" in logs["v_offline"]
        runs = pd.read_parquet(R / "summary/runs.parquet")  # the partial summary
        assert (runs[runs.device == "host"].status == "ok").all()
        bad = runs[runs.device != "host"]  # faulty devices' runs: marked, never measured
        assert (bad.status != "ok").all() and bad.iteration_median_ms.isna().all()
        iters = pd.read_parquet(R / "summary/iterations.parquet")
        assert set(iters.device) <= {"host"}
    finally:
        for vd in vds.values():
            disconnect_vdev(adb_server, vd)
        adb_server.disconnect(offline.serial)
