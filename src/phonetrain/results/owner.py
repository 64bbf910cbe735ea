"""One owner per results folder: the workflow instance that executes jobs into a results
folder holds an exclusive lock on it (:mod:`filelock`, ``flock`` on Linux) for as long as it
runs; a second instance is refused at its start with the holder named, so it neither moves
run folders aside under the first nor replaces what the first is writing.

Files (:class:`phonetrain.layout.Layout`): ``owner.lock`` (the lock; the kernel releases it
when the holding process ends, however it ends) and ``owner.json`` (who holds it: ``pid``,
``host``, ``cwd``, ``started_utc``, ``command``; written after the lock is taken, left in
place after, so it names the last owner).
"""

from __future__ import annotations

import os
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from phonetrain.errors import ResultsFileError
from phonetrain.io import read_json, write_json
from phonetrain.layout import Layout


class ResultsFolderBusy(ResultsFileError):
    """Another process owns the results folder; the message names it."""


def holder(L: Layout) -> str:
    """The owner recorded in ``owner.json``, as words; a note left by a former owner (its
    process gone from this host) is not taken for the current one."""
    try:
        h = read_json(L.owner_note())
    except (ResultsFileError, OSError):
        h = {}
    if not h or (h.get("host") == socket.gethostname() and not _alive(h.get("pid"))):
        return "a process that has not recorded itself yet"  # the note is a former owner's
    return (f"pid {h.get('pid')} on host {h.get('host')}, working folder {h.get('cwd')}, "
            f"started {h.get('started_utc')} ({h.get('command')})")


def _alive(pid: object) -> bool:
    """Whether a process ``pid`` exists on this host (signal 0 checks without sending)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def take(L: Layout) -> FileLock:
    """Take the results folder ``L.root`` (created when missing) for this process and record
    the holder; keep the returned lock referenced for the whole run (releasing it, or the
    process ending, frees the folder). Raises :class:`ResultsFolderBusy` naming the holder
    when another process has it, :class:`ResultsFileError` when the folder is not writable."""
    root = Path(L.root)
    lock = FileLock(L.owner_lock(), timeout=0)
    if root.exists() and not root.is_dir():
        raise ResultsFileError(f"{root}: results_dir names a file, not a folder",
                               "give results_dir a folder (new or existing)")
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:
        raise ResultsFolderBusy(
            f"results folder {root} is in use by another workflow: {holder(L)}",
            "wait until it ends (the lock goes with that process), or give this one another "
            "results_dir") from None
    except OSError as e:
        raise ResultsFileError(f"{root}: cannot take the results folder's lock "
                               f"{L.owner_lock()} ({e.strerror or e})",
                               "make the folder writable or give another results_dir") from None
    write_json({"pid": os.getpid(), "host": socket.gethostname(), "cwd": os.getcwd(),
                "started_utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])},
               L.owner_note())
    return lock
