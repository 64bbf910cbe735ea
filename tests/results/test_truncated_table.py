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


def _aggregated(R: Path) -> dict:
    """The standard study aggregated under ``R``: the summary tables' paths."""
    study = standard_study(R / "raw")
    return aggregate.aggregate(study["runs"], summary_paths(R / "summary"),
                               bandwidth_csvs=study["bandwidth"], build_jsons=study["builds"],
                               gemm_jsons=study["gemm"], peaks_jsons=study["peaks"])


def test_truncated_gemm_table_is_one_message(tmp_path: Path):
    R = tmp_path / "results"
    paths = _aggregated(R)
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
    paths = _aggregated(R)
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


def test_a_runs_table_without_rows_is_damaged_for_report_compare_and_stale(tmp_path: Path):
    """A runs table with the right schema and 0 rows (no aggregation writes one: failed runs
    have rows too) is not read as a study of 0 runs: report and compare stop naming the file,
    and stale lists it among the damaged tables."""
    from phonetrain.cli.stale import damaged_tables
    from phonetrain.layout import Layout
    R, B = tmp_path / "results", tmp_path / "other"
    for r in (R, B):
        study = standard_study(r / "raw")
        aggregate.aggregate(study["runs"], summary_paths(r / "summary"),
                            bandwidth_csvs=study["bandwidth"], build_jsons=study["builds"],
                            gemm_jsons=study["gemm"], peaks_jsons=study["peaks"])
    runs = R / "summary" / "runs.parquet"
    pq.write_table(pq.read_table(runs).slice(0, 0), runs)
    for args in (["report", "--results", str(R)], ["compare", str(R), str(B)],
                 ["compare", str(B), str(R)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1, (args, res.output)
        assert f"{runs}: table 'runs' has no rows" in res.output, res.output
        assert "rerun the aggregate stage" in res.output, res.output
        assert "identical" not in res.output and "Traceback" not in res.output, res.output
    assert not (R / "report" / "report.html").exists()
    [line] = damaged_tables(Layout(str(R)))
    assert line.startswith(f"damaged {runs}: ") and "table 'runs' has no rows" in line, line
    assert "delete it" in line, line
    assert damaged_tables(Layout(str(B))) == []


def test_report_on_a_folder_that_does_not_exist_says_so(tmp_path: Path):
    res = CliRunner().invoke(main, ["report", "--results", str(tmp_path / "nope")])
    assert res.exit_code == 1, res.output
    assert f"results folder {tmp_path / 'nope'} does not exist" in res.output, res.output
    assert "aggregate" not in res.output, res.output
    assert not (tmp_path / "nope").exists()
