"""Energy and heat on a phone, end to end over adb: the real runner and a plan bundle are pushed
to a virtual device (the real adb server, the ADB protocol) whose ``/sys`` is a folder of
scripted files (battery voltage and current, the GPU clock, a thermal zone). The runner samples
them while it measures; the run.json pulled back carries energy per iteration = V x I x the
mean iteration time, temperatures at start and end, and the throttling flag of a GPU clock
that drops while it measures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.adb import connect_vdev, disconnect_vdev
from helpers.runner_plans import mlp_plan, stage
from helpers.sysfs import ChangeAfterOpens, put
from phonetrain.devices.adb import AdbTransport

VOLT_UV, CURRENT_UA = 4_000_000, 500_000   # 2 W
GPU_HZ = 800_000_000


@pytest.fixture()
def phone(adb_server, tmp_path, runner):
    """A virtual phone with a readable battery (4 V, 0.5 A), an 800 MHz GPU clock and a GPU
    thermal zone at 41 C, the runner and a 1500-iteration MLP bundle already pushed."""
    sysfs = tmp_path / "sys"
    put(sysfs / "class/power_supply/battery/voltage_now", VOLT_UV)
    put(sysfs / "class/power_supply/battery/current_now", CURRENT_UA)
    put(sysfs / "class/kgsl/kgsl-3d0/gpuclk", GPU_HZ)
    put(sysfs / "class/thermal/thermal_zone0/temp", 41_000)
    (sysfs / "class/thermal/thermal_zone0/type").write_text("gpu\n")
    vd = connect_vdev(adb_server, tmp_path / "dev", sysfs_root=sysfs)
    try:
        t = AdbTransport("vphone", vd.serial, adb_port=adb_server.port)
        stage(tmp_path / "bundle", mlp_plan("cpu", iterations=1500))
        t.push(runner, "runner")
        t.push(tmp_path / "bundle", "bundle")
        yield t, sysfs, tmp_path
    finally:
        disconnect_vdev(adb_server, vd)


def run_on(t: AdbTransport, out: Path, *extra: str) -> dict:
    res = t.run(["./runner", "run", "--plan", "bundle/plan.json", "--root", "bundle",
                 "--out", "out", "--threads", "1", "--power-sample-ms", "1", *extra],
                timeout_s=120)
    assert res.returncode == 0, res.stderr[-2000:]
    t.pull("out", out, ["run.json"])
    return json.loads((out / "run.json").read_text())


def test_energy_per_iteration_is_v_times_i_times_iteration_time(phone):
    """Measuring for 0.3 s whatever the host's speed (--min-seconds = --max-seconds): enough
    1 ms power samples on any host."""
    t, _, tmp = phone
    doc = run_on(t, tmp / "out", "--ci-target", "0.05", "--max-iterations", "1000000",
                 "--min-seconds", "0.3", "--max-seconds", "0.3")
    walls = [i["wall_ms"] for i in doc["iters"] if not i["warmup"]]
    want_mj = 2.0 * sum(walls) / len(walls)          # 2 W x mean iteration time (ms) = mJ
    pw = doc["power"]
    assert pw["energy_per_iteration_mj"] == pytest.approx(want_mj, rel=1e-9)
    assert pw["energy_uncertainty_mj"] == 0 and pw["power_samples"] >= 10
    assert pw["sysfs_root"].endswith("/sys")        # the phone's /sys, served by the device
    assert pw["gpu_mhz_start"] == pw["gpu_mhz_end"] == 800 and pw["throttled"] is False
    assert doc["conditions"]["temperature_c_start"] == doc["conditions"]["temperature_c_end"] == 41


def test_a_clock_drop_while_measuring_flags_throttling(phone):
    """The GPU clock falls from 800 to 500 MHz after the runner's 20th read of it; measuring
    cannot stop on its interval (--min-seconds = --max-seconds), so it ends on --max-seconds
    with samples on both sides of the drop."""
    t, sysfs, tmp = phone
    clock = ChangeAfterOpens(sysfs / "class/kgsl/kgsl-3d0/gpuclk", opens=20, value=500_000_000)
    with clock:
        doc = run_on(t, tmp / "out", "--ci-target", "0.05", "--max-iterations", "1000000",
                     "--min-seconds", "1", "--max-seconds", "1")
    assert doc["measurement"]["stopped"] == "max_seconds"
    assert clock.changed.is_set() and clock.opened > 25
    pw = doc["power"]
    assert (pw["gpu_mhz_start"], pw["gpu_mhz_end"]) == (800, 500)
    assert pw["gpu_clock_drop"] == pytest.approx(0.375) and pw["throttled"] is True
    assert pw["energy_per_iteration_mj"] > 0 and pw["power_samples"] > 25


def test_a_phone_charging_on_its_cable_measures_no_energy(phone):
    """The adb cable charges the phone: status Charging, current into the battery, USB
    online. The transport's readings say so, and the runner gives no energy figure but the
    reason."""
    t, sysfs, tmp = phone
    put(sysfs / "class/power_supply/battery/current_now", 450_000)
    (sysfs / "class/power_supply/battery/status").write_text("Charging\n")
    put(sysfs / "class/power_supply/usb/online", 1)
    got = t.readings()
    assert got["battery_discharging"] == 0.0 and got["charger_online.usb"] == 1.0
    doc = run_on(t, tmp / "out", "--ci-target", "0.05", "--max-iterations", "1000000",
                 "--min-seconds", "0.3", "--max-seconds", "0.3")
    pw = doc["power"]
    assert pw["energy_per_iteration_mj"] is None and pw["energy_method"] == "none"
    assert "on external power (battery status Charging, charger online: usb)" in \
        pw["energy_caveat"]
