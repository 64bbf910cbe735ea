"""The one driver of the on-device runner (``src/runner``): every runner process starts here.

A :class:`Runner` is a device's transport (:mod:`phonetrain.devices`: a local staging folder
or a phone over adb) plus its OpenCL selector. Each mode method builds the argv, runs it
through the transport under a time limit, maps a non-zero exit status to one
:class:`RunnerError` subclass (message: the runner's own ``runner:`` line; hint: what to try),
and pulls the output folder back, checking that every expected file arrived whole. The
workflow's stages, ``phonetrain run``/``info``/``devices``, the tests and the benchmarks all
go through it; the module-level helpers (:func:`run_plan`, :func:`info`, ...) are a local
:class:`Runner` in one call, for a runner binary and a bundle folder on this host.

Exit codes (``src/runner/util.h``; ``src/runner/README.md``) are :class:`ExitCode`; a device
that lacks a library the plan needs (exit 8) raises :class:`MissingLibraryError`, which the
stages record as a *skipped* run, not a failure. A shell's 126/127 (the runner cannot be
executed or is absent) and death by a signal get their own errors and hints; a local runner
that a damaged PoCL kernel cache kills is run once more with an empty cache
(:meth:`Runner.invoke`), and the damaged folder is named.

Runner outputs: ``run.json`` (complete only when ``"status": "ok"``), ``trace.csv`` (one row
per command execution) and ``dumps/<tensor>.f32``; :func:`read_run`, :func:`read_trace` and
:func:`read_dump` parse them.
"""

from __future__ import annotations

import enum
import itertools
import json
import os
import shutil
import signal
import sys
import tempfile
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from phonetrain import layout, spans
from phonetrain.devices import LocalTransport, get_transport
from phonetrain.devices.local import pocl_cache_in_use
from phonetrain.devices.base import CommandResult, TransportTimeout, check_outputs
from phonetrain.errors import PhonetrainError

if TYPE_CHECKING:   # numpy and pandas where dumps and traces are read: not in the stage jobs
    import numpy as np
    import pandas as pd

DEFAULT_TIMEOUT_S = 600.0
OMP_WAIT_POLICY = "ACTIVE"
MEASURING_MODES = ("run", "bench-gemm", "bench-bandwidth", "bench-peak")
"""The modes whose processes measure: their wall time is the study's measuring time
(:data:`phonetrain.spans.MEASURE`; the tune jobs measure candidates with ``bench-gemm``)."""
"""The OpenMP wait policy of every runner process, workflow and benchmarks alike (set in its
environment by :meth:`Runner.invoke`; the runner records it in ``run.json``): idle OpenMP
threads spin, so a quiet device's CPU backend runs as fast as it can (on a 2-core host,
PASSIVE waiting made the paper MLP's iteration 2.1x and LeNet-5's 3.3x slower:
docs/notebook/2026-12-01.md). Spinning threads that lose their core to another process stall a run
badly; such a run is caught by its conditions (``other_cpu_share``) and recorded unstable,
not tuned away by a slower policy. An OpenCL run has no OpenMP work of its own: it ends the
calibration probe's threads before measuring (``src/runner/probe.h``)."""


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
    OUT_OF_MEMORY = 9  # the plan's tensors do not fit: a device buffer or host tensor array
    NOT_EXECUTABLE = 126  # POSIX shell: the file exists but cannot be executed
    NOT_FOUND = 127       # POSIX shell: no such command


class RunnerError(PhonetrainError):
    """The runner failed. ``exit_code`` (None for a timeout), ``stderr`` (all of it),
    ``argv`` and ``message`` (its last ``runner:`` line, or what the driver saw) say why."""

    hint_text = ""

    def __init__(self, message: str, exit_code: int | None = None, stderr: str = "",
                 argv: Sequence[str] = (), hint: str | None = None):
        super().__init__(message, self.hint_text if hint is None else hint)
        self.exit_code = exit_code
        self.stderr = stderr
        self.argv = list(argv)


class RunnerInternalError(RunnerError):
    """Exit code 1: internal error (memory, output files)."""

    hint_text = "check free memory and free space on the device"


class BadInputError(RunnerError):
    """Exit code 2: bad command-line arguments or plan."""

    hint_text = "the plan or the arguments are malformed: relower the plan (rerun the workflow)"


