"""Commands shorter than the device timer's resolution: counted, and a kind whose every
command is below it is flagged (its sums are upper bounds, never a measured 0)."""

from __future__ import annotations

import pandas as pd

from phonetrain.results import profiling


def _trace(rows):
    cols = ["iteration", "seq", "kind", "name", "layer", "phase", "bytes", "flops",
            "queued_ns", "submit_ns", "start_ns", "end_ns", "host_begin_ns", "host_end_ns"]
    out = []
    for it, seq, kind, dur in rows:
        t0 = 1_000_000 * (it + 1) + 10_000 * seq
        dev = kind != "host"
        out.append([it, seq, kind, kind, "l", "p", 4, 0, t0 if dev else 0, t0 if dev else 0,
                    t0 + 100 if dev else 0, t0 + 100 + dur if dev else 0, t0, t0 + 5000])
    return pd.DataFrame(out, columns=cols)


ITERS = pd.DataFrame({"iteration": [0, 1, 2], "wall_ms": [1.0, 1.0, 1.0],
                      "measured": [False, True, True]})


def test_all_transfers_below_the_resolution():
    tr = _trace([(i, s, k, d) for i in range(3) for s, (k, d) in enumerate(
        [("h2d", 0), ("kernel", 5000), ("d2h", 640), ("host", 10)])])
    got = profiling.below_resolution(tr, ITERS, 1000)
    assert got == {"below_resolution_commands": 4, "kernel_below_resolution": False,
                   "transfer_below_resolution": True}


def test_warmup_rows_and_host_rows_do_not_count():
    tr = _trace([(0, 0, "kernel", 0), (1, 0, "kernel", 2000), (2, 0, "kernel", 3000),
                 (1, 1, "host", 0)])
    got = profiling.below_resolution(tr, ITERS, 1000)
    assert got["below_resolution_commands"] == 0 and got["kernel_below_resolution"] is False
    assert got["transfer_below_resolution"] is None          # no device-timed transfer


def test_no_resolution_no_verdict():
    tr = _trace([(1, 0, "kernel", 0)])
    assert profiling.below_resolution(tr, ITERS, None)["below_resolution_commands"] is None
