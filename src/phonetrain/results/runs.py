"""One run folder (``runs/<device>/<experiment>/``) -> its rows of the ``runs``,
``iterations`` and ``commands`` tables (schemas: :mod:`phonetrain.results.schema`).

A run folder holds what the workflow wrote (:mod:`phonetrain.layout` names the files):

- ``params.json``: the run's job spec (:class:`phonetrain.stages.specs.RunSpec`): the
  experiment's identity (``run_id``: the experiment id, which the tables prefix with the
  device, see :func:`run_id`; ``model``, ``device``, ``backend``, ``placement``, ``transfer``,
  ``kernel``, ``dataset``, ``batch_size``; ``warmup``, ``iterations``, ``threads`` under
  ``measure``; a folder written before run specs has them under ``config``) and provenance (``config_hash``, ``kernel_hash``, optional
  ``device_fingerprint``, ``git_rev``);
- ``run.json`` and ``trace.csv`` from the runner (repeat 0), ``repeat_<k>/`` for more repeats;
- ``events/`` (``run.json``, ``trace.csv``), in a run whose step time came from processes that
  recorded no per-command event (``measure.events_apart``): the one process of the same job
  that recorded them. Its trace gives the breakdown, the ``commands`` rows and the launch
  figures; its iteration times (which carry the events' host cost) are not the step time,
  and the breakdown is fitted into the step (:func:`fit_breakdown`) so it never claims more
  time than the step takes. Its ``iterations`` rows
  have ``role`` ``breakdown``, the timed processes' ``step`` (their breakdown columns null);
  in a run without it every process has ``both``;
- ``verify.json``: the verify step's verdict (``ok``; ``max_abs_err`` and ``tolerance``, the
  per-step check's worst error and its bound; ``trajectory``: the whole trajectory's drift):
  decided once there, read here;
- ``measurement.json``: the measurement verdict (:func:`phonetrain.results.stats.judge`: the
  median's confidence interval, the conditions, ``unstable`` and its reasons);
- ``eval.json`` (only with ``measure.eval_every`` > 0): held-out loss and accuracy of repeat
  0 at its evaluation iterations (:mod:`phonetrain.stages.evaluate`), put on those rows of
  ``iterations`` and, the last point, on ``runs``;
- or ``failed.json`` (``reason``, optional ``log``), written when the job failed.

Status: ``failed`` (no usable runner output), ``skipped`` (the device lacks a library the
kernel version needs, e.g. CLBlast or image support: nothing ran; the reason in
``status_reason``), ``wrong`` (ran, but verification failed or is missing: its speed is not
valid), ``unstable`` (verified, but measured on a contended host: the reasons in
``status_reason``; kept, and measured again on request, ``phonetrain refresh --unstable``),
``ok`` (its ``status_reason`` notes an interval wider than ``measure.ci_target``: usable,
compared with its interval).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from phonetrain import layout
from phonetrain.errors import ResultsFileError
from phonetrain.io import read_json, short_hash
from phonetrain.results import memory, profiling, provenance, schema, stats
from phonetrain.results.folders import (EVAL_COLUMNS, EVAL_POINT_KEYS,  # noqa: F401
                                        RUN_KEYS, eval_points, folder_problems, processes,
                                        traced_process)

KEY_COLUMNS = ("run_id", "model", "device", "backend", "placement", "transfer", "kernel")


def flatten_params(doc: dict[str, Any]) -> dict[str, Any]:
    """Flat experiment keys from a params document, flat or nested as
    :class:`phonetrain.config.Experiment` (``config`` with ``model``/``backend``/``kernel``/
    ``dataset``/``measure`` sections; or those sections at the top level)."""
    cfg = doc.get("config") if isinstance(doc.get("config"), dict) else doc
    flat = {k: v for k, v in doc.items() if not isinstance(v, dict)}

    def sec(name: str) -> dict[str, Any]:
        v = cfg.get(name)
        return v if isinstance(v, dict) else {}

    model, backend, kernel = sec("model"), sec("backend"), sec("kernel")
    dataset, measure = sec("dataset"), sec("measure")
    derived = {"model": model.get("name"), "backend": backend.get("name"),
               "placement": backend.get("placement"), "transfer": backend.get("transfer"),
               "kernel": kernel.get("name") if kernel else None,
               "batch_size": model.get("batch_size"), "dataset": dataset.get("name"),
               **{k: measure.get(k) for k in ("warmup", "iterations", "threads",
                                              "verify_atol")},
               "device": sec("device").get("name")}
    for k, v in derived.items():
        if flat.get(k) is None and v is not None:
            flat[k] = v
    if "config_hash" not in flat and cfg is not doc:
        flat["config_hash"] = short_hash(cfg)
    return flat


def read_params(run_dir: str | Path) -> dict[str, Any]:
    """The flat params of a run folder (:func:`flatten_params` of its ``params.json``), with
    ``run_id`` as the tables key it. Raises :class:`ResultsFileError` naming the file when it
    is missing or lacks ``model``, ``device`` or ``backend``."""
    run_dir = Path(run_dir)
    p = run_dir / layout.PARAMS
    if not p.exists():
        raise ResultsFileError(f"{run_dir}: no {layout.PARAMS}",
                               "the workflow writes it with every experiment; rerun it")
    params = flatten_params(read_json(p))
    for k in ("model", "device", "backend"):
        if not params.get(k):
            raise ResultsFileError(f"{p}: key {k!r} is missing or empty")
    params["run_id"] = run_id(params["device"], params.get("run_id") or run_dir.name)
    return params


def run_id(device: str, experiment_id: str) -> str:
    """A run's key in every summary table: ``<device>/<experiment id>`` (e.g.
    ``host/mlp_16_16.cpu.none``). An experiment id alone repeats on every device of a study;
    an id that already carries this device's prefix is returned unchanged."""
    prefix = f"{device}/"
    return experiment_id if experiment_id.startswith(prefix) else prefix + experiment_id


