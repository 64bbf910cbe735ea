"""Report honesty rules, on small hand-built tables (no runner): the device's peak is the
best compute width, zero-copy transfers get no GB/s, differences inside the intervals are
"cannot tell", and figures name an OpenCL CPU device as such."""

from __future__ import annotations

import pandas as pd

from phonetrain.report import analysis, build, figures
from phonetrain.report import findings as guidelines
from phonetrain.report.analysis import compute_peak
from phonetrain.report.findings import kernel_optimization


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


def _bw(kind: str, host_ns: list[float]) -> pd.DataFrame:
    sizes = [4096 * 8 ** i for i in range(len(host_ns))]
    return pd.DataFrame({"device": "d", "kind": kind, "size_bytes": sizes, "host_ns": host_ns,
                         "device_ns": [h / 2 for h in host_ns],
                         "host_gbps": [s / h for s, h in zip(sizes, host_ns)],
                         "device_gbps": [2 * s / h for s, h in zip(sizes, host_ns)]})


def test_zero_copy_map_reports_time_per_call_not_gbps(tmp_path):
    bw = pd.concat([_bw("h2d", [8e3, 1e4, 4e4, 1.6e5]), _bw("map", [7e3, 7.2e3, 7.1e3, 7.3e3])],
                   ignore_index=True)
    zc = analysis.zero_copy(bw)
    assert list(zc.index) == [("d", "map")] and 7.0 <= zc[("d", "map")] <= 7.3
    f = guidelines.bandwidth(bw)
    assert "would have grown): d map ~7.15 us per call" in f.statement
    assert "d h2d" in f.statement and "map 2" not in f.statement
    rows = {r[1]: r for r in f.table.rows}
    assert rows["map"][3] == "n/a" and rows["h2d"][3].startswith(f"{bw['host_gbps'].iloc[3]:.3g}")
    table = {r["kind"]: r for r in build.bandwidth_rows(bw, pd.DataFrame(columns=["device"]))}
    assert table["map"]["host_gbps"] == "~7.15 us per call (no GB/s)"
    assert table["map"]["behaviour"] == "zero-copy" and table["h2d"]["behaviour"] == "copy"
    seen = []
    orig = figures._save
    figures._save = lambda fig, path, dpi: (seen.extend(
        t.get_text() for ax in fig.axes if ax.get_legend()
        for t in ax.get_legend().get_texts()), orig(fig, path, dpi))[1]
    try:
        figures.bandwidth(bw, tmp_path / "bw.png")
    finally:
        figures._save = orig
    assert "map: zero-copy" in seen and "h2d: copy" in seen
    assert "map (host clock)" not in seen and "h2d (host clock)" in seen


def _run(run_id, placement, transfer, kernel, med, p25, p75, dtype="cpu"):
    return {"run_id": run_id, "model": "m", "device": "d", "status": "ok",
            "placement": placement, "transfer": transfer, "kernel": kernel,
            "iteration_median_ms": med, "iteration_p25_ms": p25, "iteration_p75_ms": p75,
            "iteration_ms": med, "iteration_low_ms": p25, "iteration_high_ms": p75,
            "iteration_estimator": "median, test interval",
            "device_type": None if placement is None else dtype, "transfer_ms": 0.1,
            "platform_name": None if placement is None else "Portable Computing Language"}


def _runs() -> pd.DataFrame:
    return pd.DataFrame([
        _run("d/cpu", None, None, None, 10.0, 9.0, 11.0),
        _run("d/res.a", "resident", "copy", "a", 20.0, 19.5, 21.8),     # clearly slower
        _run("d/stg.a", "staged", "copy", "a", 16.4, 11.6, 20.0),       # overlaps res.a
        _run("d/res.b", "resident", "copy", "b", 10.5, 10.0, 12.0),     # overlaps cpu
        _run("d/stg.b", "staged", "copy", "b", 40.0, 38.0, 42.0),       # clearly slower
    ])


def test_within_noise_comparisons_are_marked():
    runs = _runs()
    f = guidelines.placement(runs)
    rows = {r[2]: r for r in f.table.rows}
    assert rows["a"][-1] == "cannot tell (intervals overlap)" and "0.82x" not in f.statement
    assert rows["b"][-1] == "staged slower" and rows["b"][5].startswith("3.81x")
    assert "d: 3.81x (staging costs), cannot tell in 1 pair(s)" in f.statement
    g = guidelines.gpu_vs_cpu(runs)
    verdicts = {r[2]: r[6] for r in g.table.rows}
    assert verdicts["resident/copy b"] == "cannot tell (intervals overlap)"
    assert verdicts["staged/copy b"] == "GPU slower"
    assert "1 of 4 pairing(s): cannot tell" in g.statement
    assert "d: m 1.05x [0.909-1.33] (cannot tell (intervals overlap)): cannot tell" \
        in g.statement


def test_figures_name_an_opencl_cpu_device(tmp_path):
    runs = _runs()
    assert analysis.opencl_label(runs) == "OpenCL (CPU device: PoCL)"
    assert analysis.opencl_label(runs.assign(device_type="gpu")) == "OpenCL GPU"
    labels = []
    orig = figures._save
    figures._save = lambda fig, path, dpi: (labels.extend(
        t.get_text() for t in fig.legends[0].get_texts()), orig(fig, path, dpi))[1]
    try:
        figures.iteration_time(runs, tmp_path / "it.png")
    finally:
        figures._save = orig
    assert labels == ["CPU backend", "OpenCL (CPU device: PoCL)"]


def test_iteration_bars_stand_at_the_estimate_inside_its_interval(tmp_path):
    # a low-quantile estimate's interval usually lies wholly below the median: the bar is the
    # estimate, its whiskers the estimate's own interval (never a negative error bar)
    runs = _runs().assign(iteration_median_ms=lambda d: d["iteration_high_ms"] * 1.5)
    bars = []
    orig = figures._save
    figures._save = lambda fig, path, dpi: (bars.extend(
        (ax.get_title(), round(p.get_width(), 6)) for ax in fig.axes for p in ax.patches),
        orig(fig, path, dpi))[1]
    try:
        assert figures.iteration_time(runs, tmp_path / "it.png").stat().st_size > 0
    finally:
        figures._save = orig
    assert sorted(w for _, w in bars) == sorted(runs["iteration_ms"])


def test_short_sweep_of_small_copies_is_not_called_zero_copy():
    # 4 KiB..256 KiB: a copy's time is all call overhead here; too short a sweep to judge
    short = _bw("h2d", [8e3, 8.1e3, 8.2e3]).assign(size_bytes=[4096, 32768, 262144])
    assert analysis.zero_copy(short).empty
    f = guidelines.bandwidth(short)
    assert "Zero-copy" not in f.statement
    assert "inside the call overhead, not zero-copy" in f.statement
