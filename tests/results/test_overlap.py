"""Transfer/kernel overlap on hand-made intervals (known answers), and shares that do not
count overlapped time twice."""

from __future__ import annotations

import pandas as pd
import pytest

from phonetrain.results import profiling

H = 50_000_000   # host ns of the iteration start
OFF = 1_000_000  # device clock = host clock - OFF


def _row(seq, kind, s, e, queue=0, name="x"):
    """A device row whose enqueue call brackets its queued time exactly (offset = OFF)."""
    return {"iteration": 1, "seq": seq, "kind": kind, "name": name, "layer": "", "phase": "",
            "bytes": 4 if kind != "kernel" else 0, "flops": 0, "queued_ns": H + s - OFF,
            "submit_ns": H + s - OFF, "start_ns": H + s - OFF, "end_ns": H + e - OFF,
            "host_begin_ns": H + s, "host_end_ns": H + s, "queue": queue}


def _intervals(rows):
    return pd.DataFrame([{"kind": k, "begin_ns": b, "end_ns": e, "movement": k != "kernel"}
                         for k, b, e in rows])


@pytest.mark.parametrize("rows,want", [
    ([("kernel", 0, 100), ("h2d", 100, 150)], 0),                   # back to back
    ([("kernel", 0, 100), ("h2d", 40, 60)], 20),                    # inside
    ([("kernel", 0, 100), ("h2d", 80, 130)], 20),                   # straddles the end
    ([("kernel", 0, 100), ("h2d", 10, 30), ("d2h", 20, 50)], 40),   # transfers merged first
    ([("kernel", 0, 50), ("kernel", 60, 100), ("h2d", 40, 70)], 20),  # the kernel gap is not
    ([("h2d", 0, 10), ("d2h", 5, 20)], 0),                          # no kernel at all
])
def test_transfer_kernel_overlap_of_hand_made_intervals(rows, want):
    assert profiling.transfer_kernel_overlap_ns(_intervals(rows)) == pytest.approx(want)


def test_breakdown_counts_overlapped_transfer_once():
    """A 300 us kernel with a 100 us upload under it and a 100 us download after it, 500 us
    wall: 100 us overlap, 100 us exposed data movement, share 100/500 (not 200/500)."""
    trace = pd.DataFrame([_row(0, "kernel", 0, 300_000),
                          _row(1, "h2d", 100_000, 200_000, queue=1),
                          _row(2, "d2h", 300_000, 400_000, queue=1)])
    iters = pd.DataFrame({"iteration": [1], "wall_ms": [0.5], "measured": [True]})
    b = profiling.breakdown(trace, iters).iloc[0]
    assert b["transfer_ms"] == pytest.approx(0.2)
    assert b["transfer_kernel_overlap_ms"] == pytest.approx(0.1)
    assert b["exposed_transfer_ms"] == pytest.approx(0.1)
    assert b["busy_ms"] == pytest.approx(0.4)
    share = profiling.data_movement_share(profiling.breakdown(trace, iters))
    assert share == pytest.approx(0.1 / 0.5)
    assert b["kernel_ms"] / 0.5 + share + b["gap_ms"] / 0.5 == pytest.approx(1.0)
