"""Breakdown arithmetic on a hand-built trace with known answers, and the Perfetto JSON."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import FIXTURES
from phonetrain.io import read_json
from phonetrain.results import profiling
from phonetrain.results import runs as run_folders

OFFSET = 1_000_000  # device clock = host clock - OFFSET
H = 10_000_000      # host ns at which the measured iteration starts


def _row(it, seq, kind, name, hb, he, q=0, s=0, e=0, bytes_=0, flops=0, phase="forward"):
    dev = (lambda t: t - OFFSET + H) if s else (lambda t: 0)
    return {"iteration": it, "seq": seq, "kind": kind, "name": name, "layer": "fc1",
            "phase": phase, "bytes": bytes_, "flops": flops, "queued_ns": dev(q),
            "submit_ns": dev(q), "start_ns": dev(s), "end_ns": dev(e),
            "host_begin_ns": H + hb, "host_end_ns": H + he}


def hand_trace() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Iteration 0 (warm-up, a 0.9 ms h2d) and iteration 1 (measured; answers in the test).
    Times are ns relative to H on the host clock."""
    rows = [
        _row(0, 0, "h2d", "h2d", -2_000_000, -1_000_000, q=-1_990_000, s=-1_950_000,
             e=-1_050_000, bytes_=1024, phase="transfer"),
        _row(1, 0, "h2d", "h2d", 0, 200_000, q=10_000, s=50_000, e=150_000, bytes_=4096,
             phase="transfer"),
        _row(1, 1, "kernel", "gemm_nt", 210_000, 220_000, q=215_000, s=230_000, e=530_000,
             bytes_=8000, flops=3_000_000),
        _row(1, 2, "d2h", "d2h", 540_000, 700_000, q=545_000, s=600_000, e=650_000,
             bytes_=64, phase="loss"),
        _row(1, 3, "host", "copy_from_mapped", 700_000, 720_000, bytes_=64, phase="loss"),
        _row(1, 4, "host", "load", 720_000, 740_000, bytes_=256, phase="load"),
    ]
    iters = pd.DataFrame({"iteration": [0, 1], "wall_ms": [1.2, 1.0],
                          "measured": [False, True]})
    return pd.DataFrame(rows), iters


def test_clock_offset_is_bracketed_by_enqueue_calls():
    trace, _ = hand_trace()
    off, unc = profiling.clock_offset(profiling.check_trace(trace))
    # brackets: lo = max(host_begin - queued) = OFFSET - 5000, hi = min(host_end - queued)
    # = OFFSET + 5000 (kernel enqueue: 210..220 us around queued 215 us)
    assert off.iloc[0] == pytest.approx(OFFSET)
    assert unc == pytest.approx(5_000)


@pytest.mark.parametrize("with_op", [False, True])
def test_breakdown_of_the_hand_trace_gives_the_known_answers(with_op):
    trace, iters = hand_trace()
    if with_op:  # the runner's op column: the mapped copy is "map_copy", the batch "load"
        trace["op"] = trace["name"].map({"copy_from_mapped": "map_copy", "load": "load"})
        trace["op"] = trace["op"].fillna(trace["kind"])
        trace.loc[trace["op"] == "load", "phase"] = "forward"  # op decides, not phase
    b = profiling.breakdown(trace, iters).set_index("iteration")
    m = b.loc[1]
    assert m["kernel_ms"] == pytest.approx(0.300)
    assert m["h2d_ms"] == pytest.approx(0.100)
    assert m["d2h_ms"] == pytest.approx(0.050)
    assert m["host_ms"] == pytest.approx(0.040)
    assert m["map_ms"] == 0 and m["unmap_ms"] == 0 and m["d2d_ms"] == 0
    # union: 100 + 300 + 50 + (20 + 20 touching) us
    assert m["busy_ms"] == pytest.approx(0.490)
    assert m["gap_ms"] == pytest.approx(0.510)
    # movement: h2d + d2h + the mapped copy; the batch load is not movement
    assert m["transfer_ms"] == pytest.approx(0.170)
    assert m["overlap_ms"] == pytest.approx(0.0, abs=1e-12)
    # idle inside the blocking h2d/d2h calls: 0-50, 150-200, 540-600, 650-700 us
    assert m["transfer_overhead_ms"] == pytest.approx(0.210)
    assert b.loc[0, "h2d_ms"] == pytest.approx(0.900)


