"""The measurement lock of a phone is keyed by the phone's own identity (``ro.serialno``),
so two spellings of one phone (another adb server address, another serial) share one lock and
two phones never do. Real adb server, virtual phones."""

from __future__ import annotations

import threading
import time

from helpers.adb import connect_vdev, disconnect_vdev
from phonetrain.devices.adb import AdbTransport
from phonetrain.devices.virtual import default_props


def test_two_spellings_of_one_phone_share_its_lock(adb_server, vdev, tmp_path, monkeypatch):
    monkeypatch.setenv("PHONETRAIN_LOCK_DIR", str(tmp_path / "locks"))
    other = f"localhost:{vdev.port}"   # the same phone under a second serial
    assert "connected" in adb_server.connect(other, timeout=10)
    try:
        deadline = time.monotonic() + 10
        while not any(i.serial == other and i.state == "device" for i in adb_server.list()):
            assert time.monotonic() < deadline, adb_server.list()
            time.sleep(0.05)
        a = AdbTransport("phone", vdev.serial, adb_host="127.0.0.1", adb_port=adb_server.port)
        b = AdbTransport("same-phone", other, adb_host="localhost", adb_port=adb_server.port)
        assert a.lock().lock_file == b.lock().lock_file
        assert vdev.props["ro.serialno"] in a.lock().lock_file
        spans = []

        def measure(t):
            with t.lock():
                start = time.monotonic()
                t.shell("sleep 0.4", timeout_s=10)
                spans.append((start, time.monotonic()))

        threads = [threading.Thread(target=measure, args=(t,)) for t in (a, b)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        (_, a1), (b0, _) = sorted(spans)
        assert a1 <= b0   # the second spelling waited for the first
    finally:
        adb_server.disconnect(other)


def test_two_phones_have_two_locks(adb_server, vdev, tmp_path):
    second = connect_vdev(adb_server, tmp_path / "second")
    try:
        a = AdbTransport("a", vdev.serial, adb_port=adb_server.port)
        b = AdbTransport("b", second.serial, adb_port=adb_server.port)
        assert a.lock().lock_file != b.lock().lock_file
    finally:
        disconnect_vdev(adb_server, second)


def test_a_phone_without_serialno_is_keyed_by_its_resolved_server(adb_server, tmp_path):
    props = {k: v for k, v in default_props().items()} | {"ro.serialno": ""}
    vd = connect_vdev(adb_server, tmp_path / "bare", props=props)
    try:
        a = AdbTransport("a", vd.serial, adb_host="127.0.0.1", adb_port=adb_server.port)
        b = AdbTransport("b", vd.serial, adb_host="localhost", adb_port=adb_server.port)
        assert a.lock().lock_file == b.lock().lock_file
        assert vd.serial.replace(":", "_") in a.lock().lock_file
    finally:
        disconnect_vdev(adb_server, vd)
