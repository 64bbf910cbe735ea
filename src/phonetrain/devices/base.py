"""The transport interface: how the pipeline reaches a device's staging root.

A device has one staging root (a local folder for ``local``; ``/data/local/tmp/phonetrain``
for ``adb``) laid out the same everywhere (:mod:`phonetrain.layout`: the runner binary,
``kernels/<version>/``, ``data/...``, ``plans/<plan id>/``, ``out/<name>/``). Paths given to a
transport are relative to that root (``remote_rel``).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Protocol

from phonetrain.errors import PhonetrainError


class TransportError(PhonetrainError):
    """A device could not be reached or did not do what was asked; the message names the
    device and what to try."""


class TransportTimeout(TransportError):
    """A command ran past its time limit and was stopped."""


@dataclass
class CommandResult:
    """Exit status and output of one command run on the device."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float


class Transport(Protocol):
    """What the stages need from a device: push, run, pull, facts."""

    name: str
    streams_stderr: bool  # run() copies the command's stderr to ours as it arrives

    @classmethod
    def from_config(cls, device: Mapping[str, Any], stage_root: Path, *,
                    echo_stderr: bool = True) -> "Transport":
        """The transport for ``device`` (``conf/device/<name>.yaml`` as a dict); ``stage_root``
        is where a device on this host stages its files. Raises :class:`TransportError`
        naming the file and key when the config lacks what this transport needs."""

    @staticmethod
    def is_this_host(device: Mapping[str, Any]) -> bool:
        """Trait: whether a device of this transport is this host itself, so records kept per
        machine (the calibration probe, tuning records) describe it."""

    @staticmethod
    def shares_host_cpu(device: Mapping[str, Any]) -> bool:
        """Trait: whether a device of this transport configured as ``device`` (its config as
        a dict) runs its commands on this host's CPU, so its measurements and this host's
        other jobs load each other (:mod:`phonetrain.stages.schedule`)."""

    def push(self, local: Path, remote_rel: str) -> int:
        """Copy a file or folder to ``root/remote_rel``, skipping files whose content hash
        already matches; return the number of files actually sent."""

    def run(self, argv: list[str], *, timeout_s: float,
            env: dict[str, str] | None = None) -> CommandResult:
        """Run ``argv`` on the device with the staging root as working directory, with the
        environment variables ``env`` added. ``argv[0]`` may be ``./runner``. Raises
        :class:`TransportError` on a timeout or a lost connection; a non-zero exit status is
        returned, not raised."""

    def pull(self, remote_rel: str, local: Path, expect: list[str]) -> None:
        """Copy the folder ``root/remote_rel`` into ``local``; raise :class:`TransportError`
        naming the file if any name in ``expect`` is missing or empty there. Nothing is
        written to ``local`` unless every expected file arrived."""

    def facts(self) -> dict[str, str]:
        """Device facts for provenance (model, SoC, OS version, ABI, ...); missing ones omitted."""


def on_this_host(host: str | None) -> bool:
    """Whether ``host`` (a name or an address, e.g. an adb serial's host part) names this
    host: a loopback name or address, this host's name, or one of the addresses it resolves
    to. Other names are not looked up (a DNS query could hang): they count as elsewhere."""
    h = (host or "").strip().strip("[]").lower()
    if h in ("", "localhost", "::1", "0.0.0.0") or h.startswith("127."):
        return True
    name = socket.gethostname().lower()
    if h in (name, name.split(".")[0]):
        return True
    try:
        ipaddress.ip_address(h)
        own = socket.gethostbyname_ex(socket.gethostname())[2]
    except (ValueError, OSError):
        return False
    return h in own


def check_outputs(folder: Path, expect: list[str], device: str) -> None:
    """Raise :class:`TransportError` naming the first file of ``expect`` that is missing or
    empty in ``folder`` (a runner that stopped early leaves such a folder)."""
    for name in expect:
        f = Path(folder) / name
        if not f.is_file() or f.stat().st_size == 0:
            raise TransportError(f"device '{device}': expected output {f} is missing or empty",
                                 "the runner stopped early (see its stderr)")
