"""The ``local`` transport: the runner runs on this host from a staging folder.

The staging root is a folder on this host (the workflow's ``stage/<device>/``, see
:mod:`phonetrain.layout`). Pushes copy files whose SHA-256 differs from the staged copy (temp
file + rename, mode kept); runs are subprocesses with the staging root as working directory
and a wall-clock timeout; pulls copy a folder into a temp sibling of the destination and
rename it into place only when every expected file is present and non-empty.

:func:`locate_opencl` is the one place that decides which OpenCL library a runner on this host
loads (the system ICD loader, else a pyopencl wheel's loader with the environment it needs);
:func:`pocl_cache_env` gives PoCL a writable kernel cache (without one it hides its device).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from phonetrain.devices.base import (CommandResult, TransportError, TransportTimeout,
                                     check_outputs)
from phonetrain.io import make_temp_dir, sha256_file


@dataclass(frozen=True)
class OpenCLLocation:
    """Where a runner on this host finds OpenCL: ``cl_lib`` (None = the runner's own search
    list, which starts with the system ICD loader ``libOpenCL.so.1``), extra environment
    variables, and ``source`` (``system`` | ``pyopencl-wheel`` | ``none``)."""

    cl_lib: str | None
    env: dict[str, str] = field(default_factory=dict)
    source: str = "none"


def locate_opencl() -> OpenCLLocation:
    """Find an OpenCL library on this host: the system ICD loader first (Debian/Ubuntu:
    ``ocl-icd-libopencl1`` + ``pocl-opencl-icd``); else, as a fallback, the loader bundled in
    a pyopencl wheel, which needs ``PYOPENCL_HOME`` and its ``.libs`` folder on the library
    path (its PoCL 3.0/LLVM 14 cannot compile kernels on AMD Zen 5, so prefer the system one)."""
    import ctypes.util   # here: finding the library is work, not every job's start

    if ctypes.util.find_library("OpenCL"):
        return OpenCLLocation(None, {}, "system")
    spec = importlib.util.find_spec("pyopencl")
    if spec and spec.submodule_search_locations:
        pkg = Path(list(spec.submodule_search_locations)[0])
        for libs in (pkg / ".libs", pkg.parent / "pyopencl.libs"):
            cands = sorted(libs.glob("libOpenCL*.so*")) if libs.is_dir() else []
            if cands:
                ld = os.pathsep.join(filter(None, [str(libs), os.environ.get("LD_LIBRARY_PATH")]))
                return OpenCLLocation(str(cands[0]), {"PYOPENCL_HOME": str(pkg),
                                                      "LD_LIBRARY_PATH": ld}, "pyopencl-wheel")
    return OpenCLLocation(None, {}, "none")


def writable_folder(path: Path) -> bool:
    """Whether ``path`` is (or can be created as) a folder this process can write into."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK | os.X_OK)


