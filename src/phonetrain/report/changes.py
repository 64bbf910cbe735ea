"""What a re-measurement changed: before/after tables with verdicts.

:func:`since_last_study` reads the ``history`` table (:mod:`phonetrain.results.history`) and
sets every measurement the last re-measuring aggregation replaced beside the one that replaced
it; :func:`compare` sets two results folders' runs and GEMM shapes side by side (two phones,
two branches). Both return :class:`Change` rows: the location estimates (ms; runs: iteration
time on the host clock by the runs' estimator, GEMM shapes: the sweep's median kernel time)
with their intervals and conditions, the ratio after / before, the verdict of
:func:`phonetrain.report.wording.judge` (a difference only when both sides are usable and their
intervals separate, else ``cannot tell`` with the reason: unstable side, intervals overlap, no
interval recorded, settings differ) and what changed: the source files, else the provenance
hashes, the device, and the tuning choice (a GEMM row's tuning class, local and global size,
build options; a run's build options). Two studies of one device are also judged against the
host's drift between them (:mod:`phonetrain.report.drift`): the subjects nothing changed for
are the controls, never called faster or slower, and a changed subject's difference stands
only beyond their band. Two sides with the same measurement or the same figures are
``identical``, never a change.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd

import phonetrain.report.wording as w
import phonetrain.report.drift as drift
from phonetrain.results import history as measurements

HASHES = (("kernel_hash", "kernel sources"), ("runner_hash", "runner"),
          ("config_hash", "config"))
TUNING = (("tuned_class", "tuning class"), ("local_size", "local size"),
          ("global_size", "global size"), ("options", "build options"))
FIGURES = ("median_ms", "low_ms", "high_ms", "gflops")


@dataclass
class Change:
    """One subject before and after: ``kind`` (run, gemm), ``subject``, ``label``, the two
    location estimates in ms with their intervals (``before``/``after``: display strings),
    ``ratio`` (after / before, display), ``verdict`` (``faster``, ``slower``, ``cannot tell
    (<reason>)``, ``not valid (<reason>)``; a difference from an unstable side adds
    ``measured under contention: <conditions>``), ``changed`` (the source files or hashes
    and the tuning choices that differ), ``conditions`` (before -> after), ``identical``
    (same measurement or same figures on both sides: not a change), ``device`` (after's) and
    ``measured`` (``side by side, N pairs``: previous and new build in alternating processes
    of one job, :mod:`phonetrain.results.paired`; ``not measured: identical build``; ``not
    side by side``: two measurements made at different times)."""

    kind: str
    subject: str
    label: str
    before: str
    after: str
    ratio: str
    verdict: str
    changed: str
    conditions: str = ""
    identical: bool = False
    device: str = ""
    measured: str = ""


def _side(r: pd.Series) -> str:
    text = w.ms_interval(r["median_ms"], r["low_ms"], r["high_ms"])
    if r["kind"] == "gemm" and pd.notna(r["gflops"]):
        text += f" ({r['gflops']:.3g} GFLOPS)"
    if r["status"] not in ("ok", None) and pd.notna(r["status"]):
        text += f" ({r['status']})"
    return text


def _value(r: pd.Series, col: str):
    v = r.get(col)
    return None if v is None or (not isinstance(v, str) and pd.isna(v)) else v


def _conditions(r: pd.Series) -> str:
    """A history row's conditions in words (:func:`phonetrain.report.wording.conditions`);
    ``not recorded`` when it has none."""
    raw = _value(r, "conditions")
    return (w.conditions(json.loads(raw)) if raw else "") or "not recorded"


def identical(before: pd.Series, after: pd.Series) -> bool:
    """True when two history rows are the same measurement (``measurement_id``) or carry the
    same figures (estimate, interval ends and GFLOPS; nulls equal)."""
    if before.get("measurement_id") == after.get("measurement_id"):
        return True
    for col in FIGURES:
        x, y = _value(before, col), _value(after, col)
        if (x is None) != (y is None) or (x is not None and not math.isclose(
                float(x), float(y), rel_tol=1e-12, abs_tol=0.0)):
            return False
    return True


def changed_tuning(before: pd.Series, after: pd.Series) -> str:
    """The tuning choices that differ between two measurements, e.g. ``tuning class medium ->
    small; local size [8, 8] -> [16, 16]``; '' when none does (or neither records one)."""
    return "; ".join(f"{name} {_value(before, col) or 'default'} -> "
                     f"{_value(after, col) or 'default'}" for col, name in TUNING
                     if _value(before, col) != _value(after, col))


def _causes(before: pd.Series, after: pd.Series) -> list[str]:
    """What differs between two measurements, as :func:`changed_sources` names it; [] when
    nothing does."""
    causes = []
    if pd.notna(before.get("sources")) and pd.notna(after.get("sources")):
        b, a = json.loads(before["sources"]), json.loads(after["sources"])
        files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
        causes += [f + (" (new)" if f not in b else " (removed)" if f not in a else "")
                   for f in files]
    if not causes:
        diffs = [f"{name} {before.get(col)} -> {after.get(col)}" for col, name in HASHES
                 if before.get(col) != after.get(col) and not (pd.isna(before.get(col))
                                                               and pd.isna(after.get(col)))]
        causes += ["; ".join(diffs)] if diffs else []
    fb, fa = _value(before, "device_fingerprint"), _value(after, "device_fingerprint")
    causes += [f"device {fb} -> {fa}"] if fb and fa and fb != fa else []
    tuning = changed_tuning(before, after)
    return causes + ([tuning] if tuning else [])


def changed_sources(before: pd.Series, after: pd.Series) -> str:
    """What differs between two measurements: the source files whose content differs (from
    their ``sources`` JSON), e.g. ``src/kernels/tiled/gemm.cl``, or where either lacks the
    file list the provenance hashes that differ (``kernel sources 1a2b -> 3c4d``), the device
    (its ``device_fingerprint``), then the tuning choices (:func:`changed_tuning`); ``none
    (re-measured)`` when nothing differs."""
    return ", ".join(_causes(before, after)) or "none (re-measured)"


def unchanged(before: pd.Series, after: pd.Series) -> bool:
    """True when no source file, hash, device or tuning choice differs
    (:func:`changed_sources` names none): a control of the host's drift
    (:mod:`phonetrain.report.drift`)."""
    return not _causes(before, after)


def history_side(r: pd.Series) -> w.Side:
    """A history row as a side of a comparison (:class:`phonetrain.report.wording.Side`):
    its estimate and interval, status and reason, estimator (``interval``), the settings it
    was measured with and its conditions."""
    est = _value(r, "interval")
    return w.Side(*(float("nan") if _value(r, c) is None else float(r[c])
                    for c in ("median_ms", "low_ms", "high_ms")),
                  status=str(_value(r, "status") or "ok"),
                  reason=str(_value(r, "status_reason") or ""),
                  estimator=None if est in (None, "none") else est,
                  settings={k: _value(r, k) for k in measurements.COMPARED_SETTINGS},
                  conditions=_conditions(r) if _value(r, "conditions") else "")


Drifts = dict[tuple[str, str], drift.Drift]


def host_drift(pairs: list[tuple[pd.Series, pd.Series]]) -> Drifts:
    """The host's drift between two studies per (kind, device) (:func:`drift.bands`) from
    the unchanged subjects (:func:`unchanged`) among ``pairs`` of (before, after) rows."""
    return drift.bands(((b["kind"], a["device"]), b["kind"], history_side(b), history_side(a))
                       for b, a in pairs if unchanged(b, a) and not identical(b, a))


def verdict(before: pd.Series, after: pd.Series, drifts: Drifts | None = None) -> w.Verdict:
    """The :class:`~phonetrain.report.wording.Verdict` from ``before`` to ``after`` (history
    rows): their kernel or iteration times by :func:`phonetrain.report.wording.judge`, and,
    with ``drifts`` (two studies of one device, :func:`host_drift`), within the host's drift
    by :func:`phonetrain.report.drift.judge`."""
    if drifts is None:
        return w.judge(history_side(before), history_side(after))
    return drift.judge(history_side(before), history_side(after),
                       unchanged=unchanged(before, after),
                       drift=drifts.get((before["kind"], after["device"])))


def side_by_side(before: pd.Series, after: pd.Series) -> dict | None:
    """The side-by-side verdict (``paired``, :mod:`phonetrain.results.paired`) ``after``
    records against the build ``before`` was measured with (its previous build's kernel hash
    is ``before``'s), else None: the two were measured at different times."""
    raw = _value(after, "paired")
    if not raw or before.get("measurement_id") == after.get("measurement_id"):
        return None
    doc = json.loads(raw)
    prev = doc.get("previous_kernel_hash")
    return doc if prev is None or prev == _value(before, "kernel_hash") else None


APART = "not side by side"


def paired_text(doc: dict) -> tuple[str, str]:
    """A side-by-side verdict (``paired``) in words: (verdict, how it was measured), e.g.
    (``slower (interval 1.27x-1.35x, above 1.05x)``, ``side by side, 3 pairs``) or
    (``no change (identical build)``, ``not measured: identical build``)."""
    if doc.get("identical_build"):
        return "no change (identical build)", "not measured: identical build"
    word = doc.get("verdict", w.CANNOT_TELL)
    return (f"{word} ({doc['reason']})" if doc.get("reason") else word,
            f"side by side, {doc.get('pairs', 0)} pairs")


def change_row(before: pd.Series, after: pd.Series, label: str | None = None,
               drifts: Drifts | None = None) -> Change:
    """A :class:`Change` from two history-shaped rows: the side-by-side verdict where
    ``after`` records one against ``before``'s build (:func:`side_by_side`), else judged by
    :func:`verdict`, ``measured`` saying ``not side by side``."""
    q = (after["median_ms"] / before["median_ms"]
         if pd.notna(before["median_ms"]) and before["median_ms"] > 0 else float("nan"))
    pair = side_by_side(before, after)
    same = pair is None and identical(before, after)
    if pair is not None:
        text, how = paired_text(pair)
        q = pair["ratio"] if pair.get("ratio") is not None else \
            (1.0 if pair.get("identical_build") else q)
    else:
        text = "identical (same measurement)" if same else str(verdict(before, after, drifts))
        how = "" if same else APART
    return Change(after["kind"], after["subject"], label or after["label"], _side(before),
                  _side(after), w.times(q), text,
                  "" if same else changed_sources(before, after),
                  f"{_conditions(before)} -> {_conditions(after)}", same,
                  device=str(after["device"]), measured=how)


def since_last_study(history: pd.DataFrame) -> tuple[int | None, list[Change]]:
    """Takes history.parquet; returns (the number of the last aggregation that replaced a
    measurement by one with other figures, its changes: one per such replaced measurement,
    runs first, sorted by subject); (None, []) when no measurement was ever replaced so.
    Replacements with identical figures are not changes and are left out."""
    if history.empty or history["superseded_in"].isna().all():
        return None, []
    latest = history[history["latest"].astype(bool)].set_index("subject")
    for n in sorted({int(x) for x in history["superseded_in"].dropna()}, reverse=True):
        before = history[history["superseded_in"] == n]
        before = before.assign(_order=(before["kind"] != "run")).sort_values(
            ["_order", "subject"])
        pairs = [(b, _row(latest, b["subject"])) for _, b in before.iterrows()
                 if b["subject"] in latest.index]
        drifts = host_drift(pairs)
        rows = [change_row(b, a, drifts=drifts) for b, a in pairs]
        rows = [r for r in rows if not r.identical]
        if rows:
            return n, rows
    return None, []


def _row(indexed: pd.DataFrame, key: str) -> pd.Series:
    """The row of ``indexed`` at ``key`` as a Series with ``subject`` = ``key``."""
    r = indexed.loc[key].copy()
    r["subject"] = key
    return r


def _subjects(tables: dict[str, pd.DataFrame], name: str = "a results folder") -> pd.DataFrame:
    """The current measurement of every run and GEMM shape of a results folder's tables
    (:func:`phonetrain.results.history.measurements`), taken from its history where recorded
    there (which names the source files), with a ``match`` key that ignores the device
    (``<experiment id>`` or ``<kernel>/<shape>``); ``name`` names the folder in the error
    raised when it measured nothing."""
    now = measurements.measurements(tables)
    if now.empty:
        raise ValueError(f"{name}: no measured run or GEMM shape in its summary tables; "
                         "measure there first (the workflow, or `phonetrain run` then "
                         "`phonetrain aggregate --found`)")
    h = tables["history"].drop_duplicates("measurement_id").set_index("measurement_id")
    rows = [h.loc[m].to_dict() | {"measurement_id": m} if m in h.index else r.to_dict()
            for m, (_, r) in zip(now["measurement_id"], now.iterrows())]
    out = pd.DataFrame(rows)
    out["match"] = [s.split("/", 1)[1] if "/" in s else s for s in out["subject"]]
    return out


def compare(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame],
            names: tuple[str, str] = ("A", "B")) -> list[Change]:
    """Two results folders' tables (each from :func:`phonetrain.report.build.load_tables`)
    side by side: every run and GEMM shape measured in both, A as "before" and B as
    "after". Subjects are matched by their full id (same device), else, where each folder
    holds one device, by their id without the device (two phones). Raises ValueError naming
    the folders (``names``) and their devices when no subject matches."""
    sa, sb = _subjects(a, names[0]), _subjects(b, names[1])
    held = "; ".join(f"{n} holds {sorted(s['device'].unique())}" for n, s in zip(names, (sa, sb)))
    key = "subject"
    if not set(sa["subject"]) & set(sb["subject"]):
        if sa["device"].nunique() > 1 or sb["device"].nunique() > 1:
            raise ValueError(f"no run or GEMM shape of the same device in both folders ({held}),"
                             " and a folder of several devices cannot be matched to another "
                             "device; compare folders that share a device, or two folders of "
                             "one device each")
        key = "match"
    ia, ib = sa.set_index(key), sb.set_index(key)
    common = sorted(set(ia.index) & set(ib.index),
                    key=lambda s: (ia.loc[s, "kind"] != "run", s))
    if not common:
        raise ValueError(f"the two folders have no run or GEMM shape in common ({held}); "
                         "compare folders that measured the same experiments")
    pairs = [(_row(ia, s), _row(ib, s)) for s in common]
    if key == "match":   # two devices: the device is the cause, no host drift to gauge
        return [change_row(ra, rb, f"{rb['label']} ({ra['device']} -> {rb['device']})")
                for ra, rb in pairs]
    drifts = host_drift(pairs)
    return [change_row(ra, rb, drifts=drifts) for ra, rb in pairs]


def text_table(changes: list[Change], a: str = "before", b: str = "after") -> str:
    """The changes as a plain-text table (aligned columns), headed ``a`` and ``b``; identical
    measurements are left out and counted in a last line."""
    head = ["kind", "subject", a, b, f"{b} / {a}", "verdict", "changed",
            f"conditions ({a} -> {b})", "device", "measured"]
    rows = [[c.kind, c.label, c.before, c.after, c.ratio, c.verdict, c.changed, c.conditions,
             c.device, c.measured] for c in changes if not c.identical]
    same = sum(c.identical for c in changes)
    tail = [f"{same} run(s) or GEMM shape(s) identical on both sides (same measurement), "
            "not listed"] if same else []
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:<{n}}}" for n in widths)
    return "\n".join([fmt.format(*r).rstrip() for r in [head, ["-" * n for n in widths], *rows]]
                     + tail)
