"""Raw outputs -> the summary tables ``summary/<table>.parquet`` (schemas:
:mod:`phonetrain.results.schema`).

:func:`aggregate` reads every run folder of a study (:mod:`phonetrain.results.runs`; a folder
whose job failed or never ran becomes a ``failed`` row, so the report lists it), the devices'
bandwidth sweeps, kernel builds, GEMM sweeps and peaks (:mod:`phonetrain.results.readers`),
the devices' facts from the run folders (:mod:`phonetrain.results.devices`),
and writes each table atomically, schema-enforced, to the path given for it. The ``history``
table merges this aggregation's measurements into the previous ones kept in a ledger file
(:mod:`phonetrain.results.history`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd
import pyarrow.parquet as pq

from phonetrain.results import devices, history, readers, runs, schema


def add_kernel_gflops(run_rows: pd.DataFrame, commands: pd.DataFrame) -> pd.DataFrame:
    """Fill ``flops_per_iteration`` and ``kernel_gflops`` (all kernel FLOPs of one iteration
    over its median kernel time) from the commands table."""
    k = commands[commands["kind"] == "kernel"].groupby("run_id")["flops_per_iteration"].sum()
    run_rows = run_rows.copy()
    run_rows["flops_per_iteration"] = run_rows["run_id"].map(k).astype("Int64")
    t = pd.to_numeric(run_rows["kernel_ms"], errors="coerce")
    run_rows["kernel_gflops"] = (run_rows["flops_per_iteration"].astype(float)
                                 / (t * 1e6)).where(t > 0)
    return run_rows


def tables(run_dirs: Iterable[str | Path], *, bandwidth_csvs: Iterable[str | Path] = (),
           build_jsons: Iterable[str | Path] = (), gemm_jsons: Iterable[str | Path] = (),
           peaks_jsons: Iterable[str | Path] = (),
           not_ok: Mapping[str, str] | None = None,
           absent: Mapping[str, tuple[Mapping[str, Any], str]] | None = None
           ) -> dict[str, pd.DataFrame]:
    """Every summary table (name -> DataFrame with the schema's columns) from the raw files.

    ``not_ok`` maps per-device files that are not measurements to the reason: such a build
    (failed, or never run; the file then absent) becomes one ``failed`` row, such a GEMM
    sweep one ``error`` row, such peaks and bandwidth files give no rows. ``absent`` maps run
    folders without a readable measurement to (the run's params, why): each becomes one
    ``failed`` row (:func:`phonetrain.results.runs.absent_run`). The ``history`` table is
    not made here (:func:`aggregate`).
    Raises :class:`~phonetrain.errors.ResultsFileError` naming a file that cannot be read."""
    nok = {str(k): v for k, v in (not_ok or {}).items()}
    run_dirs = list(run_dirs)
    parts: dict[str, list[pd.DataFrame]] = {t: [] for t in schema.TABLES
                                            if t not in ("history", "devices")}
    absent = {str(k): v for k, v in (absent or {}).items()}
    for d in run_dirs:
        got = (runs.absent_run(absent[str(d)][0], d, absent[str(d)][1]) if str(d) in absent
               else runs.read_run(d))
        for t, df in got.items():
            parts[t].append(df)
    parts["bandwidth"] = [readers.read_bandwidth(p) for p in bandwidth_csvs if str(p) not in nok]
    parts["builds"] = [readers.build_not_ok(p, nok[str(p)]) if str(p) in nok
                       else readers.read_build(p) for p in build_jsons]
    parts["gemm"] = [readers.gemm_not_current(p, nok[str(p)]) if str(p) in nok
                     else readers.read_gemm(p) for p in gemm_jsons]
    parts["peaks"] = [readers.read_peaks(p) for p in peaks_jsons if str(p) not in nok]
    out = {t: (pd.concat([df for df in dfs if len(df)], ignore_index=True)
               if any(len(df) for df in dfs) else schema.empty(t))
           for t, dfs in parts.items()}
    out["runs"] = add_kernel_gflops(out["runs"], out["commands"])
    out["devices"] = devices.device_rows(run_dirs)
    out["history"] = schema.empty("history")
    return out


def read_ledger(path: str | Path | None) -> pd.DataFrame:
    """The history ledger at ``path`` (an empty history table when there is none yet). A
    ledger written under another schema of the history table is migrated in memory
    (:func:`phonetrain.results.schema.migrate`; the aggregation then rewrites it). Raises
    :class:`~phonetrain.results.schema.SchemaError` naming a damaged file, or the columns
    of a stale one that cannot be migrated."""
    if path is None or not Path(path).exists():
        return schema.empty("history")
    try:
        return schema.read_table(path, "history")
    except schema.SchemaError as e:
        stale = "schema differs" in e.message
        why = e.message
    if stale:
        try:
            return schema.migrate(pq.read_table(path), "history").to_pandas()
        except schema.SchemaError as e:
            why = f"{path}: {e.message}"
    raise schema.SchemaError(f"{why}: the measurement history cannot be read",
                             f"move {path} aside to start a new history (the replaced "
                             "measurements it holds are then not reported)")


def aggregate(run_dirs: Iterable[str | Path], outputs: Mapping[str, str | Path], *,
              bandwidth_csvs: Iterable[str | Path] = (),
              build_jsons: Iterable[str | Path] = (),
              gemm_jsons: Iterable[str | Path] = (),
              peaks_jsons: Iterable[str | Path] = (), ledger: str | Path | None = None,
              sources: history.Sources | None = None,
              not_ok: Mapping[str, str] | None = None,
              absent: Mapping[str, tuple[Mapping[str, Any], str]] | None = None
              ) -> dict[str, Path]:
    """Aggregate run folders (present or expected-but-empty), bandwidth CSVs, build files and
    the GEMM study's files (``not_ok``, ``absent``: see :func:`tables`) into one Parquet file
    per table:
    ``outputs`` maps every table name of :data:`~phonetrain.results.schema.TABLES` to its
    path. The ``history`` table is the ledger at ``ledger`` (when given) updated with this
    aggregation's measurements (:func:`phonetrain.results.history.update`; ``sources`` names
    their source files), and the ledger is rewritten with it, last. Returns table -> path."""
    missing = sorted(set(schema.TABLES) - set(outputs))
    if missing:
        raise ValueError(f"aggregate: no output path for tables {missing}")
    got = tables(run_dirs, bandwidth_csvs=bandwidth_csvs, build_jsons=build_jsons,
                 gemm_jsons=gemm_jsons, peaks_jsons=peaks_jsons, not_ok=not_ok,
                 absent=absent)
    got["history"] = history.update(read_ledger(ledger),
                                    history.measurements(got, sources))
    paths = {t: schema.write_table(df, t, outputs[t]) for t, df in got.items()}
    if ledger is not None:
        schema.write_table(got["history"], "history", ledger)
    return paths