def run_iterations(run: dict[str, Any], where: str) -> pd.DataFrame:
    """``run.json``'s per-iteration records as ``iteration, wall_ms, loss, measured``.

    Reads the runner's ``"iters": [{"iteration", "warmup", "wall_ms", "loss"}...]`` (also
    accepted under ``"iterations"``), or parallel lists ``"wall_ms": [...]``, ``"loss": [...]``
    with ``"warmup": <count>`` (warm-up first).
    """
    recs = run.get("iters", run.get("iterations"))
    if isinstance(recs, list):
        df = pd.DataFrame(recs)
        if "wall_ms" not in df:
            raise ResultsFileError(f"{where}: iterations[] lack 'wall_ms'")
        if "iteration" not in df:
            df["iteration"] = range(len(df))
        warm = df["warmup"] if "warmup" in df else df["iteration"] < int(run.get("warmup", 0))
        df["measured"] = ~warm.astype(bool)
    elif isinstance(run.get("wall_ms"), list):
        n = len(run["wall_ms"])
        df = pd.DataFrame({"iteration": range(n), "wall_ms": run["wall_ms"]})
        df["loss"] = (run.get("loss") or [None] * n)[:n]
        df["measured"] = df["iteration"] >= int(run.get("warmup", 0))
    else:
        raise ResultsFileError(f"{where}: no per-iteration records ('iters' or 'wall_ms')")
    if "loss" not in df:
        df["loss"] = np.nan
    df["loss"] = pd.to_numeric(df["loss"], errors="coerce")
    return df[["iteration", "wall_ms", "loss", "measured"]].astype(
        {"iteration": "int64", "wall_ms": "float64", "measured": bool})


def memory_types_text(dev: dict[str, Any]) -> str | None:
    """A Vulkan device object's memory types as one string: each type's flags joined by
    ``+``, types by ``; `` (e.g. ``device_local+host_visible+host_coherent+host_cached``);
    None for a device object without them (OpenCL)."""
    types = dev.get("memory_types")
    if not isinstance(types, list) or not types:
        return None
    return "; ".join("+".join(t.get("flags") or []) or "none" for t in types)


