"""``phonetrain info``: this host's CPU and OpenCL platforms/devices, from ``runner info``."""

from __future__ import annotations

import json

import click

from phonetrain.errors import PhonetrainError

TABLE_COLUMNS = {
    "platform": "platform", "name": "device", "type": "type", "opencl_c_version": "OpenCL C",
    "compute_units": "CUs", "max_clock_mhz": "clock_mhz", "global_mem_bytes": "global_mem_gib",
    "local_mem_bytes": "local_mem_kib", "max_work_group_size": "max_wg", "fp16": "fp16",
    "fp64": "fp64", "timer_resolution_ns": "timer_ns",
}


def format_info(doc: dict) -> str:
    """Human-readable summary of an ``info`` document: host line, library line, device table."""
    from phonetrain.runner import devices_table
    host = doc["host"]
    lines = [f"host: {host['cpu_model']} ({host['logical_cores']} logical cores)",
             f"OpenCL library: {doc['runner']['opencl_library'] or 'none'}"
             + (f"  [{doc['opencl_error']}]" if doc.get("opencl_error") else "")]
    df = devices_table(doc)
    if df.empty:
        lines.append("no OpenCL platform/device found")
        return "\n".join(lines)
    df = df[list(TABLE_COLUMNS)].rename(columns=TABLE_COLUMNS)
    df["global_mem_gib"] = (df["global_mem_gib"] / 2**30).round(1)
    df["local_mem_kib"] = df["local_mem_kib"] // 1024
    lines.append(df.to_string(index=False))
    return "\n".join(lines)


@click.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print the runner's JSON document.")
@click.option("--cl-lib", default=None, help="Explicit OpenCL library path (default: search list).")
def info_command(as_json: bool, cl_lib: str | None) -> None:
    """Show this host's OpenCL platforms and devices (every platform) and CPU facts."""
    from phonetrain.devices.toolchains import host_runner
    from phonetrain.runner import info
    say = lambda line: click.echo(f"phonetrain info: {line}", err=True)  # noqa: E731
    try:
        doc = info(host_runner(announce=say), cl_lib=cl_lib)
    except PhonetrainError as e:
        raise click.ClickException(str(e)) from None
    click.echo(json.dumps(doc, indent=1) if as_json else format_info(doc))
