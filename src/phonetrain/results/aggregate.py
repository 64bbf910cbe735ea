"""Raw outputs -> ``results/summary/*.parquet`` (schemas in :mod:`phonetrain.results.schema`).

Inputs, per experiment, one *run folder* holding what the train/verify stages wrote:

- ``params.json`` (:data:`PARAMS_FILE`, written by the workflow): the experiment's identity
  (``run_id``: the experiment id, which the tables prefix with the device, see :func:`run_id`;
  ``model``, ``device``, ``backend``, ``placement``, ``transfer``, ``kernel``,
  ``dataset``, ``batch_size``, ``warmup``, ``iterations``, ``threads``, ``verify_atol``) and
  provenance (``config_hash``, ``kernel_hash``, optional ``device_fingerprint``, ``git_rev``);
- ``run.json`` and ``trace.csv`` from the runner (repeat 0), ``repeat_<k>/`` for more repeats;
- ``verify.json`` from the numpy reference (``max_abs_err``; optional ``atol``, ``ok``);
- or a failure marker ``failed.json`` (:data:`FAILURE_MARKER`: ``reason``, optional
  ``log``), written when the job failed; such a folder becomes a ``failed`` row.

An *expected* run (its ``params.json`` path given, its folder without outputs, as after a
failed job under ``snakemake --keep-going``) becomes a ``failed`` row too, so the report lists
it. Per device: bandwidth CSVs (the runner's ``bench-bandwidth`` table) and ``build.json``
files (runner ``build``), each beside a ``params.json`` naming the device (and kernel).

Status: ``failed`` (no usable runner output), ``skipped`` (the device lacks a library the
kernel version needs, e.g. CLBlast or image support: nothing ran; the reason in
``status_reason``), ``wrong`` (ran, but ``verify_max_abs_err`` > tolerance, or no
verification: its speed is not valid), ``ok``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from phonetrain.results import profiling
from phonetrain.results import schema

PARAMS_FILE = "params.json"
FAILURE_MARKER = "failed.json"
PROVENANCE_KEYS = ("config_hash", "kernel_hash", "runner_hash", "device_fingerprint", "git_rev")
KEY_COLUMNS = ("run_id", "model", "device", "backend", "placement", "transfer", "kernel")


class AggregateError(ValueError):
    """An input that cannot be aggregated; the message names the file and key."""


def read_json(path: Path) -> dict[str, Any]:
    """Read a JSON object; :class:`AggregateError` naming the file when it is not one."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise AggregateError(f"{path}: cannot read JSON: {e}") from None
    if not isinstance(doc, dict):
        raise AggregateError(f"{path}: expected a JSON object")
    return doc


def device_fingerprint(device: Any) -> str | None:
    """16 hex digits identifying an OpenCL device and its driver (platform, name, vendor,
    versions) from the runner's ``device`` object, or a CPU from its ``host`` object
    (``cpu_model``, ``logical_cores``); None when there is none."""
    if not isinstance(device, dict) or not device:
        return None
    keys = ("platform", "platform_version", "name", "vendor", "version", "driver_version",
            "cpu_model", "logical_cores")
    return short_hash({k: device.get(k) for k in keys})


