"""Transports to devices: :func:`get_transport` picks one from a device config.

``local`` (:mod:`.local`) runs on this host from ``<results>/stage/<device>/``; ``adb``
(:mod:`.adb`) reaches a phone through an adb server. Both implement
:class:`phonetrain.devices.base.Transport` plus ``lock()`` (a host-wide ``filelock.FileLock``
keyed by device: one measurement at a time per device).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phonetrain.devices.base import CommandResult, Transport, TransportError
from phonetrain.devices.local import LocalTransport

__all__ = ["get_transport", "stage_root", "CommandResult", "Transport", "TransportError",
           "LocalTransport"]


def stage_root(results_dir: str | Path, device: str) -> Path:
    """The local staging folder of a device: ``<results>/stage/<device>``."""
    return Path(results_dir) / "stage" / device


def get_transport(device: dict[str, Any], results_dir: str | Path) -> Any:
    """The transport for a device config (``conf/device/<name>.yaml`` as a dict).

    Raises TransportError for an unknown transport or an adb device without a serial.
    """
    name, kind = device["name"], device["transport"]
    if kind == "local":
        return LocalTransport(name, stage_root(results_dir, name))
    if kind == "adb":
        from phonetrain.devices.adb import AdbTransport  # adbutils only when needed
        if not device.get("serial"):
            raise TransportError(f"conf/device/{name}.yaml: key 'serial' is empty; set it to "
                                 "the phone's serial from 'adb devices'")
        return AdbTransport(name, device["serial"], adb_host=device.get("adb_host") or
                            "127.0.0.1", adb_port=device.get("adb_port"))
    raise TransportError(f"conf/device/{name}.yaml: key 'transport' is {kind!r}; use local "
                         "or adb")
