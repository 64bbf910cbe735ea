"""Python driver of the on-device runner (``src/runner``): build it for this host, locate
OpenCL, invoke its modes with a timeout, and parse its outputs into pandas.

Exit codes of the runner map to :class:`ExitCode` and to one :class:`RunnerError` subclass
each (``src/runner/README.md`` documents them). Outputs of ``run`` (``run.json``,
``trace.csv``, ``dumps/<tensor>.f32``) are read by :func:`read_run`, :func:`read_trace` and
:func:`read_dump`; a run is complete only when ``run.json`` says ``"status": "ok"``.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import enum
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

try:
    from filelock import FileLock
except ImportError:  # bare device hosts (numpy + pandas only) drive the runner without it
    FileLock = None

RUNNER_SRC = Path(__file__).resolve().parents[1] / "runner"
BASE_FLAGS = ("-O3", "-fopenmp", "-std=c11", "-Wall", "-Wextra")
LIBS = ("-ldl", "-lm")
DEFAULT_TIMEOUT_S = 600.0


class ExitCode(enum.IntEnum):
    """The runner's exit codes (``src/runner/util.h``)."""

    OK = 0
    INTERNAL = 1       # out of memory, cannot write outputs
    BAD_INPUT = 2      # bad arguments or plan (unknown kernel, wrong version, bad local size)
    BUNDLE = 3         # bundle file missing, unreadable or of the wrong size
    NO_DEVICE = 4      # no OpenCL library, or nothing matches the platform/device selector
    BUILD = 5          # OpenCL program build failed; the compiler log is on stderr
    CL_RUNTIME = 6     # an OpenCL call failed at run time (call and error name)
    NONFINITE = 7      # the loss became NaN or infinite
    NO_LIBRARY = 8     # an external library the plan needs (CLBlast) cannot be loaded, or the
                       # device lacks image support that a plan's image argument needs


class RunnerError(RuntimeError):
    """The runner failed. ``exit_code``, ``stderr`` (all of it) and ``message`` (its last
    ``runner:`` line) say why."""

    def __init__(self, message: str, exit_code: int | None = None, stderr: str = "",
                 command: Sequence[str] = ()):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.stderr = stderr
        self.command = list(command)


class RunnerInternalError(RunnerError):
    """Exit code 1: internal error (memory, output files)."""


class BadInputError(RunnerError):
    """Exit code 2: bad command-line arguments or plan."""


class BundleFileError(RunnerError):
    """Exit code 3: a bundle file (tensor init, batch, kernel source) is missing or wrong."""


class NoDeviceError(RunnerError):
    """Exit code 4: no OpenCL library or no device matching the selector."""


class KernelBuildError(RunnerError):
    """Exit code 5: an OpenCL program failed to build; ``stderr`` holds the compiler log."""


class OpenCLRuntimeError(RunnerError):
    """Exit code 6: an OpenCL call failed while running."""


class NonFiniteLossError(RunnerError):
    """Exit code 7: the loss became NaN or infinite."""


class MissingLibraryError(RunnerError):
    """Exit code 8: an external library the plan needs (CLBlast) cannot be loaded, or the
    device has no image support for the ``image`` kernel version; callers skip such runs
    with the reason rather than fail them."""


class RunnerTimeout(RunnerError):
    """The runner ran past its timeout and was killed."""


class RunnerCompileError(RunnerError):
    """The C compiler failed to build the runner itself."""


ERRORS: dict[int, type[RunnerError]] = {
    ExitCode.INTERNAL: RunnerInternalError, ExitCode.BAD_INPUT: BadInputError,
    ExitCode.BUNDLE: BundleFileError, ExitCode.NO_DEVICE: NoDeviceError,
    ExitCode.BUILD: KernelBuildError, ExitCode.CL_RUNTIME: OpenCLRuntimeError,
    ExitCode.NONFINITE: NonFiniteLossError, ExitCode.NO_LIBRARY: MissingLibraryError,
}


@dataclass(frozen=True)
class DeviceSelector:
    """Which OpenCL device the runner uses: case-insensitive substrings of the platform and
    device names, a device type (``gpu|cpu|accelerator|all``; None prefers a GPU, else the
    first device) and an explicit OpenCL library path."""

    platform: str | None = None
    device: str | None = None
    device_type: str | None = None
    cl_lib: str | None = None

    def to_args(self) -> list[str]:
        args: list[str] = []
        for flag, value in (("--platform", self.platform), ("--device", self.device),
                            ("--device-type", self.device_type), ("--cl-lib", self.cl_lib)):
            if value:
                args += [flag, str(value)]
        return args


def _selector(sel: DeviceSelector | Mapping[str, Any] | None) -> DeviceSelector:
    if sel is None:
        return DeviceSelector()
    if isinstance(sel, DeviceSelector):
        return sel
    return DeviceSelector(**{k: v for k, v in sel.items() if v is not None})


