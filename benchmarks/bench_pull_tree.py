#!/usr/bin/env python3
"""Pull of a run's output folder from the virtual phone: one sync connection for the whole
folder (:meth:`AdbTransport.pull`) against a new connection per file (adbutils'
``sync.pull_file``, the same listing, size checks and atomic rename). The arms alternate,
``--repeats`` times each, over the real adb server from adbutils' wheel on a private port.
Prints wall seconds per pull (median, min, max) and the ratio::

    python benchmarks/bench_pull_tree.py --files 120 --repeats 7
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests"))

import adbutils  # noqa: E402

from helpers.adb import connect_vdev, disconnect_vdev, free_port  # noqa: E402
from phonetrain.devices.adb import AdbTransport  # noqa: E402
from phonetrain.io import make_temp_dir  # noqa: E402


class PerFileTransport(AdbTransport):
    """The pull of one adb sync connection per file (and per LIST and STAT)."""

    def pull(self, remote_rel: str, local: Path, expect: list[str]) -> None:
        remote = f"{self.root}/{remote_rel}".rstrip("/")
        tmp = make_temp_dir(local.parent, f".{local.name}.pull-")
        try:
            sync = self.device().sync
            assert stat.S_ISDIR(self.stat(remote)[0])
            self._per_file(sync, remote, tmp)
            assert all((tmp / n).stat().st_size for n in expect)
            if local.exists():
                shutil.rmtree(local)
            os.replace(tmp, local)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _per_file(self, sync, remote: str, dest: Path) -> None:
        dest.mkdir(exist_ok=True)
        for name, mode, expected in self.listdir(remote):
            if stat.S_ISDIR(mode):
                self._per_file(sync, f"{remote}/{name}", dest / name)
            elif stat.S_ISREG(mode):
                assert sync.pull_file(f"{remote}/{name}", dest / name) == expected


def plant(out: Path, files: int) -> int:
    """``files`` files under ``out`` in folders of 20 (a train run with checkpoints); bytes."""
    total = 0
    for i in range(files):
        f = out / f"ckpt/step{i // 20}/t{i}.f32" if i else out / "run.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(os.urandom(4096 + 97 * i))
        total += f.stat().st_size
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=120)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pull-") as tmp:
        work, port = Path(tmp), free_port()
        subprocess.run([adbutils.adb_path(), "-P", str(port), "start-server"], check=True,
                       capture_output=True)
        client = adbutils.AdbClient(port=port)
        vd = connect_vdev(client, work / "device")
        try:
            size = plant(vd.root / "phonetrain/out/r1", args.files)
            arms = {"one connection": AdbTransport("v", vd.serial, adb_port=port),
                    "connection per file": PerFileTransport("v", vd.serial, adb_port=port)}
            times: dict[str, list[float]] = {k: [] for k in arms}
            for _ in range(args.repeats):
                for name, t in arms.items():
                    t0 = time.perf_counter()
                    t.pull("out/r1", work / "back/r1", ["run.json"])
                    times[name].append(time.perf_counter() - t0)
            print(f"pull of {args.files} files ({size / 1e6:.2f} MB), {args.repeats} "
                  f"alternating repeats; load {os.getloadavg()[0]:.1f}\n")
            print("| arm | median s | min s | max s |\n|---|---|---|---|")
            for name, ts in times.items():
                print(f"| {name} | {statistics.median(ts):.3f} | {min(ts):.3f} | "
                      f"{max(ts):.3f} |")
            ratio = statistics.median(times["connection per file"]) / \
                statistics.median(times["one connection"])
            print(f"\nper-file / one-connection median: {ratio:.1f}x")
        finally:
            disconnect_vdev(client, vd)
            subprocess.run([adbutils.adb_path(), "-P", str(port), "kill-server"],
                           capture_output=True)


if __name__ == "__main__":
    main()