class BundleFileError(RunnerError):
    """Exit code 3: a bundle file (tensor init, batch, kernel source) is missing or wrong."""

    hint_text = "a file the plan needs is missing or damaged on the device: deploy again"


class NoDeviceError(RunnerError):
    """Exit code 4: no OpenCL library or no device matching the selector."""

    hint_text = ("check `phonetrain info` and the device config's opencl_library, "
                 "opencl_platform and opencl_device")


class KernelBuildError(RunnerError):
    """Exit code 5: an OpenCL program failed to build; ``stderr`` holds the compiler log."""

    hint_text = "fix the kernel source; the compiler log is in the stage's log"


class OpenCLRuntimeError(RunnerError):
    """Exit code 6: an OpenCL call failed while running."""

    hint_text = ("an OpenCL call failed on the device (out of device memory, a bad launch "
                 "size or a driver fault)")


class NonFiniteLossError(RunnerError):
    """Exit code 7: the loss became NaN or infinite."""

    hint_text = "lower model.lr, or check the kernel version for a wrong result"


class MissingLibraryError(RunnerError):
    """Exit code 8: an external library the plan needs (CLBlast) cannot be loaded, or the
    device has no image support for an image operand; callers record the run as skipped."""


class OutOfMemoryError(RunnerError):
    """Exit code 9: the plan's tensors do not fit on the device (an OpenCL buffer, or a
    tensor's host array, could not be allocated); callers record the run as ``oom``, an
    outcome of its batch size, not a failure."""

    hint_text = "lower model.batch_size (sweep.batches) or use a device with more memory"


class RunnerNotExecutableError(RunnerError):
    """Exit status 126: the runner exists on the device but cannot be executed."""

    hint_text = ("the runner lost its execute bit or sits on a noexec mount: deploy again "
                 "(pushes restore the mode) or stage under /data/local/tmp")


class RunnerNotFoundError(RunnerError):
    """Exit status 127: no runner where the command expected it."""

    hint_text = "the runner was not deployed to this device: rerun the workflow's deploy stage"


class RunnerSignalError(RunnerError):
    """The runner was killed by a signal (a crash such as SIGSEGV, or SIGKILL)."""

    hint_text = ("a crash in the runner or the OpenCL driver; rerun it, and report it with "
                 "the plan and `phonetrain info` if it repeats (SIGKILL: out of memory?)")


# Deaths that a damaged PoCL kernel cache causes (an assertion, a truncated shared object).
CACHE_CRASH_SIGNALS = {signal.SIGABRT, signal.SIGBUS, signal.SIGSEGV}


class RunnerTimeout(RunnerError):
    """The runner ran past its time limit and was stopped."""

    hint_text = "raise measure.timeout_s or shrink the run"


ERRORS: dict[int, type[RunnerError]] = {
    ExitCode.INTERNAL: RunnerInternalError, ExitCode.BAD_INPUT: BadInputError,
    ExitCode.BUNDLE: BundleFileError, ExitCode.NO_DEVICE: NoDeviceError,
    ExitCode.BUILD: KernelBuildError, ExitCode.CL_RUNTIME: OpenCLRuntimeError,
    ExitCode.NONFINITE: NonFiniteLossError, ExitCode.NO_LIBRARY: MissingLibraryError,
    ExitCode.OUT_OF_MEMORY: OutOfMemoryError,
    ExitCode.NOT_EXECUTABLE: RunnerNotExecutableError, ExitCode.NOT_FOUND: RunnerNotFoundError,
}


@dataclass(frozen=True)
class Adaptive:
    """Adaptive measurement of ``runner run`` (``src/runner/README.md``): after the plan's
    measured iterations, go on until the 95% bootstrap interval of the location estimate (the
    lower quartile of the iteration times, ``src/runner/stats.h`` ``ESTIMATE_QUANTILE``) is
    within ``+-ci_target`` (relative) of it, at most ``max_iterations`` measured
    iterations, deciding no more once measuring took ``max_seconds`` (s) and judging the interval
    only once measuring took ``min_seconds`` (s; at or above ``max_seconds`` a limit always ends
    measuring); ``resamples`` bootstrap resamples (:func:`phonetrain.results.stats.quantile_ci`
    gives the same interval)."""

    ci_target: float = 0.05
    max_iterations: int = 200
    max_seconds: float = 10.0
    resamples: int = 1000
    min_seconds: float = 0.0

    def to_args(self) -> list[str]:
        return ["--ci-target", repr(float(self.ci_target)),
                "--max-iterations", str(int(self.max_iterations)),
                "--min-seconds", repr(float(self.min_seconds)),
                "--max-seconds", repr(float(self.max_seconds)),
                "--resamples", str(int(self.resamples))]


