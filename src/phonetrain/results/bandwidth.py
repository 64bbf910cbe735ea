"""What a device's bandwidth sweep shows, per transfer kind: where the per-call cost stops
hiding the transfer (the knee), whether the time grows with size by the sweep's end, and
whether a map/unmap is zero-copy.

The runner's ``bench-bandwidth`` (``src/runner/bench.c``) grows each kind's transfer size
until its time grows with size, or to the cap; the rules here read the resulting rows
(``bandwidth`` table: ``kind``, ``size_bytes``, ``host_ns``, ``host_gbps``) with the same
constants:

- *knee*: the last size before the host time first rises by ``KNEE_RATIO`` per doubling while
  over ``KNEE_FLOOR`` times the smallest time of the kind's sweep;
- *grows*: the last two doublings each raised the time by ``LINEAR_RATIO`` or more (the
  bandwidth regime: a fixed cost under ~10% of a call);
- *zero-copy* (map and unmap only): the time stays flat (within ``FLAT_SPREAD`` of its
  smallest) across a span of sizes over which a copy at the device's measured link bandwidth
  (the best ``host_gbps`` of h2d and d2h) would have grown by at least ``FLAT_FACTOR``: the
  largest flat size takes ``FLAT_FACTOR`` times the flat time at that bandwidth. A kind that
  stays flat only where a copy would also hide inside the call cost (a sweep stopped too small)
  is not called zero-copy: ``undetermined``.
"""

from __future__ import annotations

import math

import pandas as pd

KNEE_RATIO = 1.5
LINEAR_RATIO = 1.8
KNEE_FLOOR = 3.0
FLAT_FACTOR = 16.0
FLAT_SPREAD = 2.0
MAP_KINDS = ("map", "unmap")


def _knee(t: list[float], sizes: list[int]) -> int | None:
    floor = t[0]
    for i in range(1, len(t)):
        floor = min(floor, t[i])
        if t[i] >= KNEE_FLOOR * floor and t[i] >= KNEE_RATIO * t[i - 1]:
            return sizes[i - 1]
    return None


def _grows(t: list[float]) -> bool:
    if len(t) < 3:
        return False
    floor = min(t)
    return all(t[i] >= LINEAR_RATIO * t[i - 1] and t[i] >= KNEE_FLOOR * floor
               for i in (len(t) - 2, len(t) - 1))


def _flat_until(t: list[float], sizes: list[int]) -> int | None:
    """The largest size up to which the time stays within FLAT_SPREAD of its smallest."""
    floor = min(t)
    last = None
    for ti, s in zip(t, sizes):
        if ti > FLAT_SPREAD * floor:
            break
        last = s
    return last


def sweep_summary(bandwidth: pd.DataFrame) -> pd.DataFrame:
    """One row per device x kind of a ``bandwidth`` table: ``knee_bytes`` (None: no knee in
    the sweep), ``last_bytes``, ``grows`` (bool), ``flat_until_bytes``, ``per_call_us`` (the
    smallest host time of the sweep), ``link_gbps`` (the device's best h2d/d2h host GB/s),
    ``zero_copy`` (``yes`` | ``no`` | ``undetermined`` for map/unmap; None for the copies),
    ``peak_gbps`` (the kind's best host GB/s). Rules and constants: module docstring."""
    rows = []
    for dev, d in bandwidth.groupby("device", sort=False):
        links = d[d["kind"].isin(("h2d", "d2h"))]["host_gbps"]
        link = float(links.max()) if len(links) else math.nan
        for kind, k in d.groupby("kind", sort=False):
            k = k.sort_values("size_bytes")
            t = [float(x) for x in k["host_ns"]]
            sizes = [int(x) for x in k["size_bytes"]]
            flat = _flat_until(t, sizes)
            zc = None
            if kind in MAP_KINDS:
                if flat is not None and flat > sizes[0] and link > 0 and \
                        flat / link >= FLAT_FACTOR * min(t):
                    zc = "yes"
                elif _grows(t) or _knee(t, sizes) is not None:
                    zc = "no"
                else:
                    zc = "undetermined"
            rows.append({"device": dev, "kind": kind, "knee_bytes": _knee(t, sizes),
                         "last_bytes": sizes[-1], "grows": _grows(t), "flat_until_bytes": flat,
                         "per_call_us": min(t) / 1e3, "link_gbps": link, "zero_copy": zc,
                         "peak_gbps": float(k["host_gbps"].max())})
    return pd.DataFrame(rows, columns=["device", "kind", "knee_bytes", "last_bytes", "grows",
                                       "flat_until_bytes", "per_call_us", "link_gbps",
                                       "zero_copy", "peak_gbps"])
