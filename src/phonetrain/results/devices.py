"""Run folders -> the ``devices`` table: one row per device of a study, its phone facts and
its OpenCL device's facts, to be joined with ``runs`` on ``device``.

Sources, per run folder of the device (:mod:`phonetrain.layout` names the files):

- ``params.json``: the device's name and transport (``config.device``);
- ``device.json`` (adb devices): the ``getprop`` facts (``facts``: model, SoC, Android
  version, ABI; docs/device-sensors.md);
- ``run.json``: the runner's ``device`` object (OpenCL runs: platform, device, version,
  compute units, clock, memory, image support, timer resolution; a Vulkan run's, ``"api":
  "vulkan"``, is not read here) and ``host`` object (CPU model, logical cores).

Each column takes the first value found over the device's run folders in the order given
(folders that failed or hold no such file contribute nothing), so a device whose OpenCL runs
all failed still gets a row with its phone facts. ``facts_from_runs`` counts the folders a
value came from. The table has no provenance columns: every column except ``device`` is
absent from ``runs``, so ``runs.merge(devices, on="device")`` adds no suffixes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from phonetrain import layout
from phonetrain.errors import ResultsFileError
from phonetrain.io import read_json
from phonetrain.results import schema

# devices column -> key of device.json's ``facts`` (getprop; phonetrain.devices.adb.FACT_PROPS)
PHONE_FACTS = {
    "serial": "serial", "product_model": "model", "product_manufacturer": "manufacturer",
    "soc_model": "soc_model", "soc_manufacturer": "soc_manufacturer",
    "board_platform": "board_platform", "hardware": "hardware",
    "android_version": "android_version", "android_sdk": "sdk", "abi": "abi",
}
# devices column -> key of run.json's ``device`` object (src/runner/cl_loader.c)
OPENCL_FACTS = {
    "opencl_platform": "platform", "opencl_platform_version": "platform_version",
    "opencl_device": "name", "opencl_device_vendor": "vendor", "opencl_version": "version",
    "opencl_driver_version": "driver_version", "opencl_c_version": "opencl_c_version",
    "opencl_device_type": "type", "compute_units": "compute_units",
    "max_clock_mhz": "max_clock_mhz", "global_mem_bytes": "global_mem_bytes",
    "local_mem_bytes": "local_mem_bytes", "max_alloc_bytes": "max_alloc_bytes",
    "image_support": "image_support", "fp16": "fp16", "fp64": "fp64",
    "host_unified_memory": "host_unified_memory",
    "opencl_timer_resolution_ns": "timer_resolution_ns",
}
HOST_FACTS = {"cpu_model": "cpu_model", "logical_cores": "logical_cores"}


def _json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; {} when it is absent or damaged (a damaged run folder is
    reported by the runs table, not here)."""
    if not path.exists():
        return {}
    try:
        doc = read_json(path)
    except ResultsFileError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _facts(run_dir: Path) -> tuple[str | None, str | None, dict[str, Any]]:
    """(device, transport, {column: value}) of one run folder; values absent are left out."""
    params = _json(run_dir / layout.PARAMS)
    # a run spec holds ``device_config``; a folder written before run specs, ``config.device``
    cfg = params.get("config") if isinstance(params.get("config"), dict) else {}
    dev_cfg = params.get("device_config") or cfg.get("device")
    dev_cfg = dev_cfg if isinstance(dev_cfg, dict) else {}
    device = params.get("device") or dev_cfg.get("name")
    transport = dev_cfg.get("transport")
    got: dict[str, Any] = {}
    if not (run_dir / layout.FAILED).exists():
        phone = _json(run_dir / layout.DEVICE_READINGS).get("facts") or {}
        run = _json(run_dir / layout.RUN)
        cl = run.get("device") if isinstance(run.get("device"), dict) else {}
        if cl.get("api") == "vulkan":   # a Vulkan device's object: not the OpenCL facts
            cl = {}
        host = run.get("host") if isinstance(run.get("host"), dict) else {}
        for cols, src in ((PHONE_FACTS, phone), (OPENCL_FACTS, cl), (HOST_FACTS, host)):
            got |= {c: src[k] for c, k in cols.items() if src.get(k) not in (None, "")}
    return device, transport, got


def device_rows(run_dirs: Iterable[str | Path]) -> pd.DataFrame:
    """The ``devices`` table (schema :data:`phonetrain.results.schema.DEVICES`) from the run
    folders of a study: one row per device named by a folder's ``params.json``, in order of
    first appearance; a column no folder of the device records is null."""
    rows: dict[str, dict[str, Any]] = {}
    for d in run_dirs:
        device, transport, got = _facts(Path(d))
        if not device:
            continue
        row = rows.setdefault(device, {"device": device, "transport": transport,
                                       "facts_from_runs": 0})
        if row["transport"] is None:
            row["transport"] = transport
        if got:
            row["facts_from_runs"] += 1
        for c, v in got.items():
            row.setdefault(c, v)
    return schema.frame(list(rows.values()), "devices") if rows else schema.empty("devices")