# ---------------------------------------------------------------- building

def _sources() -> list[Path]:
    return sorted(list(RUNNER_SRC.glob("*.c")) + list(RUNNER_SRC.glob("*.h")))


def runner_source_hash() -> str:
    """SHA-256 (hex) over the names and contents of ``src/runner/*.c`` and ``*.h``."""
    h = hashlib.sha256()
    for p in _sources():
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def build_runner(build_dir: Path, cc: str = "cc", extra_flags: Sequence[str] = ()) -> Path:
    """Compile the runner for this host into ``build_dir/runner-<key>/runner`` and return it.

    The key hashes the sources, the compiler and the flags, so an unchanged runner is reused;
    ``-DRUNNER_SOURCE_HASH`` bakes :func:`runner_source_hash` into the binary (``run.json``
    reports it). Concurrent builds are serialized by a file lock. Raises
    :class:`RunnerCompileError` with the compiler's output on failure.
    """
    build_dir = Path(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    src_hash = runner_source_hash()
    flags = [*BASE_FLAGS, *extra_flags, f'-DRUNNER_SOURCE_HASH="{src_hash[:16]}"']
    key = hashlib.sha256(json.dumps([src_hash, cc, flags]).encode()).hexdigest()[:16]
    out = build_dir / f"runner-{key}" / "runner"
    lock = FileLock(str(build_dir / ".runner.lock")) if FileLock else contextlib.nullcontext()
    with lock:
        if out.exists():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"runner.tmp.{os.getpid()}")
        cmd = [cc, *flags, "-o", str(tmp), *[str(p) for p in RUNNER_SRC.glob("*.c")], *LIBS]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise RunnerCompileError(f"compiling the runner with {cc} failed:\n{proc.stderr}",
                                     proc.returncode, proc.stderr, cmd)
        tmp.replace(out)
    return out


# ---------------------------------------------------------------- OpenCL location

@dataclass(frozen=True)
class OpenCLLocation:
    """Where the runner finds OpenCL: ``cl_lib`` (None = the runner's own search list, which
    starts with the system ICD loader ``libOpenCL.so.1``) and extra environment variables."""

    cl_lib: str | None
    env: dict[str, str]
    source: str  # "system" | "pyopencl-wheel" | "none"


def locate_opencl() -> OpenCLLocation:
    """Find an OpenCL library: the system ICD loader first (Debian/Ubuntu:
    ``ocl-icd-libopencl1`` + ``pocl-opencl-icd``); else, as a documented fallback only, the
    loader bundled in a pyopencl wheel, which needs ``PYOPENCL_HOME`` and its ``.libs`` folder on
    the library path (its PoCL 3.0/LLVM 14 cannot compile kernels on AMD Zen 5, so prefer
    the system one)."""
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


# ---------------------------------------------------------------- invoking

def _last_runner_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("runner: ")]
    return lines[-1][len("runner: "):] if lines else (stderr.strip().splitlines() or [""])[-1]


