"""A pipelined run through ``phonetrain run`` (real runner, PoCL) into runs.parquet: the
placement is its own row, verified, with the overlap columns filled."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from helpers import STEADY
from helpers.results import summary_paths
from phonetrain.cli import main
from phonetrain.results import aggregate, schema

MODEL = "mlp_784_256_128_16"


def test_runs_parquet_carries_the_pipelined_placement(seeded_results, pocl, tmp_path):
    R = seeded_results
    args = ["run", f"model={MODEL}", "device=host", f"results_dir={R}",
            "backend=opencl_pipelined", "kernel=baseline", "measure.warmup=1",
            "measure.iterations=2", "measure.progress=false", *STEADY]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, (res.output, res.exception)
    paths = aggregate.aggregate([R / "runs" / "host" / f"{MODEL}.opencl_pipelined.baseline"],
                                summary_paths(tmp_path / "summary"))
    runs = schema.read_table(paths["runs"], "runs")
    assert list(runs["placement"]) == ["pipelined"]
    assert list(runs["backend"]) == ["opencl_pipelined"]
    pip = runs.iloc[0]
    assert pip["status"] == "ok" and pip["transfer"] == "copy", pip["status_reason"]
    assert pip["verify_max_abs_err"] <= pip["verify_tolerance"]
    assert 0 <= pip["transfer_kernel_overlap_ms"] <= pip["transfer_ms"]
    assert 0 <= pip["data_movement_share"] <= 1
    it = schema.read_table(paths["iterations"], "iterations")
    assert (it["transfer_kernel_overlap_ms"] >= 0).all() and (it["placement"] == "pipelined").all()
    # per iteration, exposed = transfer - overlap; the run's figure is the median of those over
    # the measured iterations of every runner process (not a difference of medians)
    m = it[it["measured"]]
    assert np.allclose(m["exposed_transfer_ms"],
                       np.maximum(m["transfer_ms"] - m["transfer_kernel_overlap_ms"], 0),
                       rtol=1e-6, atol=1e-9)
    assert np.isclose(pip["exposed_transfer_ms"], m["exposed_transfer_ms"].median(), rtol=1e-9)
