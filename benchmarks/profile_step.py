#!/usr/bin/env python3
"""Where one training step's device time goes: per kernel launch (layer, phase, kernel), the
median device time per measured iteration from the runner's profiling events, for each kernel
version given, on one OpenCL device (PoCL by default). Prints one markdown table per version,
the launches with the most device time first, and the total per step.

Needs numpy, pandas and PyYAML, the runner built with ``cc`` (no Hydra, no Snakemake)::

    python benchmarks/profile_step.py                                    # PoCL, LeNet-5
    python benchmarks/profile_step.py --platform NVIDIA --versions baseline,fused --top 10
    python benchmarks/profile_step.py --platform NVIDIA --versions fused --splitk-groups 1024
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import pandas as pd  # noqa: E402

from phonetrain import runner as rt  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402
from phonetrain.lowering import LowerSpec, write_bundle  # noqa: E402


def device_ms_per_launch(out: Path) -> tuple[pd.Series, float]:
    """(median device ms per measured iteration of each (layer, phase, kernel), median total
    kernel ms per iteration) from ``out/trace.csv`` (profiling start/end in device ns)."""
    t = pd.read_csv(out / "trace.csv")
    t = t[(t.warmup == 0) & (t.op == "kernel")].copy()
    t["ms"] = (t.end_ns - t.start_ns) / 1e6
    per_it = t.groupby(["iteration", "layer", "phase", "name"]).ms.sum()
    return (per_it.groupby(["layer", "phase", "name"]).median().sort_values(ascending=False),
            float(t.groupby("iteration").ms.sum().median()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="lenet5")
    ap.add_argument("--versions", default="baseline,fused")
    ap.add_argument("--platform", help="OpenCL platform name substring (default: the first)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--top", type=int, default=8, help="rows per table")
    ap.add_argument("--splitk-groups", type=int, default=0, metavar="N",
                    help="LowerSpec.splitk_groups: a fused convolution update with long, few "
                    "weight-gradient sums is split (split K: conv_wgrad_partial + "
                    "conv_sgd_finish) to reach N work-groups; 1024 suits an H200-class GPU, "
                    "0 (default) never splits, the right choice for CPUs/PoCL and phone GPUs")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="profile_step."))
    runner = toolchains.build_runner(tmp / "build")
    sel = rt.DeviceSelector(platform=a.platform) if a.platform else None
    print(f"model {a.model}, batch {a.batch}, resident placement, {a.iterations} measured "
          f"iterations, split K to {a.splitk_groups or 'no'} work-groups (--splitk-groups); "
          f"load average {os.getloadavg()[0]:.2f}")
    for version in a.versions.split(","):
        spec = LowerSpec(model=a.model, batch_size=a.batch, backend="opencl",
                         placement="resident", transfer="copy", kernel=version, warmup=3,
                         iterations=a.iterations, num_batches=4, dumps="none", checkpoints=(),
                         plan_id=f"profile-{a.model}-{version}",
                         splitk_groups=a.splitk_groups)
        plan = write_bundle(spec, tmp / "root")
        out = tmp / "out" / version
        rt.run_plan(runner, plan, tmp / "root", out, device_selector=sel)
        per_launch, total = device_ms_per_launch(out)
        print(f"\n{version}: {total:.3f} ms of kernel time per step (median)\n")
        print("| layer | phase | kernel | device ms per step | share |")
        print("|---|---|---|---|---|")
        for (layer, phase, name), ms in per_launch.head(a.top).items():
            print(f"| {layer} | {phase} | {name} | {ms:.4f} | {ms / total:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
