#!/usr/bin/env python3
"""Staged vs pipelined placement (both copy transfers) per model: median iteration wall time
(host clock) with p10-p90 over measured iterations, and from the trace (device events) the
per-iteration medians of kernel time, data-movement time, their sum and maximum, and the
transfer/kernel overlap (``phonetrain.results.profiling``). Every run is verified per step
against the numpy reference first; a run that fails verification is printed WRONG.

Runs are interleaved (staged, pipelined, staged, ...) ``--repeats`` times so a change of
machine load hits both placements alike; the iterations of all repeats are pooled.

    python benchmarks/bench_pipelined.py                              # this host's PoCL
    python benchmarks/bench_pipelined.py --platform NVIDIA --iterations 200 --repeats 3

Lowering needs the full package (digits needs scikit-learn); the runner is built with ``cc``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import reference  # noqa: E402
from phonetrain import runner as rt  # noqa: E402
from phonetrain.config import MeasureConfig  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402
from phonetrain.lowering import LowerSpec, write_bundle  # noqa: E402
from phonetrain.plan import Plan  # noqa: E402
from phonetrain.results import profiling  # noqa: E402



def _q(x: pd.Series) -> str:
    return f"{x.median():.3g} [{x.quantile(0.1):.3g}-{x.quantile(0.9):.3g}]"


def run_one(runner: Path, root: Path, pid: str, out: Path, sel, threads: int) -> tuple:
    """One run: returns (verified ok, per-iteration breakdown of measured iterations, device)."""
    plan_path = root / "plans" / pid / "plan.json"
    doc = rt.run_plan(runner, plan_path, root, out, threads=threads, device_selector=sel)
    v = reference.verify_run_dir(Plan.load(plan_path), root, out)
    iters = pd.DataFrame({"iteration": range(len(doc["iters"])),
                          "wall_ms": [it["wall_ms"] for it in doc["iters"]],
                          "measured": [not it["warmup"] for it in doc["iters"]]})
    b = profiling.breakdown(profiling.read_trace_csv(out / "trace.csv"), iters)
    ok = v["ok"] and v["max_abs_err"] <= MeasureConfig.verify_atol
    return ok, b[b["measured"]], (doc.get("device") or {}).get("name", "?")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp_784_256_128_16,lenet5")
    ap.add_argument("--kernel", default="baseline")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30, help="measured, per repeat")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--platform", default="Portable Computing Language",
                    help="OpenCL platform name (substring)")
    ap.add_argument("--threads", type=int, default=1, help="runner host threads")
    ap.add_argument("--placements", default="staged,pipelined",
                    help="comma-separated, run in this order each repeat (resident too)")
    ap.add_argument("--root", type=Path, default=None, help="bundle folder (default: temp)")
    a = ap.parse_args()
    root = a.root or Path(tempfile.mkdtemp(prefix="bench-pipelined-"))
    runner = toolchains.build_runner(root / "build")
    sel = rt.DeviceSelector(platform=a.platform)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows, device = [], "?"
    placements = a.placements.split(",")
    for model in a.models.split(","):
        pids = {}
        for placement in placements:
            spec = LowerSpec(model=model, batch_size=a.batch, backend="opencl",
                             placement=placement, transfer="copy", kernel=a.kernel,
                             warmup=a.warmup, iterations=a.iterations, num_batches=8,
                             dumps="none")
            write_bundle(spec, root)
            pids[placement] = spec.resolved_plan_id()
        got = {p: [] for p in placements}
        verified = {p: True for p in placements}
        for r in range(a.repeats):
            for p in placements:
                ok, b, device = run_one(runner, root, pids[p], root / "out" / f"{pids[p]}-{r}",
                                        sel, a.threads)
                verified[p] &= ok
                got[p].append(b)
        for p in placements:
            b = pd.concat(got[p])
            k, t = b["kernel_ms"], b["transfer_ms"]
            rows.append({"model": model, "placement": p,
                         "status": "ok" if verified[p] else "WRONG",
                         "wall ms median [p10-p90]": _q(b["wall_ms"]),
                         "kernel ms": _q(k), "transfer ms": _q(t),
                         "max(k, t) ms": f"{np.maximum(k, t).median():.3g}",
                         "k + t ms": f"{(k + t).median():.3g}",
                         "overlap ms": _q(b["transfer_kernel_overlap_ms"]),
                         "n": len(b)})
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"device: {device}; kernel {a.kernel}; batch {a.batch}; {a.repeats} x {a.iterations} "
          f"measured iterations per placement (after {a.warmup} warm-up each)\n")
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
