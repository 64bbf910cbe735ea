"""``phonetrain info``: this host's CPU, OpenCL platforms/devices and Vulkan devices, from
``runner info``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from phonetrain.errors import PhonetrainError

TABLE_COLUMNS = {
    "platform": "platform", "name": "device", "type": "type", "opencl_c_version": "OpenCL C",
    "compute_units": "CUs", "max_clock_mhz": "clock_mhz", "global_mem_bytes": "global_mem_gib",
    "local_mem_bytes": "local_mem_kib", "max_work_group_size": "max_wg", "fp16": "fp16",
    "fp64": "fp64", "timer_resolution_ns": "timer_ns",
}

CL_LIB_HINT = ("give the path of an OpenCL ICD loader or driver library (e.g. "
               "/usr/lib/x86_64-linux-gnu/libOpenCL.so.1), or leave --cl-lib out to search "
               "the default list")


def vulkan_lines(doc: dict) -> list[str]:
    """One line per Vulkan device of an ``info`` document (name, type, API version, shared
    memory, its memory types by flags, whether one is host-visible and device-local: the
    zero-copy case), or one line saying why there is none."""
    devs = doc.get("vulkan_devices") or []
    if not devs:
        why = doc.get("vulkan_error") or "the Vulkan loader found no device with a compute queue"
        return [f"no Vulkan device ({why})"]
    out = []
    for d in devs:
        types = "; ".join("+".join(t["flags"]) or "none" for t in d["memory_types"])
        out.append(f"Vulkan: {d['name']} ({d['type']}, Vulkan {d['api_version']}, shared "
                   f"memory {d['max_compute_shared_memory_bytes'] // 1024} KiB; memory types: "
                   f"{types}; host-visible device-local: "
                   f"{'yes' if d['host_visible_device_local'] else 'no'})")
    return out


def format_info(doc: dict) -> str:
    """Human-readable summary of an ``info`` document: host line, library line, OpenCL device
    table, then the Vulkan devices (:func:`vulkan_lines`)."""
    from phonetrain.runner import devices_table
    host = doc["host"]
    lines = [f"host: {host['cpu_model']} ({host['logical_cores']} logical cores)",
             f"OpenCL library: {doc['runner']['opencl_library'] or 'none'}"
             + (f"  [{doc['opencl_error']}]" if doc.get("opencl_error") else "")]
    df = devices_table(doc)
    if df.empty:
        lines.append("no OpenCL platform/device found")
    else:
        df = df[list(TABLE_COLUMNS)].rename(columns=TABLE_COLUMNS)
        df["global_mem_gib"] = (df["global_mem_gib"] / 2**30).round(1)
        df["local_mem_kib"] = df["local_mem_kib"] // 1024
        lines.append(df.to_string(index=False))
    return "\n".join(lines + vulkan_lines(doc))


@click.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print the runner's JSON document.")
@click.option("--cl-lib", default=None, help="Explicit OpenCL library path (default: search list).")
def info_command(as_json: bool, cl_lib: str | None) -> None:
    """Show this host's OpenCL platforms and devices (every platform), its Vulkan devices
    and CPU facts.
    Exits non-zero when ``--cl-lib`` names a library the runner cannot load."""
    from phonetrain.devices.toolchains import host_runner
    from phonetrain.runner import info
    if cl_lib and "/" in cl_lib and not Path(cl_lib).is_file():
        raise click.ClickException(f"--cl-lib {cl_lib}: no such file; {CL_LIB_HINT}")
    say = lambda line: click.echo(f"phonetrain info: {line}", err=True)  # noqa: E731
    try:
        doc = info(host_runner(announce=say), cl_lib=cl_lib)
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
    if cl_lib and not doc["runner"].get("opencl_library"):
        raise click.ClickException(f"--cl-lib {cl_lib}: the runner could not load it "
                                   f"({doc.get('opencl_error') or 'no reason given'}); "
                                   f"{CL_LIB_HINT}")
    click.echo(json.dumps(doc, indent=1) if as_json else format_info(doc))
