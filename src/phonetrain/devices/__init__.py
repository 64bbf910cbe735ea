"""Transports to devices: :func:`get_transport` picks one from a device config.

``local`` (:mod:`.local`) runs on this host from a staging folder; ``adb`` (:mod:`.adb`)
reaches a phone through an adb server. Each transport class carries its traits (e.g.
``shares_host_cpu``: :func:`shares_host_cpu`). Both implement
:class:`phonetrain.devices.base.Transport` plus ``lock()`` (a host-wide ``filelock.FileLock``
keyed by device: one measurement at a time per device).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from phonetrain.devices.base import CommandResult, Transport, TransportError
from phonetrain.devices.local import LocalTransport

__all__ = ["get_transport", "shares_host_cpu", "transport_class", "CommandResult", "Transport",
           "TransportError", "LocalTransport"]


def transport_class(kind: str) -> type:
    """The transport class of a device config's ``transport`` (``local`` | ``adb``); raises
    TransportError for another."""
    if kind == "local":
        return LocalTransport
    if kind == "adb":
        from phonetrain.devices.adb import AdbTransport  # adbutils only when needed
        return AdbTransport
    raise TransportError(f"transport {kind!r} is not known", "use local or adb")


def shares_host_cpu(device: dict[str, Any]) -> bool:
    """Whether the configured ``device`` runs its commands on this host's CPU (its
    transport's trait, :meth:`phonetrain.devices.base.Transport.shares_host_cpu`)."""
    return transport_class(device["transport"]).shares_host_cpu(device)


def get_transport(device: dict[str, Any], stage_root: str | Path, *,
                  echo_stderr: bool = True) -> Any:
    """The transport for a device config (``conf/device/<name>.yaml`` as a dict);
    ``stage_root`` is the staging folder of a ``local`` device (unused for ``adb``, whose root
    is on the phone). ``echo_stderr``: a local run copies the runner's stderr to ours live.

    Raises TransportError for an unknown transport or an adb device without a serial.
    """
    name, kind = device["name"], device["transport"]
    if kind == "local":
        return LocalTransport(name, Path(stage_root), echo_stderr=echo_stderr)
    if kind == "adb":
        from phonetrain.devices.adb import AdbTransport  # adbutils only when needed
        if not device.get("serial"):
            raise TransportError(f"conf/device/{name}.yaml: key 'serial' is empty",
                                 "set it to the phone's serial from 'phonetrain devices'")
        return AdbTransport(name, device["serial"], adb_host=device.get("adb_host") or
                            "127.0.0.1", adb_port=device.get("adb_port"))
    raise TransportError(f"conf/device/{name}.yaml: key 'transport' is {kind!r}",
                         "use local or adb")
