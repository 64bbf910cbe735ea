"""Report honesty rules, on small hand-built tables (no runner): the device's peak is the
best compute width, zero-copy transfers get no GB/s, differences inside the IQRs are noise,
and figures name an OpenCL CPU device as such."""

from __future__ import annotations

import pandas as pd

from phonetrain.gemm_report import compute_peak, kernel_optimization


def _peaks(scalar: float, vec16: float) -> pd.DataFrame:
    return pd.DataFrame({"device": ["d"] * 3, "kind": ["compute", "compute", "bandwidth"],
                         "name": ["float", "float16", "read_float4"],
                         "width": [1, 16, 4], "gflops": [scalar, vec16, None],
                         "gbps": [None, None, 20.0]})


def _gemm(regblock: float) -> pd.DataFrame:
    rows = [("baseline", 2.0), ("regblock", regblock)]
    return pd.DataFrame({"device": "d", "kernel": [k for k, _ in rows], "gemm": "gemm_nn",
                         "m": 256, "n": 256, "k": 256, "shape_source": "square",
                         "status": "ok", "gflops": [g for _, g in rows]})


def test_peak_is_best_width_and_above_peak_is_flagged():
    assert compute_peak(_peaks(6.0, 60.0), "d") == (60.0, "float16")
    below = kernel_optimization(_gemm(30.0), _peaks(6.0, 60.0)).statement
    assert "50% of the measured peak 60 GFLOPS (float16)" in below
    assert "500%" not in below                # not measured against the scalar chain
    above = kernel_optimization(_gemm(87.0), _peaks(6.0, 60.0)).statement
    assert "above the measured peak 60 GFLOPS (float16" in above
    assert "the microbenchmark underestimates" in above and "145%" not in above
