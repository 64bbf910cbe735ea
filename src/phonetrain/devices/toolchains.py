"""Toolchains: which C compiler and flags build the runner for a device.

- ``host``: the device config's ``cc`` (default ``cc``) for this machine (the local device,
  and the virtual device, which runs this host's binaries).
- ``android``: the Android NDK's ``aarch64-linux-android<api>-clang`` with ``-fopenmp
  -static-openmp`` (OpenMP linked in: phones have no libomp.so), from ``device.ndk`` or
  ``$ANDROID_NDK_HOME`` (``$ANDROID_NDK_ROOT`` also accepted). Android 9 (API 28) is the
  default minimum API: older phones need ``android_api`` lowered.
- ``linux-aarch64``: Debian's GNU cross compiler ``aarch64-linux-gnu-gcc`` (package
  ``gcc-aarch64-linux-gnu``), ``-static`` so the binary runs on any aarch64 Linux board (and
  under ``qemu-aarch64`` from Debian's ``qemu-user`` on this host).

:func:`build_runner` compiles ``src/runner`` with a toolchain's compiler into a cache folder
keyed by the sources, the compiler and the flags (so devices sharing a toolchain share one
compile); :func:`host_runner` is the runner of this host in the user cache (``phonetrain
info``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from phonetrain.errors import PhonetrainError

DEFAULT_ANDROID_API = 28
NDK_HOST_TAG = {"Linux": "linux-x86_64", "Darwin": "darwin-x86_64"}.get(platform.system(),
                                                                        "linux-x86_64")


RUNNER_SRC = Path(__file__).resolve().parents[2] / "runner"
BASE_FLAGS = ("-O3", "-fopenmp", "-std=c11", "-Wall", "-Wextra")
LIBS = ("-ldl", "-lm")


class ToolchainError(PhonetrainError):
    """A toolchain that cannot be used on this host; the message says what to install or set."""


class RunnerCompileError(PhonetrainError):
    """The C compiler failed to build the runner; ``stderr`` holds its output."""

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


@dataclass(frozen=True)
class Toolchain:
    """A compiler and flags for one device ABI.

    cc: compiler path or name; extra_flags: appended to the runner's own flags;
    emulator: argv prefix that runs the result on this host (``[]`` = runs natively,
    ``None`` = cannot run here)."""

    name: str
    cc: str
    extra_flags: tuple[str, ...] = ()
    emulator: list[str] | None = field(default_factory=list)


def android_ndk_clang(ndk: str | os.PathLike | None, api: int, device: str = "?") -> Path:
    """Path of ``aarch64-linux-android<api>-clang`` in the NDK; raises ToolchainError."""
    root = ndk or os.environ.get("ANDROID_NDK_HOME") or os.environ.get("ANDROID_NDK_ROOT")
    if not root:
        raise ToolchainError(
            f"device '{device}': toolchain 'android' needs the Android NDK (r23 or newer); "
            "install it (e.g. 'sdkmanager \"ndk;26.3.11579264\"') and set ANDROID_NDK_HOME "
            f"or device.ndk=/path/to/ndk in conf/device/{device}.yaml")
    clang = (Path(root) / "toolchains/llvm/prebuilt" / NDK_HOST_TAG / "bin" /
             f"aarch64-linux-android{api}-clang")
    if not clang.exists():
        raise ToolchainError(
            f"device '{device}': no {clang.name} in the NDK at {root} (expected {clang}); "
            "check ANDROID_NDK_HOME / device.ndk points at an NDK root, and that "
            f"android_api={api} is supported by that NDK")
    return clang


def resolve(name: str, *, cc: str = "cc", ndk: str | None = None,
            android_api: int = DEFAULT_ANDROID_API, device: str = "?") -> Toolchain:
    """The toolchain called ``name`` for device ``device``; raises ToolchainError naming what
    to install or set when its compiler is missing."""
    if name == "host":
        if shutil.which(cc) is None:
            raise ToolchainError(f"device '{device}': C compiler '{cc}' not found; install "
                                 "gcc (Debian: apt-get install gcc) or set device.cc")
        return Toolchain("host", cc)
    if name == "android":
        clang = android_ndk_clang(ndk, android_api, device)
        return Toolchain("android", str(clang), ("-fopenmp", "-static-openmp"), None)
    if name == "linux-aarch64":
        gcc = "aarch64-linux-gnu-gcc"
        if shutil.which(gcc) is None:
            raise ToolchainError(f"device '{device}': toolchain 'linux-aarch64' needs {gcc}; "
                                 "install it with 'apt-get install gcc-aarch64-linux-gnu'")
        native = platform.machine() in ("aarch64", "arm64")
        qemu = shutil.which("qemu-aarch64")
        emulator = [] if native else ([qemu, "-L", "/usr/aarch64-linux-gnu"] if qemu else None)
        return Toolchain("linux-aarch64", gcc, ("-static",), emulator)
    raise ToolchainError(f"device '{device}': unknown toolchain '{name}'; use host, android "
                         "or linux-aarch64")


def for_device(device_cfg) -> Toolchain:
    """The toolchain of a device config (``conf/device/*.yaml``: toolchain, cc, ndk,
    android_api; missing keys take their defaults)."""
    get = (lambda k, d=None: device_cfg.get(k, d)) if hasattr(device_cfg, "get") else \
        (lambda k, d=None: getattr(device_cfg, k, d))
    return resolve(get("toolchain", "host"), cc=get("cc", "cc") or "cc", ndk=get("ndk"),
                   android_api=int(get("android_api", DEFAULT_ANDROID_API) or
                                   DEFAULT_ANDROID_API),
                   device=get("name", "?"))


def runner_sources(src_dir: Path = RUNNER_SRC) -> list[Path]:
    """The runner's C sources and headers (``src/runner/*.c``, ``*.h``), sorted."""
    return sorted(list(src_dir.glob("*.c")) + list(src_dir.glob("*.h")))


def cpu_backend_sources(src_dir: Path = RUNNER_SRC) -> list[Path]:
    """The C files of the runner's CPU backend (``src/runner/cpu_*.c``: the kernel dispatch
    and one file per kernel file of ``src/kernels``), sorted: with ``cpu_kernels.h`` they
    build alone, as a library (``cpu_kernel_run``)."""
    return sorted(src_dir.glob("cpu_*.c"))


def runner_source_hash(src_dir: Path = RUNNER_SRC) -> str:
    """SHA-256 (hex) over the names and contents of the runner's sources."""
    h = hashlib.sha256()
    for p in runner_sources(src_dir):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def build_runner(build_dir: Path, cc: str = "cc", extra_flags: Sequence[str] = (),
                 announce: Callable[[str], None] | None = None,
                 src_dir: Path = RUNNER_SRC) -> Path:
    """Compile the runner into ``build_dir/runner-<key>/runner`` and return it.

    The key hashes the sources, the compiler and the flags, so an unchanged runner is reused;
    ``-DRUNNER_SOURCE_HASH`` bakes :func:`runner_source_hash` into the binary (``run.json``
    reports it). Concurrent builds are serialized by a file lock (where ``filelock`` is
    installed: bare benchmark hosts build without it). ``announce`` is called with one line
    before a compile (never when the binary is reused), for commands a user waits on.
    ``src_dir``: the folder of the sources (a copy of ``src/runner``, for tests). Raises
    :class:`RunnerCompileError` with the compiler's output on failure.
    """
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    src_hash = runner_source_hash(src_dir)
    flags = [*BASE_FLAGS, *extra_flags, f'-DRUNNER_SOURCE_HASH="{src_hash[:16]}"']
    key = hashlib.sha256(json.dumps([src_hash, cc, flags]).encode()).hexdigest()[:16]
    out = build_dir / f"runner-{key}" / "runner"
    try:
        from filelock import FileLock
        lock = FileLock(str(build_dir / ".runner.lock"))
    except ImportError:
        lock = contextlib.nullcontext()
    with lock:
        if out.exists():
            return out
        if announce:
            announce(f"compiling the runner with {cc} into {out.parent} (once per runner "
                     "version; some seconds)")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"runner.tmp.{os.getpid()}")
        cmd = [cc, *flags, "-o", str(tmp), *[str(p) for p in sorted(src_dir.glob("*.c"))], *LIBS]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise RunnerCompileError(f"compiling the runner with {cc} failed:\n{proc.stderr}",
                                     proc.stderr)
        tmp.replace(out)
    return out


def which_cc(cc: str = "cc") -> str | None:
    """Path of the C compiler, or None when it is not installed."""
    return shutil.which(cc)


def cache_dir() -> Path:
    """phonetrain's per-user cache folder: ``$PHONETRAIN_CACHE``, else
    ``$XDG_CACHE_HOME/phonetrain``, else ``~/.cache/phonetrain`` (not created here)."""
    return Path(os.environ.get("PHONETRAIN_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "phonetrain")


def host_runner(cc: str = "cc", announce: Callable[[str], None] | None = None) -> Path:
    """The runner built for this host in the user cache (``$PHONETRAIN_CACHE`` or
    ``$XDG_CACHE_HOME/phonetrain``, default ``~/.cache/phonetrain``), for commands run outside
    the workflow (``phonetrain info``). Raises :class:`ToolchainError` naming that folder
    when it cannot be created or written."""
    base = cache_dir()
    try:
        (base / "runner").mkdir(parents=True, exist_ok=True)
        writable = os.access(base / "runner", os.W_OK | os.X_OK)
        why = "not writable"
    except OSError as e:
        writable, why = False, e.strerror or str(e)
    if not writable:
        raise ToolchainError(f"phonetrain's cache folder {base / 'runner'} cannot be used "
                             f"({why}): the runner for this host is built there",
                             "set PHONETRAIN_CACHE (or XDG_CACHE_HOME, or HOME) to a folder "
                             "you can write to")
    return build_runner(base / "runner", cc=cc, announce=announce)


def build_runner_for(device_cfg, build_dir: Path) -> Path:
    """Build the runner for a device into ``build_dir``; returns the binary's path.
    Raises ToolchainError before compiling when the toolchain is unusable."""
    tc = for_device(device_cfg)
    return build_runner(Path(build_dir), cc=tc.cc, extra_flags=tc.extra_flags)