def test_data_movement_share_excludes_warmup():
    trace, iters = hand_trace()
    b = profiling.breakdown(trace, iters)
    assert profiling.data_movement_share(b) == pytest.approx(0.17)
    assert profiling.data_movement_share(b, with_overhead=True) == pytest.approx(0.38)
    b["measured"] = True  # counting warm-up would change it: (0.9 + 0.17) / 2.2
    assert profiling.data_movement_share(b) == pytest.approx(1.07 / 2.2)


def test_union_handles_overlap_and_containment():
    b = np.array([0.0, 5.0, 6.0, 20.0])
    e = np.array([10.0, 7.0, 12.0, 25.0])
    assert profiling.union_ns(b, e) == 17.0
    assert profiling.union_ns(np.array([]), np.array([])) == 0.0
    a = profiling.merge_intervals(b, e)
    assert a == [(0.0, 12.0), (20.0, 25.0)]
    assert profiling.intersection_ns(a, [(5.0, 21.0), (24.0, 30.0)]) == 7.0 + 1.0 + 1.0


def test_cpu_backend_rows_use_host_clock():
    rows = [_row(0, i, "kernel", "gemm_nn", i * 100, i * 100 + 60, flops=10) for i in range(3)]
    iters = pd.DataFrame({"iteration": [0], "wall_ms": [0.001], "measured": [True]})
    b = profiling.breakdown(pd.DataFrame(rows), iters).iloc[0]
    assert b["kernel_ms"] == pytest.approx(180e-6)
    assert b["busy_ms"] == pytest.approx(180e-6)
    assert b["transfer_ms"] == 0
    assert profiling.data_movement_share(profiling.breakdown(pd.DataFrame(rows), iters)) == 0


def test_command_summary_over_measured_iterations():
    trace, iters = hand_trace()
    b = profiling.breakdown(trace, iters)
    s = profiling.command_summary(trace, b).set_index("name")
    assert s.loc["h2d", "count"] == 1  # the warm-up h2d is excluded
    assert s.loc["gemm_nt", "gflops"] == pytest.approx(3_000_000 / 300_000)
    assert s.loc["h2d", "gbps"] == pytest.approx(4096 / 100_000)
    assert s.loc["gemm_nt", "share_of_wall"] == pytest.approx(0.3)
    assert s.loc["gemm_nt", "per_iteration_median_ms"] == pytest.approx(0.3)


def test_per_iteration_median_resists_a_disturbed_iteration():
    rows = [_row(it, 0, "kernel", "gemm_nn", it * 10_000_000,
                 it * 10_000_000 + (9_000_000 if it == 2 else 100_000), flops=1000)
            for it in range(3)]
    iters = pd.DataFrame({"iteration": [0, 1, 2], "wall_ms": [0.2, 0.2, 9.1],
                          "measured": [True] * 3})
    trace = pd.DataFrame(rows)
    s = profiling.command_summary(trace, profiling.breakdown(trace, iters)).iloc[0]
    assert s["per_iteration_median_ms"] == pytest.approx(0.1)
    assert s["per_iteration_ms"] == pytest.approx(9.2 / 3)


