"""Atomic file writes, JSON reading with clear errors, content hashes.

Every file phonetrain writes goes through a temporary file in the same folder and a rename
(POSIX ``rename(2)`` is atomic within a file system), so a crash or Ctrl-C never leaves a
partial file under the final name: a reader sees the old file or the new one.

``tempfile`` creates its files 0600 and its folders 0700 whatever the umask; every file and
folder published here gets the mode a plain ``open``/``mkdir`` would have given it instead
(0666 / 0777 less the process umask: 0644 / 0755 under umask 022), the mode of the figures
matplotlib writes: :func:`publish` and :func:`make_temp_dir` are the one place that sets it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from phonetrain.errors import ResultsFileError


def umask() -> int:
    """The process's umask, read from ``/proc/self/status`` (Linux 4.7+) without changing
    it; elsewhere set and restored at once with :func:`os.umask`."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def file_mode() -> int:
    """The mode a new plain file gets: 0o666 less the umask (0o644 under umask 022)."""
    return 0o666 & ~umask()


def dir_mode() -> int:
    """The mode a new folder gets: 0o777 less the umask (0o755 under umask 022)."""
    return 0o777 & ~umask()


def publish(tmp: str | Path, path: str | Path) -> Path:
    """Give the temporary file or folder ``tmp`` the umask's mode (:func:`file_mode`,
    :func:`dir_mode`) and rename it to ``path`` (atomic on one file system); returns
    ``path``."""
    os.chmod(tmp, dir_mode() if Path(tmp).is_dir() else file_mode())
    os.replace(tmp, path)
    return Path(path)


def make_temp_dir(parent: str | Path, prefix: str) -> Path:
    """A new, uniquely named folder in ``parent`` (created) with the umask's mode rather
    than :func:`tempfile.mkdtemp`'s 0700, for a folder that is renamed into place."""
    Path(parent).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=prefix))
    os.chmod(tmp, dir_mode())
    return tmp


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (parents created) with the umask's mode
    (:func:`file_mode`); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; returns the path."""
    return write_bytes(path, text.encode())


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no spaces: equal objects give equal text (what hashes see)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def short_hash(obj: Any) -> str:
    """First 16 hex digits of SHA-256 over :func:`canonical_json` of ``obj``."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:16]


def write_json(obj: Any, path: str | Path) -> Path:
    """Write ``obj`` as indented JSON atomically (NaN written as JSON null is the caller's
    job: ``allow_nan`` stays on for readability of run documents)."""
    return write_text(path, json.dumps(obj, indent=1, default=str) + "\n")


def write_if_changed(path: str | Path, obj: Any) -> bool:
    """Write ``obj`` as sorted, indented JSON only when the file's content differs, so an
    unchanged file keeps its mtime (Snakemake's ``mtime`` trigger reruns nothing). Returns
    True when the file was (re)written."""
    path = Path(path)
    text = json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n"
    if path.is_file() and path.read_text() == text:
        return False
    write_text(path, text)
    return True


def read_json(path: str | Path) -> dict[str, Any]:
    """A JSON object from ``path``.

    Raises :class:`~phonetrain.errors.ResultsFileError` naming the file when it is missing,
    unreadable, not JSON (e.g. truncated) or not an object."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsFileError(f"{path}: missing", "rerun the stage that writes it") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsFileError(f"{path}: cannot read JSON ({e})",
                               "the file is damaged; rerun the stage that writes it") from None
    if not isinstance(doc, dict):
        raise ResultsFileError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def utc_stamp() -> str:
    """Now in UTC as a folder name, to the microsecond: ``20260102T030405.123456Z`` (the
    quarantine folder's and a failed run's record name)."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
