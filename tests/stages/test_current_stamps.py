"""Per-device results carry a stamp of their inputs (stages.current): a file made from other
settings or another runner binary is not current, one without a stamp is not judged; the
aggregate turns such files into rows that say so (builds failed, GEMM error) or none (peaks,
bandwidth), never measurements."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from phonetrain.results.aggregate import tables
from phonetrain.stages.current import STAMP, not_current, stamp
from helpers.results import standard_study


def _runner(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def test_stamp_compares_params_and_the_runner_binary(tmp_path):
    runner = _runner(tmp_path / "runner", b"\x7fELF one build")
    params = {"device": "host", "kernel_hash": "abc", "sizes": [64]}
    doc = {STAMP: stamp(SimpleNamespace(params=params, input=SimpleNamespace(runner=str(runner))))}
    assert not_current(doc, params, runner) is None
    assert "settings or kernel sources" in not_current(doc, {**params, "kernel_hash": "x"}, runner)
    other = _runner(tmp_path / "runner2", b"\x7fELF another build")
    assert "runner binary" in not_current(doc, params, other)
    assert not_current({}, {**params, "kernel_hash": "x"}, other) is None  # no stamp: not judged


def test_not_current_files_never_become_measurements(tmp_path):
    study = standard_study(tmp_path)
    why = "not current: made with other settings or kernel sources than the study's now"
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
