"""Guidelines on batch size and memory: the largest batch that fits and how throughput
scales (:func:`batch_size`), and the device memory a run holds (:func:`memory`)."""

from __future__ import annotations

import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import (BATCH_KEY, MEMORY_ROLES, batch_scaling, largest_batch,
                                        memory_frame, run_label)
from phonetrain.report.findings.base import Finding, Table, not_measured, run_refs


def batch_size(runs: pd.DataFrame) -> Finding:
    """The largest batch that fits per device, model and backend (status ``ok`` vs ``oom``
    over ``sweep.batches``; :func:`~phonetrain.report.analysis.largest_batch`), and how the
    iteration time per sample (host clock) and the OpenCL buffers change from the smallest to
    the largest batch that ran. Only series with two or more batch sizes."""
    s = batch_scaling(runs)
    if not s.empty:
        s = s[s.groupby(BATCH_KEY, dropna=False)["batch_size"].transform("nunique") >= 2]
    title = "Batch size: the largest that fits, and time per sample"
    if s.empty:
        return Finding("batch_size", title, "Not measured: no model ran at two or more batch "
                       "sizes (set sweep.batches, e.g. [8, 16, 32, 64]).", measured=False)
    lim = largest_batch(runs.merge(s[["device", "model", "backend", "placement", "transfer",
                                      "kernel"]].drop_duplicates()))
    rows = []
    for _, L in lim.iterrows():
        g = s[(s[BATCH_KEY].fillna("none") == L[BATCH_KEY].values).all(axis=1)]
        ok = g[g["status"] == "ok"]
        first, last = (ok.iloc[0], ok.iloc[-1]) if len(ok) else (None, None)
        per = (f"{w.num(first['ms_per_sample'], '.3g')} -> {w.num(last['ms_per_sample'], '.3g')}"
               if first is not None else "none ran")
        rows.append([L["device"], L["model"], run_label(L, False), str(int(L["batches"])),
                     "none" if pd.isna(L["largest_ok"]) else str(int(L["largest_ok"])),
                     "none" if pd.isna(L["smallest_oom"]) else str(int(L["smallest_oom"])),
                     per, w.num(last["device_buffer_mib"], ".3g") if first is not None else ""])
    ids = runs.merge(s[BATCH_KEY + ["batch_size"]], on=BATCH_KEY + ["batch_size"])["run_id"]
    n_oom = int(lim["smallest_oom"].notna().sum())
    statement = (f"{len(lim)} model/backend series ran at two or more batch sizes; "
                 f"{n_oom} ran out of device memory at some size (largest that fits per series "
                 "in the table). Time per sample is the median iteration time (host clock) "
                 "divided by the batch size.")
    return Finding("batch_size", title, statement, rows=run_refs(sorted(set(ids))),
                   table=Table(["device", "model", "backend", "batch sizes run",
                                "largest that fits", "smallest out of memory",
                                "ms per sample, smallest -> largest batch that ran",
                                "OpenCL buffers MiB at the largest"], rows))


def _memory_sentence(dev: str, model: str, g: pd.DataFrame) -> str:
    """One clause on one device and model from its :func:`memory_frame` rows: the role that
    takes the most bytes at the largest batch (the largest lowering there), with its bytes,
    the total and its share; "it dominates" above
    :data:`~phonetrain.report.wording.DOMINANT_SHARE`, else "under half"."""
    r = g[g["batch_size"] == g["batch_size"].max()].iloc[0]
    verdict = ("it dominates" if w.dominates(r["dominant_share"]) == "dominates" else
               "under half")
    top = next(c for c, lab in MEMORY_ROLES if lab == r["dominant"])
    return (f"{dev}, {model} (batch {int(r['batch_size'])}, {r['variant']}): largest role "
            f"{r['dominant']}, {w.size(r[top])} of {w.size(r['plan_tensor_bytes'])} "
            f"({w.pct(r['dominant_share'])}: {verdict})")


def _fit_sentence(m: pd.DataFrame, dev: str, model: str) -> str | None:
    """Where ``model`` ran at two or more batch sizes on ``dev``: the largest batch that fit
    (ran to the end in every configuration that shares its plan: ``ran`` and not ``oom`` of
    :func:`memory_frame`) with its plan bytes, and the smallest
    that ran out of device memory (``oom``) with its bytes; None without a sweep."""
    g = m[(m["device"] == dev) & (m["model"] == model)]
    if g["batch_size"].nunique() < 2:
        return None
    fit, oom = g[g["ran"] & ~g["oom"]], g[g["oom"]]
    head = (f"{dev}, {model}: the largest batch that fit is {int(fit['batch_size'].max())} "
            f"({w.size(fit.loc[fit['batch_size'].idxmax(), 'plan_tensor_bytes'])} of tensors)"
            if len(fit) else f"{dev}, {model}: no batch fit")
    if not len(oom):
        return head + f", all {g['batch_size'].nunique()} batch sizes fit"
    o = oom.loc[oom["batch_size"].idxmin()]
    return head + (f"; batch {int(o['batch_size'])} ran out of device memory "
                   f"({w.size(o['plan_tensor_bytes'])})")


def memory(runs: pd.DataFrame) -> Finding:
    """Which memory role takes the most of a training step's tensors, per device and model
    (:func:`~phonetrain.report.analysis.memory_frame`: bytes of the plan's tensors by role,
    phonetrain.results.memory), and, where a model ran at two or more batch sizes
    (``sweep.batches``; runs with status ``oom`` did not fit), the largest batch that fit per
    device with its bytes. It is built from verified runs -- ``ok`` and also ``unstable``:
    the bytes are the plan's and do not depend on the timing -- and the batches that did not
    fit (``oom``) only; a run that failed verification never counts."""
    title = "Memory: which role dominates a training step's tensors"
    m = memory_frame(runs[runs["status"].isin(["ok", "unstable", "oom"])])
    if m.empty:
        return not_measured("memory", title, "no verified run has memory by role (the aggregate "
                        "reads it from each run folder's plan.json; re-aggregate)", [])
    pairs = list(m.groupby(["device", "model"], sort=True))
    lead = "; ".join(_memory_sentence(dev, model, g) for (dev, model), g in pairs) + "."
    fits = [s for s in (_fit_sentence(m, dev, model) for (dev, model), _ in pairs) if s]
    tail = (" Batch sweep: " + "; ".join(fits) + "." if fits else " No batch sweep: set "
            "sweep.batches (e.g. [16, 32, 64]) to find the largest batch that fits.")
    rows = [[r["device"], r["model"], str(int(r["batch_size"])), r["variant"],
             w.size(r["plan_tensor_bytes"]), *[w.size(r[c]) for c, _ in MEMORY_ROLES],
             f"{r['dominant']} {w.pct(r['dominant_share'])}",
             "yes" if r["oom"] else "no"] for _, r in m.iterrows()]
    note = (" Bytes are the plan's tensors (numel x 4); the runner allocates each once on the "
            "host and, on OpenCL, once as a device buffer.")
    return Finding("memory", title, lead + tail + note,
                   rows=run_refs(sorted({i for ids in m["run_ids"] for i in ids})),
                   table=Table(["device", "model", "batch", "configurations", "total",
                                *[lab for _, lab in MEMORY_ROLES], "largest role",
                                "out of memory"], rows))
