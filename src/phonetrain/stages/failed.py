"""A run's failure record: what the deploy and train stages leave in a run folder when the
device or the runner fails.

The run folder then holds ``plan.json`` (deploy's output, the input of train), the settings
that failed (``params.json``) and ``failed.json`` (``reason``: one line naming the device, the
run and the cause, e.g. "adb server unreachable at 127.0.0.1:15201"; ``log``: the runner's
stderr, when it ran), and nothing that looks complete. What an earlier measurement left there
(``run.json``, ``measurement.json``, ``trace.csv``, repeats, dumps ...) is moved aside, not
deleted, into ``quarantine/<UTC time>/runs/<device>/<experiment>/`` with the note
``<experiment>.why.json`` beside it, as the check does (:mod:`phonetrain.results.check`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from phonetrain import layout
from phonetrain.io import utc_stamp, write_json
from phonetrain.layout import Layout

KEEP = (layout.PLAN, layout.FAILED)  # deploy's output stays; the record is rewritten


def record_failure(rdir: str | Path, params: Mapping[str, Any], reason: str,
                   log: str = "") -> Path | None:
    """Leave the failure record in the run folder ``rdir`` (``runs/<device>/<experiment>``
    under the results folder), after moving what an earlier measurement left there aside;
    returns the quarantine folder it went to (None when there was nothing). Raises OSError
    when the results folder cannot be written."""
    rdir = Path(rdir)
    rdir.mkdir(parents=True, exist_ok=True)
    moved = set_aside(rdir, reason)
    write_json(dict(params), rdir / layout.PARAMS)  # the settings that failed
    write_json({"reason": reason, "log": log[-20000:]}, rdir / layout.FAILED)
    return moved


def set_aside(rdir: Path, why: str) -> Path | None:
    """Move every entry of ``rdir`` but :data:`KEEP` and working folders (``.train-*``)
    into its quarantine folder (one ``os.replace`` each, same filesystem) with a note."""
    old = [e for e in sorted(rdir.iterdir())
           if e.name not in KEEP and not e.name.startswith(".")]
    if not old:
        return None
    root = rdir.parents[2]
    stamp = utc_stamp()
    rel = rdir.relative_to(root).as_posix()
    dest = Path(Layout(str(root)).quarantine(stamp, rel))
    dest.mkdir(parents=True, exist_ok=True)
    for e in old:
        os.replace(e, dest / e.name)
    write_json({"why": f"a later job failed: {why}", "moved_at_utc": stamp, "from": rel},
               dest.with_name(dest.name + layout.QUARANTINE_NOTE))
    return dest
