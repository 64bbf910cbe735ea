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

import os
import platform
from pathlib import Path
from typing import Any

from phonetrain.devices.toolchains import cache_dir
from phonetrain.io import read_json, short_hash, write_json


def machine_record(facts: dict[str, str]) -> Path:
    """This machine's probe record for a local device whose transport reports ``facts``
    (:meth:`phonetrain.devices.local.LocalTransport.facts`: OS, ABI, CPU model)."""
    base = Path(os.environ.get("PHONETRAIN_PROBE_DIR") or cache_dir() / "probe")
    ident = {**facts, "node": platform.node(), "logical_cores": os.cpu_count()}
    return base / f"{short_hash(ident)}.json"


def readings(probes: list[dict[str, Any]]) -> list[float]:
    """The positive before/after readings (ms) of ``run.json``'s ``probe`` objects."""
    got = [p.get(k) for p in probes for k in ("before_ms", "after_ms")]
    return [g for g in got if isinstance(g, (int, float)) and g > 0]


def _kept(record: Path, key: str) -> float | None:
    doc = read_json(record) if record.exists() else {}
    kept = (doc.get("quiet_ms") or {}).get(key)
    return kept if isinstance(kept, (int, float)) and kept > 0 else None


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
