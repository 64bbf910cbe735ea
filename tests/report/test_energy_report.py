"""The energy guideline and figure: from runs whose run.json carries the runner's ``power``
object (src/runner/power.c), the report names the configuration with the least energy per
iteration, sets the fastest beside it, says where energy was not measured, lists throttled
runs, and references its rows; without energy anywhere it says how to measure it."""

from __future__ import annotations

import json

import matplotlib.image
import pytest

from helpers.results import write_run
from phonetrain.report import figures
from phonetrain.report.analysis import energy_differs, energy_frame
from phonetrain.report.findings import energy
from phonetrain.results import aggregate


def _with_power(d, mj, u_mj, throttled=False):
    doc = json.loads((d / "run.json").read_text())
    doc["power"] = {"energy_per_iteration_mj": mj, "energy_uncertainty_mj": u_mj,
                    "sample_hz": 100.0, "gpu_mhz_start": 800.0,
                    "gpu_mhz_end": 500.0 if throttled else 800.0, "throttled": throttled}
    (d / "run.json").write_text(json.dumps(doc))
    return d


@pytest.fixture()
def runs(tmp_path):
    R = tmp_path / "runs"
    slow_cpu = _with_power(write_run(R, device="phone", kernel_ns=900_000), 2.0, 0.05)
    fast_cl = _with_power(write_run(R, device="phone", backend="opencl", placement="resident",
                                    transfer="copy", kernel="baseline", kernel_ns=100_000),
                          3.0, 0.05)
    hot_cl = _with_power(write_run(R, device="phone", backend="opencl", placement="staged",
                                   transfer="copy", kernel="tiled", kernel_ns=400_000),
                         2.9, 0.3, throttled=True)
    host = write_run(R, device="host")
    return aggregate.tables([slow_cpu, fast_cl, hot_cl, host])["runs"]


def test_frame_derives_power_and_energy_per_sample(runs):
    e = energy_frame(runs)
    assert list(e["device"]) == ["phone"] * 3  # the host measured none
    assert list(e["energy_per_iteration_mj"]) == [2.0, 2.9, 3.0]  # least first
    first = e.iloc[0]
    assert first["energy_per_sample_mj"] == pytest.approx(2.0 / 32)
    assert first["mean_power_w"] == pytest.approx(2.0 / first["iteration_median_ms"])
    assert energy_differs(e.iloc[0], e.iloc[2])          # 2.0 vs 3.0, SE 0.05 each
    assert not energy_differs(e.iloc[1], e.iloc[2])      # 2.9 +- 2x0.3 overlaps 3.0 +- 2x0.05


def test_finding_names_least_energy_the_fastest_and_the_gaps(runs):
    f = energy(runs)
    assert f.measured and f.key == "energy"
    assert "phone, mlp_784_256_128_16: cpu used the least energy per training iteration, " \
           "2 mJ" in f.statement
    # the fastest run (resident, 100 us kernels) costs 1.5x the least
    assert "the fastest, resident/copy baseline, used 3 mJ (1.5x the least)" in f.statement
    assert "tied" not in f.statement   # 2.0 +- 2x0.05 stands apart from 2.9 +- 2x0.3
    assert "Not measured on host (no readable battery voltage and current" in f.statement
    hot = runs.loc[runs["placement"] == "staged", "run_id"].item()
    assert f.statement.endswith(f"Throttled while measured (a sampled clock dropped; their time "
                                f"and energy are at lower clocks): {hot}.")
    assert sorted(f.rows) == sorted(f"runs.parquet: {r}" for r in
                                    runs.loc[runs["device"] == "phone", "run_id"])
    assert [r[2] for r in f.table.rows] == ["cpu", "staged/copy tiled", "resident/copy baseline"]
    assert [r[-1] for r in f.table.rows] == ["no", "yes", "no"]


def test_finding_and_figure_without_energy_say_how_to_measure(runs, tmp_path):
    host = runs[runs["device"] == "host"]
    f = energy(host)
    assert not f.measured and "Not measured on host" in f.statement
    assert "measure.power_sample_ms" in f.statement
    out = figures.energy(host, tmp_path / "none.png")
    assert out.is_file() and (tmp_path / "none.svg").is_file()
    assert "no run measured energy" in (tmp_path / "none.svg").read_text()


def test_figure_has_a_panel_per_device(runs, tmp_path):
    out = figures.energy(runs, tmp_path / "energy.png")
    assert matplotlib.image.imread(out).shape[0] > 200
    svg = (tmp_path / "energy.svg").read_text()
    assert "not measured on host" in svg and "phone: energy per training iteration" in svg
    assert "(throttled)" in svg and "mlp_784_256_128_16 | cpu" in svg


def test_unverified_runs_never_enter(runs):
    wrong = runs.assign(status=lambda d: d["status"].where(d["backend"] != "cpu", "wrong"))
    assert "cpu" not in list(energy_frame(wrong)["label"])
    # 2.9 +- 2x0.3 and 3.0 +- 2x0.05 overlap: the least is named with its tie
    assert "phone, mlp_784_256_128_16: staged/copy tiled used the least energy per training " \
        "iteration, 2.9 mJ at" in energy(wrong).statement
    assert "(tied within the uncertainty with resident/copy baseline)" in energy(wrong).statement


def test_a_readable_battery_with_too_short_runs_is_not_called_unreadable(runs):
    """The runner read the battery (power_samples > 0) but too few times for an energy figure:
    the report says so and what to change, instead of blaming the battery."""
    short = runs.assign(power_samples=2)
    f = energy(short)
    assert "Not measured on host (battery readable, but the measured iterations were " \
        "shorter than one sampling period" in f.statement
    assert "measure.power_sample_ms" in f.statement and "no readable battery" not in f.statement
    one_short = short.assign(energy_per_iteration_mj=lambda d: d["energy_per_iteration_mj"].where(
        d["backend"] != "cpu"))
    assert "1 more verified run(s) on phone have no energy figure (battery readable" in \
        energy(one_short).statement