def run_mode(runner: Path, mode: str, args: list[str], timeout_s: float = DEFAULT_TIMEOUT_S,
             cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``runner <mode> <args>``; return the completed process (text stdout/stderr).

    Raises the :class:`RunnerError` subclass of the exit code (message = the runner's stderr
    line naming the cause), or :class:`RunnerTimeout` after ``timeout_s`` seconds.
    """
    loc = locate_opencl()
    env = {**os.environ, **loc.env}
    cmd = [str(runner), mode, *args]
    if loc.cl_lib and "--cl-lib" not in args:
        cmd += ["--cl-lib", loc.cl_lib]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd,
                              env=env)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise RunnerTimeout(f"runner {mode} ran past {timeout_s:g} s and was killed", None, err,
                            cmd) from None
    if proc.returncode != 0:
        cls = ERRORS.get(proc.returncode, RunnerError)
        raise cls(_last_runner_line(proc.stderr) or f"runner {mode} exited {proc.returncode}",
                  proc.returncode, proc.stderr, cmd)
    return proc


def info(runner: Path, cl_lib: str | None = None, timeout_s: float = 60.0) -> dict:
    """``runner info`` as a dict: ``runner``, ``host`` (cpu_model, logical_cores),
    ``opencl_error`` (None when a library loaded) and ``platforms`` (each with ``devices``)."""
    args = ["--cl-lib", cl_lib] if cl_lib else []
    return json.loads(run_mode(runner, "info", args, timeout_s).stdout)


def devices_table(info_doc: dict) -> pd.DataFrame:
    """One row per OpenCL device of an :func:`info` document."""
    rows = [{"platform": p["name"], **{k: v for k, v in d.items() if k != "extensions"}}
            for p in info_doc["platforms"] for d in p["devices"]]
    return pd.DataFrame(rows)


def run_plan(runner: Path, plan_path: Path, root: Path, out_dir: Path, threads: int | None = None,
             device_selector: DeviceSelector | Mapping[str, Any] | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S, progress: bool = False,
             clblast_lib: str | None = None) -> dict:
    """Execute a plan; return the parsed ``run.json`` (``status`` "ok").

    ``plan_path`` and ``root`` (the bundle: the plan's relative paths resolve under it) may be
    relative to the current directory. Outputs go to ``out_dir``. Raises a
    :class:`RunnerError` subclass on failure (then ``out_dir/run.json`` says "failed").
    """
    args = ["--plan", str(plan_path), "--root", str(root), "--out", str(out_dir)]
    if threads:
        args += ["--threads", str(int(threads))]
    if progress:
        args.append("--progress")
    if clblast_lib:
        args += ["--clblast-lib", str(clblast_lib)]
    args += _selector(device_selector).to_args()
    run_mode(runner, "run", args, timeout_s)
    return read_run(out_dir)


def build_kernels(runner: Path, sources: Sequence[Path], out_dir: Path, options: str = "",
                  device_selector: DeviceSelector | Mapping[str, Any] | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """``runner build``: compile ``sources`` on the selected device; return ``build.json``.
    Raises :class:`KernelBuildError` (compiler log in ``.stderr``) when a program fails."""
    args = [a for s in sources for a in ("--source", str(s))]
    args += ["--options", options, "--out", str(out_dir), *_selector(device_selector).to_args()]
    run_mode(runner, "build", args, timeout_s)
    return json.loads((Path(out_dir) / "build.json").read_text())


def bench_bandwidth(runner: Path, out_dir: Path, min_bytes: int = 4096,
                    max_bytes: int = 64 << 20, min_time_ms: float = 20, repeats: int = 3,
                    device_selector: DeviceSelector | Mapping[str, Any] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> pd.DataFrame:
    """``runner bench-bandwidth``: one row per (op, size_bytes) with ``device_gbps`` and
    ``host_gbps`` (GB/s = 1e9 bytes/s); ``df.attrs["bench"]`` holds ``bench.json`` (device,
    launch latency in us)."""
    args = ["--out", str(out_dir), "--min-bytes", str(min_bytes), "--max-bytes", str(max_bytes),
            "--min-time-ms", str(int(min_time_ms)), "--repeats", str(repeats),
            *_selector(device_selector).to_args()]
    run_mode(runner, "bench-bandwidth", args, timeout_s)
    df = pd.read_csv(Path(out_dir) / "bandwidth.csv")
    df.attrs["bench"] = json.loads((Path(out_dir) / "bench.json").read_text())
    return df


# ---------------------------------------------------------------- outputs

TRACE_NS = ("queued_ns", "submit_ns", "start_ns", "end_ns")


def read_run(out_dir: Path) -> dict:
    """``out_dir/run.json`` as a dict (check ``["status"] == "ok"`` before trusting it)."""
    return json.loads((Path(out_dir) / "run.json").read_text())


def read_trace(out_dir: Path) -> pd.DataFrame:
    """``out_dir/trace.csv``: one row per command execution. Device times (``*_ns`` of
    :data:`TRACE_NS`, device clock) are nullable Int64, empty for host rows and the CPU
    backend; ``host_begin_ns``/``host_end_ns`` are CLOCK_MONOTONIC ns."""
    df = pd.read_csv(Path(out_dir) / "trace.csv", keep_default_na=False,
                     na_values={c: [""] for c in TRACE_NS},
                     dtype={"name": str, "layer": str, "phase": str})
    for c in TRACE_NS:
        df[c] = df[c].astype("Int64")
    df["warmup"] = df["warmup"].astype(bool)
    return df


def read_dump(out_dir: Path, tensor_name: str, shape: Sequence[int] | None = None,
              dtype: str = "f32") -> np.ndarray:
    """``out_dir/dumps/<tensor_name>.f32`` (raw little-endian, float32 or int32)."""
    arr = np.fromfile(Path(out_dir) / "dumps" / f"{tensor_name}.f32",
                      dtype="<f4" if dtype == "f32" else "<i4")
    return arr.reshape(shape) if shape is not None else arr


def which_cc(cc: str = "cc") -> str | None:
    """Path of the C compiler, or None when it is not installed."""
    return shutil.which(cc)


def host_runner(cc: str = "cc") -> Path:
    """The runner built for this host in the user cache (``$PHONETRAIN_CACHE`` or
    ``$XDG_CACHE_HOME/phonetrain``, default ``~/.cache/phonetrain``), for commands run outside
    the workflow (``phonetrain info``)."""
    base = os.environ.get("PHONETRAIN_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "phonetrain"
    return build_runner(Path(base) / "runner", cc=cc)