@functools.lru_cache(maxsize=4)
def git_rev(repo: Path | None = None) -> str:
    """``git rev-parse --short HEAD`` plus ``-dirty`` when tracked files differ; ``unknown``
    outside a git checkout."""
    cwd = repo or Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=cwd, check=True,
                             capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def short_hash(obj: Any) -> str:
    """16 hex digits of SHA-256 over canonical JSON of ``obj`` (as phonetrain.config.config_hash)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---- one run folder -------------------------------------------------------------------

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


def _params(run_dir: Path) -> dict[str, Any]:
    p = run_dir / PARAMS_FILE
    if not p.exists():
        raise AggregateError(f"{run_dir}: no {PARAMS_FILE}; the workflow writes it with every "
                             "experiment (rerun the train stage)")
    params = flatten_params(read_json(p))
    for k in ("model", "device", "backend"):
        if not params.get(k):
            raise AggregateError(f"{p}: key {k!r} is missing or empty")
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
            raise AggregateError(f"{where}: iterations[] lack 'wall_ms'")
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
        raise AggregateError(f"{where}: no per-iteration records ('iters' or 'wall_ms')")
    if "loss" not in df:
        df["loss"] = np.nan
    df["loss"] = pd.to_numeric(df["loss"], errors="coerce")
    return df[["iteration", "wall_ms", "loss", "measured"]].astype(
        {"iteration": "int64", "wall_ms": "float64", "measured": bool})


def _repeat_dirs(run_dir: Path) -> list[Path]:
    extra = sorted((p for p in run_dir.glob("repeat_*") if p.is_dir()),
                   key=lambda p: int(p.name.split("_")[1]) if p.name[7:].isdigit() else 0)
    return [run_dir] + extra


def _device_facts(run: dict[str, Any]) -> dict[str, Any]:
    dev = run.get("device") or {}
    return {"device_name": dev.get("name"), "device_type": dev.get("type"),
            "platform_name": dev.get("platform"),
            "timer_resolution_ns": run.get("timer_resolution_ns",
                                           dev.get("timer_resolution_ns"))}


def _runner_hash(run: dict[str, Any]) -> str | None:
    r = run.get("runner") or {}
    return run.get("runner_hash") or r.get("source_hash") or r.get("hash")


def _verify(run_dir: Path, params: dict[str, Any]) -> tuple[float | None, float, str | None]:
    """(max_abs_err, tolerance, problem) from ``verify.json``; problem is None when it passed."""
    tol = float(params.get("verify_atol", 1e-3))
    p = run_dir / "verify.json"
    if not p.exists():
        return None, tol, "not verified (no verify.json)"
    v = read_json(p)
    tol = float(v.get("atol", v.get("tolerance", tol)))
    err = v.get("max_abs_err")
    err = None if err is None else float(err)
    if err is None or not math.isfinite(err):
        return err, tol, f"verification gave no finite max_abs_err ({p})"
    if v.get("ok") is False or err > tol:
        return err, tol, f"verification failed: max_abs_err {err:.3g} > atol {tol:.3g}"
    return err, tol, None


def _failed_row(params: dict[str, Any], reason: str, run_dir: Path) -> dict[str, Any]:
    return {**_key(params), "status": "failed", "status_reason": reason,
            "run_dir": str(run_dir), **_settings(params), **_provenance(params, {})}


def _key(params: dict[str, Any]) -> dict[str, Any]:
    return {k: params.get(k) for k in KEY_COLUMNS}


def _settings(params: dict[str, Any]) -> dict[str, Any]:
    return {k: params.get(k) for k in ("dataset", "batch_size", "warmup", "iterations",
                                        "threads")}


def _provenance(params: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    ident = {k: params.get(k) for k in KEY_COLUMNS if k != "run_id"}
    fp = (params.get("device_fingerprint") or device_fingerprint(run.get("device"))
          or device_fingerprint(run.get("host")))
    return {"config_hash": params.get("config_hash") or short_hash(ident),
            "kernel_hash": params.get("kernel_hash"),
            "runner_hash": _runner_hash(run) or params.get("runner_hash"),
            "device_fingerprint": fp, "git_rev": params.get("git_rev") or git_rev()}


def read_run(run_dir: str | Path, *, write_perfetto: bool = False) -> dict[str, pd.DataFrame]:
    """Aggregate one run folder into ``{"runs": 1 row, "iterations": ..., "commands": ...}``
    (DataFrames with the schema's columns). A failure marker, a missing ``run.json`` or a
    runner status other than ``ok`` gives a ``failed`` row and no iterations/commands; a
    skipped run (``run.json`` status ``skipped``) a ``skipped`` row with its reason, and none.
    Writes ``trace.perfetto.json`` beside each ``trace.csv`` when ``write_perfetto``."""
    run_dir = Path(run_dir)
    params = _params(run_dir)
    none = {"iterations": schema.empty("iterations"), "commands": schema.empty("commands")}
    marker = run_dir / FAILURE_MARKER
    if marker.exists():
        reason = read_json(marker).get("reason") or "job failed"
        return {"runs": _frame([_failed_row(params, reason, run_dir)], "runs"), **none}
    if not (run_dir / "run.json").exists():
        return {"runs": _frame([_failed_row(params, "no run.json (job failed or not run)",
                                            run_dir)], "runs"), **none}
    top = read_json(run_dir / "run.json")
    if top.get("status") == "skipped":  # the device lacks a library the version needs
        row = _failed_row(params, top.get("reason") or "skipped", run_dir)
        return {"runs": _frame([{**row, "status": "skipped"}], "runs"), **none}
    per_iter, per_cmd, runs = [], [], []
    for rep, d in enumerate(_repeat_dirs(run_dir)):
        run = read_json(d / "run.json")
        if run.get("status", "ok") != "ok":
            reason = f"runner status {run.get('status')!r}: {run.get('error', '')}".strip()
            return {"runs": _frame([_failed_row(params, reason, run_dir)], "runs"), **none}
        iters = run_iterations(run, str(d / "run.json"))
        trace = profiling.read_trace_csv(d / "trace.csv")
        b = profiling.breakdown(trace, iters)
        b["repeat"] = rep
        per_iter.append(b)
        c = profiling.command_summary(trace, b)
        c["repeat"] = rep
        per_cmd.append(c)
        runs.append(run)
        _, unc = profiling.clock_offset(profiling.check_trace(trace))
        run["_offset_unc"] = unc
        if write_perfetto:
            profiling.write_json_atomic(
                profiling.perfetto_trace(trace, iters, title=f"{params['run_id']} r{rep}",
                                         device=_device_facts(run)["device_name"] or "device"),
                d / "trace.perfetto.json")
    it = pd.concat(per_iter, ignore_index=True)
    cmds = _merge_commands(pd.concat(per_cmd, ignore_index=True), it)
    row = _run_row(params, run_dir, runs, it)
    prov = {k: row[k] for k in PROVENANCE_KEYS}
    key = _key(params)
    it = it.assign(**key, **prov)
    cmds = cmds.assign(**key, **prov)
    return {"runs": _frame([row], "runs"), "iterations": _frame(it, "iterations"),
            "commands": _frame(cmds, "commands")}


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


def _run_row(params: dict[str, Any], run_dir: Path, runs: list[dict], it: pd.DataFrame) -> dict:
    m = it[it["measured"]]
    wall = m["wall_ms"]
    med = m.median(numeric_only=True)
    err, tol, problem = _verify(run_dir, params)
    loss = it["loss"].dropna()
    row = {**_key(params), **_settings(params),
           "status": "ok" if problem is None else "wrong", "status_reason": problem,
           "repeats": len(runs), "verify_max_abs_err": err,
           "threads": runs[0].get("threads", params.get("threads")),  # as run (0 = all cores)
           "verify_tolerance": tol,
           "iteration_median_ms": wall.median(), "iteration_p25_ms": wall.quantile(0.25),
           "iteration_p75_ms": wall.quantile(0.75), "iteration_min_ms": wall.min(),
           "iteration_max_ms": wall.max(),
           **{f"{k}_ms": med[f"{k}_ms"] for k in ("kernel", "h2d", "d2h", "map", "unmap",
                                                  "d2d", "host", "gap", "transfer",
                                                  "transfer_overhead")},
           "data_movement_share": profiling.data_movement_share(it),
           "data_movement_call_share": profiling.data_movement_share(it, with_overhead=True),
           "loss_first": loss.iloc[0] if len(loss) else None,
           "loss_last": loss.iloc[-1] if len(loss) else None,
           "clock_offset_uncertainty_ns": max((r["_offset_unc"] for r in runs), default=None),
           "max_rss_bytes": max((_first(r, "peak_rss_bytes", "max_rss_bytes") or 0
                                 for r in runs), default=0) or None,
           "device_buffer_bytes": _first(runs[0], "device_bytes_allocated",
                                         "device_buffer_bytes"),
           "run_dir": str(run_dir), **_device_facts(runs[0]), **_provenance(params, runs[0])}
    return row


def _first(doc: dict[str, Any], *keys: str) -> Any:
    return next((doc[k] for k in keys if doc.get(k) is not None), None)


def _frame(rows: Iterable[dict] | pd.DataFrame, table: str) -> pd.DataFrame:
    """Rows -> a DataFrame with exactly the table's columns (absent ones null)."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    names = schema.schema(table).names
    for n in names:
        if n not in df:
            df[n] = None
    return df[names]


def add_kernel_gflops(runs: pd.DataFrame, commands: pd.DataFrame) -> pd.DataFrame:
    """Fill ``flops_per_iteration`` and ``kernel_gflops`` (all kernel FLOPs of one iteration
    over its median kernel time) from the commands table."""
    k = commands[commands["kind"] == "kernel"].groupby("run_id")["flops_per_iteration"].sum()
    runs = runs.copy()
    runs["flops_per_iteration"] = runs["run_id"].map(k).astype("Int64")
    t = pd.to_numeric(runs["kernel_ms"], errors="coerce")
    runs["kernel_gflops"] = (runs["flops_per_iteration"].astype(float) / (t * 1e6)).where(t > 0)
    return runs


# ---- per-device tables ------------------------------------------------------------------

def read_bandwidth(csv_path: str | Path) -> pd.DataFrame:
    """One ``bandwidth.csv`` of the runner's ``bench-bandwidth`` (columns ``op``,
    ``size_bytes``, ``iterations``, ``repeats``, ``device_ns``, ``host_ns``, ``device_gbps``,
    ``host_gbps``) -> bandwidth rows. The device is the folder's name (``bandwidth/<device>/``)
    unless a ``params.json`` beside it names it; ``bench.json`` beside it (the runner's device
    facts and settings) gives the runner hash and device fingerprint."""
    csv_path = Path(csv_path)
    try:
        df = pd.read_csv(csv_path).rename(columns={"op": "kind"})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise AggregateError(f"{csv_path}: cannot read: {e}") from None
    for c in ("kind", "size_bytes", "device_gbps", "host_gbps"):
        if c not in df:
            raise AggregateError(f"{csv_path}: missing column {c!r} (rerun the bandwidth stage)")
    params = _side_params(csv_path)
    bench_path = csv_path.with_name("bench.json")
    bench = read_json(bench_path) if bench_path.exists() else {}
    settings = {"device": params["device"], "bench": {k: v for k, v in bench.items()
                                                      if k in ("min_time_ms", "repeats")}}
    params.setdefault("config_hash", short_hash(settings))
    prov = _provenance({**params, "kernel_hash": None}, bench)
    return _frame(df.assign(device=params["device"], **prov), "bandwidth")


def _side_params(path: Path) -> dict[str, Any]:
    p = path.parent / PARAMS_FILE
    params = read_json(p) if p.exists() else {}
    params.setdefault("device", path.parent.name)
    return params


def read_build(json_path: str | Path) -> pd.DataFrame:
    """One ``build.json`` of the runner's ``build`` mode (``programs: [{program, status,
    error, build_ms, binary_size_bytes, log}]``, ``options``, ``device``, ``kernel``,
    ``kernel_hash``, ``runner``) plus its ``params.json`` -> one builds row per program."""
    json_path = Path(json_path)
    doc = read_json(json_path)
    params = {**_side_params(json_path),
              **{k: doc[k] for k in ("device", "kernel", "kernel_hash") if doc.get(k)}}
    params.setdefault("kernel", json_path.parent.name)
    if "config_hash" not in params:
        params["config_hash"] = short_hash({k: params.get(k) for k in (
            "device", "kernel", "kernel_hash", "device_config")} | {"options": doc.get("options")})
    progs = doc.get("programs") or [{"program": "*", "status": doc.get("status", "failed"),
                                     "log": doc.get("log")}]
    rows = [{"device": params["device"], "kernel": params["kernel"],
             "program": p.get("program", p.get("name")),
             "status": "ok" if p.get("status", doc.get("status", "ok")) == "ok" else "failed",
             "build_ms": p.get("build_ms"), "binary_size_bytes": p.get("binary_size_bytes"),
             "log": "\n".join(x for x in (p.get("error"), p.get("log")) if x) or None,
             "options": p.get("options", doc.get("options"))}
            for p in progs]
    df = pd.DataFrame(rows).assign(**_provenance(params, doc))
    return _frame(df, "builds")


# ---- everything -------------------------------------------------------------------------

def aggregate(run_dirs: Iterable[str | Path], out_dir: str | Path, *,
              bandwidth_csvs: Iterable[str | Path] = (),
              build_jsons: Iterable[str | Path] = (),
              gemm_jsons: Iterable[str | Path] = (),
              peaks_jsons: Iterable[str | Path] = ()) -> dict[str, Path]:
    """Aggregate run folders (present or expected-but-empty), bandwidth CSVs, build files and
    the GEMM sweep's files (phonetrain.gemm_stages) into ``out_dir/<table>.parquet`` (atomic,
    schema-enforced). Returns table -> path."""
    parts: dict[str, list[pd.DataFrame]] = {t: [] for t in schema.TABLES}
    for d in run_dirs:
        for t, df in read_run(d).items():
            parts[t].append(df)
    parts["bandwidth"] = [read_bandwidth(p) for p in bandwidth_csvs]
    parts["builds"] = [read_build(p) for p in build_jsons]
    from phonetrain.gemm_stages import read_gemm, read_peaks
    parts["gemm"] = [read_gemm(p) for p in gemm_jsons]
    parts["peaks"] = [read_peaks(p) for p in peaks_jsons]
    tables = {t: (pd.concat([df for df in dfs if len(df)], ignore_index=True)
                  if any(len(df) for df in dfs) else schema.empty(t))
              for t, dfs in parts.items()}
    tables["runs"] = add_kernel_gflops(tables["runs"], tables["commands"])
    out_dir = Path(out_dir)
    return {t: schema.write_table(df, t, out_dir / f"{t}.parquet") for t, df in tables.items()}
