"""The devices table: a virtual phone's scripted getprop facts reach ``devices.parquet``
through a real one-off run over adb (CPU backend: no kernel compile) and the aggregate; the
OpenCL facts come from the real runner's run.json of an OpenCL run on PoCL."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from helpers import REPO, STEADY
from helpers.adb import connect_vdev, disconnect_vdev
from helpers.results import summary_paths
from phonetrain.cli import main
from phonetrain.devices.virtual import default_props
from phonetrain.results import aggregate, schema

PROPS = {"ro.product.model": "Pixel Test", "ro.product.manufacturer": "TestCo",
         "ro.soc.model": "SM8550", "ro.soc.manufacturer": "QTI",
         "ro.build.version.release": "13", "ro.build.version.sdk": "33"}


@pytest.fixture(scope="module")
def summary(adb_server, runner, tmp_path_factory):
    """One CPU run of mlp_16_16 on a virtual phone with scripted props, aggregated."""
    tmp = tmp_path_factory.mktemp("devices")
    R = tmp / "results"
    # the session's runner compile is the one this run would make (same sources, compiler and
    # flags: the cache key): seed the results folder's runner cache with it
    shutil.copytree(runner.parent, R / "build" / ".runner-cache" / runner.parent.name)
    vd = connect_vdev(adb_server, tmp / "phone", props=default_props() | PROPS)
    mp = pytest.MonkeyPatch()
    mp.setenv("PHONETRAIN_LOCK_DIR", str(tmp / "locks"))  # never wait on other users' runs
    try:
        conf = tmp / "conf"
        shutil.copytree(REPO / "conf", conf)
        host = yaml.safe_load((REPO / "conf/device/host.yaml").read_text())
        (conf / "device/vphone.yaml").write_text(yaml.safe_dump(
            dict(host, name="vphone", transport="adb", serial=vd.serial)))
        res = CliRunner().invoke(main, [
            "run", "--conf", str(conf), "model=mlp_16_16", "device=vphone", "backend=cpu",
            "model.batch_size=8", f"results_dir={R}", "measure.warmup=1",
            "measure.iterations=2", "measure.progress=false", "measure.cooldown_limit_s=1",
            "measure.checkpoints=[]", *STEADY])
        assert res.exit_code == 0, (res.output, res.exception)
    finally:
        mp.undo()
        disconnect_vdev(adb_server, vd)
    run_dirs = sorted((R / "runs").glob("*/*"))
    paths = aggregate.aggregate(run_dirs, summary_paths(tmp / "summary"))
    return paths, vd


def test_scripted_getprop_facts_reach_devices_parquet(summary):
    paths, vd = summary
    dev = schema.read_table(paths["devices"], "devices").set_index("device")
    assert list(dev.index) == ["vphone"]
    row = dev.loc["vphone"]
    assert row["transport"] == "adb" and row["serial"] == vd.serial
    assert (row["product_model"], row["product_manufacturer"]) == ("Pixel Test", "TestCo")
    assert (row["soc_model"], row["soc_manufacturer"]) == ("SM8550", "QTI")
    assert (row["android_version"], row["android_sdk"]) == ("13", "33")
    assert row["abi"] == default_props()["ro.product.cpu.abi"]
    assert row["facts_from_runs"] == 1
    assert row["cpu_model"] and row["logical_cores"] >= 1
    assert pd.isna(row["opencl_device"])    # a CPU run records no OpenCL device


def test_runs_join_devices_and_group_by_soc(summary):
    paths, _ = summary
    runs = schema.read_table(paths["runs"], "runs")
    dev = schema.read_table(paths["devices"], "devices")
    joined = runs.merge(dev, on="device", how="left", validate="many_to_one")
    assert not [c for c in joined.columns if c.endswith(("_x", "_y"))]  # no clashing columns
    by_soc = joined.groupby("soc_model")["iteration_median_ms"].median()
    assert list(by_soc.index) == ["SM8550"] and by_soc.iloc[0] > 0


def test_a_device_whose_runs_all_failed_still_has_a_row(tmp_path):
    from helpers.results import write_run
    d = write_run(tmp_path, device="deadphone", failed_reason="unplugged")
    dev = aggregate.tables([d])["devices"]
    assert list(dev["device"]) == ["deadphone"] and dev["facts_from_runs"].iloc[0] == 0
    assert dev["soc_model"].isna().all()


def test_opencl_facts_come_from_the_runners_run_json(runner, pocl, tmp_path):
    """A real OpenCL run on PoCL: the devices row holds what run.json says of the device."""
    from helpers.runner_plans import mlp_plan, stage
    from phonetrain import runner as runner_api
    plan = stage(tmp_path / "bundle", mlp_plan("opencl", iterations=1))
    d = tmp_path / "runs" / "host" / "mlp.opencl.baseline"
    runner_api.run_plan(runner, plan, tmp_path / "bundle", d, device_selector=pocl)
    (d / "params.json").write_text(json.dumps({
        "run_id": d.name, "model": "mlp", "device": "host", "backend": "opencl",
        "config": {"device": {"name": "host", "transport": "local"}}}))
    cl = json.loads((d / "run.json").read_text())["device"]
    row = aggregate.tables([d])["devices"].iloc[0]
    assert (row["device"], row["transport"]) == ("host", "local")
    assert row["opencl_platform"] == cl["platform"] and "Portable" in row["opencl_platform"]
    assert (row["opencl_device"], row["opencl_version"]) == (cl["name"], cl["version"])
    assert row["compute_units"] == cl["compute_units"] >= 1
    assert row["max_clock_mhz"] == cl["max_clock_mhz"]
    assert row["global_mem_bytes"] == cl["global_mem_bytes"] > 0
    assert row["image_support"] == cl["image_support"]
    assert row["opencl_timer_resolution_ns"] == cl["timer_resolution_ns"]
    assert pd.isna(row["soc_model"])          # a local host has no getprop facts
