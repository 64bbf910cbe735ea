"""Transports to devices: one registry, :data:`TRANSPORTS`, from a device config's
``transport`` to the class that reaches it.

``local`` (:mod:`.local`) runs on this host from a staging folder; ``adb`` (:mod:`.adb`)
reaches a phone through an adb server. A transport is one module holding one class that
implements :class:`phonetrain.devices.base.Transport`: ``from_config`` builds it from a device
config, ``lock()`` serializes measurements per device, and its traits (``shares_host_cpu``,
``is_this_host``) tell the stages what they need to know about it, so no stage reads a
transport's name. Adding a transport is that module and one line of :data:`TRANSPORTS`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from phonetrain.devices.base import CommandResult, Transport, TransportError
from phonetrain.devices.local import LocalTransport

__all__ = ["TRANSPORTS", "get_transport", "is_this_host", "shares_host_cpu", "transport_class",
           "CommandResult", "Transport", "TransportError", "LocalTransport"]

# A device config's ``transport`` -> "module:class", imported on first use (adbutils is
# loaded only by a study with a phone). The config's allowed values are these keys.
TRANSPORTS: dict[str, str] = {
    "local": "phonetrain.devices.local:LocalTransport",
    "adb": "phonetrain.devices.adb:AdbTransport",
}


def transport_class(kind: str) -> type:
    """The transport class registered in :data:`TRANSPORTS` as ``kind`` (a device config's
    ``transport``); raises TransportError naming the known ones for another."""
    if kind not in TRANSPORTS:
        raise TransportError(f"transport {kind!r} is not known",
                             f"use one of {', '.join(TRANSPORTS)}")
    module, _, cls = TRANSPORTS[kind].partition(":")
    return getattr(importlib.import_module(module), cls)


def shares_host_cpu(device: dict[str, Any]) -> bool:
    """Whether the configured ``device`` runs its commands on this host's CPU (its
    transport's trait, :meth:`phonetrain.devices.base.Transport.shares_host_cpu`)."""
    return transport_class(device["transport"]).shares_host_cpu(device)


def is_this_host(device: dict[str, Any]) -> bool:
    """Whether the configured ``device`` is this host itself, so that records kept per
    machine (calibration, tuning records) describe it (its transport's trait,
    :meth:`phonetrain.devices.base.Transport.is_this_host`)."""
    return transport_class(device["transport"]).is_this_host(device)


def get_transport(device: dict[str, Any], stage_root: str | Path, *,
                  echo_stderr: bool = True) -> Any:
    """The transport for a device config (``conf/device/<name>.yaml`` as a dict);
    ``stage_root`` is the staging folder of a ``local`` device (unused for ``adb``, whose root
    is on the phone). ``echo_stderr``: a local run copies the runner's stderr to ours live.

    Raises TransportError for an unknown transport or an adb device without a serial.
    """
    return transport_class(device["transport"]).from_config(device, Path(stage_root),
                                                           echo_stderr=echo_stderr)