def _device_facts(run: dict[str, Any]) -> dict[str, Any]:
    dev = run.get("device") or {}
    return {"device_name": dev.get("name"), "device_type": dev.get("type"),
            "platform_name": dev.get("platform"),
            # the GPU API of the run's device (null on the CPU backend: no device object)
            "device_api": (dev.get("api") or "opencl") if dev else None,
            "device_memory_types": memory_types_text(dev),
            "timer_resolution_ns": run.get("timer_resolution_ns",
                                           dev.get("timer_resolution_ns"))}


def _verify(run_dir: Path) -> tuple[dict[str, Any], str | None]:
    """(columns, problem) from ``verify.json``, whose ``ok`` is the verdict; problem is None
    when it passed. Columns: ``verify_max_abs_err``, ``verify_tolerance``,
    ``trajectory_drift_max``, ``trajectory_drift_from_iteration``."""
    p = run_dir / layout.VERIFY
    cols: dict[str, Any] = {"verify_max_abs_err": None, "verify_tolerance": None,
                            "trajectory_drift_max": None, "trajectory_drift_from_iteration": None}
    if not p.exists():
        return cols, f"not verified (no {layout.VERIFY})"
    v = read_json(p)
    err, tol = v.get("max_abs_err"), v.get("tolerance", v.get("atol"))
    err = None if err is None else float(err)
    tol = None if tol is None else float(tol)
    traj = v.get("trajectory") or {}
    cols.update(verify_max_abs_err=err, verify_tolerance=tol,
                trajectory_drift_max=traj.get("drift_max"),
                trajectory_drift_from_iteration=traj.get("drift_from_iteration"))
    if v.get("ok") is not True:
        where = v.get("worst") or {}
        at = (f" at iteration {where['iteration']}, tensor {where.get('tensor')}"
              if where.get("iteration") is not None else "")
        return cols, v.get("reason") or (
            f"verification failed ({v.get('method', 'trajectory')}): error {err:.3g} > "
            f"bound {tol:.3g}{at}" if err is not None and tol is not None
            else f"verification failed ({p})")
    return cols, None


def read_eval(run_dir: str | Path) -> pd.DataFrame:
    """``eval.json``'s points as ``iteration, cumulative_wall_ms, heldout_loss,
    heldout_accuracy, n_heldout`` (one row per evaluation, in order); empty (those columns)
    when the folder has none. Raises :class:`ResultsFileError` naming a damaged file
    (:func:`phonetrain.results.folders.eval_points`)."""
    return pd.DataFrame(eval_points(run_dir), columns=list(EVAL_POINT_KEYS))


def _measurement(run_dir: Path, walls: pd.Series, runs: list[dict]) -> dict[str, Any]:
    """``measurement.json`` (the train stage's verdict); for a folder without one, the same
    figures computed here, judged against nothing (never unstable)."""
    p = run_dir / layout.MEASUREMENT
    if p.exists():
        return read_json(p)
    return stats.judge(walls.tolist(), [r.get("conditions") or {} for r in runs],
                       ci_target=0, max_other_cpu_share=1.0)


def _paired(run_dir: Path) -> str | None:
    """The side-by-side verdict of a rerun (``paired.json`` of the train stage,
    :mod:`phonetrain.stages.paired`) as JSON text without its per-pair figures; None when the
    run was measured alone."""
    p = run_dir / layout.PAIRED
    if not p.is_file():
        return None
    doc = {k: v for k, v in read_json(p).items() if k != "pairs_ms"}
    return json.dumps(doc, sort_keys=True)


def _failed_row(params: dict[str, Any], reason: str, run_dir: Path) -> dict[str, Any]:
    """A row without a measurement; its memory columns come from the folder's ``plan.json``
    where deploy left one (an oom run's plan is the one that did not fit)."""
    return {**_key(params), "status": "failed", "status_reason": reason,
            "run_dir": str(run_dir), **_settings(params), **provenance.columns(params, {}),
            **memory.plan_memory(run_dir / layout.PLAN)}


def _key(params: dict[str, Any]) -> dict[str, Any]:
    return {k: params.get(k) for k in KEY_COLUMNS}


def _settings(params: dict[str, Any]) -> dict[str, Any]:
    return {k: params.get(k) for k in ("dataset", "batch_size", "warmup", "iterations",
                                        "threads")}


