#!/usr/bin/env python3
"""Host<->device bandwidth (h2d, d2h, map, unmap, d2d) and kernel launch latency of one OpenCL
device, measured by ``runner bench-bandwidth`` (clpeak method: warm-up, calibrated iteration
count, median of repeats). Prints markdown tables: GB/s (1e9 B/s, device-event time; d2d
counts the size once) per op and size, the launch latency, and the host time per iteration of
a step's launches enqueued one by one and replayed from a ``cl_khr_command_buffer``.

Needs numpy + pandas and ``cc``; builds the runner unless --runner is given::

    python benchmarks/bench_bandwidth.py                               # this host's PoCL
    python benchmarks/bench_bandwidth.py --device-type gpu --max-bytes 67108864
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import runner as rt  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runner", type=Path, help="runner binary (default: build one with cc)")
    ap.add_argument("--platform"), ap.add_argument("--device"), ap.add_argument("--device-type")
    ap.add_argument("--min-bytes", type=int, default=4096)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--min-time-ms", type=float, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runner = a.runner or toolchains.build_runner(Path(tmp) / "build")
        sel = rt.DeviceSelector(a.platform, a.device, a.device_type)
        df = rt.bench_bandwidth(runner, Path(tmp) / "bw", a.min_bytes, a.max_bytes, a.min_time_ms,
                                a.repeats, device_selector=sel)
    bench = df.attrs["bench"]
    dev = bench["device"]
    print(f"device: {dev['name']} ({dev['platform']}, {dev['type']}); "
          f"min_time_ms={a.min_time_ms:g}, repeats={a.repeats}\n")
    table = df.pivot(index="size_bytes", columns="op", values="device_gbps")
    table = table[["h2d", "d2h", "map", "unmap", "d2d"]]
    table.index = [f"{s // 1024} KiB" if s < 1 << 20 else f"{s >> 20} MiB" for s in table.index]
    print("GB/s (device events)\n")
    print(table.round(2).to_markdown() if _has_tabulate() else table.round(2).to_string())
    lat = bench["latency"]
    print(f"\nempty-kernel launch latency (median of {lat['launches']}): queued->start "
          f"{lat['queued_to_start_us']:.1f} us, submit->start {lat['submit_to_start_us']:.1f} us, "
          f"host round trip {lat['host_round_trip_us']:.1f} us")
    print(_replay_table(bench["replay"]))


def _replay_table(rep: dict) -> str:
    """The record-and-replay figures of ``bench.json`` (host us per iteration of
    ``launches_per_iteration`` launches and a clFinish, median) as a markdown table."""
    def us(key):
        return "-" if rep[key] is None else f"{rep[key]:.1f}"
    ext = rep["command_buffer"] or "not listed by the device"
    return (f"\nhost us per iteration of {rep['launches_per_iteration']} launches + clFinish "
            f"(median of {rep['iterations']}; command buffer: {ext})\n\n"
            "| queue | enqueued one by one | replayed from a command buffer |\n|---|---|---|\n"
            f"| profiling, an event per launch | {us('enqueue_profiled_us')} | {us('replay_profiled_us')} |\n"
            f"| plain, no events | {us('enqueue_plain_us')} | {us('replay_plain_us')} |")


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401  (pandas' to_markdown needs it)
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
