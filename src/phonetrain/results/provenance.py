"""Provenance columns of every summary row: which config, kernel sources, runner, device and
project revision a measurement came from (:data:`phonetrain.results.schema.PROVENANCE`)."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

from phonetrain.io import short_hash

KEYS = ("config_hash", "kernel_hash", "runner_hash", "device_fingerprint", "git_rev")
IDENTITY = ("model", "device", "backend", "placement", "transfer", "kernel")


def device_fingerprint(device: Any) -> str | None:
    """16 hex digits identifying an OpenCL device and its driver (platform, name, vendor,
    versions) from the runner's ``device`` object, or a CPU from its ``host`` object
    (``cpu_model``, ``logical_cores``); None when there is none."""
    if not isinstance(device, dict) or not device:
        return None
    keys = ("platform", "platform_version", "name", "vendor", "version", "driver_version",
            "cpu_model", "logical_cores")
    return short_hash({k: device.get(k) for k in keys})


@functools.lru_cache(maxsize=4)
def git_rev(repo: Path | None = None) -> str:
    """``git rev-parse --short HEAD`` plus ``-dirty`` when tracked files differ; ``unknown``
    outside a git checkout."""
    cwd = repo or Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd, check=True,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def runner_hash(run: dict[str, Any]) -> str | None:
    """The runner's source hash as a ``run.json`` (or ``bench.json``) reports it."""
    r = run.get("runner") or {}
    return run.get("runner_hash") or r.get("source_hash") or r.get("hash")


def columns(params: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The provenance columns of a row: from its params document (``config_hash``,
    ``kernel_hash``, optional ``device_fingerprint``/``git_rev``/``runner_hash``) and the
    runner's output document ``run`` (its ``runner``, ``device`` or ``host`` objects)."""
    ident = {k: params.get(k) for k in IDENTITY}
    fp = (params.get("device_fingerprint") or device_fingerprint(run.get("device"))
          or device_fingerprint(run.get("host")))
    return {"config_hash": params.get("config_hash") or short_hash(ident),
            "kernel_hash": params.get("kernel_hash"),
            "runner_hash": runner_hash(run) or params.get("runner_hash"),
            "device_fingerprint": fp, "git_rev": params.get("git_rev") or git_rev()}
