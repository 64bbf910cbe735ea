"""What a re-measurement changed: before/after tables with verdicts.

:func:`since_last_study` reads the ``history`` table (:mod:`phonetrain.results.history`) and
sets every measurement the last re-measuring aggregation replaced beside the one that replaced
it; :func:`compare` sets two results folders' runs and GEMM shapes side by side (two phones,
two branches). Both return :class:`Change` rows: the medians (ms; runs: iteration time on the
host clock, GEMM shapes: the sweep's median kernel time) with their intervals, the ratio
after / before, and the verdict of :func:`phonetrain.report.wording.change` (runs: intervals
overlap = no difference) or :func:`~phonetrain.report.wording.relative_change` (GEMM shapes,
which record no interval).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

import phonetrain.report.wording as w
from phonetrain.results import history as measurements

HASHES = (("kernel_hash", "kernel sources"), ("runner_hash", "runner"),
          ("config_hash", "config"))


@dataclass
class Change:
    """One subject before and after: ``kind`` (run, gemm), ``subject``, ``label``, the two
    medians in ms with their intervals (``before``/``after``: display strings),
    ``ratio`` (after / before, display), ``verdict`` (faster, slower, no difference, not
    valid), ``changed`` (the source files or hashes that differ), and the GFLOPS where known."""

    kind: str
    subject: str
    label: str
    before: str
    after: str
    ratio: str
    verdict: str
    changed: str


def _side(r: pd.Series) -> str:
    text = w.ms_interval(r["median_ms"], r["low_ms"], r["high_ms"])
    if r["kind"] == "gemm" and pd.notna(r["gflops"]):
        text += f" ({r['gflops']:.3g} GFLOPS)"
    if r["status"] not in ("ok", None) and pd.notna(r["status"]):
        text += f" ({r['status']})"
    return text


def changed_sources(before: pd.Series, after: pd.Series) -> str:
    """The source files whose content differs between two measurements (from their
    ``sources`` JSON), e.g. ``src/kernels/tiled/gemm.cl``; where either lacks the file list,
    the provenance hashes that differ (``kernel sources 1a2b -> 3c4d``); ``none
    (re-measured)`` when nothing differs."""
    if pd.notna(before.get("sources")) and pd.notna(after.get("sources")):
        b, a = json.loads(before["sources"]), json.loads(after["sources"])
        files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
        marks = [f + (" (new)" if f not in b else " (removed)" if f not in a else "")
                 for f in files]
        if marks:
            return ", ".join(marks)
    diffs = [f"{name} {before.get(col)} -> {after.get(col)}" for col, name in HASHES
             if before.get(col) != after.get(col) and not (pd.isna(before.get(col))
                                                           and pd.isna(after.get(col)))]
    return "; ".join(diffs) if diffs else "none (re-measured)"


def verdict(before: pd.Series, after: pd.Series) -> str:
    """faster / slower / no difference from ``before`` to ``after`` (history rows), or
    ``not valid`` when either failed verification."""
    if "wrong" in (before.get("status"), after.get("status")):
        return "not valid"
    if pd.notna(before["low_ms"]) and pd.notna(after["low_ms"]):
        return w.change((before["low_ms"], before["high_ms"]), (after["low_ms"], after["high_ms"]))
    return w.relative_change(before["median_ms"], after["median_ms"])


def change_row(before: pd.Series, after: pd.Series, label: str | None = None) -> Change:
    """A :class:`Change` from two history-shaped rows."""
    q = (after["median_ms"] / before["median_ms"]
         if pd.notna(before["median_ms"]) and before["median_ms"] > 0 else float("nan"))
    return Change(after["kind"], after["subject"], label or after["label"], _side(before),
                  _side(after), w.times(q), verdict(before, after),
                  changed_sources(before, after))


def since_last_study(history: pd.DataFrame) -> tuple[int | None, list[Change]]:
    """Takes history.parquet; returns (the number of the last aggregation that replaced a
    measurement, its changes: one per replaced measurement, runs first, sorted by subject);
    (None, []) when no measurement was ever replaced."""
    if history.empty or history["superseded_in"].isna().all():
        return None, []
    n = int(history["superseded_in"].max())
    before = history[history["superseded_in"] == n]
    before = before.assign(_order=(before["kind"] != "run")).sort_values(["_order", "subject"])
    latest = history[history["latest"].astype(bool)].set_index("subject")
    rows = [change_row(b, _row(latest, b["subject"])) for _, b in before.iterrows()
            if b["subject"] in latest.index]
    return n, rows


def _row(indexed: pd.DataFrame, key: str) -> pd.Series:
    """The row of ``indexed`` at ``key`` as a Series with ``subject`` = ``key``."""
    r = indexed.loc[key].copy()
    r["subject"] = key
    return r


def _subjects(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The current measurement of every run and GEMM shape of a results folder's tables
    (:func:`phonetrain.results.history.measurements`), taken from its history where recorded
    there (which names the source files), with a ``match`` key that ignores the device
    (``<experiment id>`` or ``<kernel>/<shape>``)."""
    now = measurements.measurements(tables)
    if now.empty:
        raise ValueError("no measured run or GEMM shape")
    h = tables["history"].drop_duplicates("measurement_id").set_index("measurement_id")
    rows = [h.loc[m].to_dict() | {"measurement_id": m} if m in h.index else r.to_dict()
            for m, (_, r) in zip(now["measurement_id"], now.iterrows())]
    out = pd.DataFrame(rows)
    out["match"] = [s.split("/", 1)[1] if "/" in s else s for s in out["subject"]]
    return out


def compare(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> list[Change]:
    """Two results folders' tables (each from :func:`phonetrain.report.build.load_tables`)
    side by side: every run and GEMM shape measured in both, A as "before" and B as
    "after". Subjects are matched by their full id (same device), else, where each folder
    holds one device, by their id without the device (two phones). Raises ValueError when
    no subject matches."""
    sa, sb = _subjects(a), _subjects(b)
    key = "subject"
    if not set(sa["subject"]) & set(sb["subject"]):
        if sa["device"].nunique() > 1 or sb["device"].nunique() > 1:
            raise ValueError("no run or GEMM shape of the same device in both folders, and a "
                             "folder holds several devices: nothing to match")
        key = "match"
    ia, ib = sa.set_index(key), sb.set_index(key)
    common = sorted(set(ia.index) & set(ib.index),
                    key=lambda s: (ia.loc[s, "kind"] != "run", s))
    if not common:
        raise ValueError("the two folders have no run or GEMM shape in common")
    out = []
    for s in common:
        ra, rb = _row(ia, s), _row(ib, s)
        label = rb["label"] if key == "subject" else \
            f"{rb['label']} ({ra['device']} -> {rb['device']})"
        out.append(change_row(ra, rb, label))
    return out


def text_table(changes: list[Change], a: str = "before", b: str = "after") -> str:
    """The changes as a plain-text table (aligned columns), headed ``a`` and ``b``."""
    head = ["kind", "subject", a, b, f"{b} / {a}", "verdict", "changed"]
    rows = [[c.kind, c.label, c.before, c.after, c.ratio, c.verdict, c.changed]
            for c in changes]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:<{n}}}" for n in widths)
    return "\n".join(fmt.format(*r).rstrip() for r in [head, ["-" * n for n in widths], *rows])
