"""Virtual devices for the adb tests: started on a free port and registered with the adb server
by ``adb connect``. The ``adb_server`` and ``vdev`` fixtures (tests/conftest.py) use these."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import adbutils

from phonetrain.devices.virtual import Faults, VirtualDevice


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not 5555 <= port <= 5585:  # adb treats that range as emulators
            return port


def connect_vdev(client: adbutils.AdbClient, root: Path, faults: Faults | None = None,
                 **kwargs) -> VirtualDevice:
    """Start a virtual device and ``adb connect`` it; waits until its state is ``device``."""
    vd = VirtualDevice(root, port=free_port(), faults=faults, **kwargs).start()
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


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie awaiting its reaper counts as stopped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_for_pid(path: Path, timeout_s: float = 30) -> int:
    """The pid a command wrote to ``path``, waiting up to ``timeout_s`` for it to appear."""
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"the command never wrote its pid to {path}"
        time.sleep(0.05)
    return int(path.read_text())


def wait_until_stopped(pid: int, timeout_s: float = 10) -> None:
    """Wait up to ``timeout_s`` for ``pid`` to stop; fails the test if it still runs."""
    deadline = time.monotonic() + timeout_s
    while process_alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.05)


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """Whether anything accepts TCP connections at ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def stop_stray_server(port: int) -> None:
    """Stop an adb server found on ``port`` (one a test's code under test should not have
    started there), so that a failing test leaves no server behind."""
    if listening(port):
        subprocess.run([adbutils.adb_path(), "-P", str(port), "kill-server"],
                       capture_output=True, timeout=30)
