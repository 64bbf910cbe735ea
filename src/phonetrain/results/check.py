"""The check of a study's run folders: it finds each measured run that must be measured again
and moves it aside, so that the run's outputs are missing and Snakemake reruns its jobs.

Snakemake alone decides what reruns. A run folder the workflow cannot trust is taken out of
its way instead of being judged by params that change on their own: it is moved (one
``os.replace``, nothing copied, nothing measured lost) into
``quarantine/<UTC time>/<its path under the results folder>`` (:meth:`Layout.quarantine`),
with a note beside it (``<path>.why.json``: ``why``, ``moved_at_utc``, ``from``).

A measured run (its folder holds a ``run.json``) is a finding when

- a failed job's record (``failed.json``) sits beside that older measurement;
- its folder is damaged (:func:`phonetrain.results.runs.folder_problems`);
- it was measured under other settings than the study's now: its ``params.json`` differs
  from the run params the workflow gives (:func:`phonetrain.results.runs.changed_params`;
  location-only keys aside), e.g. a one-off ``phonetrain run`` wrote it;

A run the measurement verdict calls *unstable* is never a finding: the train job already
measured it again a bounded number of times (``measure.max_attempts``) and kept it with its
reason and figures, so a rerun of the workflow plans nothing for it by itself. Measuring it again
is asked for explicitly: ``phonetrain refresh --unstable`` (:func:`unstable_runs`).

``hashes`` False (the workflow's start, every parse) checks contents by sizes and row counts
only; the ``phonetrain check`` command also compares every ledger file's SHA-256.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple

from phonetrain import layout
from phonetrain.errors import ResultsFileError
from phonetrain.io import read_json, utc_stamp, write_json
from phonetrain.layout import Layout

# phonetrain.results.runs (pandas) is imported where a measured run folder is read: the
# workflow's start imports this module on every parse, most often with no run folder yet.


class Finding(NamedTuple):
    """A run folder to move aside (``path``, as the layout spells it) and why."""

    path: str
    why: str


def run_finding(run_dir: str | Path, params: Mapping[str, Any], *,
                hashes: bool = True) -> str | None:
    """Why the measured run in ``run_dir`` must be measured again, or None (also when it
    was never measured: Snakemake runs it anyway). ``params``: the run's params as the
    workflow gives them now."""
    run_dir = Path(run_dir)
    if not (run_dir / layout.RUN).exists():
        return None
    if (run_dir / layout.FAILED).exists():
        return f"a failed job's record ({layout.FAILED}) beside an older measurement"
    from phonetrain.results.runs import changed_params, folder_problems

    problems = folder_problems(run_dir, hashes=hashes)
    if problems:
        return f"damaged: {'; '.join(problems)}"
    changed = changed_params(run_dir, params)
    if changed:
        return f"measured under other settings ({', '.join(changed)} differ)"
    return None


def findings(run_params: Mapping[tuple[str, str], Mapping[str, Any]], L: Layout, *,
             hashes: bool = True) -> list[Finding]:
    """The study's run folders to move aside, in the order of ``run_params`` ((device,
    experiment) -> run params, as :func:`phonetrain.stages.params.job_params` gives
    ``run``). Raises nothing for a damaged folder: what cannot be read is a finding."""
    out = []
    for (device, exp), p in run_params.items():
        rdir = L.run_dir(device, exp)
        why = run_finding(rdir, p, hashes=hashes)
        if why:
            out.append(Finding(rdir, why))
    return out


def unstable_runs(L: Layout) -> list[Finding]:
    """Every measured run folder under the results folder ``L`` (``runs/<device>/<experiment>``)
    whose measurement verdict calls it unstable, or whose verdict file cannot be read (no
    verdict to keep it by), sorted by path, with the reasons: what ``phonetrain refresh
    --unstable`` moves aside."""
    from phonetrain.results.runs import unstable_reason

    out = []
    for rdir in sorted(Path(L.root, "runs").glob("*/*")):
        if not (rdir / layout.RUN).exists():
            continue
        why = unstable_reason(rdir)
        if why:
            out.append(Finding(str(rdir), f"unstable: {why}"))
        elif (bad := unreadable_verdict(rdir)):
            out.append(Finding(str(rdir), bad))
    return out


def unreadable_verdict(run_dir: str | Path) -> str | None:
    """Why the run's ``measurement.json`` cannot be read (named, with the remedy), or None when
    it reads or is absent."""
    p = Path(run_dir) / layout.MEASUREMENT
    try:
        if p.exists():
            read_json(p)
    except ResultsFileError as e:
        return f"{e.message}: no measurement verdict; measure the run again"
    return None


def move_aside(path: str | Path, why: str, L: Layout, stamp: str | None = None) -> Path:
    """Move ``path`` (a file or folder under the results folder ``L``) to
    ``quarantine/<stamp>/<its relative path>``, remove the summary's and the report's
    ``COMPLETE`` markers (the summary holds what was moved; and Snakemake reruns a job for a
    missing input only when one of its own outputs is missing) and write the note beside it;
    returns where it went. Raises :class:`ValueError` for a path outside the results folder
    and :class:`ResultsFileError` naming the path and the quarantine folder when the move fails
    (nothing is moved then: the one ``os.replace`` either happened or did not)."""
    path = Path(path)
    rel = os.path.relpath(path, L.root)
    if rel.startswith(".."):
        raise ValueError(f"{path}: not under the results folder {L.root}")
    stamp = stamp or utc_stamp()
    dest = Path(L.quarantine(stamp, Path(rel).as_posix()))
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
    except OSError as e:
        hint = ("keep quarantine/ on the same filesystem as the run folders (is it a link to "
                "another disk?)" if e.errno == errno.EXDEV else
                f"make {Path(L.root, 'quarantine')} a folder you can write to, with free space")
        raise ResultsFileError(f"{path}: cannot move it aside to {dest} ({e.strerror or e}); "
                               "nothing was moved, the measurement is where it was", hint) from None
    for marker in (L.summary_complete(), L.report_complete()):
        Path(marker).unlink(missing_ok=True)
    note = {"why": why, "moved_at_utc": stamp, "from": Path(rel).as_posix()}
    try:
        write_json(note, dest.with_name(dest.name + layout.QUARANTINE_NOTE))
    except OSError as e:
        raise ResultsFileError(f"{path}: moved aside to {dest}, but its note "
                               f"({layout.QUARANTINE_NOTE}) could not be written "
                               f"({e.strerror or e})", "free space in the results folder; the "
                               "move stands, the next snakemake all measures it again") from None
    return dest


def quarantine(found: list[Finding], L: Layout) -> Iterator[tuple[Finding, Path]]:
    """Move every finding aside into one quarantine folder (:func:`move_aside`), yielding
    (finding, where it went) as each is moved, so a caller reports each move before the next
    is tried. Raises what :func:`move_aside` raises, for the first finding that cannot be moved
    (those before it are moved and were yielded, those after it are not moved)."""
    stamp = utc_stamp()
    for f in found:
        yield f, move_aside(f.path, f.why, L, stamp)
