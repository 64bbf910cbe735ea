"""Build stage: the runner per device (its toolchain), then each kernel version compiled on the
device's own OpenCL compiler (the runner's ``build`` mode: per-program build time, log,
binary size).

Stages: ``build-runner`` (params :class:`~phonetrain.stages.specs.RunnerSpec`; output
``runner``) and ``build-kernels`` (params :class:`~phonetrain.stages.specs.KernelSpec`; inputs
``runner``, ``sources``; output ``build``: build.json, with ``params.json`` beside it). A
version that does not compile fails its job with the compiler log, and leaves ``failed.json``
beside the would-be build.json: the aggregate reads it to say why the version's builds and runs
are missing. build.json stays missing, so the next ``snakemake all`` reruns the build (and a
build that succeeds removes ``failed.json``). A compile that equals an earlier one in the same
results folder (:func:`compile_key`: the same sources but comments and white space, options,
runner and device; e.g. ``clblast``, which compiles ``baseline``'s sources, or a version after
an edit of its comments) is not compiled again: its build.json is that compile's record, with
``reused_from`` naming the version that compiled (records under
``build/<device>/kernels/.builds/``). A device that cannot be reached (its adb server
stopped, the connection lost) leaves ``failed.json`` with the transport's reason the same way.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from phonetrain import layout
from phonetrain.devices import toolchains
from phonetrain.devices.base import TransportError
from phonetrain.errors import PhonetrainError, StageError
from phonetrain.io import read_json, sha256_file, write_json
from phonetrain.kernels import build_hash, load_version, stage_kernels
from phonetrain.kernels.buildlog import compiler_messages, explain, line_table
from phonetrain.runner import KernelBuildError, Runner, RunnerError
from phonetrain.stages.stamp import STAMP, stamp, write_stamp
from phonetrain.stages.job import Job, main
from phonetrain.stages.specs import KernelSpec, RunnerSpec, to_params


def build_runner(job: Job) -> Path:
    """Compile the runner for the device with its toolchain (host cc, Android NDK, aarch64
    cross; :mod:`phonetrain.devices.toolchains`) and install it at ``output.runner``. Devices
    sharing a toolchain share one compile (the cache folder is keyed by sources, compiler and
    flags, and locked). The settings it was built with go beside it first
    (``runner.inputs.json``, :mod:`phonetrain.stages.stamp`)."""
    s = job.spec(RunnerSpec)
    tc = toolchains.for_device(s.device_config)
    built = toolchains.build_runner(job.runtime.at(s.cache), cc=tc.cc, extra_flags=tc.extra_flags)
    out = Path(job.output.runner)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    shutil.copy2(built, tmp)
    write_stamp(out, stamp(job))
    tmp.replace(out)
    return out


def build_kernels(job: Job) -> dict:
    """:func:`compile_kernels`; a device that cannot be reached (its adb server stopped, the
    connection lost) leaves ``failed.json`` with the transport's reason and raises
    :class:`StageError`, so the version's runs say why they are missing."""
    try:
        return compile_kernels(job)
    except TransportError as e:
        s = job.spec(KernelSpec)
        reason = f"device '{s.device_config['name']}': kernel version '{s.kernel}' not built: {e}"
        write_json({"reason": reason, "log": "", STAMP: stamp(job)},
                   Path(job.output.build).with_name(layout.FAILED))
        raise StageError(reason) from None


def compile_kernels(job: Job) -> dict:
    """Compile one kernel version on one device; write ``output.build`` (build.json: per
    program build time, log, binary size) and ``params.json`` beside it. A compile error
    raises :class:`StageError` with the compiler's messages located in the kernel sources
    (:func:`compile_error`), which the job's log then holds (no build.json)."""
    s = job.spec(KernelSpec)
    dev, version = s.device_config, s.kernel
    out = Path(job.output.build)
    failed = out.with_name(layout.FAILED)
    key = compile_key(version, dev, job.input.runner)
    doc = reused_build(out, key, version)
    if doc is not None:
        return _finish(job, s, out, doc)
    r = Runner.for_device(dev, job.runtime.at(s.stage_root), timeout_s=job.runtime.timeout_s)
    with tempfile.TemporaryDirectory(prefix="phonetrain-kernels-") as tmp, r.lock():
        r.push_runner(job.input.runner)
        src = stage_kernels(version, Path(tmp))
        r.transport.push(src, layout.device_kernels(version))
        sources = [f"{layout.device_kernels(version)}/{f.name}" for f in sorted(src.glob("*.cl"))]
        try:
            doc = r.build(sources, load_version(version).options, Path(tmp) / "pulled")
        except KernelBuildError as e:
            fname, log = compile_error(e, src)
            where = f" ({fname})" if fname else ""
            reason = (f"device '{dev['name']}': kernel version '{version}' failed to build"
                      f"{where}:\n{compiler_messages(log)}")
            write_json({"reason": reason, "log": log[-20000:], STAMP: stamp(job)}, failed)
            raise StageError(reason, f"fix the kernel source; this message is also in "
                                     f"{job.log}") from None
        except RunnerError as e:
            raise StageError(f"device '{dev['name']}': kernel version '{version}': {e}") from None
    keep_build(out, key, doc, version)
    return _finish(job, s, out, doc)


