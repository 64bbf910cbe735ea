"""Fixtures for adb tests: a real adb server (adbutils' bundled binary) on a private port and
virtual devices registered with it by ``adb connect``. Import the fixtures into a test module
with ``from adb_fixtures import adb_server, vdev, connect_vdev``."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import adbutils
import pytest

from phonetrain.devices.virtual import Faults, VirtualDevice


def _free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not 5555 <= port <= 5585:  # adb treats that range as emulators
            return port


@pytest.fixture(scope="session")
def adb_server():
    """A fresh adb server on a private port; ANDROID_ADB_SERVER_PORT points at it."""
    port = _free_port()
    adb = adbutils.adb_path()
    old = os.environ.get("ANDROID_ADB_SERVER_PORT")
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
    subprocess.run([adb, "-P", str(port), "start-server"], check=True, capture_output=True,
                   timeout=60)
    try:
        yield adbutils.AdbClient(host="127.0.0.1", port=port)
    finally:
        subprocess.run([adb, "-P", str(port), "kill-server"], capture_output=True, timeout=30)
        if old is None:
            os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
        else:
            os.environ["ANDROID_ADB_SERVER_PORT"] = old


def connect_vdev(client: adbutils.AdbClient, root: Path, faults: Faults | None = None,
                 **kwargs) -> VirtualDevice:
    """Start a virtual device and ``adb connect`` it; waits until its state is ``device``."""
    vd = VirtualDevice(root, port=_free_port(), faults=faults, **kwargs).start()
    answer = client.connect(vd.serial, timeout=10)
    assert "connected" in answer, answer
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if any(i.serial == vd.serial and i.state == "device" for i in client.list()):
            return vd
        time.sleep(0.05)
    raise AssertionError(f"virtual device {vd.serial} did not come online: {client.list()}")


def disconnect_vdev(client: adbutils.AdbClient, vd: VirtualDevice) -> None:
    client.disconnect(vd.serial)
    vd.stop()


@pytest.fixture
def vdev(adb_server, tmp_path):
    """A connected virtual device with its sandbox under tmp_path/device."""
    vd = connect_vdev(adb_server, tmp_path / "device")
    yield vd
    disconnect_vdev(adb_server, vd)
