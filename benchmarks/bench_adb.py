#!/usr/bin/env python3
"""adb transport costs: push throughput (MB/s), the cost of an incremental push that sends
nothing (device-side sha256 of unchanged files), pull throughput, and shell v2 round-trip
latency. Prints a markdown table.

By default it measures against the virtual device over the real adb server from adbutils'
wheel (a private server port; nothing else is touched), which bounds the protocol overhead
of phonetrain's own path. Give ``--serial`` to measure a real phone through the adb server
on ``--adb-port`` instead (files go under /data/local/tmp/phonetrain/bench)::

    python benchmarks/bench_adb.py
    python benchmarks/bench_adb.py --serial R58M12ABCDE --sizes-mb 1 16 64
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import adbutils  # noqa: E402

from phonetrain.devices.adb import AdbTransport  # noqa: E402
from phonetrain.devices.virtual import VirtualDevice  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(fn, repeats: int) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(t: AdbTransport, sizes_mb: list[int], repeats: int, work: Path) -> list[str]:
    rows = ["| size MB | push MB/s | re-push (skipped) ms | pull MB/s |", "|---|---|---|---|"]
    t.shell("mkdir -p /data/local/tmp/phonetrain/bench", timeout_s=30)
    for mb in sizes_mb:
        src = work / f"f{mb}"
        src.mkdir(exist_ok=True)
        (src / "blob.bin").write_bytes(os.urandom(mb * 1_000_000))

        def fresh_push():
            t.shell("rm -rf /data/local/tmp/phonetrain/bench/p", timeout_s=30)
            assert t.push(src, "bench/p") == 1

        push_s = timed(fresh_push, repeats)
        skip_s = timed(lambda: t.push(src, "bench/p") == 0 or sys.exit("re-push sent files"),
                       repeats)
        pull_s = timed(lambda: t.pull("bench/p", work / f"back{mb}", ["blob.bin"]), repeats)
        rows.append(f"| {mb} | {mb / push_s:.1f} | {skip_s * 1e3:.1f} | {mb / pull_s:.1f} |")
    rtt = timed(lambda: t.shell("true", timeout_s=30), max(repeats, 10))
    rows += ["", f"shell v2 round trip (`true`): {rtt * 1e3:.2f} ms (median of "
             f"{max(repeats, 10)})"]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serial", help="a real device (default: start a virtual device)")
    ap.add_argument("--adb-port", type=int, default=None)
    ap.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-adb-") as tmp:
        work = Path(tmp)
        server = None
        if args.serial:
            t = AdbTransport(args.serial, args.serial, adb_port=args.adb_port)
            what = f"device {args.serial}"
        else:
            port = _free_port()
            subprocess.run([adbutils.adb_path(), "-P", str(port), "start-server"], check=True,
                           capture_output=True)
            server = adbutils.AdbClient(port=port)
            vd = VirtualDevice(work / "device", _free_port()).start()
            server.connect(vd.serial, timeout=10)
            time.sleep(0.5)
            t = AdbTransport("virtual", vd.serial, adb_port=port)
            what = f"virtual device over adb server {adbutils.adb_path()} (port {port})"
        try:
            print(f"adb transport on {what}\n")
            print("\n".join(measure(t, args.sizes_mb, args.repeats, work)))
        finally:
            if server is not None:
                server.disconnect(vd.serial)
                vd.stop()
                subprocess.run([adbutils.adb_path(), "-P", str(server.port), "kill-server"],
                               capture_output=True)


if __name__ == "__main__":
    main()
