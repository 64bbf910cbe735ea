#!/usr/bin/env python3
"""Kernel launches per training iteration and what they cost: the ``baseline`` and ``fused``
kernel versions (src/kernels/fused/README.md) on the MLP 784-256-128-16, LeNet-5 and
MobileNetV2 (``--models`` picks), through the real runner on one OpenCL device (PoCL by
default). Prints a markdown table per placement: launches per iteration, the median
iteration time with p10-p90 (host clock), the median idle time between consecutive kernels
(device events) and the iteration gap per launch (host clock;
``phonetrain.results.profiling.launch_stats``), plus the load average.

    python benchmarks/bench_fused.py                       # PoCL, resident placement
    python benchmarks/bench_fused.py --platform NVIDIA --placements resident staged
    python benchmarks/bench_fused.py --runner path/to/runner --iterations 100
    python benchmarks/bench_fused.py --models mobilenetv2_small

On a GPU host (e.g. an NVIDIA H200) give ``--platform NVIDIA``; nothing else changes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402

from phonetrain import runner as runner_api  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402
from phonetrain.lowering import LowerSpec, write_bundle  # noqa: E402
from phonetrain.results import profiling  # noqa: E402
from phonetrain.results.runs import run_iterations  # noqa: E402

MODELS = ["mlp_784_256_128_16", "lenet5", "mobilenetv2_small"]
VERSIONS = ["baseline", "fused"]


def measure(runner: Path, selector, work: Path, model: str, version: str, placement: str,
            batch: int, warmup: int, iterations: int) -> dict:
    """One run; returns the row of the table (ms and us)."""
    spec = LowerSpec(model=model, batch_size=batch, backend="opencl", placement=placement,
                     transfer="copy", kernel=version, num_batches=4, warmup=warmup,
                     iterations=iterations,
                     dataset="synthetic" if model.startswith("mlp") else "digits")
    root = work / f"{model}-{version}-{placement}"
    plan = write_bundle(spec, root, seed=0)
    run = runner_api.run_plan(runner, plan, root, root / "out", device_selector=selector)
    it = run_iterations(run, str(root / "out" / "run.json"))
    trace = profiling.read_trace_csv(root / "out" / "trace.csv")
    b = profiling.breakdown(trace, it)
    launch = profiling.launch_stats(trace, b)
    wall = b.loc[b["measured"], "wall_ms"].to_numpy()
    return {"model": model, "version": version, "placement": placement, **launch,
            "n": len(wall), "median_ms": float(np.median(wall)),
            "p10_ms": float(np.percentile(wall, 10)), "p90_ms": float(np.percentile(wall, 90))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner", type=Path, help="runner binary (default: build one)")
    ap.add_argument("--platform", default="Portable Computing Language",
                    help="OpenCL platform substring (default: PoCL)")
    ap.add_argument("--device", default=None, help="OpenCL device substring")
    ap.add_argument("--placements", nargs="+", default=["resident"],
                    choices=["resident", "staged"])
    ap.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=30)
    args = ap.parse_args()
    selector = runner_api.DeviceSelector(platform=args.platform, device=args.device)
    with tempfile.TemporaryDirectory(prefix="bench_fused.") as tmp:
        work = Path(tmp)
        runner = args.runner or toolchains.build_runner(work / "runner")
        load_before = os.getloadavg()[0]
        rows = [measure(runner, selector, work, m, v, p, args.batch, args.warmup,
                        args.iterations)
                for p in args.placements for m in args.models for v in VERSIONS]
        load_after = os.getloadavg()[0]
    print(f"platform {args.platform!r}, batch {args.batch}, load average (1 min) "
          f"{load_before:.2f} before, {load_after:.2f} after, {os.cpu_count()} CPUs\n")
    print("| placement | model | version | launches / iteration | iterations | median ms | "
          "p10-p90 ms | median gap between kernels (us) | gap per launch (us) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        gap = "n/a" if r["kernel_gap_median_us"] is None else f"{r['kernel_gap_median_us']:.1f}"
        per = "n/a" if r["launch_overhead_us"] is None else f"{r['launch_overhead_us']:.1f}"
        print(f"| {r['placement']} | {r['model']} | {r['version']} | "
              f"{r['launches_per_iteration']} | {r['n']} | {r['median_ms']:.3f} | "
              f"{r['p10_ms']:.3f}-{r['p90_ms']:.3f} | {gap} | {per} |")


if __name__ == "__main__":
    main()
