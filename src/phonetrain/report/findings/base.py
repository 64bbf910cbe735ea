"""What every guideline shares: the :class:`Finding` and :class:`Table` it returns, the run
filters (verified, measured), the run-against-run verdict (:func:`run_verdict`) and the
unstable runs' list.

Only runs with status ``ok`` (ran and verified) give a finding its figures; ``wrong``,
``failed`` and ``skipped`` runs never do, and ``unstable`` runs enter only the comparisons of
two runs, where a difference from them is stated only when it survives their noise, marked
"measured under contention" (:func:`phonetrain.report.wording.judge`). Two runs differ only
when both are usable and the intervals of their location estimates (runs.parquet
``iteration_ms``) separate (:func:`run_verdict`); otherwise the verdict is "cannot tell" with
its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

import phonetrain.report.wording as w
from phonetrain.report.analysis import estimate, gpu_api_label, interval, is_cpu
from phonetrain.report.paper import Anchor


@dataclass
class Table:
    """A finding's compact table: ``columns`` (headers, units in them) and ``rows`` (display
    strings, one list per row)."""

    columns: list[str]
    rows: list[list[str]]


@dataclass
class Finding:
    """One guideline: ``key`` (stable id, the HTML anchor ``finding-<key>``), ``title``,
    ``statement`` (one or two sentences with the numbers and the measure they use), ``table``
    (the comparisons behind it), ``rows`` (references to the table rows it came from),
    ``paper`` (the seed paper's figures it is set beside), and ``measured`` False when the
    data to decide was missing."""

    key: str
    title: str
    statement: str
    rows: list[str] = field(default_factory=list)
    paper: list[Anchor] = field(default_factory=list)
    table: Table | None = None
    measured: bool = True


def run_refs(run_ids) -> list[str]:
    """Row references ``runs.parquet: <run_id>``."""
    return [f"runs.parquet: {r}" for r in run_ids]


def ok_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The verified runs (status ``ok``); unstable runs are kept out like wrong ones."""
    return runs[runs["status"] == "ok"]


def measured_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with an iteration time to compare: ``ok`` and ``unstable`` (the comparison's
    verdict says when an unstable side leaves it undecided)."""
    return runs[runs["status"].isin(["ok", "unstable"])]


def baseline_first(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` ordered usable (``ok``) first, then by iteration time: the first row per group
    is the baseline a comparison uses."""
    return runs.assign(_unstable=runs["status"] != "ok").sort_values(
        ["_unstable", "iteration_ms"]).drop(columns="_unstable")


# Settings both runs of a guideline's comparison must share (before/after comparisons of one
# run use phonetrain.results.history.SETTINGS).
PAIR_SETTINGS = ("batch_size", "dataset")


def run_side(r: pd.Series | dict, settings=PAIR_SETTINGS) -> w.Side:
    """One run row as a side of a comparison (:class:`phonetrain.report.wording.Side`): its
    ``iteration_ms`` with its interval, status and reason, estimator, the ``settings``
    columns it must share with the other side, and its conditions."""
    reason = r.get("status_reason")
    return w.Side(estimate(r), *interval(r), status=str(r.get("status")),
                  reason="" if reason is None or pd.isna(reason) else str(reason),
                  estimator=None if pd.isna(r.get("iteration_estimator")) else
                  r.get("iteration_estimator"),
                  settings={k: r.get(k) for k in settings}, conditions=w.conditions(r))


def run_verdict(a: pd.Series | dict, b: pd.Series | dict,
                settings=PAIR_SETTINGS) -> w.Verdict:
    """Takes two run rows; returns the :class:`~phonetrain.report.wording.Verdict` of b's
    iteration time against a's (:func:`phonetrain.report.wording.judge`): ``faster`` means b
    is faster."""
    return w.judge(run_side(a, settings), run_side(b, settings))


def not_measured(key: str, title: str, why: str, paper: list[Anchor]) -> Finding:
    """The finding ``Not measured: <why>.`` (``measured`` False)."""
    return Finding(key, title, f"Not measured: {why}.", paper=paper, measured=False)


def unstable_as_ok(runs: pd.DataFrame) -> pd.DataFrame:
    """runs.parquet with every ``unstable`` run counted as usable: what a figure is computed
    from, marked measured under contention, when no usable run measured it."""
    return runs.assign(status=runs["status"].replace("unstable", "ok"))


CONTENDED_ONLY = ("Measured under contention only: every OpenCL run behind it is unstable "
                  "(see Unstable runs), so its times may be inflated; At a glance states "
                  "only what survives that noise.")


def from_unstable(fn, runs: pd.DataFrame, missing: Finding) -> Finding:
    """``fn``'s finding computed from the unstable runs, its statement opened by
    :data:`CONTENDED_ONLY`, when no usable run measured it; ``missing`` when none did."""
    if not (runs["status"] == "unstable").any():
        return missing
    f = fn(unstable_as_ok(runs))
    return replace(f, statement=f"{CONTENDED_ONLY} {f.statement}") if f.measured else missing


def flag_of(r: pd.Series | dict, col: str) -> bool | None:
    """A nullable boolean column of a run row as True, False or None."""
    v = r.get(col)
    return None if v is None or pd.isna(v) else bool(v)


def opencl_on_cpu(runs: pd.DataFrame) -> str | None:
    """Takes runs.parquet; returns a caveat sentence when OpenCL or Vulkan runs that reached their
    device (any status with a recorded ``device_type``: verified, unstable or wrong alike)
    used a CPU device (``device_type`` cpu, e.g. PoCL or lavapipe), whose numbers measure the
    API's overheads on the host's cores rather than a GPU; it says "every" when no such run
    used anything else, and names the API (:func:`gpu_api_label`). None when none used a CPU
    device."""
    ran = runs[~is_cpu(runs) & runs["device_type"].notna()]
    cl = ran[ran["device_type"] == "cpu"]
    if cl.empty:
        return None
    names = ", ".join(sorted({f"{d} ({n})" for d, n in zip(cl["device"], cl["device_name"])}))
    api = gpu_api_label(cl)   # OpenCL, Vulkan, or OpenCL or Vulkan
    which = (f"every {api} device of this study is a CPU" if len(cl) == len(ran) else
             f"the {api} device of {len(cl)} of the {len(ran)} {gpu_api_label(ran)} run(s) "
             "is a CPU")
    return (f"Caveat: {which} ({names}), so 'GPU' below means that {api} device sharing the "
            f"host's cores, not a GPU; the comparison shows the cost of the {api} path, not "
            "of GPU hardware.")


def unstable_runs(runs: pd.DataFrame) -> list[dict[str, str]]:
    """Takes runs.parquet; returns the ``unstable`` runs (ran and verified, but measured under
    contention: the host ran slower than its quiet figure), one dict each: ``run_id``, ``reason``
    (``status_reason``), ``iteration`` (median with its interval, for the record only) and
    ``conditions`` (:func:`~phonetrain.report.wording.conditions`). They give no figure of
    their own to a guideline and enter its comparisons only as
    :func:`~phonetrain.report.wording.judge` allows."""
    u = runs[runs["status"] == "unstable"]
    return [{"run_id": r["run_id"], "reason": "" if pd.isna(r["status_reason"]) else
             str(r["status_reason"]),
             "iteration": w.ms_interval(estimate(r), *interval(r)),
             "conditions": w.conditions(r)} for _, r in u.sort_values("run_id").iterrows()]
