"""The measurement history: every measurement a study has aggregated, the replaced ones kept.

A *subject* is what gets measured again after an edit: a run (``run_id``) or a GEMM shape of
a kernel version on a device (``<device>/<kernel>/<gemm> <m>x<n>x<k>``). Each aggregation
turns the summary tables into one *measurement* per subject (:func:`measurements`: its
location estimate and interval (runs: ``iteration_ms`` by ``iteration_estimator``), the
settings and conditions it was measured under, a GEMM row's tuning choice, its provenance
hashes, and the per-file hashes of the sources it
was built from where they are known), and :func:`update` merges them into the history of the
previous aggregations: a subject whose measurement changed (a new ``measurement_id``: other
values or other kernel, runner or config hashes) gets the new one as ``latest`` and keeps
the old one, marked ``superseded_in`` the number of this aggregation. An aggregation that
changes nothing adds nothing, so re-aggregating gives the same table.

The history lives in two files (paths from :class:`phonetrain.layout.Layout`): the ledger
``history/measurements.parquet``, read and rewritten by every aggregation and never an output
of a workflow rule (Snakemake deletes a rule's outputs before rerunning it), and its copy
``summary/history.parquet`` that the report reads. Schema:
:data:`phonetrain.results.schema.HISTORY`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import pandas as pd

from phonetrain.io import short_hash
from phonetrain.results import schema

# (kind, device, kernel, kernel_hash, runner_hash) -> {source path: content hash} or None
Sources = Callable[[str, str, Optional[str], Optional[str], Optional[str]],
                   Optional[dict[str, str]]]
MEASURED_RUN = ("ok", "wrong", "unstable")   # run statuses that carry an iteration time
RUN_VALUES = ("iteration_median_ms", "iteration_p25_ms", "iteration_p75_ms",
              "iteration_min_ms", "iteration_max_ms", "loss_first", "loss_last")


CONDITIONS = ("load_avg_1m", "other_cpu_share", "omp_wait_policy", "cpu_mhz_start",
              "cpu_mhz_end", "temperature_c_start", "temperature_c_end")
SETTINGS = ("threads", "iterations", "repeats", "batch_size", "dataset")   # recorded
# The settings both sides of a comparison must share: not the measured iteration count
# (``iterations``), which adaptive measurement makes an outcome (each process stops once its
# interval is narrow enough), nor the processes per run (``repeats``, the remedy an unstable
# verdict names): their effect is in the interval.
COMPARED_SETTINGS = ("threads", "batch_size", "dataset")
TUNING = ("tuned_class", "local_size", "global_size", "options")
GEMM_INTERVAL = "median of the sweep's repeats, runner bench-gemm interval"


def _plain(x: Any) -> Any:
    """``x`` as a JSON value: None for null, numpy scalars as Python numbers."""
    if x is None or (not isinstance(x, str) and pd.isna(x)):
        return None
    return x.item() if hasattr(x, "item") else x


def _conditions(r: pd.Series) -> str | None:
    """The measurement conditions the row records, as JSON {column: value}; None when none."""
    c = {k: _plain(r.get(k)) for k in CONDITIONS if _plain(r.get(k)) is not None}
    return json.dumps(c, sort_keys=True) if c else None


def _estimate(r: pd.Series) -> tuple[Any, Any, Any, str]:
    """(estimate, low, high, estimator) of a run's iteration time: ``iteration_ms`` with its
    interval and ``iteration_estimator`` (``none`` when not recorded)."""
    name = r.get("iteration_estimator")
    return (_num(r.get("iteration_ms")), _num(r.get("iteration_low_ms")),
            _num(r.get("iteration_high_ms")), "none" if _plain(name) is None else str(name))


def _label(r: pd.Series) -> str:
    if r["placement"] in (None, "none", "") or pd.isna(r["placement"]):
        return f"{r['model']} cpu"
    return f"{r['model']} {r['placement']}/{r['transfer']} {r['kernel']}"


def _prov(r: pd.Series) -> dict[str, Any]:
    return {k: (None if pd.isna(r.get(k)) else r.get(k)) for k in
            ("config_hash", "kernel_hash", "runner_hash", "device_fingerprint", "git_rev")}


def _num(x: Any) -> float | None:
    return None if x is None or pd.isna(x) else float(x)


def run_measurements(runs: pd.DataFrame, sources: Sources | None = None) -> list[dict]:
    """One measurement per run that has an iteration time (status ok, wrong, unstable)."""
    out = []
    for _, r in runs[runs["status"].isin(MEASURED_RUN)].iterrows():
        est, lo, hi, name = _estimate(r)
        prov = _prov(r)
        ident = {"subject": r["run_id"], **{k: _num(r[k]) for k in RUN_VALUES},
                 **{k: prov[k] for k in ("config_hash", "kernel_hash", "runner_hash")}}
        src = sources("run", r["device"], None if pd.isna(r["kernel"]) else r["kernel"],
                      prov["kernel_hash"], prov["runner_hash"]) if sources else None
        out.append({"kind": "run", "subject": r["run_id"], "device": r["device"],
                    "kernel": None if pd.isna(r["kernel"]) else r["kernel"],
                    "label": _label(r), "status": r["status"],
                    "status_reason": _plain(r.get("status_reason")),
                    "median_ms": est, "low_ms": lo, "high_ms": hi, "interval": name,
                    "gflops": _num(r["kernel_gflops"]),
                    "measurement_id": short_hash(ident),
                    "sources": json.dumps(src, sort_keys=True) if src else None,
                    **{k: _plain(r.get(k)) for k in SETTINGS}, "conditions": _conditions(r),
                    "paired": _plain(r.get("paired")),
                    **{k: _plain(r.get(k)) for k in TUNING}, **prov})
    return out


def gemm_measurements(gemm: pd.DataFrame, sources: Sources | None = None) -> list[dict]:
    """One measurement per GEMM shape of each kernel version and device with a GFLOPS figure:
    the sweep's ``median_ms`` with its interval ``low_ms``..``high_ms`` (null until the runner
    records one), the tuning choice it ran with, and the conditions where the table records
    them."""
    out = []
    for _, r in gemm[gemm["gflops"].notna() & gemm["status"].isin(["ok", "wrong"])].iterrows():
        shape = f"{r['gemm']} {r['m']}x{r['n']}x{r['k']}"
        subject = f"{r['device']}/{r['kernel']}/{shape}"
        prov = _prov(r)
        ident = {"subject": subject, "gflops": _num(r["gflops"]),
                 "median_ms": _num(r["median_ms"]),
                 **{k: prov[k] for k in ("config_hash", "kernel_hash", "runner_hash")}}
        src = sources("gemm", r["device"], r["kernel"], prov["kernel_hash"],
                      prov["runner_hash"]) if sources else None
        out.append({"kind": "gemm", "subject": subject, "device": r["device"],
                    "kernel": r["kernel"], "label": f"{r['kernel']} {shape}",
                    "status": r["status"], "status_reason": _plain(r.get("status_reason")),
                    "median_ms": _num(r["median_ms"]), "low_ms": _num(r.get("low_ms")),
                    "high_ms": _num(r.get("high_ms")),
                    "interval": GEMM_INTERVAL if pd.notna(r.get("low_ms")) else "none",
                    "gflops": _num(r["gflops"]), "measurement_id": short_hash(ident),
                    "sources": json.dumps(src, sort_keys=True) if src else None,
                    "conditions": _conditions(r), "paired": _plain(r.get("paired")),
                    **{k: _plain(r.get(k)) for k in TUNING}, **prov})
    return out


def measurements(tables: dict[str, pd.DataFrame], sources: Sources | None = None) -> pd.DataFrame:
    """Takes the summary tables (``runs``, ``gemm``); returns this aggregation's measurements
    as history rows without ``latest``, ``recorded_in`` and ``superseded_in``. ``sources``
    gives the per-file hashes of the sources a measurement was built from, or None where they
    are not known (then a later comparison names the hashes that changed instead of files)."""
    rows = run_measurements(tables["runs"], sources) + gemm_measurements(tables["gemm"], sources)
    return pd.DataFrame(rows)


def update(previous: pd.DataFrame, current: pd.DataFrame) -> pd.DataFrame:
    """Merge this aggregation's measurements (:func:`measurements`) into the previous history
    (a history table, possibly empty); returns the new history (schema ``history``).

    A subject whose latest measurement has the same ``measurement_id`` is unchanged. Otherwise
    the aggregation gets the number n = 1 + the highest number in the history: the new
    measurement is ``latest`` with ``recorded_in`` n, the one it replaces stays with
    ``latest`` False and ``superseded_in`` n. Subjects absent now (a failed run, a run no
    longer in the sweep) keep their last measurement."""
    prev = schema.frame(previous, "history") if len(previous) else schema.empty("history")
    n_prev = pd.concat([prev["recorded_in"], prev["superseded_in"]]).dropna()
    n = int(n_prev.max()) + 1 if len(n_prev) else 1
    latest = prev[prev["latest"].astype(bool)].set_index("subject") if len(prev) else None
    new_rows, replaced = [], set()
    for _, c in (current.iterrows() if len(current) else []):
        if latest is not None and c["subject"] in latest.index:
            if latest.loc[c["subject"], "measurement_id"] == c["measurement_id"]:
                continue
            replaced.add(c["subject"])
        new_rows.append({**c.to_dict(), "latest": True, "recorded_in": n,
                         "superseded_in": None})
    prev = prev.copy()
    mask = prev["latest"].astype(bool) & prev["subject"].isin(replaced)
    prev.loc[mask, "latest"] = False
    prev.loc[mask, "superseded_in"] = n
    if not new_rows:
        return schema.frame(prev, "history")
    out = pd.concat([prev, schema.frame(pd.DataFrame(new_rows), "history")], ignore_index=True)
    return schema.frame(out.sort_values(["kind", "subject", "recorded_in"], kind="stable")
                        .reset_index(drop=True), "history")