def unstable_reason(run_dir: str | Path) -> str | None:
    """The reasons the measurement verdict (``measurement.json``) calls a run unstable, or
    None (stable, or no verdict)."""
    p = Path(run_dir) / layout.MEASUREMENT
    if not p.exists():
        return None
    try:
        doc = read_json(p)
    except ResultsFileError:
        return None
    return "; ".join(doc.get("reasons") or ["unstable"]) if doc.get("unstable") else None


NOT_SETTINGS = ("generation", "stage_root")
"""Run params that do not change what a run measures: where a local device stages its files
(it follows the spelling of the results folder), and ``generation``, a counter older run
folders record."""


def changed_params(run_dir: str | Path, params: Mapping[str, Any]) -> list[str]:
    """Top-level keys (and ``<key>.<sub>`` keys of nested objects such as ``measure``) whose
    values differ between the run
    folder's ``params.json`` and ``params``, :data:`NOT_SETTINGS` aside; ``["params.json"]``
    when the folder has none or it cannot be read."""
    try:
        have = read_json(Path(run_dir) / layout.PARAMS)
    except ResultsFileError:
        return [layout.PARAMS]
    want = json.loads(json.dumps(dict(params), default=str))
    out = []
    for k in sorted((set(have) | set(want)) - set(NOT_SETTINGS)):
        a, b = have.get(k), want.get(k)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{k}.{s}" for s in sorted(set(a) | set(b)) if a.get(s) != b.get(s)]
        else:
            out.append(k)
    return out


def absent_run(params: Mapping[str, Any], run_dir: str | Path,
               reason: str) -> dict[str, pd.DataFrame]:
    """The rows of a run the study expects but whose folder holds no measurement (never
    measured, or moved aside by :mod:`phonetrain.results.check`): one ``failed`` row with
    ``reason``, from ``params`` (the run's ``params.json`` document as the workflow gives
    it), and no iterations or commands. Raises :class:`ResultsFileError` when ``params``
    lacks ``device``."""
    flat = flatten_params(dict(params))
    if not flat.get("device"):
        raise ResultsFileError(f"{run_dir}: the run's params lack 'device'")
    flat["run_id"] = run_id(flat["device"], flat.get("run_id") or Path(run_dir).name)
    return {"runs": schema.frame([_failed_row(flat, reason, Path(run_dir))], "runs"),
            "iterations": schema.empty("iterations"), "commands": schema.empty("commands")}


DAMAGED = "damaged, not a measurement"
"""How the ``status_reason`` of a run whose folder is damaged begins (:func:`damaged_reason`)."""


def damaged_reason(problems: list[str], run_dir: str | Path, rid: str) -> str:
    """The ``status_reason`` of the run ``rid`` (``DEVICE/EXPERIMENT``) whose folder
    ``run_dir`` is damaged: :data:`DAMAGED`, the ``problems`` (each naming its file) and the
    remedy. The workflow's start checks sizes only (a file changed in place stays), so the
    remedy is ``phonetrain refresh``, which moves the folder aside whatever the damage, with
    ``--results`` the folder above ``runs/`` (:meth:`phonetrain.layout.Layout.run_dir`)."""
    parents = Path(run_dir).parents
    results = f" --results {parents[2]}" if len(parents) > 2 and parents[1].name == "runs" else ""
    return (f"{DAMAGED}: {'; '.join(problems)}; phonetrain refresh {rid}{results} moves it "
            "aside, then snakemake all (or phonetrain run, for a one-off run) measures it "
            "again")


