"""A stand-in transport registered by tests: a development board that stages its files from
this host's folder (so it needs no hardware) but declares the traits of a board on the
network -- not this host, computing on its own CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from phonetrain.devices.local import LocalTransport, OpenCLLocation


class BoardTransport(LocalTransport):
    """``transport: board``: :class:`LocalTransport`'s staging with a board's traits."""

    @classmethod
    def from_config(cls, device: Mapping[str, Any], stage_root: Path, *,
                    echo_stderr: bool = True) -> "BoardTransport":
        # a board finds its OpenCL on the board: nothing of this host's is searched
        return cls(device["name"], Path(stage_root), opencl=OpenCLLocation(None),
                   echo_stderr=echo_stderr)

    @staticmethod
    def is_this_host(device: Mapping[str, Any]) -> bool:
        return False

    @staticmethod
    def shares_host_cpu(device: Mapping[str, Any]) -> bool:
        return False