@dataclass(frozen=True)
class DeviceSelector:
    """Which OpenCL device the runner uses: case-insensitive substrings of the platform and
    device names, a device type (``gpu|cpu|accelerator|all``; None prefers a GPU, else the
    first device) and an explicit OpenCL library path; for Vulkan plans a substring of the
    Vulkan device name (None: the first GPU, else the first device) and a libvulkan path."""

    platform: str | None = None
    device: str | None = None
    device_type: str | None = None
    cl_lib: str | None = None
    vk_device: str | None = None
    vk_lib: str | None = None

    @classmethod
    def of_device(cls, device_config: Mapping[str, Any]) -> DeviceSelector:
        """The selector of a device config (``opencl_platform``, ``opencl_device``,
        ``opencl_library``; empty strings select the first). The Vulkan device is the
        runner's default (the first GPU, else the first device)."""
        return cls(platform=device_config.get("opencl_platform") or None,
                   device=device_config.get("opencl_device") or None,
                   cl_lib=device_config.get("opencl_library") or None)

    def to_args(self) -> list[str]:
        """The runner's selector options."""
        args: list[str] = []
        for flag, value in (("--platform", self.platform), ("--device", self.device),
                            ("--device-type", self.device_type), ("--cl-lib", self.cl_lib),
                            ("--vk-device", self.vk_device), ("--vk-lib", self.vk_lib)):
            if value:
                args += [flag, str(value)]
        return args


def _selector(sel: DeviceSelector | Mapping[str, Any] | None) -> DeviceSelector:
    if sel is None:
        return DeviceSelector()
    if isinstance(sel, DeviceSelector):
        return sel
    return DeviceSelector(**{k: v for k, v in sel.items() if v is not None})


def _last_runner_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("runner: ")]
    return lines[-1][len("runner: "):] if lines else (stderr.strip().splitlines() or [""])[-1]


def _signal_of(code: int) -> int | None:
    """The signal that ended a process: negative status (subprocess) or 128+n (a shell)."""
    n = -code if code < 0 else code - 128 if 128 < code < 128 + 64 else 0
    return n if n > 0 else None


def error_for(mode: str, res: CommandResult, argv: Sequence[str]) -> RunnerError:
    """The :class:`RunnerError` for a runner that exited with ``res.returncode`` != 0."""
    code = res.returncode
    sig = _signal_of(code) if code not in ERRORS else None
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return RunnerSignalError(f"runner {mode} was killed by {name}", code, res.stderr, argv)
    cls = ERRORS.get(code, RunnerError)
    msg = _last_runner_line(res.stderr or "") or f"runner {mode} exited with status {code}"
    if cls in (RunnerNotExecutableError, RunnerNotFoundError):
        msg = f"{argv[0]} {'cannot be executed' if code == 126 else 'not found'} ({msg})"
    return cls(msg, code, res.stderr, argv)


