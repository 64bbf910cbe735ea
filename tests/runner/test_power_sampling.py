"""Energy and heat: the real runner samples scripted sysfs files (battery voltage and current,
GPU clock, thermal zone) under ``--sysfs-root`` during the measured iterations; run.json's
``power`` object and the runs table carry energy per iteration, its uncertainty, the sampling
rate and the throttling flag. A helper thread rewrites a file atomically (``os.replace``) to
script a value that changes over time; measuring lasts a fixed time (``--min-seconds`` =
``--max-seconds``), so every host takes enough samples."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers.results import write_run
from helpers.runner_plans import mlp_plan, stage
from helpers.sysfs import ChangeAfterOpens, put
from phonetrain import runner as runner_api
from phonetrain.results import runs as run_folders

VOLT_UV = 4_000_000
PERIOD_MS = 1
ITERATIONS = 20
MEASURE_S = 0.3     # measuring time of every run: 100+ samples at 1 ms on a quiet host


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("power")
    return stage(root / "bundle", mlp_plan("cpu", iterations=ITERATIONS)), root / "bundle"


def battery(sysfs: Path, current_ua: int) -> Path:
    bat = sysfs / "class/power_supply/battery"
    put(bat / "voltage_now", VOLT_UV)
    put(bat / "current_now", current_ua)
    return bat / "current_now"


def run(runner, bundle, tmp_path, sysfs, period_ms=PERIOD_MS) -> dict:
    """Measure for MEASURE_S seconds: the interval never ends it (min = max seconds)."""
    plan, root = bundle
    r = runner_api.Runner.local_binary(runner, root)
    fixed_time = runner_api.Adaptive(ci_target=0.05, max_iterations=10**7,
                                     min_seconds=MEASURE_S, max_seconds=MEASURE_S)
    return r.run(plan.resolve(), tmp_path / "out", threads=1, adaptive=fixed_time,
                 power_sample_ms=period_ms, sysfs_root=str(sysfs.resolve()))


def mean_iteration_s(doc: dict) -> float:
    walls = [i["wall_ms"] for i in doc["iters"] if not i["warmup"]]
    return sum(walls) / len(walls) / 1e3


def test_constant_power_gives_v_times_i_times_iteration_time(runner, bundle, tmp_path):
    battery(tmp_path / "sys", -500_000)          # discharging, negative by this vendor's sign
    doc = run(runner, bundle, tmp_path, tmp_path / "sys")
    pw = doc["power"]
    want_mj = 4.0 * 0.5 * mean_iteration_s(doc) * 1e3     # 2 W x mean iteration time
    assert pw["energy_per_iteration_mj"] == pytest.approx(want_mj, rel=1e-9)
    assert pw["energy_uncertainty_mj"] == 0 and pw["mean_power_w"] == pytest.approx(2.0)
    assert pw["power_samples"] >= 10
    assert 0 < pw["sample_hz"] <= 1000 / PERIOD_MS * 1.05
    assert pw["sysfs_root"] == str((tmp_path / "sys").resolve())


def test_scripted_current_is_read_as_scripted_and_integrated_by_the_trapezoid_rule(
        runner, bundle, tmp_path):
    """Current alternating 0.25 A / 0.75 A every 10 ms at 4 V. Each sample the runner reports
    must show a power the file held while that sample was being read (between its own time and
    the next sample's: the sampler reads files one sample after another), and the energy, mean
    power and its standard error must be those of the reported samples (trapezoid rule,
    s / sqrt(N)). Both hold however the host delays the sampler or the script: a delay changes
    what is sampled, not whether it was read and integrated right."""
    cur = battery(tmp_path / "sys", 250_000)
    stop = threading.Event()
    held = [(-math.inf, -math.inf, 1.0)]      # (before write, after write, power_w) per value

    def script():
        while not stop.wait(0.010):
            ua = 1_000_000 - round(held[-1][2] / 4.0 * 1e6)
            before = time.monotonic()
            put(cur, ua)
            held.append((before, time.monotonic(), 4.0 * ua * 1e-6))
    t = threading.Thread(target=script)
    t.start()
    try:
        doc = run(runner, bundle, tmp_path, tmp_path / "sys")
    finally:
        stop.set()
        t.join()
    pw = doc["power"]
    t_s, p_w = pw["samples"]["t_s"], pw["samples"]["power_w"]
    assert len(t_s) == len(p_w) == pw["power_samples"] >= 10
    assert {round(p, 9) for p in p_w} == {1.0, 3.0}
    at = [pw["sampled_from_monotonic_s"] + t for t in t_s]
    nexts = [(b, a) for b, a, _ in held[1:]] + [(math.inf, math.inf)]
    for i, (t_read, p) in enumerate(zip(at, p_w)):
        t_done = at[i + 1] if i + 1 < len(at) else math.inf
        # value k is in the file from (at latest) its write's end to (at least) the next
        # write's start, and perhaps from its write's start to the next write's end
        assert any(round(v, 9) == round(p, 9) and start <= t_done and t_read <= stop_
                   for (start, _, v), (_, stop_) in zip(held, nexts)), (i, t_read, p)
    e_j = sum((t1 - t0) * (a + b) / 2 for t0, t1, a, b in zip(t_s, t_s[1:], p_w, p_w[1:]))
    assert pw["energy_j"] == pytest.approx(e_j, rel=1e-6)
    assert pw["sampled_s"] == pytest.approx(t_s[-1] - t_s[0], rel=1e-6)
    assert pw["mean_power_w"] == pytest.approx(e_j / pw["sampled_s"], rel=1e-6)
    assert pw["mean_power_se_w"] == pytest.approx(
        statistics.stdev(p_w) / math.sqrt(len(p_w)), rel=1e-6)
    assert pw["energy_per_iteration_mj"] == pytest.approx(
        pw["mean_power_w"] * mean_iteration_s(doc) * 1e3, rel=1e-6)
    assert pw["energy_uncertainty_mj"] == pytest.approx(
        pw["mean_power_se_w"] * mean_iteration_s(doc) * 1e3, rel=1e-6)


def test_a_gpu_clock_drop_during_the_run_flags_throttling(runner, bundle, tmp_path):
    """The clock falls from 800 to 500 MHz after the runner's 20th read of it."""
    sysfs = tmp_path / "sys"
    battery(sysfs, 500_000)
    clk = sysfs / "class/kgsl/kgsl-3d0/gpuclk"
    put(clk, 800_000_000)
    with ChangeAfterOpens(clk, opens=20, value=500_000_000) as drop:
        doc = run(runner, bundle, tmp_path, sysfs)
    assert drop.changed.is_set() and drop.opened > 25
    pw = doc["power"]
    assert pw["gpu_mhz_start"] == 800 and pw["gpu_mhz_end"] == 500
    assert pw["gpu_clock_drop"] == pytest.approx(0.375) and pw["throttled"] is True


def test_a_steady_clock_is_not_throttling_and_temperatures_come_from_the_root(
        runner, bundle, tmp_path):
    sysfs = tmp_path / "sys"
    battery(sysfs, 500_000)
    put(sysfs / "class/kgsl/kgsl-3d0/gpuclk", 800_000_000)
    put(sysfs / "class/thermal/thermal_zone0/temp", 41_500)
    put(sysfs / "devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", 1_800_000)
    doc = run(runner, bundle, tmp_path, sysfs)
    pw, cond = doc["power"], doc["conditions"]
    assert pw["throttled"] is False and pw["gpu_clock_drop"] == 0
    assert pw["cpu_mhz_max_start"] == 1800 and cond["cpu_mhz_start"] == 1800
    assert cond["temperature_c_start"] == 41.5 and cond["temperature_c_end"] == 41.5


def test_without_power_files_nothing_is_measured(runner, bundle, tmp_path):
    (tmp_path / "sys").mkdir()
    pw = run(runner, bundle, tmp_path, tmp_path / "sys")["power"]
    for k in ("energy_per_iteration_mj", "energy_uncertainty_mj", "sample_hz", "throttled",
              "gpu_mhz_start"):
        assert pw[k] is None, k


def test_runs_table_carries_energy_and_throttling(runner, bundle, tmp_path):
    """Two repeats folded into one runs row: energy mean, uncertainties in quadrature / 2."""
    d = write_run(tmp_path / "runs", iterations=2)
    doc = json.loads((d / "run.json").read_text())
    doc["power"] = {"energy_per_iteration_mj": 1.0, "energy_uncertainty_mj": 0.3,
                    "sample_hz": 900.0, "gpu_mhz_start": 800.0, "gpu_mhz_end": 790.0,
                    "throttled": False}
    (d / "run.json").write_text(json.dumps(doc))
    rep = d / "repeat_1"
    rep.mkdir()
    for f in ("run.json", "trace.csv"):
        (rep / f).write_bytes((d / f).read_bytes())
    doc["power"] = dict(doc["power"], energy_per_iteration_mj=2.0, energy_uncertainty_mj=0.4,
                        gpu_mhz_end=500.0, throttled=True)
    (rep / "run.json").write_text(json.dumps(doc))
    row = run_folders.read_run(d)["runs"].iloc[0]
    assert row["energy_per_iteration_mj"] == pytest.approx(1.5)
    assert row["energy_uncertainty_mj"] == pytest.approx(math.hypot(0.3, 0.4) / 2)
    assert row["power_sample_hz"] == 900 and bool(row["throttled"]) is True
    assert (row["gpu_mhz_start"], row["gpu_mhz_end"]) == (800, 500)
    bare = run_folders.read_run(write_run(tmp_path / "bare"))["runs"].iloc[0]
    assert bare[["energy_per_iteration_mj", "power_sample_hz", "throttled"]].isna().all()


def test_report_says_not_measured_on_a_device_without_power(tmp_path):
    from phonetrain.report.build import energy
    from phonetrain.results import aggregate
    d = write_run(tmp_path / "runs", device="phone", iterations=2)
    doc = json.loads((d / "run.json").read_text())
    doc["power"] = {"energy_per_iteration_mj": 1.25, "energy_uncertainty_mj": 0.05,
                    "sample_hz": 950.0, "gpu_mhz_start": 800.0, "gpu_mhz_end": 500.0,
                    "throttled": True}
    (d / "run.json").write_text(json.dumps(doc))
    runs = aggregate.tables([d, write_run(tmp_path / "runs", device="host")])["runs"]
    by_dev = {e["device"]: e for e in energy(runs)}
    assert by_dev["host"]["note"].startswith("not measured on host (no readable battery")
    assert not by_dev["host"]["rows"]
    (row,) = by_dev["phone"]["rows"]
    assert by_dev["phone"]["note"] == "" and row["energy"] == "1.25 +- 0.05"
    assert (row["gpu_mhz"], row["throttled"]) == ("800->500", "yes")


@pytest.mark.parametrize("readable", [True, False])
def test_adaptive_measuring_waits_for_a_second_battery_sample(runner, tmp_path, readable):
    """An interval target no measurement misses (+-1e9) stops at the first check, after the
    plan's 3 iterations, unless the battery is readable: then the stop waits until the
    sampler (50 ms period) read it twice, and energy is measured."""
    plan = stage(tmp_path / "bundle", mlp_plan("cpu", iterations=3))
    sysfs = tmp_path / "sys"
    (battery(sysfs, 500_000) if readable else sysfs.mkdir())
    subprocess.run([str(runner), "run", "--plan", str(plan), "--root", str(tmp_path / "bundle"),
                    "--out", str(tmp_path / "out"), "--threads", "1", "--power-sample-ms", "50",
                    "--sysfs-root", str(sysfs), "--ci-target", "1e9", "--max-iterations",
                    "100000", "--max-seconds", "20"],
                   check=True, capture_output=True, timeout=120)
    doc = json.loads((tmp_path / "out/run.json").read_text())
    assert doc["measurement"]["stopped"] == "ci"
    measured_ms = sum(i["wall_ms"] for i in doc["iters"] if not i["warmup"])
    pw = doc["power"]
    if readable:
        assert pw["power_samples"] >= 3 and measured_ms >= 40
        assert pw["energy_per_iteration_mj"] == pytest.approx(2.0 * measured_ms /
                                                              (len(doc["iters"]) - 1), rel=1e-9)
    else:
        assert pw["energy_per_iteration_mj"] is None and doc["iterations"] == 3


def plug(sysfs: Path, status: str, usb_online: int | None = None) -> None:
    """The battery's status text and, when given, the USB charger's online flag."""
    bat = sysfs / "class/power_supply/battery"
    bat.mkdir(parents=True, exist_ok=True)
    (bat / "status").write_text(f"{status}\n")
    if usb_online is not None:
        put(sysfs / "class/power_supply/usb/online", usb_online)


def test_a_charging_phone_reports_no_energy_and_says_why(runner, bundle, tmp_path):
    """On the USB cable: status Charging, current positive (into the battery), charger
    online. The current is the charger's, so no energy figure, and the record says so."""
    sysfs = tmp_path / "sys"
    battery(sysfs, 500_000)
    plug(sysfs, "Charging", usb_online=1)
    pw = run(runner, bundle, tmp_path, sysfs)["power"]
    assert pw["power_samples"] >= 10
    assert pw["energy_per_iteration_mj"] is None and pw["mean_power_w"] is None
    assert pw["external_power"] is True and pw["energy_method"] == "none"
    assert pw["battery_status_start"] == pw["battery_status_end"] == "Charging"
    assert pw["chargers_online"] == "usb"
    assert "on external power (battery status Charging, charger online: usb)" in \
        pw["energy_caveat"]


def test_a_discharging_phone_names_its_method(runner, bundle, tmp_path):
    sysfs = tmp_path / "sys"
    battery(sysfs, -500_000)
    plug(sysfs, "Discharging", usb_online=0)
    pw = run(runner, bundle, tmp_path, sysfs)["power"]
    assert pw["energy_per_iteration_mj"] > 0 and pw["mean_power_w"] == pytest.approx(2.0)
    assert pw["external_power"] is False and pw["energy_method"] == "battery_discharge"
    assert pw["energy_caveat"] is None and pw["chargers_online"] == ""


def test_an_unreadable_status_is_an_assumption_said_aloud(runner, bundle, tmp_path):
    battery(tmp_path / "sys", -500_000)       # voltage and current only
    pw = run(runner, bundle, tmp_path, tmp_path / "sys")["power"]
    assert pw["energy_per_iteration_mj"] > 0 and pw["external_power"] is None
    assert pw["energy_method"] == "battery_current"
    assert "assumes the phone ran on its battery" in pw["energy_caveat"]


def test_a_charger_plugged_in_while_measuring_voids_the_energy(runner, bundle, tmp_path):
    """The USB charger comes online after the runner's 10th read of its flag: the samples
    after it measure the charger, so the run has no energy figure."""
    sysfs = tmp_path / "sys"
    battery(sysfs, -500_000)
    plug(sysfs, "Discharging", usb_online=0)
    with ChangeAfterOpens(sysfs / "class/power_supply/usb/online", opens=10, value=1) as usb:
        pw = run(runner, bundle, tmp_path, sysfs)["power"]
    assert usb.changed.is_set() and usb.opened > 12
    assert pw["external_power"] is True and pw["energy_per_iteration_mj"] is None
    assert pw["battery_status_start"] == "Discharging" and "usb" in pw["energy_caveat"]


def test_the_report_says_a_charging_phone_was_not_measured(tmp_path):
    from phonetrain.report.analysis import energy_gaps
    from phonetrain.report.build import energy
    from phonetrain.results import aggregate
    d = write_run(tmp_path / "runs", device="phone", iterations=2)
    doc = json.loads((d / "run.json").read_text())
    caveat = ("on external power (battery status Charging, charger online: usb): the battery "
              "current is the charger's input less the phone's draw, not its consumption")
    doc["power"] = {"energy_per_iteration_mj": None, "power_samples": 40,
                    "energy_method": "none", "energy_caveat": caveat, "external_power": True}
    (d / "run.json").write_text(json.dumps(doc))
    runs = aggregate.tables([d])["runs"]
    row = runs.iloc[0]
    assert row["energy_method"] == "none" and row["energy_caveat"] == caveat
    (e,) = energy(runs)
    assert e["note"] == f"not measured on phone ({caveat})" and not e["rows"]
    assert list(energy_gaps(runs)["why"]) == [caveat]


def test_a_battery_current_in_milliamperes_is_flagged_not_tabulated(runner, bundle, tmp_path):
    """A phone whose current_now is in mA (a 500 mA draw reads 500, where uA are read): the
    runner's mean power is 1000x too low (2 mW), which no computing phone draws, so the runs
    table carries no energy for it but the caveat naming the file and its likely unit, and
    the report says why the run was not measured."""
    from phonetrain.report.build import energy
    from phonetrain.results import aggregate
    sysfs = tmp_path / "sys"
    battery(sysfs, -500)
    plug(sysfs, "Discharging", usb_online=0)
    d = write_run(tmp_path / "runs", device="phone", iterations=2)
    doc = json.loads((d / "run.json").read_text())
    doc["power"] = run(runner, bundle, tmp_path, sysfs)["power"]
    assert doc["power"]["mean_power_w"] == pytest.approx(0.002)   # what the runner computed
    (d / "run.json").write_text(json.dumps(doc))
    row = aggregate.tables([d])["runs"].iloc[0]
    assert row["energy_per_iteration_mj"] is None or math.isnan(row["energy_per_iteration_mj"])
    assert row["energy_method"] == "implausible"
    assert "implausible battery power 0.002 W" in row["energy_caveat"]
    assert "current_now is likely in mA" in row["energy_caveat"]
    (e,) = energy(aggregate.tables([d])["runs"])
    assert not e["rows"] and "implausible battery power 0.002 W" in e["note"], e
