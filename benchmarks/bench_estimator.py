#!/usr/bin/env python3
"""Which location estimate holds between runner processes: one plan measured by several
runner processes, then per estimator (minimum, p10, p25, median) the spread of the processes'
figures (largest / smallest) and the typical half-width of one process's bootstrap interval.

An estimator describes a rerun when its spread between processes is small against its own
interval; noise that only adds time moves the median more than a low quantile (Chen and
Revels 2016). Optionally under a CPU hog for the second half of the processes (``--hog``),
which then shows how far each estimator moves under contention. The runner is built from
``src/runner`` into a temporary folder; the plan is lowered there (synthetic data)::

    python benchmarks/bench_estimator.py --model mlp_784_256_128_16 --processes 6
    python benchmarks/bench_estimator.py --backend opencl --hog
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import runner as runner_api  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402
from phonetrain.lowering import LowerSpec, write_bundle  # noqa: E402
from phonetrain.results import stats  # noqa: E402

HOG = "import time\nend = time.time() + {s}\nwhile time.time() < end:\n    pass\n"
QUANTILES = {"min": 0.0, "p10": 0.10, "p25": 0.25, "median": 0.5}


def measure(binary: Path, root: Path, plan: Path, n: int, seconds: float) -> list[list[float]]:
    """Measured iteration times (ms) of ``n`` runner processes, each adaptive to +-5% within
    ``seconds``, one after the other."""
    r = runner_api.Runner.local_binary(binary, root)
    out = []
    for k in range(n):
        doc = r.run(plan.resolve(), root / f"out{k}",
                    adaptive=runner_api.Adaptive(ci_target=0.05, max_iterations=60,
                                                 max_seconds=seconds))
        out.append([i["wall_ms"] for i in doc["iters"] if not i["warmup"]])
    return out


def table(label: str, procs: list[list[float]]) -> None:
    print(f"\n{label}: {len(procs)} processes, {sum(map(len, procs))} measured iterations")
    print("| estimator | per process ms | largest / smallest | one process's interval +-% "
          "(median over processes) |")
    print("|---|---|---:|---:|")
    for name, q in QUANTILES.items():
        figs, halves = [], []
        for p in procs:
            est, lo, hi = stats.quantile_ci(p, q)
            figs.append(est)
            halves.append(stats.rel_half_width(est, lo, hi))
        print(f"| {name} | {', '.join(f'{f:.3f}' for f in figs)} | "
              f"{max(figs) / min(figs):.2f} | {100 * float(np.median(halves)):.1f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="mlp_784_256_128_16")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "opencl"))
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=1.5, help="max_seconds per process")
    ap.add_argument("--hog", action="store_true",
                    help="a busy loop per core during the second half of the processes")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-estimator-") as tmp:
        root = Path(tmp)
        binary = toolchains.build_runner(root / "build")
        spec = LowerSpec(model=a.model, batch_size=32, dataset="synthetic", warmup=2,
                         iterations=10, num_batches=4, backend=a.backend,
                         placement="resident" if a.backend == "opencl" else None,
                         transfer="copy" if a.backend == "opencl" else None,
                         kernel="baseline")
        plan = write_bundle(spec, root, seed=0)
        print(f"{a.model} {a.backend}; host {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.2f} at start")
        half = a.processes // 2 if a.hog else a.processes
        quiet = measure(binary, root, plan, half, a.seconds)
        table("as found", quiet)
        if a.hog:
            procs = [subprocess.Popen([sys.executable, "-c", HOG.format(s=600)])
                     for _ in range(os.cpu_count() or 1)]
            try:
                busy = measure(binary, root, plan, a.processes - half, a.seconds)
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            table("under the hog", busy)
            table("both together", quiet + busy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