class Runner:
    """The runner on one device.

    ``transport``: the device's transport (push/run/pull, its staging root as working folder);
    ``selector``: its OpenCL device; ``exe``: the runner as the transport runs it
    (``./runner`` in the staging root, or a binary's path on this host); ``launcher``: a
    command that runs it (e.g. ``qemu-aarch64 -L ...`` for a cross-built runner; empty:
    directly); ``timeout_s``: the limit of one invocation (s); ``progress``: the runner prints
    one line per iteration.
    """

    _names = itertools.count()

    def __init__(self, transport: Any, selector: DeviceSelector | None = None, *,
                 exe: str = f"./{layout.DEVICE_RUNNER}", launcher: Sequence[str] = (),
                 timeout_s: float = DEFAULT_TIMEOUT_S, progress: bool = False):
        self.transport = transport
        self.selector = selector or DeviceSelector()
        self.exe = exe
        self.launcher = list(launcher)
        self.timeout_s = timeout_s
        self.progress = progress
        self.local = isinstance(transport, LocalTransport)
        if self.local and not self.selector.cl_lib and transport.opencl.cl_lib:
            self.selector = replace(self.selector, cl_lib=transport.opencl.cl_lib)

    @classmethod
    def for_device(cls, device_config: Mapping[str, Any], stage_root: str | Path, *,
                   timeout_s: float = DEFAULT_TIMEOUT_S, progress: bool = False) -> Runner:
        """The runner of a configured device (``conf/device/<name>.yaml`` as a dict) whose
        binary is (or will be) deployed to its staging root."""
        t = get_transport(dict(device_config), stage_root, echo_stderr=progress)
        return cls(t, DeviceSelector.of_device(device_config), timeout_s=timeout_s,
                   progress=progress)

    @classmethod
    def local_binary(cls, binary: str | Path, root: str | Path, selector: Any = None, *,
                     launcher: Sequence[str] = (), timeout_s: float = DEFAULT_TIMEOUT_S,
                     progress: bool = False) -> Runner:
        """A runner binary on this host working in the folder ``root`` (created), run
        directly or through ``launcher`` (an emulator for a cross-built binary)."""
        Path(root).mkdir(parents=True, exist_ok=True)
        return cls(LocalTransport("local", Path(root), echo_stderr=progress),
                   _selector(selector), exe=str(Path(binary).resolve()), launcher=launcher,
                   timeout_s=timeout_s, progress=progress)

    @property
    def device(self) -> str:
        return self.transport.name

    def lock(self) -> Any:
        """The device's measurement lock (one measurement at a time per device)."""
        return self.transport.lock()

    def push_runner(self, binary: str | Path) -> int:
        """Copy the runner binary into the staging root (skipped when unchanged)."""
        return self.transport.push(Path(binary), layout.DEVICE_RUNNER)

    # ------------------------------------------------------------------ invoking

    def invoke(self, mode: str, args: Sequence[str], *, out: str | Path | None = None,
               expect: Sequence[str] = (), selector: bool = True,
               timeout_s: float | None = None,
               env: Mapping[str, str] | None = None) -> CommandResult:
        """Run ``runner <mode> <args> [--out ...] [selector]`` (with the environment
        variables ``env`` added) and return its result.

        With ``out`` (a folder on this host) the runner's output folder is brought there and
        ``expect`` files are checked present and non-empty. Raises the :class:`RunnerError`
        of the exit status, :class:`RunnerTimeout`, or the transport's error."""
        argv = [*self.launcher, self.exe, mode, *args]
        env = {"OMP_WAIT_POLICY": OMP_WAIT_POLICY, **(env or {})}   # the one policy, every process
        remote = None
        if out is not None:
            if self.local:  # the same file system: the runner writes the folder directly
                argv += ["--out", str(Path(out).resolve())]
            else:
                remote = layout.device_out(f"{mode}-{next(self._names)}-{uuid.uuid4().hex[:8]}")
                self.transport.run(["rm", "-rf", remote], timeout_s=60)
                argv += ["--out", remote]
        if selector:
            argv += self.selector.to_args()
        elif self.selector.cl_lib:
            argv += ["--cl-lib", self.selector.cl_lib]
        limit = self.timeout_s if timeout_s is None else timeout_s
        res = self._run(mode, argv, limit, env)
        if res.returncode != 0:
            err = error_for(mode, res, argv)
            if not self._kernel_cache_suspect(mode, err, env):
                raise err
            res = self._retry_with_empty_cache(mode, argv, limit, env, err)
        if out is not None:
            if remote is not None:
                self.transport.pull(remote, Path(out), list(expect))
            else:
                check_outputs(Path(out), list(expect), self.device)
        return res

    def _run(self, mode: str, argv: list[str], limit: float,
             env: Mapping[str, str]) -> CommandResult:
        try:
            kind = spans.MEASURE if mode in MEASURING_MODES else spans.RUNNER
            with spans.span(kind, mode):   # the job's log lists it
                return self.transport.run(argv, timeout_s=limit, env=dict(env))
        except TransportTimeout as e:
            raise RunnerTimeout(f"runner {mode} timed out after {limit:g} s and was killed",
                                None, "", argv) from e

    def _kernel_cache_suspect(self, mode: str, err: RunnerError,
                              env: Mapping[str, str]) -> bool:
        """Whether a crash may come from PoCL's shared kernel cache: a runner on this host
        killed by SIGABRT, SIGBUS or SIGSEGV in a mode that compiles kernels while it used
        that cache (not a private one, as a cold build does). PoCL loads a damaged entry (a
        truncated ``program.bc`` or kernel ``.so``, after a full disk or a killed compile)
        without checking it and aborts on an assertion or faults in it."""
        return (self.local and mode != "info" and isinstance(err, RunnerSignalError)
                and "POCL_CACHE_DIR" not in env
                and _signal_of(err.exit_code or 0) in CACHE_CRASH_SIGNALS)

    def _retry_with_empty_cache(self, mode: str, argv: list[str], limit: float,
                                env: Mapping[str, str], err: RunnerError) -> CommandResult:
        """Run ``argv`` once more with an empty private PoCL kernel cache after ``err`` (a
        crash with the shared one). When that run succeeds the shared cache is damaged: it
        is removed when phonetrain owns it, else named on stderr with what to do. When it
        crashes too, the cache is not the cause: that error is raised, saying so."""
        cache, owned = pocl_cache_in_use(dict(env))
        fresh = tempfile.mkdtemp(prefix="phonetrain-kcache-")
        try:
            res = self._run(mode, argv, limit, {**env, "POCL_CACHE_DIR": fresh})
        finally:
            shutil.rmtree(fresh, ignore_errors=True)
        if res.returncode != 0:
            again = error_for(mode, res, argv)
            if isinstance(again, RunnerSignalError):
                again.hint = ("a crash in the runner or the OpenCL driver, also with an empty "
                              "PoCL kernel cache (so not a damaged cache); report it with the "
                              "plan and `phonetrain info` (SIGKILL: out of memory?)")
            raise again
        if owned:
            shutil.rmtree(cache, ignore_errors=True)
            what = "removed it (phonetrain's own folder; the next run fills it again)"
        else:
            what = (f"delete that folder (rm -rf {cache}); until then each run crashes once "
                    "and compiles its kernels afresh")
        print(f"phonetrain: {err.message} with PoCL's kernel cache {cache} and ran with an "
              f"empty one: that cache is damaged; {what}", file=sys.stderr, flush=True)
        return res

    # ------------------------------------------------------------------ modes

    def info(self) -> dict:
        """``runner info`` as a dict: ``runner``, ``host`` (cpu_model, logical_cores),
        ``opencl_error`` (None when a library loaded) and ``platforms`` (each with
        ``devices``)."""
        res = self.invoke("info", [], selector=False, timeout_s=min(self.timeout_s, 120))
        try:
            return json.loads(res.stdout)
        except json.JSONDecodeError as e:
            raise RunnerError(f"runner info printed no JSON ({e}); first bytes: "
                              f"{res.stdout[:200]!r}") from None

    def build(self, sources: Sequence[str], options: str, out: str | Path, *,
              cold_cache: bool = True) -> dict:
        """``runner build``: compile ``sources`` (paths as the runner sees them) with
        ``options`` on the device; returns ``build.json`` (per program: status, build_ms,
        binary_size_bytes, log, ``cached``). Raises :class:`KernelBuildError` (compiler log in
        ``.stderr``) when a program fails.

        ``cached`` says whether a program's binary came from the OpenCL implementation's
        kernel cache, so that its build time and size are not a compile's. With
        ``cold_cache`` the build runs with an empty, private kernel cache where the
        implementation lets one be chosen (PoCL: ``POCL_CACHE_DIR``, PoCL's documented
        environment variable); when that cache filled during the build, PoCL compiled and
        ``cached`` is false. Otherwise (other implementations, whose caches cannot be chosen
        or seen from here) ``cached`` is null: unknown."""
        args = [a for s in sources for a in ("--source", str(s))] + ["--options", options]
        cache = self._private_cache() if cold_cache else None
        try:
            self.invoke("build", args, out=out, expect=["build.json"],
                        env={"POCL_CACHE_DIR": cache} if cache else None)
            doc = json.loads((Path(out) / "build.json").read_text())
            filled = bool(cache) and self._cache_filled(cache)
        finally:
            if cache:
                self._remove_cache(cache)
        pocl = "portable computing language" in str((doc.get("device") or {}).get(
            "platform", "")).lower()
        for prog in doc.get("programs", []):
            prog["cached"] = False if (pocl and filled) else None
        return doc

    def _private_cache(self) -> str:
        """An empty folder for the OpenCL implementation's kernel cache: on this host a
        temporary folder, on a device one under its staging root's ``out/``."""
        if self.local:
            return tempfile.mkdtemp(prefix="phonetrain-kcache-")
        return layout.device_out(f"kcache-{uuid.uuid4().hex[:8]}")

    def _cache_filled(self, cache: str) -> bool:
        if self.local:
            return any(p.is_file() for p in Path(cache).rglob("*"))
        res = self.transport.run(["find", cache, "-type", "f"], timeout_s=60)
        return bool(res.stdout.strip())

    def _remove_cache(self, cache: str) -> None:
        if self.local:
            shutil.rmtree(cache, ignore_errors=True)
        else:
            try:
                self.transport.run(["rm", "-rf", cache], timeout_s=60)
            except PhonetrainError:
                pass  # a leftover cache folder under out/ is harmless

    def run(self, plan: str | Path, out: str | Path, *, root: str | Path = ".",
            threads: int = 0, clblast_lib: str | None = None,
            adaptive: Adaptive | None = None, power_sample_ms: int = 0,
            sysfs_root: str | None = None, profiling: bool = True,
            checkpoints: bool = True, probe: bool = True,
            previous: tuple[str | Path, str | Path] | None = None) -> dict:
        """Execute a plan (``plan`` and ``root``, the folder its relative paths resolve under,
        as the runner sees them); outputs land in ``out``. ``adaptive``: measure until the
        estimate's interval is narrow enough (:class:`Adaptive`); None: exactly the plan's
        iterations. ``power_sample_ms`` > 0 samples battery power and clocks during the
        measured iterations (run.json ``power``; docs/device-sensors.md); ``sysfs_root``: the
        folder the runner reads as ``/sys`` (None: ``$PHONETRAIN_SYSFS_ROOT`` on the device,
        else ``/sys``). ``profiling=False`` (OpenCL plans on one queue) runs
        ``--no-profiling``: no profiling event per command, so ``trace.csv`` has host times
        only and an iteration's ``wall_ms`` lacks the events' host cost. ``checkpoints=False``
        runs ``--no-checkpoints``: none of the plan's checkpoints is kept (a process whose steps
        are not verified; it also measures no iteration after the adaptive decision for the
        checkpoints counted from the end). ``probe=False`` runs ``--no-probe``: no calibration
        probe (``run.json``'s ``probe`` null; a process no verdict judges). ``previous``
        (a plan as the runner sees it, a folder on this host) measures that plan side by side
        in the same process (``--previous-plan``/``--previous-out``: both set up on one
        backend and device, their measured iterations alternating, the order reversed every
        round; ``src/runner/run.c``), its outputs in that folder in the same format (brought
        from a device as ``out`` is). Returns the parsed ``run.json``. Raises a :class:`RunnerError` subclass on failure (the runner's own
        ``run.json`` then says "failed" where the output folder is on this host); a
        :class:`BadInputError` for ``profiling=False`` with a pipelined plan."""
        args = ["--plan", str(plan), "--root", str(root)]
        if power_sample_ms:
            args += ["--power-sample-ms", str(int(power_sample_ms))]
        if sysfs_root:
            args += ["--sysfs-root", str(sysfs_root)]
        if threads:
            args += ["--threads", str(int(threads))]
        if adaptive is not None:
            args += adaptive.to_args()
        if self.progress:
            args.append("--progress")
        if not profiling:
            args.append("--no-profiling")
        if not checkpoints:
            args.append("--no-checkpoints")
        if not probe:
            args.append("--no-probe")
        if clblast_lib:
            args += ["--clblast-lib", str(clblast_lib)]
        prev_remote = None
        if previous is not None:
            prev_out = Path(previous[1])
            if self.local:
                prev_arg = str(prev_out.resolve())
            else:
                prev_arg = prev_remote = layout.device_out(
                    f"run-previous-{next(self._names)}-{uuid.uuid4().hex[:8]}")
                self.transport.run(["rm", "-rf", prev_remote], timeout_s=60)
            args += ["--previous-plan", str(previous[0]), "--previous-out", prev_arg]
        expect = [layout.RUN, layout.TRACE]
        self.invoke("run", args, out=out, expect=expect)
        if prev_remote is not None:
            self.transport.pull(prev_remote, prev_out, expect)
        elif previous is not None:
            check_outputs(prev_out, expect, self.device)
        return read_run(Path(out))

    def bench_bandwidth(self, out: str | Path, *, min_bytes: int = 4096,
                        max_bytes: int = 64 << 20, min_time_ms: float = 20,
                        repeats: int = 3) -> Path:
        """``runner bench-bandwidth``: writes ``out/bandwidth.csv`` (one row per op and size:
        ``device_gbps``, ``host_gbps``; GB/s = 1e9 bytes/s) and ``out/bench.json`` (device,
        launch latency in us). Returns the CSV's path."""
        args = ["--min-bytes", str(min_bytes), "--max-bytes", str(max_bytes),
                "--min-time-ms", str(int(min_time_ms)), "--repeats", str(repeats)]
        self.invoke("bench-bandwidth", args, out=out, expect=["bandwidth.csv"])
        return Path(out) / "bandwidth.csv"

    def bench_gemm(self, spec: dict[str, Any], out: str | Path, *,
                   timeout_s: float | None = None) -> dict:
        """``runner bench-gemm`` on a spec (layout: ``src/runner/bench_gemm.c``; built by
        :func:`phonetrain.kernels.gemm.gemm_spec`); returns ``gemm.json``. The spec is pushed
        to the device's ``specs/`` folder; its ``source`` is a path as the runner sees it.
        ``timeout_s``: the process's limit (s; default the runner's ``timeout_s``)."""
        name = f"spec-{os.getpid()}-{next(self._names)}.json"
        local = Path(out).parent / f".{name}"
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(json.dumps(spec))
        try:
            if self.local:
                spec_arg = str(local.resolve())
            else:
                spec_arg = layout.device_spec(name)
                self.transport.push(local, spec_arg)
            self.invoke("bench-gemm", ["--spec", spec_arg], out=out, expect=["gemm.json"],
                        timeout_s=timeout_s)
        finally:
            local.unlink(missing_ok=True)
        return json.loads((Path(out) / "gemm.json").read_text())

    def bench_peak(self, out: str | Path, *, min_time_ms: float = 50,
                   work_items: int = 0) -> dict:
        """``runner bench-peak`` (clpeak's method): compute GFLOPS per vector width and read
        bandwidth; returns ``peaks.json``. ``work_items`` > 0 shrinks the launches (tests)."""
        args = ["--min-time-ms", str(min_time_ms)]
        if work_items:
            args += ["--work-items", str(work_items)]
        self.invoke("bench-peak", args, out=out, expect=["peaks.json"])
        return json.loads((Path(out) / "peaks.json").read_text())


