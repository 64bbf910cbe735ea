"""The virtual device against the real adb server and adb client (adbutils' bundled adb)."""

from __future__ import annotations

import gc
import json
import os
import shlex
import shutil
import subprocess
import threading
import time

import adbutils
import pytest

from helpers.adb import (connect_vdev, disconnect_vdev, process_alive, wait_for_pid,
                         wait_until_stopped)
from phonetrain.devices.virtual import Faults, VirtualDevice, load_props


def adb_cli(client, *args, timeout=30):
    return subprocess.run([adbutils.adb_path(), "-P", str(client.port), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_banner_announces_features_and_props(adb_server, vdev):
    info = next(i for i in adb_server.list(extended=True) if i.serial == vdev.serial)
    assert info.state == "device"
    assert info.tags["model"] == "Phonetrain_Virtual"  # adb replaces spaces in the banner
    dev = adb_server.device(vdev.serial)
    assert dev.get_features() == "shell_v2,cmd"
    assert dev.getprop("ro.product.model") == "Phonetrain Virtual"
    assert dev.getprop("ro.no.such.prop") == ""


def test_shell_v2_separates_streams_and_exit_status(adb_server, vdev):
    dev = adb_server.device(vdev.serial)
    res = dev.shell2("echo out; echo err >&2; exit 7", v2=True)
    assert (res.returncode, res.stdout, res.stderr) == (7, "out\n", "err\n")
    # the adb command-line client negotiates shell v2 from the banner too
    cli = adb_cli(adb_server, "-s", vdev.serial, "shell", "echo e >&2; exit 3")
    assert (cli.returncode, cli.stderr) == (3, "e\n")


def test_commands_run_in_sandbox_with_device_paths_mapped(adb_server, vdev):
    dev = adb_server.device(vdev.serial)
    dev.shell("mkdir -p /data/local/tmp/phonetrain && echo hi > /data/local/tmp/phonetrain/f")
    assert (vdev.root / "phonetrain" / "f").read_text() == "hi\n"
    assert dev.shell("pwd") == str(vdev.root)


def test_sync_push_pull_roundtrip_with_adb_client(adb_server, vdev, tmp_path):
    src = tmp_path / "big.bin"
    payload = bytes(range(256)) * 5000  # 1.28 MB: several WRTE packets and sync DATA chunks
    src.write_bytes(payload)
    push = adb_cli(adb_server, "-s", vdev.serial, "push", str(src), "/data/local/tmp/d/e/big.bin")
    assert push.returncode == 0, push.stderr
    assert (vdev.root / "d/e/big.bin").read_bytes() == payload
    pull = adb_cli(adb_server, "-s", vdev.serial, "pull", "/data/local/tmp/d", str(tmp_path / "back"))
    assert pull.returncode == 0, pull.stderr
    assert (tmp_path / "back/e/big.bin").read_bytes() == payload
    sync = adb_server.device(vdev.serial).sync
    assert sync.stat("/data/local/tmp/d/e/big.bin").size == len(payload)
    assert sync.stat("/data/local/tmp/missing").mode == 0
    assert [e.path for e in sync.list("/data/local/tmp/d/e")] == [".", "..", "big.bin"]


def test_sync_refuses_paths_outside_data_local_tmp(adb_server, vdev):
    sync = adb_server.device(vdev.serial).sync
    with pytest.raises(adbutils.AdbError):
        sync.push(b"x", "/system/bin/evil")
    with pytest.raises(adbutils.AdbError, match="Permission denied"):
        sync.read_bytes("/etc/passwd")


def test_fault_fail_push_refuses_matching_paths(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(fail_push="*/plans/*"))
    try:
        sync = adb_server.device(vd.serial).sync
        sync.push(b"ok", "/data/local/tmp/ok.txt")
        with pytest.raises(adbutils.AdbError):
            sync.push(b"no", "/data/local/tmp/plans/p.json")
        assert not (vd.root / "plans/p.json").exists()
    finally:
        disconnect_vdev(adb_server, vd)


def test_fault_dropped_connection_mid_push_leaves_no_partial_file(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(drop_after_bytes=100_000))
    try:
        src = tmp_path / "f.bin"
        src.write_bytes(b"\1" * 500_000)
        res = adb_cli(adb_server, "-s", vd.serial, "push", str(src), "/data/local/tmp/f.bin")
        assert res.returncode != 0
        assert not (vd.root / "f.bin").exists()  # the partial file never appears
    finally:
        disconnect_vdev(adb_server, vd)


def test_fault_hang_is_killed_when_the_stream_closes(adb_server, tmp_path, monkeypatch):
    # the hang fault runs "exec sleep 86400": a sleep first on PATH records its pid, then sleeps
    pid_file = tmp_path / "hang.pid"
    shim = tmp_path / "bin" / "sleep"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\necho $$ > {shlex.quote(str(pid_file))}\n"
                    f"exec {shlex.quote(shutil.which('sleep'))} \"$@\"\n")
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(hang=r"^./runner"))
    try:
        dev = adb_server.device(vd.serial)
        stream = dev.shell("./runner run", stream=True)
        try:
            pid = wait_for_pid(pid_file)
            stream.conn.settimeout(0.5)
            with pytest.raises(adbutils.AdbTimeout):  # it hangs: no output, no exit
                stream.read_until_close()
            assert process_alive(pid)
        finally:
            stream.close()
        wait_until_stopped(pid)
        assert dev.shell("echo alive") == "alive"  # other commands still run
    finally:
        disconnect_vdev(adb_server, vd)


