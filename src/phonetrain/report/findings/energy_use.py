"""The guideline on energy: the least energy per iteration per device and model
(:func:`energy`)."""

from __future__ import annotations

import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import energy_differs, energy_frame, energy_gaps
from phonetrain.report.findings.base import Finding, Table, flag_of, run_refs


def _energy_sentence(dev: str, model: str, g: pd.DataFrame) -> str:
    """One sentence on one device and model from its :func:`energy_frame` rows (least
    energy first): the least energy per iteration and its mean power (and the runs within its
    uncertainty: :func:`energy_differs`), and how the fastest (or, when that is the same run,
    the costliest) configuration compares."""
    least = g.iloc[0]
    head = (f"{dev}, {model}: {least['label']} used the least energy per training iteration, "
            f"{w.num(least['energy_per_iteration_mj'])} mJ at "
            f"{w.num(least['mean_power_w'])} W mean power")
    if len(g) == 1:
        return head + " (the only configuration measured)."
    tied = [r["label"] for _, r in g.iloc[1:].iterrows() if not energy_differs(least, r)]
    if tied:
        head += f" (tied within the uncertainty with {', '.join(tied)})"
    fastest = g.loc[g["iteration_median_ms"].idxmin()]
    other, role = ((g.iloc[-1], "the costliest") if fastest["run_id"] == least["run_id"]
                   else (fastest, "the fastest"))
    ratio = other["energy_per_iteration_mj"] / least["energy_per_iteration_mj"]
    same = "" if energy_differs(least, other) else ", within the uncertainty"
    also = "; it was also the fastest" if role == "the costliest" else ""
    return (head + f"{also}; {role}, {other['label']}, used "
            f"{w.num(other['energy_per_iteration_mj'])} mJ ({w.times(ratio)} the least{same}) "
            f"at {w.num(other['mean_power_w'])} W.")


def _energy_gap_sentences(runs: pd.DataFrame, measured: set[str]) -> list[str]:
    """Per device, why verified runs have no energy figure
    (:func:`~phonetrain.report.analysis.energy_gaps`): "Not measured on <device> (<why>)."
    for a device without any, else how many of its runs lack one and why."""
    out = []
    for dev, g in energy_gaps(runs).groupby("device", sort=True):
        for why, h in g.groupby("why", sort=True):
            out.append(f"Not measured on {dev} ({why})." if dev not in measured else
                       f"{len(h)} more verified run(s) on {dev} have no energy figure ({why}).")
    return out


def energy(runs: pd.DataFrame) -> Finding:
    """Energy per training iteration per device and model, from the runner's battery power
    sampler (:func:`~phonetrain.report.analysis.energy_frame`; verified runs only): which
    configuration costs the least energy, how the fastest compares (energy = mean power x
    time, so a faster run at higher power can cost more), the devices where energy was not
    measured, and the runs whose clocks dropped while they were measured (``throttled``)."""
    title = "Energy per iteration: which configuration costs the least"
    e = energy_frame(runs)
    gaps = _energy_gap_sentences(runs, set(e["device"]))
    if e.empty:
        return Finding("energy", title, " ".join(gaps) or "Not measured: no verified run.",
                       measured=False)
    sentences = [_energy_sentence(dev, model, g)
                 for (dev, model), g in e.groupby(["device", "model"], sort=True)] + gaps
    hot = e.loc[e["throttled"].fillna(False).astype(bool), "run_id"]
    if len(hot):
        sentences.append("Throttled while measured (a sampled clock dropped; their time and "
                         f"energy are at lower clocks): {', '.join(hot)}.")
    flags = {True: "yes", False: "no"}
    rows = [[r["device"], r["model"], r["label"],
             f"{w.num(r['energy_per_iteration_mj'], '.4g')} +- "
             f"{w.num(r['energy_uncertainty_mj'], '.2g')}",
             w.num(r["energy_per_sample_mj"]), w.num(r["mean_power_w"]),
             w.num(r["iteration_median_ms"]), w.num(r["power_sample_hz"], ".0f"),
             flags.get(flag_of(r, "throttled"), "not known")] for _, r in e.iterrows()]
    return Finding("energy", title, " ".join(sentences), rows=run_refs(e["run_id"]),
                   table=Table(["device", "model", "run", "energy per iteration (mJ, +- SE)",
                                "energy per sample (mJ)", "mean power (W)",
                                "median iteration (ms, host clock)", "sampling (Hz)",
                                "throttled"], rows))