def read_run(run_dir: str | Path, *, write_perfetto: bool = False) -> dict[str, pd.DataFrame]:
    """Aggregate one run folder into ``{"runs": 1 row, "iterations": ..., "commands": ...}``
    (DataFrames with the schema's columns). A failure marker, a missing ``run.json`` or a
    runner status other than ``ok`` gives a ``failed`` row and no iterations/commands; a
    skipped run (``run.json`` status ``skipped``) a ``skipped`` row with its reason, and none.
    Writes ``trace.perfetto.json`` beside each ``trace.csv`` when ``write_perfetto``."""
    run_dir = Path(run_dir)
    params = read_params(run_dir)
    none = {"iterations": schema.empty("iterations"), "commands": schema.empty("commands")}
    marker = run_dir / layout.FAILED
    if marker.exists():
        reason = read_json(marker).get("reason") or "job failed"
        return {"runs": schema.frame([_failed_row(params, reason, run_dir)], "runs"), **none}
    if not (run_dir / layout.RUN).exists():
        return {"runs": schema.frame([_failed_row(params, "no run.json (job failed or not run)",
                                            run_dir)], "runs"), **none}
    try:
        top = read_json(run_dir / layout.RUN)
    except ResultsFileError as e:  # damaged: a failed row, the other runs still aggregate
        reason = damaged_reason([e.message], run_dir, params["run_id"])
        return {"runs": schema.frame([_failed_row(params, reason, run_dir)], "runs"), **none}
    if top.get("status") in ("skipped", "oom"):  # a library missing; the batch does not fit
        st = top["status"]
        row = _failed_row(params, top.get("reason") or st, run_dir)
        return {"runs": schema.frame([{**row, "status": st}], "runs"), **none}
    damaged = folder_problems(run_dir)
    if damaged:  # never tabulate a folder cut short or changed
        reason = damaged_reason(damaged, run_dir, params["run_id"])
        return {"runs": schema.frame([_failed_row(params, reason, run_dir)], "runs"), **none}
    per_iter, per_cmd, runs, below, launches, uncertain = [], [], [], [], [], []
    for rep, (d, role) in enumerate(processes(run_dir)):
        run = read_json(d / layout.RUN)
        if run.get("status", "ok") != "ok":
            reason = f"runner status {run.get('status')!r}: {run.get('error', '')}".strip()
            return {"runs": schema.frame([_failed_row(params, reason, run_dir)], "runs"), **none}
        iters = run_iterations(run, str(d / layout.RUN))
        if role != "breakdown":
            runs.append(run)
        if role == "step":   # no per-command event: nothing to break down
            per_iter.append(profiling.no_breakdown(iters).assign(repeat=rep, role=role))
            continue
        trace = profiling.read_trace_csv(d / layout.TRACE)
        got = profiling.analyse(trace, iters, _device_facts(run)["timer_resolution_ns"])
        per_iter.append(got["breakdown"].assign(repeat=rep, role=role))
        below.append(got["below"])
        launches.append(got["launches"])
        per_cmd.append(got["commands"].assign(repeat=rep))
        uncertain.append(got["clock_offset_uncertainty_ns"])
        if write_perfetto:
            profiling.write_json_atomic(
                profiling.perfetto_trace(trace, iters, title=f"{params['run_id']} r{rep}",
                                         device=_device_facts(run)["device_name"] or "device"),
                d / layout.PERFETTO)
    it = pd.concat(per_iter, ignore_index=True)
    ev = read_eval(run_dir)
    it = _with_eval(it, ev)
    cmds = _merge_commands(pd.concat(per_cmd, ignore_index=True), it)
    row = _run_row(params, run_dir, runs, it)
    row["clock_offset_uncertainty_ns"] = max(uncertain, default=None)
    last = ev.iloc[-1] if len(ev) else None
    row.update(heldout_loss_last=None if last is None else float(last["heldout_loss"]),
               heldout_accuracy_last=None if last is None else float(last["heldout_accuracy"]),
               n_heldout=None if last is None else int(last["n_heldout"]))
    row.update(_below(below))
    row.update(_launches(launches))
    if row["launch_overhead_us"] is not None and row["events_iteration_ms"] is not None:
        # the gap per launch, of the gap fitted into the step (fit_breakdown)
        n = row["launches_per_iteration"]
        row["launch_overhead_us"] = row["gap_ms"] * 1e3 / n if n else None
    prov = {k: row[k] for k in provenance.KEYS}
    key = _key(params)
    it = it.assign(**key, **prov)
    cmds = cmds.assign(**key, **prov)
    return {"runs": schema.frame([row], "runs"), "iterations": schema.frame(it, "iterations"),
            "commands": schema.frame(cmds, "commands")}


