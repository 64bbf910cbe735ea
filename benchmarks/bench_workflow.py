"""Workflow timings: the full study, a no-op rerun, and a rerun after one kernel edit.

Copies Snakefile, rules/, conf/ and src/ to a temporary folder (so the edit does not touch the
checkout), runs ``snakemake --cores N all`` there with the given overrides, and prints one
table row per measurement (wall seconds, jobs run). Targets: full default study < 5 min,
no-op < 10 s on the 2-core development machine.

    python benchmarks/bench_workflow.py [--cores 1] [--override measure.iterations=10 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def copy_workflow(ws: Path) -> Path:
    """Copy this checkout's Snakefile, rules/, conf/ and src/ into the folder ``ws`` and return
    it: a workspace whose kernel edits and results leave the checkout alone."""
    shutil.copy2(REPO / "Snakefile", ws / "Snakefile")
    for d in ("rules", "conf", "src"):
        shutil.copytree(REPO / d, ws / d,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return ws


def run(ws: Path, cores: int, overrides: list[str]) -> tuple[float, int, int]:
    """(wall seconds, jobs finished, exit status) of one ``snakemake all``."""
    env = dict(os.environ, PYTHONPATH=str(ws / "src"))
    cmd = [str(Path(sys.executable).with_name("snakemake")), "--cores", str(cores), "all",
           "--config", f"overrides={json.dumps(overrides)}"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ws, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    jobs = len(re.findall(r"^Finished jobid", p.stdout + p.stderr, re.M))
    if p.returncode != 0:
        print((p.stdout + p.stderr)[-3000:], file=sys.stderr)
    return wall, jobs, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--override", action="append", default=[], help="Hydra override")
    ap.add_argument("--kernel-file", default="src/kernels/baseline/elementwise.cl")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-workflow-") as tmp:
        ws = copy_workflow(Path(tmp))
        rows = [("full study", *run(ws, a.cores, a.override)),
                ("no-op rerun", *run(ws, a.cores, a.override))]
        f = ws / a.kernel_file
        f.write_text(f.read_text() + "\n// benchmark edit\n")
        rows.append((f"after editing {a.kernel_file}", *run(ws, a.cores, a.override)))
    load = os.getloadavg()[0]
    print(f"overrides: {a.override or 'none'}; --cores {a.cores}; "
          f"{os.cpu_count()} CPUs; load average now {load:.1f}")
    print(f"| {'measurement':40s} | wall_s | jobs | exit |")
    print(f"|{'-' * 42}|-------:|-----:|-----:|")
    for name, wall, jobs, rc in rows:
        print(f"| {name:40s} | {wall:6.1f} | {jobs:4d} | {rc:4d} |")


if __name__ == "__main__":
    main()
