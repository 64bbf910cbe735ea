"""One OpenCL resolution everywhere on this host (devices.local.locate_opencl): where only a
wheel's loader is found, `phonetrain info` and `phonetrain run` load the same library; a
runner killed by a signal is reported by the signal's name with what to try."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
from pathlib import Path

import pytest
from helpers.adb import connect_vdev, disconnect_vdev
from helpers.workflow import seed_runner_build
from click.testing import CliRunner

from phonetrain.cli import main
from phonetrain.devices import local
from phonetrain.devices.adb import AdbTransport
from phonetrain.devices.virtual import Faults
from phonetrain.runner import Runner, RunnerSignalError


def _system_loader() -> Path:
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    paths = [ln.split("=>")[-1].strip() for ln in out.splitlines() if "libOpenCL.so.1" in ln]
    if not paths:
        pytest.skip("no system OpenCL loader (ocl-icd-libopencl1) to stand in for a wheel's")
    return Path(paths[0])


@pytest.fixture
def wheel_only(tmp_path, monkeypatch, pocl) -> Path:
    """This host as a pip user sees it: no system libOpenCL on the search path, a
    pyopencl-like wheel holding its own loader (here: a link to the system one)."""
    site = tmp_path / "site"
    libs = site / "pyopencl" / ".libs"
    libs.mkdir(parents=True)
    (site / "pyopencl" / "__init__.py").write_text("")
    loader = libs / "libOpenCL-wheel.so.1"
    loader.symlink_to(_system_loader())
    monkeypatch.syspath_prepend(str(site))
    real = ctypes.util.find_library
    monkeypatch.setattr(ctypes.util, "find_library",
                        lambda name: None if name == "OpenCL" else real(name))
    assert local.locate_opencl().cl_lib == str(loader)
    return loader


def test_info_and_run_load_the_same_library(wheel_only, tmp_path, seeded_results, runner,
                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    # `info` runs the runner of phonetrain's cache folder: a private one holding the session's
    # runner build (the user's is not touched; the runner's compile is not the subject)
    monkeypatch.setenv("PHONETRAIN_CACHE", str(tmp_path / "cache"))
    seed_runner_build(tmp_path / "cache" / "runner", runner)
    info = CliRunner().invoke(main, ["info", "--json"])
    assert info.exit_code == 0, info.output
    # stdout is the JSON (a first call says on stderr when it compiles the runner)
    assert json.loads(info.stdout)["runner"]["opencl_library"] == str(wheel_only)
    res = CliRunner().invoke(main, ["run", "model=mlp_16_16", "device=host", "backend=opencl",
                                    "kernel=baseline", "measure.warmup=0",
                                    "measure.iterations=1", "measure.progress=false",
                                    f"results_dir={seeded_results}"])
    assert res.exit_code == 0, res.output
    run = json.loads((seeded_results / "runs/host/mlp_16_16.opencl.baseline/run.json")
                     .read_text())
    assert run["runner"]["opencl_library"] == str(wheel_only)


def _crashing_runner(tmp_path: Path) -> Path:
    crash = tmp_path / "crash" / "runner"
    crash.parent.mkdir()
    crash.write_text("#!/bin/sh\necho 'runner: loading the OpenCL driver' >&2\nkill -SEGV $$\n")
    crash.chmod(0o755)
    return crash


def test_signal_death_on_this_host_is_named(tmp_path):
    with pytest.raises(RunnerSignalError) as e:
        Runner.local_binary(_crashing_runner(tmp_path), tmp_path / "w", timeout_s=30).info()
    assert "killed by SIGSEGV" in e.value.message and "crash" in e.value.hint


def test_signal_death_on_a_phone_is_named(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev", Faults(crash=r"runner info"))
    try:
        r = Runner(AdbTransport("vphone", vd.serial, adb_port=adb_server.port), timeout_s=30)
        r.push_runner(_crashing_runner(tmp_path))
        with pytest.raises(RunnerSignalError) as e:
            r.info()
        assert "killed by SIGSEGV" in e.value.message and "crash" in e.value.hint
    finally:
        disconnect_vdev(adb_server, vd)
