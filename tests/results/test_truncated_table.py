"""A summary table cut short (a Parquet file truncated on disk) stops `phonetrain report` with
one message naming the file and what to do, never a pyarrow traceback."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from click.testing import CliRunner

from phonetrain.cli import main
from phonetrain.results import aggregate
from helpers.results import standard_study, summary_paths


def test_truncated_gemm_table_is_one_message(tmp_path: Path):
    R = tmp_path / "results"
    study = standard_study(R / "raw")
    paths = aggregate.aggregate(study["runs"], summary_paths(R / "summary"),
                                bandwidth_csvs=study["bandwidth"], build_jsons=study["builds"],
                                gemm_jsons=study["gemm"], peaks_jsons=study["peaks"])
    gemm = Path(paths["gemm"])
    gemm.write_bytes(gemm.read_bytes()[: gemm.stat().st_size // 2])
    res = CliRunner().invoke(main, ["report", "--results", str(R)])
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output and "pyarrow" not in res.output.lower()
    assert str(gemm) in res.output and "not a readable Parquet file" in res.output
    assert "rerun the aggregate stage" in res.output, res.output


def test_a_table_of_an_older_schema_names_the_columns_that_differ(tmp_path: Path):
    """A runs table written before the ``options`` and memory columns existed (and with one
    column of another type): the message names those columns, not the whole column list."""
    R = tmp_path / "results"
    study = standard_study(R / "raw")
    paths = aggregate.aggregate(study["runs"], summary_paths(R / "summary"),
                                bandwidth_csvs=study["bandwidth"], build_jsons=study["builds"],
                                gemm_jsons=study["gemm"], peaks_jsons=study["peaks"])
    runs = Path(paths["runs"])
    old = pq.read_table(runs).drop_columns(["options", "param_bytes"])
    i = old.schema.get_field_index("batch_size")
    pq.write_table(old.set_column(i, "batch_size", pc.cast(old["batch_size"], pa.string())),
                   runs)
    res = CliRunner().invoke(main, ["compare", str(R), str(R)])
    assert res.exit_code == 1 and "Traceback" not in res.output, (res.output, res.exception)
    assert f"{runs}: schema differs" in res.output
    assert "missing columns ['param_bytes', 'options']" in res.output
    assert "batch_size string (want int64)" in res.output
    assert "'run_id'" not in res.output and "rerun the aggregate stage" in res.output
