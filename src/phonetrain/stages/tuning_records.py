"""This machine's tuning records: a tuning measured once for a local device is reused by every
later study of the same kernel sources on it.

A tuning is itself a measurement: the tuner picks the candidate with the most GFLOPS, and on a
shared host two tunings of identical sources can pick different tiles (on the 2-core
development VM one study's LeNet-5 ran 84 ms per step with 128x128 tiles, the next 49 ms with
another choice), so two studies of the same sources would measure different programs. As
CLBlast keeps its tuned parameters per device in a database, the tune stage keeps each
tuning of a ``local`` device in ``$PHONETRAIN_TUNING_DIR/<key>.json`` (default
``<cache>/tuning``, the cache of :func:`phonetrain.devices.toolchains.cache_dir`), ``<key>`` a
hash of the machine (:func:`phonetrain.stages.quiet.machine_ident`, as the calibration
probe's record) and of the tune job's whole spec (device config,
version, ``kernel_hash`` of its sources, class or square sizes, tuning settings). A later tune
job with the same key copies the record, with ``reused_from`` naming it, instead of measuring;
an edited kernel source, another class or other settings make another key. Delete the folder
to tune again (e.g. after a driver update). Phones (adb) are tuned per study, as before.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from phonetrain.devices.toolchains import cache_dir
from phonetrain.errors import ResultsFileError
from phonetrain.io import short_hash, write_json
from phonetrain.kernels import tuning
from phonetrain.stages.quiet import machine_ident


def tuning_dir() -> Path:
    """The folder of this machine's tuning records: ``$PHONETRAIN_TUNING_DIR``, else
    ``<cache>/tuning``."""
    return Path(os.environ.get("PHONETRAIN_TUNING_DIR") or cache_dir() / "tuning")


def record_path(facts: dict[str, str], spec: dict[str, Any]) -> Path:
    """The record of the tune job ``spec`` (its params, ``stage_root`` left out: where the
    workflow stages files is not the tuning) on a local device whose transport reports
    ``facts`` (:meth:`phonetrain.devices.local.LocalTransport.facts`)."""
    ident = machine_ident(facts) | {
        "spec": {k: v for k, v in spec.items() if k != "stage_root"}}
    return tuning_dir() / f"{short_hash(ident)}.json"


def recall(record: Path) -> dict[str, Any] | None:
    """The tuning document kept in ``record``, with ``reused_from`` naming it; None when there
    is none. A record that is not a tuning document is named on stderr and tuned again (the
    new tuning replaces it)."""
    if not record.exists():
        return None
    try:
        doc = tuning.load_tuning(record)
    except ResultsFileError as e:
        print(f"phonetrain: {e.message}; tuning again (the new tuning replaces it)",
              file=sys.stderr)
        return None
    return doc | {"reused_from": str(record)}


def keep(record: Path, doc: dict[str, Any]) -> None:
    """Keep a measured tuning document in ``record`` (atomic write), with the UTC time it was
    tuned. A folder that cannot hold it is named on stderr and the job goes on: the study's
    own tuning file is already written, so nothing measured is lost."""
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        write_json(doc | {"tuned_at": datetime.now(timezone.utc).isoformat(timespec="seconds")},
                   record)
    except OSError as e:
        why = "not a folder" if record.parent.exists() and not record.parent.is_dir() \
            else (e.strerror or str(e))
        print(f"phonetrain: {record.parent}: cannot keep this machine's tuning record "
              f"{record.name} ({why}); the next study tunes again: set "
              "PHONETRAIN_TUNING_DIR to a folder you can write", file=sys.stderr)
