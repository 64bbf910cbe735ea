"""Device discovery: list adb devices, and write ``conf/device/<name>.yaml`` for each one.

``phonetrain devices`` lists every device the adb server knows (serial, state, model, SoC,
ABI, Android version); devices in another state than ``device`` come with the fix to try.
``phonetrain devices --write`` pushes a runner built for the device to it, runs ``runner info``
there and writes a device config with the OpenCL library, GPU name and compute units found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from phonetrain.devices.adb import (AdbTransport, default_port, ensure_server,
                                    server_client, state_hint)
from phonetrain.devices.base import TransportError
from phonetrain.errors import PhonetrainError
from phonetrain.io import write_text

ABI_TOOLCHAIN = {"arm64-v8a": "android"}  # other ABIs: the host toolchain (emulators, vdev)


@dataclass
class DeviceRow:
    """One line of ``phonetrain devices``."""

    serial: str
    state: str
    facts: dict[str, str] = field(default_factory=dict)
    hint: str = ""

    @property
    def soc(self) -> str:
        return self.facts.get("soc_model") or self.facts.get("board_platform") or ""


def list_devices(adb_host: str = "127.0.0.1", adb_port: int | None = None) -> list[DeviceRow]:
    """Every device known to the adb server, with getprop facts for the online ones. Only
    the default local server (no ``adb_port`` given) is started when nothing listens; a
    given port without a server raises TransportError ("no adb server at HOST:PORT")."""
    port = int(adb_port) if adb_port else default_port()
    ensure_server(adb_host, port, may_start=adb_port is None)
    client = server_client(adb_host, port)
    rows = []
    for info in client.list():
        row = DeviceRow(info.serial, info.state)
        if info.state == "device":
            try:
                row.facts = AdbTransport(info.serial, info.serial, adb_host, port).facts()
            except TransportError as exc:
                row.hint = str(exc)
        else:
            row.hint = state_hint(info.state, info.serial, adb_host, port)
        rows.append(row)
    return rows


def config_name(facts: dict[str, str], serial: str) -> str:
    """A config/file name from the model (``Pixel 7`` -> ``pixel_7``), else from the serial."""
    base = facts.get("model") or serial
    return re.sub(r"[^a-z0-9]+", "_", base.lower()).strip("_") or "phone"


def pick_opencl(info: dict) -> tuple[str | None, dict | None]:
    """The OpenCL library path and the preferred OpenCL device (a GPU if any) in the JSON of
    ``runner info``; (None, None) when the device has no OpenCL."""
    devices, libs = [], []

    def walk(node, key=""):
        if isinstance(node, dict):
            if "name" in node and "compute_units" in node:
                devices.append(node)
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and "librar" in key.lower() and node:
            libs.append(node)

    walk(info)
    gpus = [d for d in devices if d.get("type") == "gpu"]
    return (libs[0] if libs else None), (gpus or devices or [None])[0]


def device_config(name: str, row: DeviceRow, adb_host: str, adb_port: int | None,
                  info: dict) -> dict:
    """The ``conf/device/<name>.yaml`` mapping for a discovered device."""
    lib, cl = pick_opencl(info)
    abi = row.facts.get("abi", "")
    return {
        "name": name,
        "transport": "adb",
        "serial": row.serial,
        "adb_host": None if adb_host in ("127.0.0.1", "localhost") else adb_host,
        "adb_port": adb_port,
        "toolchain": ABI_TOOLCHAIN.get(abi, "host"),
        "cc": "cc",
        "opencl_library": lib,
        "opencl_platform": (cl or {}).get("platform", "") or "",
        "opencl_device": (cl or {}).get("name", "") or "",
        "facts": {
            "soc": row.soc or None,
            "gpu": (cl or {}).get("name"),
            "peak_gflops": None,
            "bandwidth_gbps": None,
        },
    }


class ConfigConflict(PhonetrainError):
    """A device config of that name already exists for another device."""


def read_config(conf_dir: Path, name: str) -> dict | None:
    """``conf_dir/device/<name>.yaml`` as a dict, or None when there is no such file. Raises
    :class:`ConfigConflict` naming the file (and YAML's line) when it cannot be read: a
    config that may hold values set by hand is never replaced unread."""
    path = Path(conf_dir) / "device" / f"{name}.yaml"
    if not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigConflict(f"{path}: cannot read the existing device config "
                             f"({' '.join(str(e).split())}); it is not replaced",
                             "fix the file (it may hold values set by hand), or move it away "
                             "and run again to write a new one") from None
    return doc if isinstance(doc, dict) else {}


def same_device(existing: dict, cfg: dict) -> bool:
    """Whether an existing config describes the device ``cfg`` was discovered as: an adb
    device of the same serial behind the same server."""
    return (existing.get("transport") == "adb" and existing.get("serial") == cfg["serial"]
            and existing.get("adb_host") == cfg["adb_host"]
            and existing.get("adb_port") == cfg["adb_port"])


def merge_config(existing: dict, discovered: dict) -> tuple[dict, list[str]]:
    """The config of a device that already has one: every value set in the file is kept (a
    value filled in by hand, such as ``facts.peak_gflops``, is never reset); discovery fills
    only keys that are missing or null there. Returns (merged, notes: what discovery found
    that differs from a value kept)."""
    merged, notes = dict(existing), []
    for key, value in discovered.items():
        have = existing.get(key)
        if isinstance(value, dict):
            sub, sub_notes = merge_config(have if isinstance(have, dict) else {}, value)
            merged[key] = sub
            notes += [f"{key}.{n}" for n in sub_notes]
        elif have is None or (have == "" and value):
            merged[key] = value
        elif value not in (None, "") and have != value:
            notes.append(f"{key}: kept {have!r}, discovery found {value!r}")
    return merged, notes


def vulkan_comment(info: dict) -> str:
    """The written config's header lines on the device's Vulkan devices (from ``runner
    info``): name, type and memory types of each, or why there is none. A comment, not a
    key: the runner picks the Vulkan device itself (``docs/vulkan.md``)."""
    devs = info.get("vulkan_devices") or []
    if not devs:
        why = info.get("vulkan_error") or "no device with a compute queue"
        return f"# Vulkan: none ({why}); backend vulkan runs are recorded skipped here.\n"
    return "".join(
        f"# Vulkan: {d['name']} ({d['type']}, Vulkan {d['api_version']}); memory types: "
        + "; ".join("+".join(t["flags"]) or "none" for t in d["memory_types"])
        + (" (zero-copy: a host-visible device-local type)" if d["host_visible_device_local"]
           else "") + "\n" for d in devs)


def write_config(conf_dir: Path, cfg: dict, vulkan: str = "") -> tuple[Path, list[str], bool]:
    """Write ``conf_dir/device/<name>.yaml`` atomically (temp file + rename), merged into the
    file already there for the same device (:func:`merge_config`; unchanged: not rewritten).
    ``vulkan`` (:func:`vulkan_comment`) goes into the header.
    Returns (its path, notes on values kept, whether the file was written). Raises
    :class:`ConfigConflict` when the file belongs to another device (another serial or
    transport, e.g. ``host``): it is never replaced."""
    path = Path(conf_dir) / "device" / f"{cfg['name']}.yaml"
    existing = read_config(conf_dir, cfg["name"])
    notes: list[str] = []
    if existing is not None:
        if not same_device(existing, cfg):
            raise ConfigConflict(
                f"{path} is the config of another device (transport "
                f"{existing.get('transport')!r}, serial {existing.get('serial')!r}); it is "
                f"not replaced", "pick another name with --name SERIAL=NAME")
        merged, notes = merge_config(existing, cfg)
        if merged == existing:
            return path, notes, False
        cfg = merged
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Written by 'phonetrain devices --write' for adb serial {cfg['serial']}.\n"
              "# Fill in facts.peak_gflops and facts.bandwidth_gbps from datasheets "
              "(OpenCL clocks lie on Adreno); a rerun keeps every value set here.\n" + vulkan)
    write_text(path, header + yaml.safe_dump(cfg, sort_keys=False))
    return path, notes, True
