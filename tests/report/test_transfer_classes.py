"""Zero-copy only where a transfer's time stays flat over sizes at which a copy at the device's
measured bandwidth would have grown: synthetic sweeps, the H200's device-to-device copies (flat
at ~20 us up to 16 MiB beside 4 TB/s of measured bandwidth: not zero-copy) among them."""

from __future__ import annotations

import pandas as pd

from phonetrain.report import analysis, build
from phonetrain.report import findings as fd
from phonetrain.results import schema

SIZES = [4096 << i for i in range(0, 13, 2)]      # 4 KiB .. 16 MiB


def sweep(device: str, kind: str, host_us, device_gbps=None) -> list[dict]:
    """Rows of bandwidth.parquet: host time per size in us, event-timed GB/s."""
    host_us = list(host_us) if not callable(host_us) else [host_us(s) for s in SIZES]
    dg = device_gbps if isinstance(device_gbps, list) else [device_gbps] * len(SIZES)
    return [{"device": device, "kind": kind, "size_bytes": s, "host_ns": h * 1e3,
             "host_gbps": s / (h * 1e3), "device_gbps": g}
            for s, h, g in zip(SIZES, host_us, dg)]


def peaks(device: str, read_gbps: float) -> pd.DataFrame:
    return schema.frame([{"device": device, "kind": "bandwidth", "name": "read_float4",
                          "gbps": read_gbps, "config_hash": "c", "git_rev": "g"}], "peaks")


def table_row(f, kind: str) -> list[str]:
    return next(r for r in f.table.rows if r[1] == kind)


def classes(rows, pk=None) -> dict[str, str]:
    c = analysis.transfer_time_classes(pd.DataFrame(rows), pk)
    return {k: v for k, v in zip(c["kind"], c["cls"])}


def test_h200_device_to_device_inside_the_launch_overhead_is_not_zero_copy():
    # measured on the H200: ~20.3 us per d2d call from 4 KiB to 16 MiB; read bandwidth 4 TB/s
    flat = [20.1, 20.2, 20.3, 20.3, 20.4, 20.9, 24.3]
    rows = sweep("h200", "d2d", flat, device_gbps=[0.2, 0.8, 3.2, 12.9, 51, 200, 690]) + \
        sweep("h200", "h2d", lambda s: 9.0 + s / 19.5e3, device_gbps=19.5)
    pk = peaks("h200", 4000.0)
    got = analysis.transfer_time_classes(pd.DataFrame(rows), pk).set_index("kind")
    d2d = got.loc["d2d"]
    assert d2d["flat"] and d2d["cls"] == "overhead-bound"
    assert d2d["reference_gbps"] == 4000.0 and 4.0 < d2d["copy_growth_us"] < 4.3
    assert got.loc["h2d", "cls"] == "copy"
    assert analysis.zero_copy(pd.DataFrame(rows), pk).empty
    f = fd.bandwidth(pd.DataFrame(rows), pk)
    assert "Zero-copy" not in f.statement
    assert "inside the call overhead, not zero-copy" in f.statement
    assert "h200 d2d ~20.3 us per call" in f.statement
    assert table_row(f, "d2d")[2].startswith("inside the call overhead: ~20.3 us per call")
    table = {r["kind"]: r for r in build.bandwidth_rows(pd.DataFrame(rows), pk)}
    assert table["d2d"]["behaviour"] == "overhead-bound"


def test_flat_map_where_a_copy_would_have_grown_is_zero_copy():
    # a phone: map/unmap ~7 us whatever the size, host<->device copies at 13.7 GB/s
    rows = sweep("phone", "map", [7.0, 7.1, 7.0, 7.2, 7.1, 7.0, 7.3], device_gbps=None) + \
        sweep("phone", "h2d", lambda s: 12.0 + s / 13.7e3, device_gbps=13.7)
    assert classes(rows) == {"h2d": "copy", "map": "zero-copy"}
    zc = analysis.zero_copy(pd.DataFrame(rows))
    assert list(zc.index) == [("phone", "map")] and 7.0 <= zc.iloc[0] <= 7.2
    f = fd.bandwidth(pd.DataFrame(rows))
    assert "Zero-copy (flat where a copy at the measured bandwidth would have grown): " \
        "phone map ~7.1 us per call" in f.statement
    assert table_row(f, "map")[3] == "n/a"          # no GB/s for a zero-copy kind


def test_the_same_flat_curve_flips_with_the_reference_bandwidth():
    flat = [20.0] * len(SIZES)
    # 16 MiB at 1 TB/s takes 16.8 us more: below the 20 us overhead -> overhead-bound
    assert classes(sweep("d", "d2d", flat, 1000.0)) == {"d2d": "overhead-bound"}
    # at 500 GB/s it would take 33.5 us more: a flat curve means no bytes moved
    assert classes(sweep("d", "d2d", flat, 500.0)) == {"d2d": "zero-copy"}
    # no measured bandwidth at all: cannot tell
    assert classes(sweep("d", "d2d", flat, None)) == {"d2d": "undetermined"}


def test_a_short_sweep_of_small_copies_is_not_zero_copy():
    rows = [r for r in sweep("d", "h2d", lambda s: 8.0 + s / 64e3, 64.0)
            if r["size_bytes"] <= 262144]
    assert classes(rows) == {"h2d": "overhead-bound"}