# ---------------------------------------------------------------- one call on this host

def run_mode(runner: Path, mode: str, args: list[str], timeout_s: float = DEFAULT_TIMEOUT_S,
             cwd: Path | None = None) -> CommandResult:
    """Run ``runner <mode> <args>`` on this host (in ``cwd``); return the result. Raises the
    :class:`RunnerError` of its exit status or :class:`RunnerTimeout`."""
    r = Runner.local_binary(runner, cwd or Path.cwd(), timeout_s=timeout_s)
    return r.invoke(mode, args, selector=False)


def info(runner: Path, cl_lib: str | None = None, timeout_s: float = 60.0) -> dict:
    """``runner info`` on this host (see :meth:`Runner.info`)."""
    return Runner.local_binary(runner, Path.cwd(), DeviceSelector(cl_lib=cl_lib),
                               timeout_s=timeout_s).info()


def devices_table(info_doc: dict) -> pd.DataFrame:
    """One row per OpenCL device of an :func:`info` document."""
    import pandas as pd  # here, not at the top: running a plan needs only numpy (benchmarks)

    rows = [{"platform": p["name"], **{k: v for k, v in d.items() if k != "extensions"}}
            for p in info_doc["platforms"] for d in p["devices"]]
    return pd.DataFrame(rows)


