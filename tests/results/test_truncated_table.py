"""A summary table cut short (a Parquet file truncated on disk) stops `phonetrain report` with
one message naming the file and what to do, never a pyarrow traceback."""

from __future__ import annotations

from pathlib import Path

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
