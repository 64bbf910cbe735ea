"""Pushes in the field: a runner that lost its execute bit (exit 126) is explained and a
redeploy restores it (pushes compare the mode, not only the content); missing parent folders
are created before sending; a push the device refuses quotes the device's own reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.adb import connect_vdev, disconnect_vdev

from phonetrain.devices import LocalTransport
from phonetrain.devices.adb import AdbTransport
from phonetrain.devices.base import TransportError
from phonetrain.devices.virtual import Faults
from phonetrain.runner import Runner, RunnerNotExecutableError


def _adb(client, vd) -> AdbTransport:
    return AdbTransport("vphone", vd.serial, adb_port=client.port)


def _lost_exec_bit_then_redeploy(r: Runner, runner: Path, staged: Path) -> None:
    assert r.push_runner(runner) in (0, 1)
    assert r.info()["runner"]["version"]
    staged.chmod(0o644)  # a copy that dropped the mode, or a chmod by hand
    with pytest.raises(RunnerNotExecutableError) as e:
        r.info()
    assert e.value.exit_code == 126 and "cannot be executed" in e.value.message
    assert "execute bit" in e.value.hint and "deploy again" in e.value.hint
    assert r.push_runner(runner) == 1  # same content, other mode: sent again
    assert r.info()["runner"]["version"]
    assert r.push_runner(runner) == 0


def test_lost_execute_bit_on_a_phone(adb_server, vdev, runner):
    _lost_exec_bit_then_redeploy(Runner(_adb(adb_server, vdev), timeout_s=60), runner,
                                 vdev.root / "phonetrain" / "runner")


def test_lost_execute_bit_on_this_host(tmp_path, runner):
    stage = tmp_path / "stage"
    _lost_exec_bit_then_redeploy(Runner(LocalTransport("host", stage, echo_stderr=False),
                                        timeout_s=60), runner, stage / "runner")


def _bundle(root: Path) -> Path:
    (root / "tensors").mkdir(parents=True)
    (root / "plan.json").write_text('{"version": 1}')
    (root / "tensors" / "w.f32").write_bytes(b"\1" * 70_000)
    return root


def test_missing_parent_folders_are_created_first(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(no_parent_dirs=True))
    try:
        assert _adb(adb_server, vd).push(_bundle(tmp_path / "b"), "plans/deep/p1") == 2
        assert (vd.root / "phonetrain/plans/deep/p1/tensors/w.f32").stat().st_size == 70_000
    finally:
        disconnect_vdev(adb_server, vd)


def test_a_refused_push_quotes_the_device(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(fail_push="*.json"))
    try:
        with pytest.raises(TransportError) as e:
            _adb(adb_server, vd).push(_bundle(tmp_path / "b"), "plans/p1")
        assert "plan.json" in e.value.message
        assert "No space left on device (fault injection)" in e.value.message
        assert "cable" not in e.value.hint, e.value.hint
    finally:
        disconnect_vdev(adb_server, vd)


def test_a_file_in_the_way_of_a_folder_quotes_the_device(adb_server, vdev, tmp_path):
    (vdev.root / "phonetrain").mkdir(exist_ok=True)
    (vdev.root / "phonetrain" / "plans").write_text("not a folder")
    with pytest.raises(TransportError) as e:
        _adb(adb_server, vdev).push(_bundle(tmp_path / "b"), "plans/p1")
    assert "cannot create the folders" in e.value.message
    assert "exists" in e.value.message.lower() or "directory" in e.value.message.lower()
    assert "cable" not in e.value.hint


def test_a_full_phone_says_so_and_keeps_serving(adb_server, tmp_path):
    """Storage full (every write of sync SEND meets the kernel's ENOSPC through /dev/full):
    the phone answers FAIL with adbd's reason instead of dropping the connection, the host
    names the cause and the fix, and the same phone still answers afterwards."""
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(storage_full=True))
    try:
        t = _adb(adb_server, vd)
        with pytest.raises(TransportError) as e:
            t.push(_bundle(tmp_path / "b"), "plans/p1")
        assert "device storage full" in e.value.message
        assert "write failed: No space left on device" in e.value.message
        assert "free space on the phone" in e.value.hint
        assert "cable" not in e.value.hint and "dropped" not in e.value.message
        assert not list((vd.root / "phonetrain" / "plans" / "p1").rglob("*.sync-*"))
        assert t.shell("echo alive", timeout_s=30).stdout.strip() == "alive"
    finally:
        disconnect_vdev(adb_server, vd)
