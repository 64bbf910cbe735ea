"""Phones behind their own adb servers: a port the config names is never given a stray server
(the error names the address and what to do, and the port stays free), and the hints' adb
commands talk to the phone's own server, not the default one."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from click.testing import CliRunner

from helpers.adb import (connect_vdev, disconnect_vdev, free_port, listening,
                         stop_stray_server)
from phonetrain.cli import main
from phonetrain.devices.adb import AdbTransport
from phonetrain.devices.base import TransportError
from phonetrain.devices.discovery import list_devices


@pytest.fixture()
def silent_port():
    """A free local port; any adb server found there afterwards is stopped."""
    port = free_port()
    yield port
    stop_stray_server(port)


def test_a_configured_port_without_a_server_is_refused_not_started(silent_port):
    t = AdbTransport("far-phone", "127.0.0.1:17301", adb_port=silent_port)
    with pytest.raises(TransportError) as e:
        t.device()
    at = f"127.0.0.1:{silent_port}"
    assert f"no adb server at {at}" in e.value.message
    assert f"adb server unreachable at {at}" in e.value.message
    assert "far-phone" in e.value.message
    assert f"phonetrain adb -P {silent_port} start-server" in e.value.hint
    assert f"ssh -N -L {silent_port}:127.0.0.1:5037" in e.value.hint
    assert not listening(silent_port), "a stray adb server now holds the configured port"


def test_devices_on_a_named_port_without_a_server_is_refused(silent_port):
    with pytest.raises(TransportError, match=f"no adb server at 127.0.0.1:{silent_port}"):
        list_devices("127.0.0.1", silent_port)
    res = CliRunner().invoke(main, ["devices", "--adb-port", str(silent_port)])
    assert res.exit_code != 0 and f"no adb server at 127.0.0.1:{silent_port}" in res.output
    assert "Traceback" not in res.output
    assert not listening(silent_port)


def test_the_connect_hint_reaches_the_phones_own_server(adb_server, tmp_path, silent_port):
    """The phone's server is the fixture's; the default server ($ANDROID_ADB_SERVER_PORT) is
    another (silent_port). The hint's command, run as written, connects the phone there."""
    vd = connect_vdev(adb_server, tmp_path / "dev")
    adb_server.disconnect(vd.serial)
    try:
        t = AdbTransport("vphone", vd.serial, adb_port=adb_server.port)
        with pytest.raises(TransportError) as e:
            t.device()
        assert "state absent" in e.value.message
        want = f"phonetrain adb -P {adb_server.port} connect {vd.serial}"
        assert want in e.value.hint, e.value.hint
        argv = shlex.split(want)
        env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(silent_port))
        p = subprocess.run([sys.executable, "-m", "phonetrain.cli", *argv[1:]], env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and "connected" in p.stdout, p.stdout + p.stderr
        t2 = AdbTransport("vphone", vd.serial, adb_port=adb_server.port)
        assert t2.shell("echo hi", timeout_s=30).stdout.strip() == "hi"
    finally:
        disconnect_vdev(adb_server, vd)