def _grouped_summary(iv: pd.DataFrame, per_iteration: pd.DataFrame) -> pd.DataFrame:
    """The command summary written as pandas group-bys: the definition the array code in
    :func:`profiling.command_summary` must reproduce value for value."""
    m = per_iteration[per_iteration["measured"]]
    n_iter, wall_ns = max(len(m), 1), float(m["wall_ms"].sum()) * 1e6
    iv = iv[iv["iteration"].isin(m["iteration"])]
    keys = ["kind", "name", "layer", "phase"]
    out = iv.groupby(keys, sort=False).agg(
        count=("dur_ns", "size"), total_ns=("dur_ns", "sum"), median_ns=("dur_ns", "median"),
        bytes=("bytes", "sum"), flops=("flops", "sum")).reset_index()
    med = iv.groupby(keys + ["iteration"], sort=False)["dur_ns"].sum().groupby(
        level=keys, sort=False).median() / 1e6
    out = out.merge(med.rename("per_iteration_median_ms").reset_index(), on=keys, how="left")
    t = out["total_ns"].where(out["total_ns"] > 0)
    out = out.assign(per_iteration_ms=out["total_ns"] / n_iter / 1e6,
                     median_ms=out["median_ns"] / 1e6, total_ms=out["total_ns"] / 1e6,
                     bytes_per_iteration=(out["bytes"] // n_iter).astype("int64"),
                     flops_per_iteration=(out["flops"] // n_iter).astype("int64"),
                     gflops=(out["flops"] / t).where(out["flops"] > 0),
                     gbps=(out["bytes"] / t).where(out["bytes"] > 0),
                     share_of_wall=out["total_ns"] / wall_ns if wall_ns > 0 else np.nan)
    return out[keys + ["count", "per_iteration_ms", "per_iteration_median_ms", "median_ms",
                       "total_ms", "bytes_per_iteration", "flops_per_iteration", "gflops",
                       "gbps", "share_of_wall"]]


def _grouped_gaps(iv: pd.DataFrame, per_iteration: pd.DataFrame) -> float | None:
    """The median kernel-to-kernel gap (us) written as a pandas group-by shift."""
    m = per_iteration[per_iteration["measured"]]
    iv = iv[iv["iteration"].isin(m["iteration"])].sort_values(["iteration", "seq"])
    nxt = iv.groupby("iteration").shift(-1)
    gaps = (nxt["begin_ns"] - iv["end_ns"])[(iv["kind"] == "kernel")
                                            & (nxt["kind"] == "kernel")] / 1e3
    return float(gaps.median()) if len(gaps) else None


@pytest.mark.parametrize("seed", range(6))
def test_array_summaries_equal_the_group_by_definition(seed):
    """A shuffled trace of 6 iterations (warm-up first), kernels run back to back and
    repeated names across kinds, layers and phases, whole-ns durations up to 1 s, zero
    bytes/flops on some rows, a command absent from some iterations: the command summary and
    the kernel gaps equal the group-by definitions exactly; with no measured iteration the
    summary is empty with the same columns."""
    rng = np.random.default_rng(seed)
    rows, t = [], 0
    for it in range(6):
        for seq in range(int(rng.integers(3, 9))):
            kind = str(rng.choice(["kernel", "kernel", "h2d", "d2h", "host"]))
            dur = int(rng.integers(0, 10**9))
            rows.append({"iteration": it, "seq": seq, "kind": kind,
                         "name": str(rng.choice(["gemm", "relu", "copy"])),
                         "layer": str(rng.choice(["fc1", "fc2"])),
                         "phase": str(rng.choice(["forward", "backward"])),
                         "bytes": int(rng.integers(0, 3)) * 4096,
                         "flops": int(rng.integers(0, 3)) * 10**12, "queued_ns": 0,
                         "submit_ns": 0, "start_ns": 0, "end_ns": 0,
                         "host_begin_ns": t, "host_end_ns": t + dur})
            t += dur + int(rng.integers(0, 50_000))
    trace = pd.DataFrame(rows).sample(frac=1, random_state=seed)
    iters = pd.DataFrame({"iteration": range(6), "wall_ms": 5000.0,
                          "measured": [False] + [True] * 5})
    b = profiling.breakdown(trace, iters)
    iv = profiling.host_intervals(profiling.check_trace(trace))
    pd.testing.assert_frame_equal(profiling.command_summary(trace, b),
                                  _grouped_summary(iv, b), check_exact=True)
    assert profiling.launch_stats(trace, b)["kernel_gap_median_us"] == _grouped_gaps(iv, b)
    none = b.assign(measured=False)
    pd.testing.assert_frame_equal(profiling.command_summary(trace, none),
                                  _grouped_summary(iv, none), check_exact=True,
                                  check_index_type=False)


def test_bad_trace_names_the_problem(tmp_path):
    p = tmp_path / "trace.csv"
    trace, _ = hand_trace()
    trace.drop(columns=["start_ns"]).to_csv(p, index=False)
    with pytest.raises(profiling.TraceError, match=r"trace\.csv.*start_ns"):
        profiling.read_trace_csv(p)
    trace.assign(kind="teleport").to_csv(p, index=False)
    with pytest.raises(profiling.TraceError, match="teleport"):
        profiling.read_trace_csv(p)


def test_perfetto_json_is_valid_trace_event_format(tmp_path):
    trace, iters = hand_trace()
    path = profiling.write_json_atomic(
        profiling.perfetto_trace(trace, iters, device="pocl cpu", title="t"),
        tmp_path / "trace.perfetto.json")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == len(trace) + 2  # every command plus one slice per iteration
    for e in events:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
    for e in slices:
        assert e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["name"], str)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[(1, 1)] == "command queue" and names[(2, 1)] == "runner thread"
    gemm = next(e for e in slices if e["name"] == "gemm_nt")
    h2d = next(e for e in slices if e["name"] == "h2d" and e["args"]["iteration"] == 1)
    # device rows on the host clock: the kernel starts 180 us after the measured h2d
    assert gemm["ts"] - h2d["ts"] == pytest.approx(180.0)
    assert gemm["dur"] == pytest.approx(300.0) and gemm["pid"] == 1
    assert gemm["args"]["flops"] == 3_000_000 and gemm["args"]["layer"] == "fc1"
    load = next(e for e in slices if e["name"] == "load")
    assert load["pid"] == 2 and load["args"]["phase"] == "load"
    assert any(e["name"] == "iteration 0 (warm-up)" for e in slices)
    assert not list(tmp_path.glob(".*tmp"))


def test_real_trace_components_add_up_and_perfetto_has_every_row(real_study, tmp_path):
    """A real runner trace (PoCL, staged placement with map/unmap): components add up, every
    command lies inside its iteration's wall time, the Perfetto JSON has every row."""
    d = next(p for p in real_study["runs"]
             if p.name == "mlp_784_256_128_16.opencl_staged_map.baseline")
    d = run_folders.traced_process(d)   # the process with per-command events (events/)
    assert d.name == "events"
    trace = profiling.read_trace_csv(d / "trace.csv")
    iters = run_folders.run_iterations(read_json(d / "run.json"), "run.json")
    b = profiling.breakdown(trace, iters)
    assert (b["busy_ms"] <= b["wall_ms"] * 1.001).all()
    parts = b[[f"{k}_ms" for k in profiling.KINDS]].sum(axis=1) - b["overlap_ms"]
    assert (parts + b["gap_ms"]).to_numpy() == pytest.approx(b["wall_ms"].to_numpy(), rel=1e-3)
    assert (b["map_ms"] > 0).all() and (b["transfer_ms"] > b["map_ms"] + b["unmap_ms"]).all()
    doc = json.loads(profiling.write_json_atomic(profiling.perfetto_trace(trace, iters),
                                                 tmp_path / "t.json").read_text())
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(trace) + len(iters)
    dev_rows = int(((trace["start_ns"] > 0)).sum())
    assert sum(e["pid"] == 1 for e in slices) == dev_rows > 0
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in slices)