def test_stopped_device_goes_offline(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev")
    vd.stop()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = {i.serial: i.state for i in adb_server.list()}
        if states.get(vd.serial) != "device":
            break
        time.sleep(0.1)
    assert states.get(vd.serial) != "device"
    adb_server.disconnect(vd.serial)


def test_load_props_reads_json_and_yaml_and_names_a_bad_file(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"ro.product.model": "Pixel 7"}))
    (tmp_path / "p.yaml").write_text("ro.soc.model: SM8550\n")
    assert load_props(tmp_path / "p.json")["ro.product.model"] == "Pixel 7"
    assert load_props(tmp_path / "p.yaml")["ro.soc.model"] == "SM8550"
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.json"):
        load_props(tmp_path / "bad.json")


def test_unknown_service_is_refused(adb_server, vdev):
    conn = adb_server.device(vdev.serial).open_transport()
    try:
        conn.send_command("framebuffer:")
        with pytest.raises(adbutils.AdbError):
            conn.check_okay()
    finally:
        conn.close()


def test_props_from_constructor_reach_getprop(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev", props={"ro.product.model": "Moto G"})
    try:
        assert adb_server.device(vd.serial).getprop("ro.product.model") == "Moto G"
    finally:
        disconnect_vdev(adb_server, vd)
    assert isinstance(vd, VirtualDevice)


def test_fault_crash_segfaults_and_hide_hides_matching_files(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev",
                      Faults(crash=r"runner run", hide="*/out/*/trace.csv"))
    try:
        dev = adb_server.device(vd.serial)
        res = dev.shell2("./runner run --plan x", v2=True)
        assert res.returncode == 139 and "Segmentation fault" in res.stderr
        assert dev.shell2("echo ok", v2=True).returncode == 0
        (vd.root / "out/r1").mkdir(parents=True)
        (vd.root / "out/r1/run.json").write_text("{}")
        (vd.root / "out/r1/trace.csv").write_text("a,b\n")
        sync = dev.sync
        assert [e.path for e in sync.list("/data/local/tmp/out/r1")] == [".", "..", "run.json"]
        assert sync.stat("/data/local/tmp/out/r1/trace.csv").mode == 0
    finally:
        disconnect_vdev(adb_server, vd)


def test_an_unplugged_device_leaves_no_getprop_folder(tmp_path, monkeypatch):
    """The folder holding the device's getprop goes with stop(): a test suite of hundreds of
    phones leaves nothing in the temporary folder."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    vd = VirtualDevice(tmp_path / "root", port=0).start()
    made = list((tmp_path / "tmp").glob("phonetrain-vdev-*"))
    assert len(made) == 1 and (made[0] / "getprop").is_file()
    vd.stop()
    assert not made[0].exists()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_finished_shell_commands_leave_no_thread_or_descriptor_open(adb_server, vdev):
    """A shell v2 command that ends on its own, the host never closing its stdin, leaves
    neither the thread feeding its stdin nor the process's pipes open in the device's
    process: a process serving hundreds of commands (one pytest-xdist worker) once held
    file descriptors numbered 1024 and more, which select() refuses."""
    dev = adb_server.device(vdev.serial)
    assert dev.shell2("true", v2=True).returncode == 0   # the connection is set up
    fds0, threads0 = _open_fds(), threading.active_count()
    for _ in range(20):   # each held a thread and three pipes: 60 descriptors
        assert dev.shell2("echo x; echo y >&2", v2=True).stdout == "x\n"
    deadline = time.monotonic() + 10
    while (_open_fds() - fds0 > 5 or threading.active_count() - threads0 > 5) \
            and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert _open_fds() - fds0 <= 5, f"{_open_fds() - fds0} descriptors more than before"
    assert threading.active_count() - threads0 <= 5
