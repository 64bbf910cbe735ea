"""One measurement at a time per phone, whatever host lock folders the workflows use: the lock
held on the phone itself (phonetrain.devices.locks.PhoneLock, a folder made with mkdir on its
storage), which names its holder to a waiter and expires when its holder stops renewing it;
host lock folders and files every user of a shared host can take. Real adb server, virtual
phone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from phonetrain.devices.adb import AdbTransport
from phonetrain.devices.base import TransportError
from phonetrain.devices.locks import HostLock, PhoneLock, lock_dir


def transport(adb_server, vdev) -> AdbTransport:
    return AdbTransport("vphone", vdev.serial, adb_host="127.0.0.1", adb_port=adb_server.port)


def test_two_lock_folders_still_measure_one_phone_at_a_time(adb_server, vdev, tmp_path,
                                                           monkeypatch, capsys):
    locks = []
    for i in (1, 2):   # two workflows whose host lock folders differ
        monkeypatch.setenv("PHONETRAIN_LOCK_DIR", str(tmp_path / f"locks{i}"))
        locks.append(transport(adb_server, vdev).lock())
    assert locks[0].lock_file != locks[1].lock_file
    spans: dict[int, tuple[float, float]] = {}
    first_in = threading.Event()

    def measure(i: int) -> None:
        if i == 1:
            assert first_in.wait(30)
        with locks[i]:
            first_in.set()
            start = time.monotonic()
            time.sleep(2.5)   # longer than a waiter's poll: it asks while this one holds
            spans[i] = (start, time.monotonic())

    threads = [threading.Thread(target=measure, args=(i,)) for i in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    (_, a1), (b0, _) = spans[0], spans[1]
    assert a1 <= b0   # the second waited for the first
    err = capsys.readouterr().err
    assert "waiting for device 'vphone': held by" in err, err
    assert f"pid {os.getpid()}" in err and "lock /data/local/tmp/phonetrain-lock on the phone" \
        in err, err
    assert not (vdev.root / "phonetrain-lock").exists()   # released


def test_the_lock_on_the_phone_names_its_holder(adb_server, vdev, monkeypatch):
    monkeypatch.setenv("PHONETRAIN_JOB", "train (results/logs/train/vphone/x.log)")
    t = transport(adb_server, vdev)
    with PhoneLock("vphone", t.shell):
        held = vdev.root / "phonetrain-lock"
        h = json.loads((held / "holder").read_text())
        assert h["pid"] == os.getpid() and h["workflow"] == os.getcwd()
        assert h["job"] == "train (results/logs/train/vphone/x.log)" and h["host"]
        assert int((held / "expires").read_text()) > time.time()
    assert not held.exists()


def test_a_holder_that_stops_renewing_loses_the_phone(adb_server, vdev):
    t = transport(adb_server, vdev)
    stale = PhoneLock("vphone", t.shell, lease_s=2, renew_s=3600)   # never renews in time
    stale.acquire()
    t0 = time.monotonic()
    with PhoneLock("vphone", t.shell, lease_s=60):
        waited = time.monotonic() - t0
        assert waited >= 1   # not before the lease (phone clock, whole seconds) ran out
    with pytest.raises(TransportError, match="lost its lock on the phone"):
        stale.release()


def test_a_holder_that_renews_keeps_the_phone(adb_server, vdev):
    t = transport(adb_server, vdev)
    with PhoneLock("vphone", t.shell, lease_s=2, renew_s=0.5):
        got = []
        other = threading.Thread(target=lambda: got.append(
            PhoneLock("vphone", t.shell).__enter__()), daemon=True)
        other.start()
        other.join(5)   # more than twice the lease: renewals kept it
        assert got == []
    other.join(30)
    assert len(got) == 1
    got[0].release()


def test_host_lock_folder_and_files_every_user_may_take(tmp_path, monkeypatch):
    """Made under a umask that grants others nothing, the lock folder is rwxrwxrwt and its
    files rw-rw-rw-; as root, user nobody then takes the same lock."""
    shared = Path(tempfile.mkdtemp(prefix="phonetrain-test-"))   # traversable by others
    try:
        shared.chmod(0o755)
        monkeypatch.setenv("PHONETRAIN_LOCK_DIR", str(shared / "locks"))
        old = os.umask(0o077)
        try:
            folder = lock_dir()
            with HostLock("host", "local-host") as lk:
                pass
        finally:
            os.umask(old)
        assert folder.stat().st_mode & 0o7777 == 0o1777
        assert os.stat(lk.lock_file).st_mode & 0o777 == 0o666
        assert lk.holder_file.stat().st_mode & 0o777 == 0o666
        if os.getuid() != 0:
            return
        code = ("from phonetrain.devices.locks import HostLock\n"
                "with HostLock('host', 'local-host'): print('taken')\n")
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=shared, timeout=60)
        assert p.returncode == 0 and "taken" in p.stdout, p.stderr
        assert json.loads(lk.holder_file.read_text())["user"] == "nobody"
    finally:
        shutil.rmtree(shared, ignore_errors=True)
