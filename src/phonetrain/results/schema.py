"""The one definition of every results table: pyarrow schemas for ``results/summary/*.parquet``.

One table per grain: ``runs`` (one row per experiment), ``iterations`` (one
row per runner invocation ``repeat`` x iteration, warm-up included and flagged), ``commands``
(one row per run x command kind x name x layer x phase, over measured iterations),
``bandwidth`` (one row per device x transfer kind x size), ``builds`` (one row per device x kernel version x program).
``gemm`` (one row per device x kernel version x GEMM call) and ``peaks`` (one row per device
x peak measurement) hold the GEMM sweep and the roofline (phonetrain.gemm_stages), ``devices``
(one row per device: phone and OpenCL facts, joined to runs by ``device``); ``history``
(one row per run or GEMM shape x measurement) keeps the measurements that re-measurements
replaced (phonetrain.results.history).

Units are in column names: ``_ms`` milliseconds, ``_ns`` nanoseconds, ``_bytes`` bytes,
``_gflops`` 1e9 FLOP/s, ``_gbps`` 1e9 bytes/s (decimal GB/s, as clpeak reports). Every row
carries the provenance columns :data:`PROVENANCE`: ``config_hash`` (the composed experiment
config), ``kernel_hash`` (the kernel version's resolved sources; null where no kernel is
involved), ``runner_hash`` (the runner's sources), ``device_fingerprint`` (the device's
identity and driver), ``git_rev`` (the project revision, ``-dirty`` when the tree had edits;
``not a git checkout, sources <hash>`` outside the project's own git tree:
:func:`phonetrain.results.provenance.git_rev`).

:func:`conform` enforces a schema on a pandas DataFrame (missing or extra columns, nulls in a
non-nullable column and uncastable values raise :class:`SchemaError` naming the table and
column); :func:`write_table` writes it atomically; :func:`read_table` reads and re-checks.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from phonetrain.errors import PhonetrainError

STATUSES = ("ok", "wrong", "failed", "skipped", "unstable", "oom")
"""``ok``: ran and verified; ``wrong``: ran but failed verification (its speed is not valid);
``failed``: the job failed or produced no output; ``skipped``: not run because the device lacks
a library its kernel version needs (runner exit 8: CLBlast absent, no image support), the
reason in ``status_reason``; it has no speed and no iterations/commands rows; ``unstable``: ran
and verified, but measured under contention (the reason in ``status_reason``): listed, kept
out of guidelines, measured again on request (``phonetrain refresh --unstable``); an ``ok`` run
whose interval stayed wider than ``measure.ci_target`` says so in ``status_reason``; ``oom``: not run to the end because the plan's tensors do not fit on the device
at its ``batch_size`` (runner exit 9: a buffer allocation failed), the reason in
``status_reason``; an outcome of the batch size, with no speed and no iterations/commands rows."""

COMMAND_KINDS = ("kernel", "h2d", "d2h", "map", "unmap", "d2d", "host")
BANDWIDTH_KINDS = ("h2d", "d2h", "map", "unmap", "d2d")


class SchemaError(PhonetrainError, ValueError):
    """A table that does not match its schema; the message names the table and column."""


def _f(name: str, typ: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, typ, nullable=nullable)


S, F, I, B = pa.string(), pa.float64(), pa.int64(), pa.bool_()

PROVENANCE = [
    _f("config_hash", S, False), _f("kernel_hash", S), _f("runner_hash", S),
    _f("device_fingerprint", S), _f("git_rev", S, False),
]

# The experiment's identity, repeated on every per-run table so each joins without a lookup.
# run_id is ``<device>/<experiment id>`` (phonetrain.results.aggregate.run_id): unique in a study,
# since one experiment id (e.g. ``mlp_16_16.cpu.none``) runs on every device.
RUN_KEY = [
    _f("run_id", S, False), _f("model", S, False), _f("device", S, False),
    _f("backend", S, False), _f("placement", S), _f("transfer", S), _f("kernel", S),
]

# runs: attempts is how many times the train job measured the run (each attempt ``repeats``
# more runner processes, pooled with those of earlier uncontended attempts; more than 1 only
# after an unstable attempt, at most measure.max_attempts;
# null for a folder whose measurement.json records none); iteration_* are over measured
# iterations of all repeats (iteration_ci_*: the 95%
# bootstrap confidence interval of the median); iteration_ms with iteration_low_ms..
# iteration_high_ms is the location estimate every comparison uses, by the estimator named in
# iteration_estimator (phonetrain.results.stats.ESTIMATOR); <kind>_ms, gap_ms, transfer_ms,
# transfer_kernel_overlap_ms (data movement and a kernel both active) and exposed_transfer_ms are
# per-iteration medians (phonetrain.results.profiling defines them), taken from the process
# that recorded an event per command where the step time came from processes without them
# (measure.events_apart: events_iteration_ms is that process's median iteration time; the
# events' host cost, events_iteration_ms - iteration_median_ms, is taken off gap_ms, and
# every ms column multiplied by breakdown_scale <= 1 where the rest still exceeds the step:
# phonetrain.results.runs.fit_breakdown; elsewhere events_iteration_ms is null and
# breakdown_scale 1); loss_first/last are the
# first and last iterations run (warm-up included: training starts at iteration 0);
# heldout_loss_last/heldout_accuracy_last the last held-out evaluation of repeat 0 over
# n_heldout samples (null without measure.eval_every; phonetrain.stages.evaluate).
# launches_per_iteration: kernel commands per measured iteration (median); kernel_gap_median_us
# the median idle time between consecutive kernels, launch_overhead_us gap_ms per launch
# (phonetrain.results.profiling.launch_stats).
# verify_max_abs_err is the per-step check's worst error (verify_tolerance its bound);
# trajectory_drift_* how far the whole trajectories drift apart (reported, not judged).
# below_resolution_commands: measured device-timed commands shorter than the timer resolution;
# kernel_/transfer_below_resolution: every such command of that kind is (its sums are upper
# bounds). Measurement conditions on the device: load average, the share of CPU capacity other
# processes used during the measured iterations, OpenMP wait policy, clock and temperature at
# start and end (null where not readable). Energy (runner's power sampler, src/runner/power.c;
# null where the battery's voltage and current are not readable): energy_per_iteration_mj
# (mean power over the samples by the trapezoid rule x the mean measured iteration time),
# energy_uncertainty_mj (standard error of the mean power x the same time), power_sample_hz
# (achieved sampling rate), power_samples (battery samples over all repeats; > 0 with a null
# energy: readable, but the measured iterations spanned too few samples); energy_method
# (battery_discharge: the battery discharging, status read; battery_current: status and
# chargers unreadable, battery assumed; none: on external power, no energy) and
# energy_caveat (why a figure is missing or what it assumes); gpu_mhz_start/end; throttled (a sampled GPU or fastest-CPU clock
# fell more than 10% below its highest earlier sample; null where no clock is readable).
# Over repeats: energy and rate are means, the uncertainty sqrt(sum u^2)/repeats, throttled
# any. options: the build options of the plan's OpenCL programs (its tuning choice; distinct
# sets joined by " | "; null for the CPU backend). Memory by role, from the run folder's
# plan.json (phonetrain.results.memory; every run whose plan was deployed, oom runs included):
# param_bytes (weights, biases and the model's buffers such as batch norm's running
# statistics), grad_bytes (parameter gradients), optimizer_state_bytes (momentum buffers; Adam's
# exp_avg, exp_avg_sq and step count), activation_bytes (what the forward keeps for the
# backward), scratch_bytes (im2col columns, per-row losses, activation gradients and other
# temporaries of one step), staging_bytes (input batch, labels, loss read back) and
# plan_tensor_bytes, their sum: every tensor at its own size (numel x 4 bytes);
# plan_buffer_bytes: the bytes allocated where tensors share buffers (lowering.reuse_buffers:
# each unshared tensor plus each shared buffer once; = plan_tensor_bytes without reuse).
RUNS = pa.schema(RUN_KEY + [
    _f("dataset", S), _f("batch_size", I), _f("warmup", I), _f("iterations", I),
    _f("repeats", I), _f("attempts", I), _f("threads", I),
    _f("status", S, False), _f("status_reason", S),
    _f("verify_max_abs_err", F), _f("verify_tolerance", F),
    _f("trajectory_drift_max", F), _f("trajectory_drift_from_iteration", I),
    _f("iteration_median_ms", F), _f("iteration_p25_ms", F), _f("iteration_p75_ms", F),
    _f("iteration_min_ms", F), _f("iteration_max_ms", F),
    _f("iteration_ci_low_ms", F), _f("iteration_ci_high_ms", F),
    _f("iteration_ms", F), _f("iteration_low_ms", F), _f("iteration_high_ms", F),
    _f("iteration_estimator", S), _f("paired", S),
    _f("kernel_ms", F), _f("h2d_ms", F), _f("d2h_ms", F), _f("map_ms", F), _f("unmap_ms", F),
    _f("d2d_ms", F), _f("host_ms", F), _f("gap_ms", F), _f("transfer_ms", F),
    _f("transfer_overhead_ms", F), _f("transfer_kernel_overlap_ms", F),
    _f("exposed_transfer_ms", F), _f("events_iteration_ms", F), _f("breakdown_scale", F),
    _f("data_movement_share", F),
    _f("data_movement_call_share", F), _f("kernel_gflops", F), _f("flops_per_iteration", I),
    _f("launches_per_iteration", I), _f("kernel_gap_median_us", F), _f("launch_overhead_us", F),
    _f("loss_first", F), _f("loss_last", F),
    _f("heldout_loss_last", F), _f("heldout_accuracy_last", F), _f("n_heldout", I),
    _f("device_name", S), _f("device_type", S), _f("platform_name", S),
    _f("device_api", S), _f("device_memory_types", S),
    _f("timer_resolution_ns", F), _f("clock_offset_uncertainty_ns", F), _f("max_rss_bytes", I),
    _f("device_buffer_bytes", I),
    _f("param_bytes", I), _f("grad_bytes", I), _f("optimizer_state_bytes", I),
    _f("activation_bytes", I), _f("scratch_bytes", I), _f("staging_bytes", I),
    _f("plan_tensor_bytes", I), _f("plan_buffer_bytes", I),
    _f("below_resolution_commands", I), _f("kernel_below_resolution", B),
    _f("transfer_below_resolution", B),
    _f("load_avg_1m", F), _f("other_cpu_share", F), _f("omp_wait_policy", S),
    _f("cpu_mhz_start", F), _f("cpu_mhz_end", F), _f("temperature_c_start", F),
    _f("temperature_c_end", F), _f("energy_per_iteration_mj", F),
    _f("energy_uncertainty_mj", F), _f("power_sample_hz", F), _f("power_samples", I),
    _f("energy_method", S), _f("energy_caveat", S),
    _f("gpu_mhz_start", F),
    _f("gpu_mhz_end", F), _f("throttled", B), _f("options", S), _f("run_dir", S),
] + PROVENANCE)

# iterations: heldout_loss/heldout_accuracy at the evaluation iterations of repeat 0 (eval.json),
# NaN elsewhere. role: what the process's iterations give: "step" (a timed process without
# per-command events: the step time; breakdown columns null), "breakdown" (the one process
# of the run that recorded them: the breakdown; its wall_ms carries the events' host cost)
# or "both" (a run whose every process recorded them; phonetrain.results.runs).
ITERATIONS = pa.schema(RUN_KEY + [
    _f("repeat", I, False), _f("role", S, False), _f("iteration", I, False),
    _f("measured", B, False),
    _f("wall_ms", F), _f("loss", F), _f("heldout_loss", F), _f("heldout_accuracy", F),
    _f("kernel_ms", F), _f("h2d_ms", F), _f("d2h_ms", F), _f("map_ms", F), _f("unmap_ms", F),
    _f("d2d_ms", F), _f("host_ms", F), _f("busy_ms", F), _f("gap_ms", F),
    _f("transfer_ms", F), _f("overlap_ms", F), _f("transfer_kernel_overlap_ms", F),
    _f("exposed_transfer_ms", F), _f("transfer_overhead_ms", F),
] + PROVENANCE)

COMMANDS = pa.schema(RUN_KEY + [
    _f("kind", S, False), _f("name", S, False), _f("layer", S), _f("phase", S),
    _f("count", I, False), _f("per_iteration_ms", F), _f("per_iteration_median_ms", F),
    _f("median_ms", F), _f("total_ms", F),
    _f("bytes_per_iteration", I), _f("flops_per_iteration", I), _f("gflops", F),
    _f("gbps", F), _f("share_of_wall", F),
] + PROVENANCE)

# bandwidth: the runner's bench-bandwidth table; device_* timed by OpenCL events (median per
# transfer), host_* by the host clock around the blocking call (what a training step sees);
# host_gbps_low..host_gbps_high the interval of host_gbps (null where none was recorded).
BANDWIDTH = pa.schema([
    _f("device", S, False), _f("kind", S, False), _f("size_bytes", I, False),
    _f("iterations", I), _f("repeats", I), _f("device_ns", F), _f("host_ns", F),
    _f("device_gbps", F), _f("host_gbps", F),
    _f("host_gbps_low", F), _f("host_gbps_high", F),
] + PROVENANCE)

BUILDS = pa.schema([
    _f("device", S, False), _f("kernel", S, False), _f("program", S, False),
    _f("status", S, False), _f("build_ms", F), _f("binary_size_bytes", I), _f("log", S),
    _f("options", S), _f("cached", B),
] + PROVENANCE)

# gemm: one row per device x kernel version (``cpu`` = the runner's CPU backend) x GEMM call
# (runner bench-gemm: checked, warm-up, calibrated, median of 5 repeats, 3-4 for a square whose
# launch takes over a fifth of measure.gemm_max_shape_s: gemm.json's `repeats`;
# phonetrain.kernels.gemm);
# low_ms..high_ms the interval of median_ms (null where the runner recorded none).
# ``shape_source`` is ``model:<name>`` or ``square``; ``tuned_class`` the tuning class
# used (null: version.yaml defaults); status ok | wrong (failed the float64 check: its speed
# is not valid) | error | skipped (e.g. CLBlast absent; the reason in status_reason).
GEMM = pa.schema([
    _f("device", S, False), _f("kernel", S, False), _f("gemm", S), _f("m", I), _f("n", I),
    _f("k", I), _f("shape_source", S), _f("status", S, False), _f("status_reason", S),
    _f("options", S), _f("global_size", S), _f("local_size", S), _f("tuned_class", S),
    _f("gflops", F), _f("median_ms", F), _f("low_ms", F), _f("high_ms", F),
    _f("max_err", F), _f("iterations", I), _f("paired", S),
    _f("device_name", S), _f("platform_name", S),
] + PROVENANCE)

# peaks: the device's roofline ceilings (runner bench-peak, clpeak's method): kind compute
# (name float..float16, gflops) or bandwidth (name read_float4, gbps).
PEAKS = pa.schema([
    _f("device", S, False), _f("kind", S, False), _f("name", S, False), _f("width", I),
    _f("gflops", F), _f("gbps", F), _f("median_ms", F), _f("device_name", S),
    _f("platform_name", S),
] + PROVENANCE)

# history: every measurement the study has aggregated (phonetrain.results.history): one row per
# subject (``kind`` run: a run_id; gemm: ``<device>/<kernel>/<gemm> <m>x<n>x<k>``) x measurement.
# ``median_ms`` the location estimate with its interval ``low_ms``..``high_ms`` (runs:
# iteration_ms by ``interval``, the runs' iteration_estimator; gemm: the sweep's median_ms),
# ``gflops`` (runs: kernel_gflops; gemm: the sweep's), ``measurement_id`` (hash of the measured
# values and the config, kernel and runner hashes), ``sources`` (JSON {source path: content hash}
# of the kernel version's and the runner's files it was built from; null where unknown),
# ``latest`` (the subject's current measurement), ``recorded_in`` / ``superseded_in`` (the number
# of the aggregation that recorded / replaced it; null while it is the latest).
# ``status_reason`` why a run is not ok; the settings a comparison needs equal on both sides
# (threads, iterations, repeats, batch_size, dataset; runs only); ``conditions`` the measurement
# conditions as JSON {runs.parquet column: value} (load_avg_1m, other_cpu_share, ...); the
# tuning choice of a GEMM row (``tuned_class``, ``local_size``, ``global_size``, ``options``).
HISTORY = pa.schema([
    _f("kind", S, False), _f("subject", S, False), _f("device", S, False), _f("kernel", S),
    _f("label", S), _f("status", S), _f("median_ms", F), _f("low_ms", F), _f("high_ms", F),
    _f("interval", S), _f("gflops", F), _f("measurement_id", S, False), _f("sources", S),
    _f("status_reason", S), _f("threads", I), _f("iterations", I), _f("repeats", I),
    _f("batch_size", I), _f("dataset", S), _f("conditions", S), _f("tuned_class", S),
    _f("local_size", S), _f("global_size", S), _f("options", S), _f("paired", S),
    _f("latest", B, False), _f("recorded_in", I, False), _f("superseded_in", I),
] + PROVENANCE)

# devices: one row per device of the study (phonetrain.results.devices): the phone's getprop
# facts (adb devices; docs/device-sensors.md), the OpenCL device's facts from the runner's
# run.json and the CPU's; join with runs on ``device``. No provenance columns: every column but
# ``device`` is absent from runs, so a merge adds no suffixes. ``facts_from_runs``: run folders
# that contributed facts (0: every run of the device failed).
DEVICES = pa.schema([
    _f("device", S, False), _f("transport", S), _f("serial", S), _f("product_model", S),
    _f("product_manufacturer", S), _f("soc_model", S), _f("soc_manufacturer", S),
    _f("board_platform", S), _f("hardware", S), _f("android_version", S),
    _f("android_sdk", S), _f("abi", S), _f("cpu_model", S), _f("logical_cores", I),
    _f("opencl_platform", S), _f("opencl_platform_version", S), _f("opencl_device", S),
    _f("opencl_device_vendor", S), _f("opencl_version", S), _f("opencl_driver_version", S),
    _f("opencl_c_version", S), _f("opencl_device_type", S), _f("compute_units", I),
    _f("max_clock_mhz", I), _f("global_mem_bytes", I), _f("local_mem_bytes", I),
    _f("max_alloc_bytes", I), _f("image_support", B), _f("fp16", B), _f("fp64", B),
    _f("host_unified_memory", B), _f("opencl_timer_resolution_ns", F),
    _f("facts_from_runs", I, False),
])

TABLES: dict[str, pa.Schema] = {
    "runs": RUNS, "iterations": ITERATIONS, "commands": COMMANDS,
    "bandwidth": BANDWIDTH, "builds": BUILDS, "gemm": GEMM, "peaks": PEAKS,
    "history": HISTORY, "devices": DEVICES,
}
"""Table name -> schema; the Parquet file is ``results/summary/<name>.parquet``."""

_ALLOWED = {("runs", "status"): STATUSES, ("builds", "status"): ("ok", "failed"),
            ("commands", "kind"): COMMAND_KINDS, ("bandwidth", "kind"): BANDWIDTH_KINDS,
            ("gemm", "status"): ("ok", "wrong", "error", "skipped"),
            ("peaks", "kind"): ("compute", "bandwidth"), ("history", "kind"): ("run", "gemm")}


def fingerprint() -> str:
    """A short hash of every table's column names, types and nullability, with the allowed
    values of the checked columns: the aggregate rule's param, so a phonetrain whose tables
    differ rewrites existing summary tables (Snakemake's params rerun trigger) instead of
    leaving files that :func:`read_table` refuses."""
    text = repr([(name, str(t), sorted(_ALLOWED.items())) for name, t in TABLES.items()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def schema(table: str) -> pa.Schema:
    """The schema of ``table``; :class:`SchemaError` for an unknown name."""
    try:
        return TABLES[table]
    except KeyError:
        raise SchemaError(f"unknown table {table!r}; known: {sorted(TABLES)}") from None


def empty(table: str) -> pd.DataFrame:
    """An empty DataFrame with ``table``'s columns (for tables with no rows yet)."""
    return schema(table).empty_table().to_pandas()


def frame(rows: Iterable[dict] | pd.DataFrame, table: str) -> pd.DataFrame:
    """Rows (dicts or a DataFrame) -> a DataFrame with exactly ``table``'s columns, in schema
    order; columns the rows lack are null."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    names = schema(table).names
    missing = [n for n in names if n not in df]
    if missing:  # object columns of None, added at once (one insert per column costs more)
        df = pd.concat([df, pd.DataFrame({n: [None] * len(df) for n in missing},
                                         index=df.index, dtype=object)], axis=1)
    return df[names]


def _values(col: pd.Series) -> list:
    """The column's values as Python objects (``Series.tolist``), each missing one (NaN, NaT,
    ``pd.NA``, None: ``Series.notna``) as None; one list per column, no pandas copy of it."""
    return [v if filled else None for v, filled in zip(col.tolist(), col.notna().tolist())]


def conform(df: pd.DataFrame, table: str) -> pa.Table:
    """Check ``df`` against ``table``'s schema and return it as a pyarrow Table, columns in
    schema order.

    Raises :class:`SchemaError` (naming table and column) for a missing or extra column, a
    value that cannot be cast to the column's type, a null in a non-nullable column, or a
    value outside a column's allowed set (``status``, ``kind``).
    """
    sch = schema(table)
    missing = [n for n in sch.names if n not in df.columns]
    extra = [c for c in df.columns if c not in sch.names]
    if missing or extra:
        raise SchemaError(f"table {table!r}: missing columns {missing}, unexpected columns "
                          f"{extra}; the schema lives in phonetrain.results.schema")
    arrays = []
    for fld in sch:
        try:
            arr = pa.array(_values(df[fld.name]), type=fld.type, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
            raise SchemaError(f"table {table!r}, column {fld.name!r}: values do not fit "
                              f"{fld.type}: {e}") from None
        if not fld.nullable and arr.null_count:
            raise SchemaError(f"table {table!r}, column {fld.name!r}: {arr.null_count} null "
                              "value(s) in a column that must always be filled")
        allowed = _ALLOWED.get((table, fld.name))
        if allowed is not None:
            bad = sorted({v for v in arr.to_pylist() if v is not None and v not in allowed})
            if bad:
                raise SchemaError(f"table {table!r}, column {fld.name!r}: values {bad} are not "
                                  f"in {list(allowed)}")
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=sch)


def write_table(df: pd.DataFrame, table: str, path: str | Path) -> Path:
    """Conform ``df`` to ``table`` and write it as Parquet atomically (temp file in the same
    folder, then rename), so a crash never leaves a partial file under ``path``."""
    path = Path(path)
    data = conform(df, table)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(data, tmp)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def schema_difference(got: pa.Schema, want: pa.Schema) -> str:
    """What a file's schema ``got`` lacks, adds, types or nulls otherwise than ``want``, in
    words."""
    have, need = dict(zip(got.names, got.types)), dict(zip(want.names, want.types))
    nulls = {f.name: f.nullable for f in got}
    word = {True: "nullable", False: "not null"}
    parts = [f"missing columns {[n for n in need if n not in have]}",
             f"extra columns {[n for n in have if n not in need]}",
             "other types: " + ", ".join(f"{n} {have[n]} (want {t})" for n, t in need.items()
                                          if n in have and have[n] != t),
             "other nullability: " + ", ".join(
                 f"{f.name} {word[nulls[f.name]]} (want {word[f.nullable]})" for f in want
                 if f.name in nulls and nulls[f.name] != f.nullable)]
    parts = [p for p in parts if not p.endswith(("[]", ": "))]
    return "; ".join(parts) or "the columns are in another order"


def migrate(data: pa.Table, table: str) -> pa.Table:
    """``data`` (a file of ``table`` written by another phonetrain) in ``table``'s schema:
    columns put in schema order, a missing nullable column added as nulls, a column of
    another type cast where every value converts exactly (pyarrow's safe cast), nullability
    taken from the schema where the values allow it. Raises :class:`SchemaError` naming each
    column that cannot be migrated: an extra column (its values would be lost), a missing
    column that may not be null, a type that does not convert, nulls where none are allowed."""
    want = schema(table)
    cols, why = [], []
    extra = [n for n in data.column_names if n not in want.names]
    if extra:
        why.append(f"extra columns {extra} (this phonetrain's table has no place for their "
                   "values)")
    for f in want:
        if f.name not in data.column_names:
            if not f.nullable:
                why.append(f"missing column {f.name!r}, which may not be null")
                continue
            cols.append(pa.nulls(data.num_rows, f.type))
            continue
        col = data[f.name]
        try:
            col = col.cast(f.type, safe=True) if col.type != f.type else col
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            why.append(f"column {f.name!r} of type {col.type} does not convert to {f.type} "
                       f"({str(e).splitlines()[0]})")
            continue
        if not f.nullable and col.null_count:
            why.append(f"column {f.name!r} holds {col.null_count} nulls, which it may not")
            continue
        cols.append(col)
    if why:
        raise SchemaError("cannot migrate to table " + repr(table) + ": " + "; ".join(why))
    return pa.Table.from_arrays(cols, schema=want)


def read_table(path: str | Path, table: str) -> pd.DataFrame:
    """Read a Parquet file and check it against ``table``'s schema.

    Raises :class:`SchemaError` naming the file when its columns or types differ (e.g. it was
    written by an older phonetrain: rerun ``phonetrain aggregate``).
    """
    path = Path(path)
    try:
        got = pq.read_schema(path)
        want = schema(table)
        if not got.equals(want, check_metadata=False):
            raise SchemaError(f"{path}: schema differs from table {table!r} "
                              f"({schema_difference(got, want)})", "rerun the aggregate stage")
        return pq.read_table(path).to_pandas()
    except (OSError, pa.ArrowException) as e:  # truncated or not Parquet at all
        raise SchemaError(f"{path}: not a readable Parquet file ({e})",
                          "rerun the aggregate stage") from None


def require_runs(runs: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """``runs`` (the runs table read from ``path``) when it has rows. A study's aggregation
    writes one row per experiment, failed and skipped ones included, so a study's runs table
    without rows is not one an aggregation of it wrote; raises :class:`SchemaError` naming
    the file and what to do."""
    if len(runs):
        return runs
    raise SchemaError(f"{path}: table 'runs' has no rows; a study's aggregation writes one row "
                      "per experiment (failed ones included), so this is not its runs table",
                      "delete it and rerun the aggregate stage (snakemake --cores 1 all, or "
                      "phonetrain aggregate with the study's overrides)")
