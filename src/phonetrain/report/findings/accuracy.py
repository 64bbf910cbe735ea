"""The guideline on time to accuracy: who reaches the highest held-out accuracy first
(:func:`accuracy_first`)."""

from __future__ import annotations

import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import time_to_accuracy
from phonetrain.report.findings.base import Finding, Table, run_refs


def _accuracy_sentence(dev: str, model: str, g: pd.DataFrame) -> str:
    """One sentence on one device and model from its :func:`time_to_accuracy` rows: who
    reached the highest accuracy first (several named together on a tie in time), when the
    others did, and each one's accuracy at equal wall time."""
    first = g.iloc[0]
    secs = lambda ms: f"{w.num(ms / 1e3)} s"  # noqa: E731
    if len(g) == 1:
        return (f"{dev}, {model}: only {first['label']} evaluated (verified runs); its highest "
                f"held-out accuracy was {w.pct(first['target'])}, after "
                f"{secs(first['reached_target_ms'])}.")
    tied = g[g["reached_target_ms"] == first["reached_target_ms"]]
    who = " and ".join(tied["label"])
    head = (f"{dev}, {model}: {who} reached the highest held-out accuracy, "
            f"{w.pct(first['target'])}, " + ("first" if len(tied) == 1 else "at the same time")
            + f", after {secs(first['reached_target_ms'])}")
    others = g.iloc[len(tied):]
    reached = others[others["reached_target_ms"].notna()]
    tail = (f"; {', '.join(reached['label'])} reached it later "
            f"({', '.join(secs(t) for t in reached['reached_target_ms'])})"
            if len(reached) else "; no other configuration reached it" if len(others) else "")
    at = g.sort_values("accuracy_at_common", ascending=False, na_position="last")
    acc = lambda a: "no evaluation yet" if pd.isna(a) else w.pct(a)  # noqa: E731
    same = at["accuracy_at_common"].nunique(dropna=False) == 1
    common = (f"at equal wall time ({secs(first['common_ms'])}) "
              + (f"all had {acc(at['accuracy_at_common'].iloc[0])}" if same else
                 ", ".join(f"{r['label']} {acc(r['accuracy_at_common'])}"
                           for _, r in at.iterrows())))
    return head + tail + "; " + common + "."


def accuracy_first(runs: pd.DataFrame, iterations: pd.DataFrame) -> Finding:
    """Which configuration reached the highest held-out accuracy first, per device and model,
    and the accuracy each had at equal wall time (the shortest run's last evaluation); from
    :func:`~phonetrain.report.analysis.time_to_accuracy` (verified runs with
    ``measure.eval_every`` > 0; wall time by host clock, warm-up included)."""
    title = "Time to accuracy: which configuration reaches it first"
    t = time_to_accuracy(runs, iterations)
    if t.empty:
        return Finding("accuracy_first", title, "Not measured: no verified run evaluated on a "
                       "held-out split; set measure.eval_every (e.g. measure.eval_every=10) "
                       "to record held-out accuracy.", measured=False)
    sentences = [_accuracy_sentence(dev, model, g)
                 for (dev, model), g in t.groupby(["device", "model"], sort=True)]
    rows = [[r["device"], r["model"], r["label"], w.pct(r["best_accuracy"]),
             w.num(r["best_at_ms"] / 1e3), w.num(r["reached_target_ms"] / 1e3),
             w.num(r["common_ms"] / 1e3), w.pct(r["accuracy_at_common"])]
            for _, r in t.iterrows()]
    statement = (" ".join(sentences) + " Wall time is the runner's iteration times summed "
                 "(host clock, warm-up included); held-out accuracy is computed from each "
                 "run's own parameters.")
    return Finding("accuracy_first", title, statement, rows=run_refs(t["run_id"]),
                   table=Table(["device", "model", "run", "best held-out accuracy",
                                "reached at (s)", "reached the highest of all at (s)",
                                "equal wall time (s)", "accuracy then"], rows))
