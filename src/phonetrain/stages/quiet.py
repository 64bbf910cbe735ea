"""Where a device's quiet calibration-probe figure is kept, and how it is updated.

The train stage judges a run's calibration probe (src/runner/probe.c) against the fastest
probe reading on record for the device and thread count
(:func:`phonetrain.results.stats.probe_slowdown`). Two records hold it, each JSON
``{"quiet_ms": {"<threads>": ms}}``:

- the results folder's ``probe/<device>.json`` (:meth:`phonetrain.layout.Layout.probe`), for
  every device;
- for a ``local`` device, also a record of this machine outside any results folder:
  ``$PHONETRAIN_PROBE_DIR/<machine>.json``, default ``<cache>/probe/<machine>.json`` (the
  cache of :func:`phonetrain.devices.toolchains.cache_dir`), ``<machine>`` a hash of its host
  name, CPU model, OS and logical CPU count. A study that starts in a fresh results folder
  while the host is busy then still knows how fast the host's probe runs when it is quiet.

Each record takes only readings measured on it: the machine record is updated from probe
readings, never from a results folder's record, so a figure planted in one folder (a test)
never reaches the machine's.
"""

from __future__ import annotations

import math
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

from phonetrain.devices.toolchains import cache_dir
from phonetrain.errors import PhonetrainError, StageError
from phonetrain.io import read_json, short_hash, write_json


def machine_ident(facts: dict[str, str]) -> dict[str, Any]:
    """This machine's identity for a local device whose transport reports ``facts``
    (:meth:`phonetrain.devices.local.LocalTransport.facts`: OS, ABI, CPU model), with its host
    name and logical CPU count: what keys the machine's own records."""
    return {**facts, "node": platform.node(), "logical_cores": os.cpu_count()}


def machine_record(facts: dict[str, str]) -> Path:
    """This machine's probe record for a local device whose transport reports ``facts``."""
    return probe_dir() / f"{short_hash(machine_ident(facts))}.json"


def probe_dir() -> Path:
    """The folder of this machine's probe records: ``$PHONETRAIN_PROBE_DIR``, else
    ``<cache>/probe``."""
    return Path(os.environ.get("PHONETRAIN_PROBE_DIR") or cache_dir() / "probe")


def _figure(v: Any) -> float | None:
    """A record's figure when it is one (a positive finite number, not a JSON boolean)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return v if ok else None


def check_records(records: list[Path]) -> None:
    """Refuse, before anything is measured, a probe record that the run could not read or
    update afterwards: its folder not one this process can write, or the file not
    ``{"quiet_ms": {"<threads>": ms}}`` with positive numbers. Raises :class:`StageError`
    naming the file (and ``$PHONETRAIN_PROBE_DIR`` for the machine record)."""
    for r in records:
        mine = r.parent == probe_dir()   # this machine's record, not a results folder's
        move = " (or set PHONETRAIN_PROBE_DIR to another folder)" if mine else ""
        try:
            r.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=r.parent):
                pass
        except OSError as e:
            env = mine and os.environ.get("PHONETRAIN_PROBE_DIR")
            what = "PHONETRAIN_PROBE_DIR=" if env else ""
            raise StageError(f"{what}{r.parent}: cannot hold the calibration-probe record "
                             f"{r.name} ({e.strerror or e})",
                             ("set PHONETRAIN_PROBE_DIR to a folder you can write" if mine
                              else "make it a folder you can write")) from None
        if not r.exists():
            continue
        try:
            quiet, got = read_json(r).get("quiet_ms", {}), repr(r.read_text()[:80])
        except PhonetrainError as e:   # not JSON, or not an object
            quiet, got = None, e.message.removeprefix(f"{r}: ")
        if not isinstance(quiet, dict) or any(_figure(v) is None for v in quiet.values()):
            raise StageError(f"{r}: not a calibration-probe record (want "
                             f'{{"quiet_ms": {{"<threads>": <ms > 0>}}}}, got {got})',
                             "delete the file: the next run records the figure again" + move)


def readings(probes: list[dict[str, Any]]) -> list[float]:
    """The positive before/after readings (ms) of ``run.json``'s ``probe`` objects."""
    got = [p.get(k) for p in probes for k in ("before_ms", "after_ms")]
    return [g for g in got if isinstance(g, (int, float)) and g > 0]


def _kept(record: Path, key: str) -> float | None:
    doc = read_json(record) if record.exists() else {}
    return _figure((doc.get("quiet_ms") or {}).get(key))


def _update(record: Path, key: str, got: list[float]) -> None:
    """Keep ``min(got)`` in ``record`` when it beats the figure there (atomic write)."""
    kept = _kept(record, key)
    if kept is not None and kept <= min(got):
        return
    doc = read_json(record) if record.exists() else {}
    record.parent.mkdir(parents=True, exist_ok=True)
    write_json(doc | {"quiet_ms": (doc.get("quiet_ms") or {}) | {key: min(got)}}, record)


def quiet_probe(records: list[Path], probes: list[dict[str, Any]]) -> float | None:
    """The device's quiet probe figure (ms) for the thread count of ``probes`` (one run's
    ``probe`` objects): the fastest of their readings and the figures in ``records``; each
    record is updated with the readings when they beat it (the caller holds the device's
    lock). None when the probes hold no reading. An unreadable record raises
    :class:`phonetrain.errors.PhonetrainError` naming it (from :func:`read_json`)."""
    got = readings(probes)
    if not got:
        return None
    key = str(probes[0].get("threads"))
    figures = [k for k in (_kept(r, key) for r in records) if k is not None]
    for r in records:
        _update(r, key, got)
    return min(got + figures)