def run_plan(runner: Path, plan_path: Path, root: Path, out_dir: Path, threads: int | None = None,
             device_selector: DeviceSelector | Mapping[str, Any] | None = None,
             timeout_s: float = DEFAULT_TIMEOUT_S, progress: bool = False,
             clblast_lib: str | None = None, launcher: Sequence[str] = (),
             power_sample_ms: int = 0, sysfs_root: str | Path | None = None,
             profiling: bool = True) -> dict:
    """Execute a plan on this host: ``plan_path`` and ``root`` (the bundle folder its relative
    paths resolve under) may be relative to the current folder; outputs go to ``out_dir``;
    ``launcher`` runs a cross-built runner (e.g. under qemu); ``power_sample_ms``,
    ``sysfs_root`` and ``profiling`` as :meth:`Runner.run`. Returns the parsed ``run.json``;
    raises a :class:`RunnerError` subclass on failure."""
    r = Runner.local_binary(runner, root, device_selector, launcher=launcher,
                            timeout_s=timeout_s, progress=progress)
    return r.run(Path(plan_path).resolve(), out_dir, threads=threads or 0,
                 clblast_lib=clblast_lib, power_sample_ms=power_sample_ms,
                 sysfs_root=str(Path(sysfs_root).resolve()) if sysfs_root else None,
                 profiling=profiling)


