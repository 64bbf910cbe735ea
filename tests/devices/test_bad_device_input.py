"""Careless input to the phone commands and the adb transport: each gives one message naming
the option, file or environment variable and what to do, never a traceback, and nothing is
started or written before it."""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from phonetrain.cli import main
from phonetrain.devices.adb import DEFAULT_ADB_PORT, AdbTransport
from phonetrain.devices.base import TransportError


@pytest.mark.parametrize("value", ["junk", "70000", "0", "5037x", "", " "])
def test_a_junk_adb_port_variable_is_named(monkeypatch, value):
    """``ANDROID_ADB_SERVER_PORT`` that is not a TCP port (adbutils itself reads it with int()
    when imported): ``phonetrain devices``, ``phonetrain adb`` and the adb transport (every
    phone job) name the variable and its value."""
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", value)
    for args in (["devices"], ["adb", "devices"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
        for needle in ("ANDROID_ADB_SERVER_PORT", repr(value), "1..65535", "unset it"):
            assert needle in res.output, res.output
    with pytest.raises(TransportError, match="ANDROID_ADB_SERVER_PORT"):
        AdbTransport("pixel", "R58M123")


def test_the_adb_port_variable_names_the_default_server(monkeypatch):
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", " 5039 ")   # int() takes the spaces too
    assert AdbTransport("pixel", "R58M123").adb_port == 5039
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT")
    assert AdbTransport("pixel", "R58M123").adb_port == DEFAULT_ADB_PORT
    assert AdbTransport("pixel", "R58M123", adb_port=5041).adb_port == 5041


def test_a_junk_adb_port_variable_stops_the_import_with_its_name(tmp_path):
    """A fresh process (a phone job, ``phonetrain devices``): importing the adb transport
    names the variable; adbutils' own ValueError at import is never reached."""
    import subprocess
    import sys
    code = ("from phonetrain.devices.base import TransportError\n"
            "try:\n    import phonetrain.devices.adb\n"
            "except TransportError as e:\n    print('named:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "ANDROID_ADB_SERVER_PORT": "junk"}, timeout=120)
    assert out.returncode == 0 and "named: environment variable ANDROID_ADB_SERVER_PORT is "\
        "'junk'" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("name", ["pixel_7", "R58M123=", "=pixel_7", "R58M123=pixel 7",
                                  "R58M123=pixel.7"])
def test_devices_name_that_is_not_serial_equals_name_is_refused(name):
    """``--name`` takes SERIAL=NAME, NAME a config name; anything else is refused before any
    adb server is asked (no traceback from the split)."""
    res = CliRunner().invoke(main, ["devices", "--write", "--name", name])
    assert res.exit_code == 2, res.output
    for needle in ("--name", "SERIAL=NAME", "conf/device/NAME.yaml"):
        assert needle in res.output, res.output
    assert "Traceback" not in res.output


@pytest.mark.parametrize("file, text, kind", [
    ("props.yaml", "ro.product.model: [Pixel\n", "YAML"),
    ("props.json", "{'ro.product.model': 'Pixel'}", "JSON"),
    ("props.json", "ro.product.model: Pixel\n", "a YAML file's name ends in .yaml"),
])
def test_virtual_device_props_that_do_not_parse_name_the_file(tmp_path, file, text, kind):
    (tmp_path / file).write_text(text)
    res = CliRunner().invoke(main, ["virtual-device", "--port", "7123", "--root",
                                    str(tmp_path / "root"), "--props", str(tmp_path / file)])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    for needle in (str(tmp_path / file), kind, "flat mapping"):
        assert needle in res.output, res.output


@pytest.mark.parametrize("port", ["0", "70000"])
def test_virtual_device_port_out_of_range_is_refused(tmp_path, port):
    res = CliRunner().invoke(main, ["virtual-device", "--port", port, "--root",
                                    str(tmp_path / "root")])
    assert res.exit_code == 2 and "--port" in res.output and "65535" in res.output, res.output
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("text, needle", [("name: pixel_7\nfacts: {peak_gflops: 1\n", "line"),
                                          (b"name: pixel_7\n\xff\xfe\n", "utf-8")])
def test_devices_write_over_an_unreadable_config_names_it_and_keeps_it(tmp_path, monkeypatch,
                                                                      text, needle):
    """``phonetrain devices --write`` for a phone whose ``conf/device/<name>.yaml`` no longer
    parses (a hand edit gone wrong): that phone is not written, the message names the file and
    the line, the file is left as it was, and no runner is built for it."""
    from phonetrain.devices import discovery
    row = discovery.DeviceRow("R58M123", "device", {"model": "Pixel 7", "abi": "arm64-v8a"})
    monkeypatch.setattr(discovery, "list_devices", lambda host, port: [row])
    path = tmp_path / "conf" / "device" / "pixel_7.yaml"
    path.parent.mkdir(parents=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    before = path.read_bytes()
    res = CliRunner().invoke(main, ["devices", "--write", "--conf", str(tmp_path / "conf"),
                                    "--build-dir", str(tmp_path / "build")])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    for want in (str(path), needle, "not replaced", "no config written for R58M123"):
        assert want in res.output, res.output
    assert path.read_bytes() == before and not (tmp_path / "build").exists()
