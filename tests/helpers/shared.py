"""Session fixtures built once per test run, not once per pytest-xdist worker.

pytest-xdist's documented pattern ("Making session-scoped fixtures execute only once"): the
first worker to need a fixture builds it in a folder under the base temp's parent (shared by
the workers of one run) while holding a file lock; the others wait on the lock and read what it
wrote. Without xdist the base temp itself is the run's folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock


def run_folder(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The folder that every worker of this test run shares (the base temp without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base if worker_id == "master" else base.parent


def once_per_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
                 build: Callable[[Path], Any]) -> Any:
    """``build(folder)``'s JSON-able result, computed by one worker of the run.

    ``folder`` is ``<run folder>/shared/<name>``, created empty for ``build``; the result is
    kept in ``<name>.json`` beside it. A build that raised leaves no result, so the next worker
    that needs it tries again (and fails the same way, with its own traceback).
    """
    root = run_folder(tmp_path_factory, worker_id) / "shared"
    root.mkdir(exist_ok=True)
    done = root / f"{name}.json"
    with FileLock(str(root / f"{name}.lock")):
        if done.is_file():
            return json.loads(done.read_text())
        folder = root / name
        if folder.exists():  # a build that raised: start it again from nothing
            import shutil
            shutil.rmtree(folder)
        folder.mkdir()
        result = build(folder)
        tmp = done.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(done)
        return result