def build_kernels(runner: Path, sources: Sequence[Path], out_dir: Path, options: str = "",
                  device_selector: DeviceSelector | Mapping[str, Any] | None = None,
                  timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """``runner build`` on this host (see :meth:`Runner.build`)."""
    r = Runner.local_binary(runner, Path(out_dir).parent, device_selector, timeout_s=timeout_s)
    return r.build([str(Path(s).resolve()) for s in sources], options, out_dir)


def bench_bandwidth(runner: Path, out_dir: Path, min_bytes: int = 4096,
                    max_bytes: int = 64 << 20, min_time_ms: float = 20, repeats: int = 3,
                    device_selector: DeviceSelector | Mapping[str, Any] | None = None,
                    timeout_s: float = DEFAULT_TIMEOUT_S) -> pd.DataFrame:
    """``runner bench-bandwidth`` on this host: one row per (op, size_bytes) with
    ``device_gbps`` and ``host_gbps``; ``df.attrs["bench"]`` holds ``bench.json``."""
    import pandas as pd

    r = Runner.local_binary(runner, Path(out_dir).parent, device_selector, timeout_s=timeout_s)
    csv = r.bench_bandwidth(out_dir, min_bytes=min_bytes, max_bytes=max_bytes,
                            min_time_ms=min_time_ms, repeats=repeats)
    df = pd.read_csv(csv)
    df.attrs["bench"] = json.loads((Path(out_dir) / "bench.json").read_text())
    return df


# ---------------------------------------------------------------- outputs

TRACE_NS = ("queued_ns", "submit_ns", "start_ns", "end_ns")
TRACE_HEADER = ("iteration,warmup,seq,step,op,kind,name,layer,phase,bytes,flops,queued_ns,"
                "submit_ns,start_ns,end_ns,host_begin_ns,host_end_ns,queue\n")
"""The header line of the runner's ``trace.csv`` (src/runner/trace.c, ``trace_csv``)."""


def read_run(out_dir: Path) -> dict:
    """``out_dir/run.json`` as a dict (check ``["status"] == "ok"`` before trusting it)."""
    return json.loads((Path(out_dir) / layout.RUN).read_text())


def read_trace(out_dir: Path) -> pd.DataFrame:
    """``out_dir/trace.csv``: one row per command execution. Device times (``*_ns`` of
    :data:`TRACE_NS`, device clock) are nullable Int64, empty for host rows and the CPU
    backend; ``host_begin_ns``/``host_end_ns`` are CLOCK_MONOTONIC ns."""
    import pandas as pd

    df = pd.read_csv(Path(out_dir) / layout.TRACE, keep_default_na=False,
                     na_values={c: [""] for c in TRACE_NS},
                     dtype={"name": str, "layer": str, "phase": str})
    for c in TRACE_NS:
        df[c] = df[c].astype("Int64")
    df["warmup"] = df["warmup"].astype(bool)
    return df


def read_dump(out_dir: Path, tensor_name: str, shape: Sequence[int] | None = None,
              dtype: str = "f32") -> np.ndarray:
    """``out_dir/dumps/<tensor_name>.f32`` (raw little-endian, float32 or int32)."""
    import numpy as np

    arr = np.fromfile(Path(out_dir) / layout.DUMPS / f"{tensor_name}.f32",
                      dtype="<f4" if dtype == "f32" else "<i4")
    return arr.reshape(shape) if shape is not None else arr
