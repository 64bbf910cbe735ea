"""What every job output records: the settings it was made with (its stamp), and its checks.

One rule for every output the workflow's jobs make (runner, batch folder, plan, GEMM shape
list, kernel build, tuning record, GEMM sweep, peaks, bandwidth sweep, deploy manifest, summary
and report): the job records :func:`stamp`, ``params_hash`` (:func:`phonetrain.io.short_hash`
of the job's params, exactly the settings its result depends on:
:mod:`phonetrain.stages.params`), ``params`` (those settings, so that a mismatch names what
differs) and, for a job that ran the runner, ``runner_sha256``. Where it lives
(:func:`stamp_path`): a JSON document holds it under the key :data:`STAMP`; a folder in
:data:`STAMP_FILE` inside it; any other file in ``<name>.inputs.json`` beside it (the runner
binary, the COMPLETE markers). A run folder records its whole params in ``params.json``,
checked the same way by :mod:`phonetrain.results.check`.

Two checks read the stamps, and neither needs Snakemake's metadata (which is kept per path as
spelled, and is lost with ``.snakemake/``, a moved or renamed results folder, a copy):

- the workflow's start (:mod:`phonetrain.stages.current`, :mod:`phonetrain.stages.start`) compares each
  existing output's stamp with the params the study gives its job now and moves a
  non-current one aside, as it moves a run measured under other settings
  (:func:`phonetrain.results.check.move_aside`): the output is missing, so Snakemake reruns
  its job. Snakemake alone decides what reruns; no param changes on its own;
- every job checks the stamps of its inputs against the hashes the workflow expects
  (``--expect``, :func:`check_inputs`) before it starts, and fails naming both when one
  differs (an input changed behind the workflow's back after its start); the next
  ``snakemake`` then moves it aside and rebuilds it.

Why a recorded hash, not the settings in the output's path: the run folders were already
guarded this way (``params.json``, the check, the quarantine), and one mechanism now covers
every output; the documented paths (``plans/<experiment>/``, ``build/<device>/kernels/
<version>/``), which the device's staging root mirrors, stay readable and stable; an output
made under old settings is moved aside with a note saying why, where a hashed path would keep
it beside the new one unseen (and push another copy to the phone); and the recorded params
name the setting that differs (``lr: 0.05 recorded, 0.07 now``), which a hash in a path
cannot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from phonetrain.errors import ResultsFileError, StageError
from phonetrain.io import read_json, sha256_file, short_hash, write_json

STAMP = "inputs"  # the key of the stamp in a JSON output document
STAMP_FILE = "inputs.json"  # a folder output's stamp; other files: <name>.inputs.json


def stamp(job: Any) -> dict[str, Any]:
    """The stamp of a job's output (``job``: a :class:`phonetrain.stages.job.Job`, or anything
    with its ``params`` and ``input``): ``params_hash`` (:func:`phonetrain.io.short_hash` of
    its params), ``params`` and, when the job has a ``runner`` input, ``runner_sha256``."""
    doc: dict[str, Any] = {"params_hash": short_hash(job.params), "params": job.params}
    runner = getattr(job.input, "runner", None)
    if runner:
        doc["runner_sha256"] = sha256_file(runner)
    return doc


def params_stamp(params: Mapping[str, Any]) -> dict[str, Any]:
    """The stamp of an output made from ``params`` without a :class:`Job` (a ``run:`` rule)."""
    return {"params_hash": short_hash(dict(params)), "params": dict(params)}


def stamp_path(output: str | Path) -> Path:
    """Where the stamp of ``output`` lives: the output itself (a ``.json`` document, under
    :data:`STAMP`), ``<folder>/inputs.json`` (a folder), else ``<output>.inputs.json``."""
    p = Path(output)
    if p.suffix == ".json":
        return p
    if p.is_dir():
        return p / STAMP_FILE
    return p.with_name(p.name + "." + STAMP_FILE)


def write_stamp(output: str | Path, st: Mapping[str, Any]) -> Path:
    """Record the stamp ``st`` of a folder or non-JSON file ``output`` (:func:`stamp_path`;
    a JSON document carries its stamp under :data:`STAMP` itself). Written atomically."""
    return write_json({STAMP: dict(st)}, stamp_path(output))


def read_stamp(output: str | Path) -> dict[str, Any] | None:
    """The stamp recorded for ``output``, or None when it has none (made before outputs
    recorded their settings) or its record cannot be read."""
    try:
        st = read_json(stamp_path(output)).get(STAMP)
    except ResultsFileError:
        return None
    return st if isinstance(st, dict) and isinstance(st.get("params_hash"), str) else None


def differences(have: Mapping[str, Any], want: Mapping[str, Any], prefix: str = "") -> list[str]:
    """``key: A recorded, B now`` for each (dotted, nested) key whose value differs between
    two params dicts."""
    out = []
    for k in sorted(set(have) | set(want), key=str):
        a, b = have.get(k), want.get(k)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += differences(a, b, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k}: {_short(a)} recorded, {_short(b)} now")
    return out


def _short(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def files_record(folder: str | Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"size_bytes", "sha256"}}`` of the files ``names`` of a folder output, as its
    job wrote them: a stamp's ``files`` (:func:`edited_files` compares them later)."""
    return {n: {"size_bytes": (Path(folder) / n).stat().st_size,
                "sha256": sha256_file(Path(folder) / n)} for n in names}


