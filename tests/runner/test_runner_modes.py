"""Runner modes on real PoCL: info, build (ok, and a syntax error with its log),
bench-bandwidth; the Python build cache; `phonetrain info`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from phonetrain import runner as rt
from phonetrain.devices import toolchains
from phonetrain.cli import main as cli_main

GOOD_CL = "__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2.0f; }\n"


def test_info_lists_pocl_device(runner, pocl):
    doc = rt.info(runner)
    assert doc["opencl_error"] is None
    assert doc["runner"]["source_hash"] == toolchains.runner_source_hash()[:16]
    assert doc["host"]["logical_cores"] >= 1 and doc["host"]["cpu_model"]
    plat = next(p for p in doc["platforms"] if p["name"] == "Portable Computing Language")
    dev = plat["devices"][0]
    assert dev["type"] == "cpu" and dev["opencl_c_version"].startswith("OpenCL C ")
    for key in ("compute_units", "max_clock_mhz", "global_mem_bytes", "local_mem_bytes",
                "max_work_group_size", "timer_resolution_ns"):
        assert isinstance(dev[key], int) and dev[key] > 0, key
    assert isinstance(dev["fp16"], bool) and isinstance(dev["fp64"], bool)
    assert len(rt.devices_table(doc)) == sum(len(p["devices"]) for p in doc["platforms"])


def test_info_without_opencl_library_still_describes_the_host(runner, tmp_path):
    doc = rt.info(runner, cl_lib=str(tmp_path / "libNoSuchOpenCL.so"))
    assert doc["platforms"] == [] and "libNoSuchOpenCL.so" in doc["opencl_error"]
    assert doc["host"]["logical_cores"] >= 1


def test_info_lists_the_vulkan_devices_with_their_memory_types(runner, lavapipe, tmp_path):
    """lavapipe appears with its memory types (one type, device-local and host-visible: the
    zero-copy case); a libvulkan that does not load leaves the list empty and says why,
    and the text of ``phonetrain info`` says there is no Vulkan device."""
    from phonetrain.cli.info import format_info
    doc = rt.info(runner)
    assert doc["vulkan_error"] is None
    dev = next(d for d in doc["vulkan_devices"] if "llvmpipe" in d["name"])
    assert dev["api"] == "vulkan" and dev["type"] == "cpu" and dev["memory_types"]
    assert dev["host_visible_device_local"] is True
    assert "llvmpipe" in format_info(doc) and "host_visible" in format_info(doc)
    res = rt.run_mode(runner, "info", ["--vk-lib", str(tmp_path / "libNoSuchVulkan.so")])
    none = json.loads(res.stdout)
    assert none["vulkan_devices"] == [] and "libNoSuchVulkan.so" in none["vulkan_error"]
    assert "no Vulkan device (no Vulkan library: tried " in format_info(none)


def test_build_writes_binaries_and_log(runner, pocl, tmp_path):
    (tmp_path / "twice.cl").write_text(GOOD_CL)
    doc = rt.build_kernels(runner, [tmp_path / "twice.cl"], tmp_path / "out", options="-cl-fast-relaxed-math",
                           device_selector=pocl)
    assert doc["status"] == "ok" and doc["options"] == "-cl-fast-relaxed-math"
    (prog,) = doc["programs"]
    assert prog["program"] == "twice" and prog["build_ms"] > 0 and prog["binary_size_bytes"] > 0
    assert (tmp_path / "out" / "twice.bin").stat().st_size == prog["binary_size_bytes"]


def test_build_syntax_error_reports_log(runner, pocl, tmp_path):
    (tmp_path / "ok.cl").write_text(GOOD_CL)
    (tmp_path / "bad.cl").write_text(GOOD_CL.replace("*= 2.0f", "*= 2.0f +"))
    with pytest.raises(rt.KernelBuildError, match=r"bad\.cl .*CL_BUILD_PROGRAM_FAILURE") as ei:
        rt.build_kernels(runner, [tmp_path / "ok.cl", tmp_path / "bad.cl"], tmp_path / "out",
                         device_selector=pocl)
    assert "expected expression" in ei.value.stderr
    doc = json.loads((tmp_path / "out" / "build.json").read_text())
    assert doc["status"] == "failed"
    assert [p["status"] for p in doc["programs"]] == ["ok", "failed"]
    assert "expected expression" in doc["programs"][1]["log"]


def test_bench_bandwidth_measures_every_op_at_every_size(runner, pocl, tmp_path):
    df = rt.bench_bandwidth(runner, tmp_path / "bw", min_bytes=4096, max_bytes=1 << 16,
                            min_time_ms=1, repeats=2, device_selector=pocl)
    sizes = [4096 << i for i in range(5)]
    assert sorted(df["op"].unique()) == ["d2d", "d2h", "h2d", "map", "unmap"]
    for op, rows in df.groupby("op"):
        assert rows["size_bytes"].tolist() == sizes, op
    assert (df["iterations"] >= 1).all() and (df["repeats"] == 2).all()
    assert (df["host_ns"] > 0).all() and (df["device_ns"] >= 0).all()
    copies = df[df["op"].isin(["h2d", "d2h", "d2d"])]
    assert (copies["device_gbps"] > 0).all() and (copies["host_gbps"] > 0).all()
    # the runner's interval of the host GB/s (from the median host time's bootstrap interval)
    assert (df["host_gbps_low"] <= df["host_gbps"] * (1 + 1e-5)).all()
    assert (df["host_gbps"] <= df["host_gbps_high"] * (1 + 1e-5)).all()
    assert (copies["host_gbps_low"] > 0).all()
    lat = df.attrs["bench"]["latency"]
    assert lat["launches"] > 0 and 0 < lat["host_round_trip_us"] < 1e6
    assert df.attrs["bench"]["device"]["platform"] == "Portable Computing Language"
    # PoCL lists cl_khr_command_buffer: every mode ran and counted its 32 launches per iteration
    rep = df.attrs["bench"]["replay"]
    assert rep["command_buffer"] == "cl_khr_command_buffer" and rep["launches_per_iteration"] == 32
    for key in ("enqueue_profiled_us", "enqueue_plain_us", "replay_profiled_us", "replay_plain_us"):
        assert 0 < rep[key] < 1e6, key


def test_build_runner_is_cached_by_source_hash(runner, tmp_path):
    assert runner.exists() and toolchains.runner_source_hash()[:16] in runner.read_bytes().decode("latin1")
    again = toolchains.build_runner(runner.parent.parent)
    assert again == runner
    other = toolchains.build_runner(runner.parent.parent, extra_flags=("-DPHONETRAIN_TEST_FLAG=1",))
    assert other != runner and other.exists()


def test_phonetrain_info_lists_pocl_as_json_and_as_text(runner, pocl, monkeypatch):
    monkeypatch.setattr(toolchains, "host_runner", lambda cc="cc", announce=None: runner)
    res = CliRunner().invoke(cli_main, ["info", "--json"])
    assert res.exit_code == 0, res.output
    assert any(p["name"] == "Portable Computing Language" for p in json.loads(res.stdout)["platforms"])
    res = CliRunner().invoke(cli_main, ["info"])
    assert res.exit_code == 0, res.output
    assert "Portable Computing Language" in res.output and "timer" in res.output


def test_phonetrain_info_with_an_unloadable_cl_lib_fails(runner, tmp_path, monkeypatch):
    monkeypatch.setattr(toolchains, "host_runner", lambda cc="cc", announce=None: runner)
    res = CliRunner().invoke(cli_main, ["info", "--cl-lib", str(tmp_path / "nonexistent")])
    assert res.exit_code != 0 and "no such file" in res.output, res.output
    assert str(tmp_path / "nonexistent") in res.output
    bad = tmp_path / "libNotOpenCL.so"
    bad.write_text("not a shared object\n")  # exists, but dlopen refuses it: the runner says
    res = CliRunner().invoke(cli_main, ["info", "--cl-lib", str(bad)])
    assert res.exit_code != 0 and "could not load it" in res.output, res.output
    res = CliRunner().invoke(cli_main, ["info", "--cl-lib", "libNoSuchOpenCL.so.9"])
    assert res.exit_code != 0 and "libNoSuchOpenCL.so.9" in res.output, res.output