def _with_eval(it: pd.DataFrame, ev: pd.DataFrame) -> pd.DataFrame:
    """``iterations`` rows with ``heldout_loss``/``heldout_accuracy``: the evaluation's on
    repeat 0 at its iterations, NaN elsewhere."""
    it = it.assign(**{c: np.nan for c in EVAL_COLUMNS})
    if len(ev):
        at = ev.set_index(ev["iteration"].astype(int))
        rows = (it["repeat"] == 0) & it["iteration"].isin(at.index)
        for c in EVAL_COLUMNS:
            it.loc[rows, c] = it.loc[rows, "iteration"].map(at[c]).astype(float).to_numpy()
    return it


def _merge_commands(c: pd.DataFrame, it: pd.DataFrame) -> pd.DataFrame:
    """Combine per-repeat command summaries (weighted by measured iterations)."""
    if c["repeat"].nunique() == 1:
        return c.drop(columns=["repeat"])
    n = it[it["measured"]].groupby("repeat").size()
    c = c.assign(w=c["repeat"].map(n))
    keys = ["kind", "name", "layer", "phase"]

    def comb(g: pd.DataFrame) -> pd.Series:
        w = g["w"] / g["w"].sum()
        return pd.Series({
            "count": int(g["count"].sum()),
            "per_iteration_ms": float((g["per_iteration_ms"] * w).sum()),
            "per_iteration_median_ms": float(g["per_iteration_median_ms"].median()),
            "median_ms": float(g["median_ms"].median()), "total_ms": float(g["total_ms"].sum()),
            "bytes_per_iteration": int(g["bytes_per_iteration"].iloc[0]),
            "flops_per_iteration": int(g["flops_per_iteration"].iloc[0]),
            "gflops": float(g["gflops"].median()), "gbps": float(g["gbps"].median()),
            "share_of_wall": float((g["share_of_wall"] * w).sum())})
    return c.groupby(keys, sort=False).apply(comb, include_groups=False).reset_index()


def _below(per_repeat: list[dict[str, Any]]) -> dict[str, Any]:
    """Below-resolution columns over repeats: counts add up; a kind is below the resolution
    when it is in every repeat that has such commands."""
    counts = [b["below_resolution_commands"] for b in per_repeat
              if b["below_resolution_commands"] is not None]
    out: dict[str, Any] = {"below_resolution_commands": sum(counts) if counts else None}
    for k in ("kernel_below_resolution", "transfer_below_resolution"):
        vals = [b[k] for b in per_repeat if b[k] is not None]
        out[k] = all(vals) if vals else None
    return out


def _launches(per_repeat: list[dict[str, Any]]) -> dict[str, Any]:
    """Launch columns over repeats: the median of each repeat's value (None where none has
    one); the launch count is the same plan's in every repeat."""
    out: dict[str, Any] = {}
    for k in ("launches_per_iteration", "kernel_gap_median_us", "launch_overhead_us"):
        vals = [r[k] for r in per_repeat if r[k] is not None]
        med = float(np.median(vals)) if vals else None
        out[k] = int(round(med)) if med is not None and k == "launches_per_iteration" else med
    return out


def _status(problem: str | None, meas: dict[str, Any]) -> tuple[str, str | None]:
    if problem is not None:
        return "wrong", problem
    if meas.get("unstable"):
        return "unstable", "; ".join(meas.get("reasons") or ["unstable measurement"])
    return "ok", "; ".join(meas.get("notes") or []) or None


