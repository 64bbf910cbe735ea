"""`phonetrain devices --write` never silently replaces a device config: a rerun for the same
phone keeps the values filled in by hand (facts.peak_gflops); a name that belongs to another
device (the local `host`, or another phone of the same model) is refused or avoided."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from helpers.adb import connect_vdev, disconnect_vdev
from click.testing import CliRunner

from helpers.workflow import seed_runner_build
from phonetrain.cli import main
from phonetrain.config import CONF_DIR


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory, runner) -> Path:
    """One runner build shared by the module's --write calls: the session's, in the host
    toolchain's folder (the compile is not what these tests watch)."""
    build = tmp_path_factory.mktemp("runner-build")
    seed_runner_build(build / "host", runner)
    return build


def _write(client, conf: Path, build_dir: Path, *names: str):
    args = ["devices", "--write", "--conf", str(conf), "--adb-port", str(client.port),
            "--build-dir", str(build_dir)]
    for n in names:
        args += ["--name", n]
    return CliRunner().invoke(main, args)


def test_rerun_keeps_facts_filled_in_by_hand(adb_server, tmp_path, build_dir):
    conf = tmp_path / "conf"
    a = connect_vdev(adb_server, tmp_path / "a", props={"ro.product.model": "Alpha"})
    try:
        assert _write(adb_server, conf, build_dir).exit_code == 0
        f = conf / "device" / "alpha.yaml"
        cfg = yaml.safe_load(f.read_text())
        cfg["facts"]["peak_gflops"] = 1234.5
        cfg["facts"]["bandwidth_gbps"] = 44.0
        cfg["android_api"] = 33
        f.write_text(yaml.safe_dump(cfg, sort_keys=False))
        b = connect_vdev(adb_server, tmp_path / "b", props={"ro.product.model": "Beta"})
        try:
            res = _write(adb_server, conf, build_dir)  # a second phone is added
            assert res.exit_code == 0, res.output
        finally:
            disconnect_vdev(adb_server, b)
        kept = yaml.safe_load(f.read_text())
        assert kept["facts"]["peak_gflops"] == 1234.5 and kept["facts"]["bandwidth_gbps"] == 44.0
        assert kept["android_api"] == 33 and kept["serial"] == a.serial
        assert (conf / "device" / "beta.yaml").is_file()
    finally:
        disconnect_vdev(adb_server, a)


def test_naming_a_phone_host_is_refused(adb_server, tmp_path, build_dir):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    host = (conf / "device" / "host.yaml").read_text()
    vd = connect_vdev(adb_server, tmp_path / "dev")
    try:
        res = _write(adb_server, conf, build_dir, f"{vd.serial}=host")
        assert res.exit_code == 1
        assert "host.yaml is the config of another device" in res.output, res.output
        assert "sweep.devices=[host,host]" not in res.output
        assert (conf / "device" / "host.yaml").read_text() == host
    finally:
        disconnect_vdev(adb_server, vd)


def _files_of(conf: Path, serial: str) -> list[Path]:
    return [p for p in (conf / "device").glob("*.yaml")
            if yaml.safe_load(p.read_text())["serial"] == serial]


def _assert_wrote(res, serial: str) -> None:
    """--write writes every online device of the server, another test's leftover too (which
    may fail, exit status 1): judge the one device of this test."""
    assert f"{serial}: wrote " in res.output, res.output
    assert res.exit_code == 0 or "no config written for" in res.output, res.output


def test_another_phone_of_the_same_model_gets_its_own_file(adb_server, tmp_path, build_dir):
    conf = tmp_path / "conf"
    first = connect_vdev(adb_server, tmp_path / "a", props={"ro.product.model": "Twin"})
    try:
        _assert_wrote(_write(adb_server, conf, build_dir), first.serial)
    finally:
        disconnect_vdev(adb_server, first)
    [first_file] = _files_of(conf, first.serial)
    before = first_file.read_text()
    second = connect_vdev(adb_server, tmp_path / "b", props={"ro.product.model": "Twin"})
    try:
        _assert_wrote(_write(adb_server, conf, build_dir), second.serial)
    finally:
        disconnect_vdev(adb_server, second)
    assert first_file.read_text() == before
    [second_file] = _files_of(conf, second.serial)
    assert second_file.name.startswith("twin_")  # the model plus the serial


def test_a_rerun_that_changes_nothing_says_so(adb_server, tmp_path, build_dir):
    """A second --write for the same phone leaves its file as it was, and says so rather
    than 'wrote'."""
    conf = tmp_path / "conf"
    vd = connect_vdev(adb_server, tmp_path / "a", props={"ro.product.model": "Gamma"})
    try:
        _assert_wrote(_write(adb_server, conf, build_dir), vd.serial)
        f = conf / "device" / "gamma.yaml"
        before, mtime = f.read_text(), f.stat().st_mtime_ns
        res = _write(adb_server, conf, build_dir)
    finally:
        disconnect_vdev(adb_server, vd)
    assert f.read_text() == before and f.stat().st_mtime_ns == mtime
    assert f"{vd.serial}: left unchanged (already up to date) {f}" in res.output, res.output
    assert f"{vd.serial}: wrote " not in res.output, res.output
