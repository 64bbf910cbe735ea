#!/usr/bin/env python3
"""The runner's calibration probe (src/runner/probe.c) on this host: its reading quiet, with one
busy-loop process per core up to the usable CPUs, as the train stage reads it (the probe's
thread count = the CPUs the runner may use). Shows whether ``measure.max_probe_slowdown``
separates a quiet host from one whose cores are shared.

Builds a small harness around probe.c with the host's ``cc -fopenmp`` (the runner's own flags
are not needed: the probe is one OpenMP region), then per condition takes ``--readings``
probe readings (each the fastest of PROBE_SAMPLES samples) and prints the median, min and max
in ms and against the quiet median. The hogs are bounded: each ends by itself after
``--hog-s`` seconds and all are killed when the condition ends.

    python benchmarks/bench_probe.py [--readings 9] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from phonetrain.devices.cpus import availability  # noqa: E402

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "probe.h"
int main(int argc, char **argv)
{
    int threads = atoi(argv[1]), n = atoi(argv[2]);
    for (int i = 0; i < n; i++) printf("%.4f\n", probe_ms(threads));
    return 0;
}
"""
HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"


def build(tmp: Path) -> Path:
    """The harness binary, compiled from src/runner/probe.c and what it includes."""
    (tmp / "main.c").write_text(HARNESS)
    src = REPO / "src" / "runner"
    exe = tmp / "probe"
    cmd = [os.environ.get("CC", "cc"), "-O2", "-fopenmp", f"-I{src}", str(tmp / "main.c"),
           *(str(src / f) for f in ("probe.c", "util.c", "json.c")), "-lm", "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def readings(exe: Path, threads: int, n: int) -> list[float]:
    out = subprocess.run([str(exe), str(threads), str(n)], check=True, capture_output=True,
                         text=True).stdout
    return [float(x) for x in out.split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readings", type=int, default=9, help="probe readings per condition")
    ap.add_argument("--threads", type=int, default=0, help="probe threads (0: usable CPUs)")
    ap.add_argument("--hog-s", type=float, default=120, help="longest a hog may run (s)")
    a = ap.parse_args()
    cpus = availability()
    threads = a.threads or cpus.usable
    print(f"host: {cpus.online} CPUs online, {cpus.usable} usable; probe threads {threads}; "
          f"load average now {os.getloadavg()[0]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="bench-probe-"))
    try:
        exe = build(tmp)
        rows = []
        for hogs in range(cpus.usable + 1):
            procs = [subprocess.Popen([sys.executable, "-c", HOG.format(s=a.hog_s)])
                     for _ in range(hogs)]
            try:
                time.sleep(0.5 if hogs else 0)   # the hogs running before the first reading
                rows.append((hogs, readings(exe, threads, a.readings)))
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    quiet = statistics.median(rows[0][1])
    print("| busy-loop processes | readings | median ms | min ms | max ms | median / quiet |"
          " max / quiet |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for hogs, r in rows:
        med = statistics.median(r)
        print(f"| {hogs} | {len(r)} | {med:.2f} | {min(r):.2f} | {max(r):.2f} | "
              f"{med / quiet:.2f} | {max(r) / quiet:.2f} |")


if __name__ == "__main__":
    main()
