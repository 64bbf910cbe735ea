"""Per-device results carry a stamp of their inputs (stages.stamp): a one-off run reuses a
build only when it was made from the same settings and runner binary; the aggregate turns
per-device files that are not measurements into rows that say so (builds failed, GEMM
error) or none (peaks, bandwidth)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from phonetrain.results.aggregate import tables
from phonetrain.stages.stamp import STAMP, made_from, stamp
from helpers.results import standard_study


def _runner(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def test_stamp_compares_params_and_the_runner_binary(tmp_path):
    runner = _runner(tmp_path / "runner", b"\x7fELF one build")
    params = {"device": "host", "kernel_hash": "abc", "sizes": [64]}
    doc = {STAMP: stamp(SimpleNamespace(params=params, input=SimpleNamespace(runner=str(runner))))}
    assert made_from(doc, params, runner)
    assert not made_from(doc, {**params, "kernel_hash": "x"}, runner)
    other = _runner(tmp_path / "runner2", b"\x7fELF another build")
    assert not made_from(doc, params, other)
    assert not made_from({}, params, runner)  # no stamp: not reused


def test_files_that_are_not_measurements_never_become_measurements(tmp_path):
    study = standard_study(tmp_path)
    why = "not built: its job did not run"
    nok = {str(p): why for k in ("builds", "gemm", "peaks", "bandwidth") for p in study[k]}
    got = tables(study["runs"], bandwidth_csvs=study["bandwidth"], build_jsons=study["builds"],
                 gemm_jsons=study["gemm"], peaks_jsons=study["peaks"], not_ok=nok)
    assert got["peaks"].empty and got["bandwidth"].empty
    assert list(got["builds"]["status"]) == ["failed"] and got["builds"]["log"].iloc[0] == why
    g = got["gemm"]
    assert list(g["status"]) == ["error"] and g["status_reason"].iloc[0] == why
    assert pd.isna(g["gflops"].iloc[0])
    whole = tables(study["runs"], bandwidth_csvs=study["bandwidth"], build_jsons=study["builds"],
                   gemm_jsons=study["gemm"], peaks_jsons=study["peaks"])
    assert len(whole["peaks"]) and len(whole["bandwidth"])
    assert (whole["gemm"]["status"] == "ok").any()