def _finish(job: Job, s: KernelSpec, out: Path, doc: dict) -> dict:
    doc.update(device=s.device_config["name"], kernel=s.kernel, kernel_hash=s.kernel_hash)
    doc[STAMP] = stamp(job)
    write_json(to_params(s), out.with_name(layout.PARAMS))
    out.with_name(layout.FAILED).unlink(missing_ok=True)
    write_json(doc, out)
    return doc


BUILDS = ".builds"   # beside the versions' folders: one record per compile key


def compile_key(version: str, device_config: dict, runner: str | Path) -> str:
    """What decides a version's compile on a device: its build key
    (:func:`phonetrain.kernels.build_hash`: the assembled sources without comments or white
    space, and the build options), the runner binary (SHA-256) and the device's settings.
    Equal keys compile the same programs with the same compiler (sha256 hex)."""
    return hashlib.sha256(json.dumps(
        [build_hash(version), sha256_file(runner), device_config],
        sort_keys=True).encode()).hexdigest()


def reused_build(out: Path, key: str, version: str) -> dict | None:
    """The build record of an earlier compile with the same :func:`compile_key` on this
    device in this results folder (another version with the same sources and options, or
    this version before an edit of comments or white space), as this version's: its programs'
    build times, sizes and logs are that compile's, ``reused_from`` names the version that
    compiled; None when there is none. A build that failed is not kept, so it compiles again."""
    rec = out.parents[1] / BUILDS / f"{key}.json"
    try:
        doc = read_json(rec)
    except (OSError, ValueError, PhonetrainError):
        return None
    src = doc.get("kernel")
    doc["reused_from"] = doc.get("reused_from") or src
    for prog in doc.get("programs", []):   # this version's staged sources, not the other's
        prog["source"] = str(prog.get("source", "")).replace(
            f"{layout.device_kernels(src)}/", f"{layout.device_kernels(version)}/")
    print(f"phonetrain: kernel build {version}: the same compile as {doc['reused_from']} "
          f"(same sources but comments and white space, options, runner and device): its "
          f"build record, not compiled again", file=sys.stderr)
    return doc


def keep_build(out: Path, key: str, doc: dict, version: str) -> None:
    """Keep a successful compile's record under its :func:`compile_key` for
    :func:`reused_build`."""
    write_json(dict(doc, kernel=version), out.parents[1] / BUILDS / f"{key}.json")


def compile_error(e: KernelBuildError, staged: Path) -> tuple[str, str]:
    """The source that failed and the compiler log of a failed ``runner build``, its
    locations mapped back to the files under ``src/kernels`` (:func:`buildlog.explain` over
    the staged, assembled files in ``staged``). Returns (source path or '', mapped log)."""
    failed = [f for f in sorted(staged.glob("*.cl")) if f"/{f.name}" in e.message]
    tables = failed or sorted(staged.glob("*.cl"))
    log = e.stderr
    if len(tables) == 1:
        log = explain(log, line_table(tables[0].read_text()))
    if not failed:
        return "", log
    return _source_name(failed[0]), log


def _source_name(staged_file: Path) -> str:
    """The name the last ``#line`` directive of a staged file gives its own source (the
    version's file, after ``common.cl``), else the staged file's name."""
    names = [f for f, _ in line_table(staged_file.read_text()) if f]
    return names[-1] if names else staged_file.name


STAGES = {"build-runner": build_runner, "build-kernels": build_kernels}

if __name__ == "__main__":
    sys.exit(main(STAGES, sys.argv[1:]))
