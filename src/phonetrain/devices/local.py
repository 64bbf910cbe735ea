"""The ``local`` transport: the runner runs on this host from a staging folder.

The staging root is ``<results>/stage/<device>/`` (layout in :mod:`phonetrain.devices.base`).
Pushes copy files whose SHA-256 differs from the staged copy (temp file + rename, mode kept);
runs are subprocesses with the staging root as working directory and a wall-clock timeout;
pulls copy a folder into a temp sibling of the destination and rename it into place only
when every expected file is present and non-empty.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from filelock import FileLock

from phonetrain.devices.base import CommandResult, TransportError


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def lock_dir() -> Path:
    """Where per-device measurement locks live: ``$PHONETRAIN_LOCK_DIR`` or the system temp
    folder, so every workflow on this host shares them (same place as the adb transport)."""
    path = Path(os.environ.get("PHONETRAIN_LOCK_DIR",
                               Path(tempfile.gettempdir()) / "phonetrain-locks"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _tee(stream, sink: list[str]) -> None:
    """Copy a text stream to our stderr as lines arrive, keeping them in ``sink``."""
    for line in stream:
        sink.append(line)
        sys.stderr.write(line)
        sys.stderr.flush()


class LocalTransport:
    """A device that is this host; implements :class:`phonetrain.devices.base.Transport`.

    name: device config name; root: staging folder (created on first use).
    """

    def __init__(self, name: str, root: Path):
        self.name = name
        self.root = Path(root).resolve()
        self.streams_stderr = True  # run() echoes stderr live

    def lock(self) -> FileLock:
        """Host-wide lock serializing measurements on this device (one at a time)."""
        return FileLock(lock_dir() / f"local-{self.name}.lock")

    def push(self, local: Path, remote_rel: str) -> int:
        """Copy a file or folder to ``root/remote_rel``; unchanged files (same SHA-256) are
        skipped. Returns the number of files copied. Raises TransportError if ``local`` is
        missing."""
        local = Path(local)
        if not local.exists():
            raise TransportError(f"device '{self.name}': nothing to push: {local} does not exist")
        dest = self.root / remote_rel
        pairs = [(local, dest)] if local.is_file() else [
            (p, dest / p.relative_to(local)) for p in sorted(local.rglob("*")) if p.is_file()]
        sent = 0
        for src, dst in pairs:
            if dst.is_file() and sha256_file(dst) == sha256_file(src):
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            shutil.copy2(src, tmp)
            os.replace(tmp, dst)
            sent += 1
        return sent

    def run(self, argv: list[str], *, timeout_s: float) -> CommandResult:
        """Run ``argv`` in the staging root (``./runner`` resolves there); a non-zero exit is
        returned; a timeout raises TransportError (the process is killed). stderr is echoed
        line by line as it arrives (the runner's ``--progress``) and also captured."""
        self.root.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(argv, cwd=self.root, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        except OSError as e:
            raise TransportError(f"device '{self.name}': cannot start {argv[0]}: {e}") from e
        err: list[str] = []
        out: list[str] = []
        # Both pipes are drained by threads so that the wait below, not a blocking read,
        # enforces the time limit (a hung runner never closes its stdout).
        readers = [threading.Thread(target=_tee, args=(p.stderr, err), daemon=True),
                   threading.Thread(target=lambda: out.append(p.stdout.read()), daemon=True)]
        for r in readers:
            r.start()
        try:
            p.wait(timeout=max(0.0, timeout_s - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired as e:
            p.kill()
            p.wait()
            raise TransportError(f"device '{self.name}': {' '.join(argv[:2])} timed out after "
                                 f"{timeout_s:.0f} s; raise measure.timeout_s or shrink the "
                                 "run") from e
        finally:
            for r in readers:
                r.join(timeout=5)
        return CommandResult(p.returncode, "".join(out), "".join(err), time.monotonic() - t0)

    def pull(self, remote_rel: str, local: Path, expect: list[str]) -> None:
        """Copy ``root/remote_rel`` into ``local`` atomically once every name in ``expect`` is
        present and non-empty there; otherwise raise TransportError naming the file."""
        src = self.root / remote_rel
        for name in expect:
            f = src / name
            if not f.is_file() or f.stat().st_size == 0:
                raise TransportError(f"device '{self.name}': expected output {f} is missing or "
                                     "empty; the runner stopped early (see its stderr)")
        local = Path(local)
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=local.parent, prefix=f".{local.name}.pull-"))
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
