"""Scripted sysfs files for the runner's and the adb transport's readers: values written
atomically, and values that change after the reader has opened a file N times (Linux inotify
``IN_OPEN`` on the file's folder, through ``inotify_simple``). A change keyed to the reader's
own opens falls where the test wants it however fast or loaded the host is; a change after a
wall-clock delay does not."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from inotify_simple import INotify, flags


def put(path: Path, value: int) -> None:
    """Write a sysfs-style file atomically (a temporary file, then ``os.replace``), so a reader
    never sees half a value."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(f"{value}\n")
    os.replace(tmp, path)


class ChangeAfterOpens:
    """While active (a context manager), rewrite ``path`` to ``value`` right after its
    ``opens``-th open by any process (counted from ``__enter__``). ``opened`` counts every open
    seen; ``changed`` is set once the value was written. The reader's opens after the change
    see ``value`` (the rewrite follows the open by the watcher thread's latency, so the open
    that triggers it and perhaps one or two after it still read the old value)."""

    def __init__(self, path: Path, opens: int, value: int):
        if opens < 1:
            raise ValueError(f"opens must be >= 1, not {opens}")
        self.path, self.opens, self.value = Path(path), opens, value
        self.opened = 0
        self.changed = threading.Event()
        self._stop = threading.Event()
        self._inotify = INotify()
        self._inotify.add_watch(self.path.parent, flags.OPEN)
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for event in self._inotify.read(timeout=50):
                if event.name != self.path.name:
                    continue
                self.opened += 1
                if self.opened == self.opens:
                    put(self.path, self.value)
                    self.changed.set()

    def __enter__(self) -> "ChangeAfterOpens":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._inotify.close()
