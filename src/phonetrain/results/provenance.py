"""Provenance columns of every summary row: which config, kernel sources, runner, device and
project revision a measurement came from (:data:`phonetrain.results.schema.PROVENANCE`)."""

from __future__ import annotations

import functools
import hashlib
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


PACKAGE = Path(__file__).resolve().parents[1]  # src/phonetrain (or an installed copy)
# The project's root when the package sits in a source tree (<root>/src/phonetrain), else None.
PROJECT_ROOT = PACKAGE.parents[1] if PACKAGE.parent.name == "src" else None
NOT_GIT = "not a git checkout"


def _git(root: Path, *args: str) -> str:
    """stdout of ``git -C root ARGS``; raises OSError / CalledProcessError."""
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _source_files(root: Path | None, package: Path) -> list[Path]:
    """What the project's measurements are made from: the package's Python and templates,
    and in a source tree the runner, kernels, workflow and config tree."""
    files = [p for p in package.rglob("*") if p.suffix in (".py", ".j2")]
    if root is not None:
        for pattern in ("src/runner/*.[ch]", "src/kernels/**/*", "rules/*.smk", "Snakefile",
                        "conf/**/*.yaml"):
            files += root.glob(pattern)
    return sorted({p for p in files if p.is_file() and "__pycache__" not in p.parts})


def sources_hash(root: Path | None = PROJECT_ROOT, package: Path = PACKAGE) -> str:
    """16 hex digits of SHA-256 over the relative path and bytes of each of
    :func:`_source_files`."""
    h = hashlib.sha256()
    base = root if root is not None else package
    for p in _source_files(root, package):
        h.update(str(p.relative_to(base) if p.is_relative_to(base) else p.name).encode())
        h.update(b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def git_rev(root: Path | None = PROJECT_ROOT, package: Path = PACKAGE) -> str:
    """The project's revision: ``git rev-parse --short=12 HEAD`` plus ``-dirty`` when tracked
    files of the project differ, when the project root ``root`` is the top of its git work
    tree or the package's files are tracked by the enclosing one (a project kept inside a
    larger repository); otherwise (no git, or a copy without its ``.git`` lying inside
    another repository, whose commit says nothing of it) ``not a git checkout, sources
    <hash>`` (:func:`sources_hash`)."""
    where = root if root is not None else package
    try:
        top = Path(_git(where, "rev-parse", "--show-toplevel")).resolve()
        own = root is not None and top == root.resolve()
        if not own:  # the enclosing repository must track the package itself
            _git(where, "ls-files", "--error-unmatch", "--", str(package / "__init__.py"))
        rev = _git(where, "rev-parse", "--short=12", "HEAD")
        dirty = _git(where, "status", "--porcelain", "--untracked-files=no", "--", str(where))
    except (OSError, subprocess.CalledProcessError):
        return f"{NOT_GIT}, sources {sources_hash(root, package)}"
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
