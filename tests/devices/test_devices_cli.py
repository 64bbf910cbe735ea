"""``phonetrain devices [--write]`` and ``phonetrain virtual-device`` against the real adb server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from helpers import REPO
from helpers.adb import connect_vdev, disconnect_vdev, free_port
from helpers.workflow import seed_runner_build
from phonetrain.cli import main
from phonetrain.config import DeviceConfig
from phonetrain.devices.discovery import config_name, pick_opencl


@pytest.fixture
def build_dir(tmp_path, runner) -> Path:
    """``devices --write --build-dir``: its host toolchain's folder (``host/``) holds the
    session's runner build, which a virtual phone's write installs instead of compiling the
    runner again (the compile is not what these tests watch)."""
    build = tmp_path / "build"
    seed_runner_build(build / "host", runner)
    return build


def test_devices_lists_online_and_offline_with_hints(adb_server, tmp_path):
    props = {"ro.product.model": "Pixel 7", "ro.soc.model": "GS201",
             "ro.product.cpu.abi": "arm64-v8a", "ro.build.version.release": "14"}
    online = connect_vdev(adb_server, tmp_path / "a", props=props)
    gone = connect_vdev(adb_server, tmp_path / "b")
    gone.stop()  # unplugged: adb keeps it listed as offline
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
                i.serial == gone.serial and i.state == "device" for i in adb_server.list()):
            time.sleep(0.1)
        res = CliRunner().invoke(main, ["devices", "--adb-port", str(adb_server.port)])
        assert res.exit_code == 0, res.output
        line = next(l for l in res.output.splitlines() if l.startswith(online.serial))
        assert line.split()[1:] == ["device", "Pixel", "7", "GS201", "arm64-v8a", "14"]
        lines = res.output.splitlines()
        i = next(k for k, l in enumerate(lines) if l.startswith(gone.serial))
        # the fix to try, on the server listed
        assert "offline" in lines[i] and f"adb -P {adb_server.port} connect" in lines[i + 1]
    finally:
        disconnect_vdev(adb_server, online)
        adb_server.disconnect(gone.serial)


def test_virtual_device_command_serves_adb(adb_server, tmp_path):
    port = free_port()
    (tmp_path / "props.json").write_text(json.dumps({"ro.product.model": "CLI Phone"}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "phonetrain.cli", "virtual-device", "--port", str(port),
         "--root", str(tmp_path / "root"), "--props", str(tmp_path / "props.json")],
        stderr=subprocess.PIPE, text=True)
    try:
        assert "connect with: phonetrain adb connect" in proc.stderr.readline()
        serial = f"127.0.0.1:{port}"
        assert "connected" in adb_server.connect(serial, timeout=10)
        deadline = time.monotonic() + 10
        while not any(i.serial == serial and i.state == "device" for i in adb_server.list()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert adb_server.device(serial).getprop("ro.product.model") == "CLI Phone"
        adb_server.disconnect(serial)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_virtual_device_command_rejects_emulator_ports(tmp_path):
    res = CliRunner().invoke(main, ["virtual-device", "--port", "5555", "--root", str(tmp_path)])
    assert res.exit_code != 0 and "5555-5585" in res.output


def test_config_name_is_a_slug_and_opencl_pick_prefers_the_gpu():
    assert config_name({"model": "Pixel 7 Pro"}, "x") == "pixel_7_pro"
    assert config_name({}, "127.0.0.1:4000") == "127_0_0_1_4000"
    info = {"opencl_library": "/vendor/lib64/libOpenCL.so",
            "devices": [{"name": "cpu0", "type": "cpu", "compute_units": 8},
                        {"name": "QUALCOMM Adreno(TM) 650", "type": "gpu", "compute_units": 3,
                         "platform": "QUALCOMM Snapdragon(TM)"}]}
    lib, dev = pick_opencl(info)
    assert lib == "/vendor/lib64/libOpenCL.so" and dev["compute_units"] == 3
    assert pick_opencl({"opencl": None}) == (None, None)


def test_devices_write_gives_a_valid_device_config(adb_server, tmp_path, build_dir):
    import shutil

    from phonetrain.config import compose_sweep

    conf = tmp_path / "conf"
    shutil.copytree(REPO / "conf", conf)
    vd = connect_vdev(adb_server, tmp_path / "dev", props={"ro.product.model": "Virtual 9"})
    try:
        res = CliRunner().invoke(main, ["devices", "--write", "--conf", str(conf), "--adb-port",
                                        str(adb_server.port), "--build-dir",
                                        str(build_dir)])
        assert res.exit_code == 0, res.output
        cfg = yaml.safe_load((conf / "device/virtual_9.yaml").read_text())
        assert cfg["transport"] == "adb" and cfg["serial"] == vd.serial
        assert cfg["toolchain"] == "host"  # the virtual phone runs this host's binaries
        assert cfg["opencl_device"] and cfg["facts"]["gpu"] == cfg["opencl_device"]
        assert (vd.root / "phonetrain/runner").is_file()  # info really ran on the device
        # the Vulkan devices the phone's runner found: on the terminal and in the header
        header = (conf / "device/virtual_9.yaml").read_text().split("\nname:")[0]
        assert "# Vulkan: " in header and "Vulkan: " in res.output
        sweep = compose_sweep(["sweep=test", "sweep.devices=[host,virtual_9]"], conf_dir=conf)
        assert {e.device for e in sweep.experiments} == {"host", "virtual_9"}
        DeviceConfig(**{k: v for k, v in sweep.members["device"]["virtual_9"].items()
                        if k != "facts"})
    finally:
        disconnect_vdev(adb_server, vd)


def test_devices_write_names_two_phones_of_one_model_apart(adb_server, tmp_path, build_dir):
    conf = tmp_path / "conf"
    props = {"ro.product.model": "Twin"}
    a = connect_vdev(adb_server, tmp_path / "a", props=props)
    b = connect_vdev(adb_server, tmp_path / "b", props=props)
    try:
        res = CliRunner().invoke(main, ["devices", "--write", "--conf", str(conf), "--adb-port",
                                        str(adb_server.port), "--build-dir",
                                        str(build_dir)])
        # --write writes every online device of the server: judge this test's two only
        for vd in (a, b):
            assert f"{vd.serial}: wrote " in res.output, res.output
        assert res.exit_code == 0 or "no config written for" in res.output, res.output
        serial_of = {p.stem: yaml.safe_load(p.read_text())["serial"]
                     for p in (conf / "device").glob("*.yaml")}
        mine = {n: s for n, s in serial_of.items() if s in (a.serial, b.serial)}
        assert sorted(mine.values()) == sorted([a.serial, b.serial])  # a file each
        for n, s in mine.items():  # the model's name, or (taken) the model plus the serial
            assert n in ("twin", f"twin_{config_name({}, s)}"), n
    finally:
        disconnect_vdev(adb_server, a)
        disconnect_vdev(adb_server, b)


def test_devices_write_records_the_port_of_the_environment(adb_server, tmp_path, build_dir,
                                                           monkeypatch):
    """Under ANDROID_ADB_SERVER_PORT (set by the adb_server fixture, no --adb-port) the
    written config names that port, so it reaches the phone without the variable."""
    conf = tmp_path / "conf"
    (conf / "device").mkdir(parents=True)
    vd = connect_vdev(adb_server, tmp_path / "dev", props={"ro.product.model": "Envport 1"})
    try:
        assert os.environ["ANDROID_ADB_SERVER_PORT"] == str(adb_server.port)
        res = CliRunner().invoke(main, ["devices", "--write", "--conf", str(conf),
                                        "--build-dir", str(build_dir)])
        assert res.exit_code == 0, res.output
        cfg = yaml.safe_load((conf / "device/envport_1.yaml").read_text())
        assert cfg["adb_port"] == adb_server.port, cfg
    finally:
        disconnect_vdev(adb_server, vd)
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT")
    from phonetrain.cli.devices import written_port
    assert written_port(None) is None and written_port(15201) == 15201
