"""Workflow parse and dry-run time on a finished study.

Times, for one workflow checkout and one results folder, ``snakemake --list-rules`` (the
Snakefile parsed: the sweep composed, every job's params) and ``snakemake -n all`` (parsed,
plus the DAG and Snakemake's rerun checks), each ``--repeats`` times, and prints one table row
per command: median and min-max wall seconds, the dry run's output size and planned jobs.
Point ``--workflow`` at two checkouts (e.g. two commits) and the same ``--results`` to compare
them within one sitting.

    python benchmarks/bench_parse.py --results /path/to/results --override sweep=zoo \
        [--workflow DIR] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: Path) -> tuple[float, str, int]:
    """(wall seconds, stdout + stderr, exit status) of one command."""
    env = dict(os.environ, PYTHONPATH=str(cwd / "src"))
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return time.monotonic() - t0, p.stdout + p.stderr, p.returncode


def planned_jobs(out: str) -> int:
    """Jobs a dry run plans: the 'total' row of Snakemake's job-count table (0 when none)."""
    m = re.search(r"^total\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workflow", type=Path, default=REPO, help="checkout to time")
    ap.add_argument("--results", type=Path, required=True,
                    help="a finished study's folder, spelled as the study was run (relative to --workflow)")
    ap.add_argument("--override", action="append", default=[], help="Hydra override")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    overrides = json.dumps([*a.override, f"results_dir={a.results}"])  # as spelled
    base = [snakemake, "--cores", "1", "--config", f"overrides={overrides}"]
    commit = subprocess.run(["git", "-C", str(a.workflow), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"workflow {a.workflow} ({commit}), results {a.results}, load average "
          f"{os.getloadavg()[0]:.2f}, {a.repeats} repeats")
    print(f"{'command':<14} {'median_s':>9} {'min_s':>7} {'max_s':>7} {'out_bytes':>10} "
          f"{'jobs':>5}")
    for name, extra in (("--list-rules", ["--list-rules"]), ("-n all", ["-n", "all"])):
        walls, out, rc = [], "", 0
        for _ in range(a.repeats):
            w, out, rc = timed(base + extra, a.workflow)
            walls.append(w)
            if rc:
                print(out[-3000:], file=sys.stderr)
                return rc
        jobs = planned_jobs(out) if name == "-n all" else ""
        print(f"{name:<14} {statistics.median(walls):9.2f} {min(walls):7.2f} {max(walls):7.2f} "
              f"{len(out.encode()):10d} {jobs:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
