"""Workflow parse and dry-run time on a study's results folder.

Times, for one or more workflow checkouts and one results folder, ``snakemake --list-rules``
(the Snakefile parsed: the sweep composed, every job's params) and ``snakemake -n all``
(parsed, plus the DAG and Snakemake's rerun checks), ``--repeats`` times each, the checkouts
interleaved within each repeat (a changing load falls on each alike), after one untimed
warm-up each (it fills the composed-study cache, phonetrain.stages.study_cache). Prints one
row per command and checkout: median and min-max wall seconds, median CPU seconds (user +
system), the dry run's output size and planned jobs. Point ``--workflow`` at two checkouts
(e.g. a copy of another commit) and the same ``--results`` to compare them; a results folder
that does not exist times the dry run of a fresh study.

    python benchmarks/bench_parse.py --results /path/to/results --override sweep=zoo \
        [--workflow DIR ...] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, str, int]:
    """(wall seconds, CPU seconds, stdout + stderr, exit status) of one command."""
    env = dict(os.environ, PYTHONPATH=str(cwd / "src"))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return wall, cpu, p.stdout + p.stderr, p.returncode


def planned_jobs(out: str) -> int:
    """Jobs a dry run plans: the 'total' row of Snakemake's job-count table (0 when none)."""
    m = re.search(r"^total\s+(\d+)", out, re.M)
    return int(m.group(1)) if m else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workflow", type=Path, action="append",
                    help="checkout to time (repeatable; default this one)")
    ap.add_argument("--results", type=Path, required=True,
                    help="the results folder, spelled as the study was run (relative to each "
                         "--workflow)")
    ap.add_argument("--override", action="append", default=[], help="Hydra override")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    flows = a.workflow or [REPO]
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    overrides = json.dumps([*a.override, f"results_dir={a.results}"])  # as spelled
    base = [snakemake, "--cores", "1", "--config", f"overrides={overrides}"]
    print(f"results {a.results}, load average {os.getloadavg()[0]:.2f} at start, "
          f"{a.repeats} repeats, interleaved")
    for i, wf in enumerate(flows):
        commit = subprocess.run(["git", "-C", str(wf), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        print(f"workflow {i}: {wf} ({commit or 'no git'})")
    print(f"{'command':<14} {'wf':>3} {'median_s':>9} {'min_s':>7} {'max_s':>7} {'cpu_s':>6} "
          f"{'out_bytes':>10} {'jobs':>5}")
    for name, extra in (("--list-rules", ["--list-rules"]), ("-n all", ["-n", "all"])):
        walls = [[] for _ in flows]
        cpus = [[] for _ in flows]
        outs = [""] * len(flows)
        for r in range(a.repeats + 1):   # the first round warms up, untimed
            for i, wf in enumerate(flows):
                w, c, outs[i], rc = timed(base + extra, wf)
                if rc:
                    print(outs[i][-3000:], file=sys.stderr)
                    return rc
                if r:
                    walls[i].append(w)
                    cpus[i].append(c)
        for i in range(len(flows)):
            jobs = planned_jobs(outs[i]) if name == "-n all" else ""
            print(f"{name:<14} {i:>3} {statistics.median(walls[i]):9.2f} {min(walls[i]):7.2f} "
                  f"{max(walls[i]):7.2f} {statistics.median(cpus[i]):6.2f} "
                  f"{len(outs[i].encode()):10d} {jobs:>5}")
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