def pocl_default_cache() -> Path:
    """Where PoCL keeps its kernel cache when ``POCL_CACHE_DIR`` is unset:
    ``$XDG_CACHE_HOME/pocl/kcache``, else ``$HOME/.cache/pocl/kcache`` (PoCL's
    ``pocl_cache.c``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path(os.environ.get("HOME") or
                                                        Path.home()) / ".cache")
    return Path(base) / "pocl" / "kcache"


def pocl_cache_env() -> dict[str, str]:
    """The environment that gives PoCL a writable kernel cache: PoCL that cannot create its
    cache folder lists its platform with no device. Empty when ``POCL_CACHE_DIR`` (the
    user's) or PoCL's default (:func:`pocl_default_cache`) is writable; else
    ``POCL_CACHE_DIR`` set to a folder phonetrain owns in the system temp folder
    (``phonetrain-pocl-kcache-<uid>``, mode 0700).

    Raises :class:`TransportError` naming the folder when the user's ``POCL_CACHE_DIR`` is not
    writable."""
    mine = os.environ.get("POCL_CACHE_DIR")
    if mine:
        if not writable_folder(Path(mine)):
            raise TransportError(f"POCL_CACHE_DIR={mine} is not a folder you can write to: "
                                 "PoCL would list no OpenCL device",
                                 "unset POCL_CACHE_DIR or point it at a writable folder")
        return {}
    if writable_folder(pocl_default_cache()):
        return {}
    own = Path(tempfile.gettempdir()) / f"phonetrain-pocl-kcache-{os.getuid()}"
    own.mkdir(mode=0o700, exist_ok=True)
    return {"POCL_CACHE_DIR": str(own)}


def pocl_cache_in_use(env: dict[str, str] | None = None) -> tuple[Path, bool]:
    """The PoCL kernel cache folder a local run with ``env`` added uses (its
    ``POCL_CACHE_DIR``, the user's, phonetrain's own from :func:`pocl_cache_env`, else
    PoCL's default), and whether phonetrain owns it (its own folder in the temp folder)."""
    named = (env or {}).get("POCL_CACHE_DIR") or os.environ.get("POCL_CACHE_DIR")
    if named:
        return Path(named), False
    own = pocl_cache_env().get("POCL_CACHE_DIR")
    return (Path(own), True) if own else (pocl_default_cache(), False)


def _tee(stream, sink: list[str], echo: bool) -> None:
    """Keep a text stream's lines in ``sink``, copying them to our stderr as they arrive."""
    for line in stream:
        sink.append(line)
        if echo:
            sys.stderr.write(line)
            sys.stderr.flush()


class LocalTransport:
    """A device that is this host; implements :class:`phonetrain.devices.base.Transport`.

    name: device config name; root: staging folder (created on first use); ``opencl``: the
    OpenCL library its runs load (:func:`locate_opencl` when not given); ``echo_stderr``:
    copy the command's stderr to ours as it arrives (progress lines).
    """

    def __init__(self, name: str, root: Path, opencl: OpenCLLocation | None = None,
                 echo_stderr: bool = True):
        self.name = name
        self.root = Path(root).resolve()
        self.opencl = opencl if opencl is not None else locate_opencl()
        self.streams_stderr = echo_stderr

    @classmethod
    def from_config(cls, device: Mapping[str, Any], stage_root: Path, *,
                    echo_stderr: bool = True) -> "LocalTransport":
        """(:class:`~phonetrain.devices.base.Transport`) stages in ``stage_root``."""
        return cls(device["name"], Path(stage_root), echo_stderr=echo_stderr)

    @staticmethod
    def is_this_host(device: Mapping[str, Any]) -> bool:
        """Trait (:class:`~phonetrain.devices.base.Transport`): the device is this host."""
        return True

    @staticmethod
    def shares_host_cpu(device: Mapping[str, Any]) -> bool:
        """Trait (:class:`~phonetrain.devices.base.Transport`): the runner runs on this host."""
        return True

    def lock(self) -> Any:
        """Host-wide lock serializing measurements on this device, one at a time
        (:class:`phonetrain.devices.locks.HostLock`; a waiter says whom it waits for)."""
        from phonetrain.devices.locks import DeviceLock, HostLock  # bare benchmark hosts: none
        return DeviceLock(self.name, HostLock(self.name, f"local-{self.name}"))

    def push(self, local: Path, remote_rel: str) -> int:
        """Copy a file or folder to ``root/remote_rel``; unchanged files (same SHA-256 and
        execute bit) are skipped. Returns the number of files copied. Raises TransportError if
        ``local`` is missing."""
        local = Path(local)
        if not local.exists():
            raise TransportError(f"device '{self.name}': nothing to push: {local} does not exist")
        dest = self.root / remote_rel
        pairs = [(local, dest)] if local.is_file() else [
            (p, dest / p.relative_to(local)) for p in sorted(local.rglob("*")) if p.is_file()]
        sent = 0
        for src, dst in pairs:
            if dst.is_file() and sha256_file(dst) == sha256_file(src) and \
                    os.access(dst, os.X_OK) == os.access(src, os.X_OK):
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            shutil.copy2(src, tmp)
            os.replace(tmp, dst)
            sent += 1
        return sent

    def run(self, argv: list[str], *, timeout_s: float,
            env: dict[str, str] | None = None) -> CommandResult:
        """Run ``argv`` in the staging root (``./runner`` resolves there) with ``env`` added to
        the environment; a non-zero exit is returned (a program that cannot be executed or is
        absent gives a shell's 126 or 127); a timeout raises TransportError (the process is
        killed). stderr is echoed line by line as it arrives (the runner's
        ``--progress``) and also captured."""
        self.root.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(argv, cwd=self.root, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, **pocl_cache_env(), **self.opencl.env,
                                      **(env or {})})
        except (PermissionError, FileNotFoundError) as e:  # what a shell reports as 126/127
            code = 126 if isinstance(e, PermissionError) else 127
            return CommandResult(code, "", f"{argv[0]}: {e.strerror}\n",
                                 time.monotonic() - t0)
        except OSError as e:
            raise TransportError(f"device '{self.name}': cannot start {argv[0]}: {e}") from e
        err: list[str] = []
        out: list[str] = []
        # Both pipes are drained by threads so that the wait below, not a blocking read,
        # enforces the time limit (a hung runner never closes its stdout).
        readers = [threading.Thread(target=_tee, args=(p.stderr, err, self.streams_stderr),
                                    daemon=True),
                   threading.Thread(target=lambda: out.append(p.stdout.read()), daemon=True)]
        for r in readers:
            r.start()
        # A timer kills the process at the limit and a blocking wait returns the moment it
        # exits: Popen.wait(timeout) polls, sleeping up to 50 ms between looks, which added
        # ~17 ms to every runner process (a default study starts about 200).
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            p.kill()
        timer = threading.Timer(max(0.0, timeout_s - (time.monotonic() - t0)), expire)
        timer.daemon = True
        timer.start()
        try:
            p.wait()
        except BaseException:   # interrupted (SIGINT to this process alone): no orphan runner
            p.kill()
            p.wait()
            raise
        finally:
            timer.cancel()
            for r in readers:
                r.join(timeout=5)
        if expired.is_set() and p.returncode == -signal.SIGKILL:
            raise TransportTimeout(f"device '{self.name}': {' '.join(argv[:2])} timed out after "
                                   f"{timeout_s:g} s and was killed",
                                   "raise measure.timeout_s or shrink the run")
        return CommandResult(p.returncode, "".join(out), "".join(err), time.monotonic() - t0)

    def pull(self, remote_rel: str, local: Path, expect: list[str]) -> None:
        """Copy ``root/remote_rel`` into ``local`` atomically once every name in ``expect`` is
        present and non-empty there; otherwise raise TransportError naming the file."""
        src = self.root / remote_rel
        check_outputs(src, expect, self.name)
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = make_temp_dir(local.parent, f".{local.name}.pull-")
        try:
            shutil.copytree(src, tmp, dirs_exist_ok=True)
            if local.exists():
                shutil.rmtree(local)
            os.replace(tmp, local)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def facts(self) -> dict[str, str]:
        """This host: OS, machine, CPU model name (from /proc/cpuinfo where readable)."""
        facts = {"model": "host", "os": platform.platform(),
                 "abi": platform.machine()}
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    facts["cpu"] = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        return facts
