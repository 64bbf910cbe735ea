"""Reading a bandwidth sweep: the knee, time growing with size, and zero-copy called only
where the time stays flat over a span in which a copy at the link bandwidth would have grown
(synthetic sweeps); and the runner's sweep itself stops at its knee (real PoCL)."""

from __future__ import annotations

import json

import pandas as pd

from phonetrain import runner as runner_api
from phonetrain.results.bandwidth import sweep_summary


def _rows(kind, fixed_ns, gbps, sizes, device="d"):
    """A synthetic op: a fixed per-call cost plus size / bandwidth (GB/s = B/ns)."""
    out = []
    for s in sizes:
        t = fixed_ns + (s / gbps if gbps else 0)
        out.append({"device": device, "kind": kind, "size_bytes": s, "host_ns": t,
                    "host_gbps": s / t})
    return out


SIZES = [4096 << i for i in range(14)]          # 4 KiB .. 32 MiB


def test_copy_knee_and_growth_map_zero_copy():
    df = pd.DataFrame(_rows("h2d", 20_000, 10.0, SIZES) + _rows("map", 15_000, None, SIZES)
                      + _rows("unmap", 15_000, 10.0, SIZES))
    s = sweep_summary(df).set_index("kind")
    # fixed 20 us, 10 GB/s: the transfer stops hiding inside the call cost near 256 KiB
    assert 128 << 10 <= s.loc["h2d", "knee_bytes"] <= 1 << 20
    assert s.loc["h2d", "grows"] and pd.isna(s.loc["h2d", "zero_copy"])
    assert s.loc["map", "zero_copy"] == "yes" and not s.loc["map", "grows"]
    assert s.loc["unmap", "zero_copy"] == "no"
    assert abs(s.loc["map", "link_gbps"] - 10.0) < 1


def test_flat_only_inside_the_call_cost_is_not_zero_copy():
    """A sweep stopped at 16 MiB on a device whose link moves 16 MiB in 3 us (as a d2d under a
    20 us launch cost): flat, but a copy would have been flat there too."""
    small = [4096 << i for i in range(13)]      # .. 16 MiB
    df = pd.DataFrame(_rows("h2d", 20_000, 5000.0, small) + _rows("map", 20_000, 5000.0, small))
    s = sweep_summary(df).set_index("kind")
    assert s.loc["map", "zero_copy"] == "undetermined"
    assert pd.isna(s.loc["h2d", "knee_bytes"]) and not s.loc["h2d", "grows"]


def test_runner_sweeps_to_the_knee_with_training_map_flags(runner, pocl, tmp_path):
    df = runner_api.bench_bandwidth(runner, tmp_path / "bw", max_bytes=64 << 20,
                                    min_time_ms=2, repeats=1, device_selector=pocl)
    bench = json.loads((tmp_path / "bw" / "bench.json").read_text())
    assert set(bench["sweeps"]) == {"h2d", "d2h", "d2d", "map", "unmap"}
    for kind, sw in bench["sweeps"].items():
        rows = df[df["op"] == kind]
        assert sw["stopped"] in ("knee", "flat", "cap")
        assert rows["size_bytes"].max() == sw["last_bytes"] <= bench["cap_bytes"]
        if sw["stopped"] == "cap":
            assert sw["last_bytes"] * 2 > bench["cap_bytes"]
    assert bench["cap_bytes"] <= 64 << 20