def edited_files(folder: str | Path, record: Mapping[str, Any], hashes: bool) -> list[str]:
    """The files of a stamp's ``files`` record (:func:`files_record`) that are missing or
    differ from what the job wrote: in size, and with ``hashes`` in SHA-256 too."""
    out = []
    for name, entry in record.items():
        f = Path(folder) / name
        if not f.is_file():
            out.append(f"{name} missing")
        elif f.stat().st_size != entry.get("size_bytes") or (
                hashes and sha256_file(f) != entry.get("sha256")):
            out.append(f"{name} differs from what its job wrote (edited by hand?)")
    return out


def not_current(output: str | Path, params: Mapping[str, Any],
                hashes: bool = False) -> str | None:
    """Why ``output`` was not made with ``params`` (the settings its job has now), or the
    files its stamp records (``files``) that changed since its job wrote them (by size, and
    with ``hashes`` by SHA-256), or None (also when it does not exist: Snakemake makes it
    anyway)."""
    if not Path(output).exists():
        return None
    st = read_stamp(output)
    want = short_hash(dict(params))
    if st is None:
        return ("no record of the settings it was made with (an older phonetrain made it, "
                "or its record is damaged)")
    edited = edited_files(output, st.get("files") or {}, hashes) if Path(output).is_dir() \
        else []
    if edited:
        return f"{'; '.join(edited)}: its job makes it again"
    if st["params_hash"] == want:
        return None
    diff = differences(st.get("params") or {}, json.loads(json.dumps(dict(params),
                                                                     default=str)))
    what = "; ".join(diff[:4]) + ("; ..." if len(diff) > 4 else "") if diff else \
        f"settings hash {st['params_hash']} recorded, {want} now"
    return f"made with other settings than the study's now ({what})"


def check_inputs(expect: Mapping[str, str]) -> None:
    """Before a job runs: each input of ``expect`` (path -> the params hash the workflow
    expects of it) that exists was made with those settings. Raises :class:`StageError`
    naming the input, the hash it records and the hash expected."""
    for path, want in expect.items():
        if not Path(path).exists():
            continue
        st = read_stamp(path)
        have = st["params_hash"] if st else None
        if have != want:
            recorded = f"settings hash {have}" if have else "no record of its settings"
            raise StageError(
                f"input {path} was made with other settings than this job expects "
                f"({recorded}, expected {want}): it changed after the workflow started, or "
                f"another phonetrain wrote it (its settings: {stamp_path(path)})",
                "rerun snakemake: its check at the start moves the input aside and its job "
                "makes it again")


def made_from(doc: Mapping[str, Any], params: Mapping[str, Any], runner: str | Path) -> bool:
    """Whether the output document ``doc`` carries the stamp of ``params`` and the runner
    binary at ``runner`` (False when it has no stamp or the runner is absent): a one-off
    ``phonetrain run`` reuses such a kernel build."""
    st = doc.get(STAMP)
    r = Path(runner)
    return (isinstance(st, dict) and r.is_file()
            and st.get("params_hash") == short_hash(dict(params))
            and st.get("runner_sha256") == sha256_file(r))