def _run_row(params: dict[str, Any], run_dir: Path, runs: list[dict], it: pd.DataFrame) -> dict:
    m = it[it["measured"] & (it["role"] != "breakdown")]   # the step's processes
    wall = m["wall_ms"]
    traced = it[it["role"] != "step"]                      # the breakdown's
    med = traced[traced["measured"]].median(numeric_only=True)
    parts, events_ms, scale = fit_breakdown(med, wall, traced)
    vcols, problem = _verify(run_dir)
    meas = _measurement(run_dir, wall, runs)
    status, reason = _status(problem, meas)
    loss = it.loc[it["role"] != "breakdown", "loss"].dropna()
    row = {**_key(params), **_settings(params),
           "status": status, "status_reason": reason, **vcols,
           "iterations": int(len(m) // max(len(runs), 1)) if len(m) else params.get("iterations"),
           "repeats": len(runs), "attempts": meas.get("attempts"),
           "threads": runs[0].get("threads", params.get("threads")),  # as run (0 = all cores)
           "iteration_ci_low_ms": meas.get("ci_low_ms"),
           "iteration_ci_high_ms": meas.get("ci_high_ms"),
           "iteration_ms": meas.get("estimate_ms"), "iteration_low_ms": meas.get("low_ms"),
           "iteration_high_ms": meas.get("high_ms"),
           "iteration_estimator": meas.get("estimator"), "paired": _paired(run_dir),
           **{k: meas.get(k) for k in ("load_avg_1m", "other_cpu_share", "omp_wait_policy",
                                       "cpu_mhz_start", "cpu_mhz_end", "temperature_c_start",
                                       "temperature_c_end")},
           "iteration_median_ms": wall.median(), "iteration_p25_ms": wall.quantile(0.25),
           "iteration_p75_ms": wall.quantile(0.75), "iteration_min_ms": wall.min(),
           "iteration_max_ms": wall.max(),
           **parts,
           "events_iteration_ms": events_ms, "breakdown_scale": scale,
           "data_movement_share": profiling.data_movement_share(traced),
           "data_movement_call_share": profiling.data_movement_share(traced,
                                                                     with_overhead=True),
           "loss_first": loss.iloc[0] if len(loss) else None,
           "loss_last": loss.iloc[-1] if len(loss) else None,
           "max_rss_bytes": max((_first(r, "peak_rss_bytes", "max_rss_bytes") or 0
                                 for r in runs), default=0) or None,
           "device_buffer_bytes": _first(runs[0], "device_bytes_allocated",
                                         "device_buffer_bytes"),
           **_power(runs), "options": plan_options(run_dir / layout.PLAN),
           **memory.plan_memory(run_dir / layout.PLAN),
           "run_dir": str(run_dir), **_device_facts(runs[0]), **provenance.columns(params, runs[0])}
    return row


BREAKDOWN_MS = ("kernel", "h2d", "d2h", "map", "unmap", "d2d", "host", "gap", "transfer",
                "transfer_overhead", "transfer_kernel_overlap", "exposed_transfer")
"""The runs table's breakdown columns (``<name>_ms``; phonetrain.results.profiling)."""


def fit_breakdown(med: pd.Series, step_walls: pd.Series, traced: pd.DataFrame
                  ) -> tuple[dict[str, float], float | None, float]:
    """The runs row's breakdown columns from ``med`` (the breakdown process's per-iteration
    medians), fitted into the step, and ``(events_iteration_ms, breakdown_scale)``.

    Where the breakdown came from a process apart from the step's (``role`` ``breakdown``)
    it took longer per iteration than the step: the events' host cost, spent between
    commands. That excess (its median iteration time less the step's median) is taken off
    ``gap_ms`` (and ``transfer_overhead_ms``, part of the gap, capped by it); the device
    times stay as measured. If the commands' busy time plus that gap still exceed the step,
    every column is multiplied by ``breakdown_scale`` = step / (busy + gap) < 1, so the
    breakdown never claims more time than the step takes. Elsewhere the columns are the
    medians as they are, ``events_iteration_ms`` None and the scale 1."""
    parts = {f"{k}_ms": float(med[f"{k}_ms"]) for k in BREAKDOWN_MS}
    if not (traced["role"] == "breakdown").any():
        return parts, None, 1.0
    ev = float(traced.loc[traced["measured"], "wall_ms"].median())
    step = float(step_walls.median())
    if not (np.isfinite(ev) and np.isfinite(step) and step > 0):
        return parts, ev, 1.0
    parts["gap_ms"] = max(parts["gap_ms"] - max(ev - step, 0.0), 0.0)
    parts["transfer_overhead_ms"] = min(parts["transfer_overhead_ms"], parts["gap_ms"])
    whole = float(med["busy_ms"]) + parts["gap_ms"]
    scale = min(1.0, step / whole) if whole > 0 else 1.0
    return {k: v * scale for k, v in parts.items()}, ev, scale


def plan_options(plan: Path) -> str | None:
    """The build options of a plan's OpenCL programs (the tuning choice a run ran with), the
    distinct sets in program order joined by `` | ``; None without programs or when the plan
    is not there (a failed run's folder)."""
    try:
        doc = json.loads(plan.read_text())
    except (OSError, ValueError):
        return None
    programs = doc.get("programs") if isinstance(doc, dict) else None
    if not isinstance(programs, list):   # a damaged plan: no options to tell
        return None
    sets = list(dict.fromkeys(str(p.get("options") or "") for p in programs
                              if isinstance(p, dict)))
    return " | ".join(sets) if sets and sets != [""] else None


# The mean battery power (W) a phone that computes can draw: a figure outside it comes from a
# sysfs unit other than the documented one (docs/device-sensors.md), e.g. current_now in mA
# where uA is read gives 1000x too little (a 6 W phone reads 6 mW), nA 1000x too much.
PLAUSIBLE_POWER_W = (0.05, 50.0)


def plausible_power(power: Mapping[str, Any]) -> dict[str, Any]:
    """A repeat's ``power`` object (src/runner/power.c) as the tables take it: unchanged when
    its ``mean_power_w`` is unknown or within :data:`PLAUSIBLE_POWER_W`; else without energy
    (``energy_per_iteration_mj`` and its uncertainty null), ``energy_method``
    ``implausible`` and an ``energy_caveat`` naming the power, the files and their likely
    unit."""
    w = power.get("mean_power_w")
    low, high = PLAUSIBLE_POWER_W
    if w is None or low <= w <= high:
        return dict(power)
    unit = ("mA (or voltage_now in mV)" if w < low else "nA (or voltage_now in nV)")
    return {**power, "energy_per_iteration_mj": None, "energy_uncertainty_mj": None,
            "energy_method": "implausible",
            "energy_caveat": f"implausible battery power {w:.2g} W (a phone computing draws "
                             f"{low:g}..{high:g} W): this phone's "
                             f"class/power_supply/battery/current_now is likely in {unit}, "
                             "not the uA (uV) the runner reads; no energy figure"}


def _power(runs: list[dict]) -> dict[str, Any]:
    """Energy, sampling rate, GPU clocks and throttling over the repeats' ``power`` objects
    (src/runner/power.c): energy and rate are means over the repeats that measured them, the
    uncertainty ``sqrt(sum u_k^2) / k`` (the mean of k independent estimates), ``throttled``
    true when any repeat throttled, null when none could tell; null columns where the runner
    recorded no power (older runners, unreadable battery). ``power_samples``: the battery
    samples of all repeats (null where the runner recorded none); above 0 with a null energy,
    the battery was readable but the measured iterations were too short to sample.
    ``energy_method`` (``battery_discharge``, ``battery_current`` or ``none``: on external
    power; ``implausible``: :func:`plausible_power`) and ``energy_caveat``: the repeats'
    distinct values, joined."""
    pw = [plausible_power(r.get("power") or {}) for r in runs]
    n = [p["power_samples"] for p in pw if p.get("power_samples") is not None]
    e = [(p["energy_per_iteration_mj"], p.get("energy_uncertainty_mj") or 0.0) for p in pw
         if p.get("energy_per_iteration_mj") is not None]
    hz = [p["sample_hz"] for p in pw if p.get("sample_hz") is not None]
    thr = [p["throttled"] for p in pw if p.get("throttled") is not None]
    methods = list(dict.fromkeys(p["energy_method"] for p in pw if p.get("energy_method")))
    caveats = list(dict.fromkeys(p["energy_caveat"] for p in pw if p.get("energy_caveat")))
    return {"energy_per_iteration_mj": float(np.mean([v for v, _ in e])) if e else None,
            "energy_method": ",".join(methods) or None,
            "energy_caveat": "; ".join(caveats) or None,
            "energy_uncertainty_mj": (float(np.sqrt(sum(u * u for _, u in e))) / len(e)
                                      if e else None),
            "power_sample_hz": float(np.mean(hz)) if hz else None,
            "power_samples": int(sum(n)) if n else None,
            "gpu_mhz_start": pw[0].get("gpu_mhz_start"), "gpu_mhz_end": pw[-1].get("gpu_mhz_end"),
            "throttled": any(thr) if thr else None}


def _first(doc: dict[str, Any], *keys: str) -> Any:
    return next((doc[k] for k in keys if doc.get(k) is not None), None)