def test_rows_without_queued_stay_out_of_the_bracket():
    """NVIDIA gives map events no QUEUED time and start/end off the queue's clock: the
    offset comes from the other rows and the map lands at the end of its own call."""
    trace, iters = hand_trace()
    mp = _row(1, 5, "map", "map", 800_000, 900_000, q=1, s=1, e=1, bytes_=64,
              phase="transfer")
    mp.update(queued_ns=0, submit_ns=0, start_ns=123, end_ns=20_123)  # 20 us, stray clock
    trace = pd.concat([trace, pd.DataFrame([mp])], ignore_index=True)
    off, unc = profiling.clock_offset(profiling.check_trace(trace))
    assert off.iloc[0] == pytest.approx(OFFSET) and unc == pytest.approx(5_000)
    iv = profiling.host_intervals(profiling.check_trace(trace)).set_index("name")
    assert iv.loc["map", "begin_ns"] == H + 880_000 and iv.loc["map", "end_ns"] == H + 900_000
    b = profiling.breakdown(trace, iters).set_index("iteration").loc[1]
    assert b["map_ms"] == pytest.approx(0.020) and b["busy_ms"] == pytest.approx(0.510)


def test_real_nvidia_trace_is_aligned_within_microseconds():
    """A real trace from an NVIDIA H200 (OpenCL 3.0 driver, 1000 ns timer; staged placement
    with map/unmap; tests/fixtures/h200_staged_map, first 3 iterations): the driver gives map
    events no QUEUED time and start/end off the queue's clock, yet the offset is bracketed
    to a few microseconds and every command lies inside its iteration."""
    d = FIXTURES / "h200_staged_map"
    trace = profiling.read_trace_csv(d / "trace.csv.gz")
    run = read_json(d / "run.json")
    assert run["device"]["name"] == "NVIDIA H200" and run["timer_resolution_ns"] == 1000
    maps = trace[(trace["kind"] == "map") & (trace["start_ns"] > 0)]
    assert (maps["queued_ns"] == 0).sum() > 10
    _, unc = profiling.clock_offset(trace)
    assert 0 <= unc < 20_000
    iters = run_folders.run_iterations(run, "run.json")
    b = profiling.breakdown(trace, iters)
    assert (b["busy_ms"] <= b["wall_ms"] * 1.001).all()
    iv = profiling.host_intervals(trace)
    on_dev = iv[(iv["start_ns"] > 0) & iv["kind"].isin(["h2d", "d2h", "map"])]  # blocking
    assert (on_dev["begin_ns"] >= on_dev["host_begin_ns"] - unc).all()
    assert (on_dev["end_ns"] <= on_dev["host_end_ns"] + unc).all()
    assert 0 < profiling.data_movement_share(b) < 1


def test_check_trace_normalises_once_and_a_checked_trace_passes_unchanged():
    """Text columns: missing values become "" (also in a column already of the text dtype);
    number columns: "" and missing become 0, as int64; rows sorted by iteration and seq. A
    checked trace comes back equal, values and dtypes (normalised columns are left as they
    are)."""
    trace, _ = hand_trace()
    raw = trace.astype({"name": object, "bytes": object, "flops": float}).iloc[::-1].copy()
    raw.loc[0, "name"] = None                  # the warm-up h2d (iteration 0, seq 0)
    raw.loc[1, "bytes"] = ""                   # the measured h2d
    raw.loc[2, "flops"] = np.nan               # the kernel
    raw["layer"] = raw["layer"].astype(str).where(raw["seq"] != 1, np.nan)
    raw["op"] = pd.Series([None, "map_copy"] * 3, index=raw.index, dtype=object)
    checked = profiling.check_trace(raw)
    assert list(zip(checked["iteration"], checked["seq"])) == \
        sorted(zip(trace["iteration"], trace["seq"]))
    for c in ("name", "layer", "phase", "kind", "op"):
        assert checked[c].dtype == profiling._STR and checked[c].notna().all(), c
    for c in profiling.TRACE_COLUMNS:
        if c not in ("kind", "name", "layer", "phase"):
            assert checked[c].dtype == "int64", c
    assert checked.loc[0, "name"] == "" and checked.loc[1, "bytes"] == 0
    assert checked.loc[2, "flops"] == 0 and checked.loc[2, "layer"] == ""
    assert sorted(set(checked["op"])) == ["", "map_copy"]
    pd.testing.assert_frame_equal(profiling.check_trace(checked), checked, check_exact=True)
