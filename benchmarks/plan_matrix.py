#!/usr/bin/env python3
"""Every model x backend placement (x kernel version) through the runner, verified against
the numpy reference. Prints a markdown table: max error (``phonetrain.reference.verify``),
median iteration wall time, bytes moved and kernel FLOPs per iteration.

Lowering needs the full package (digits needs scikit-learn and scipy); running and verifying
need numpy + pandas and ``cc``, so a bundle can be made here and run on another machine::

    python benchmarks/plan_matrix.py                                   # this host's PoCL
    python benchmarks/plan_matrix.py --root /tmp/m --lower-only        # bundle only
    python benchmarks/plan_matrix.py --root /tmp/m --no-lower --platform NVIDIA
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import reference  # noqa: E402
from phonetrain import runner as rt  # noqa: E402
from phonetrain.devices import toolchains  # noqa: E402
from phonetrain.config import MeasureConfig  # noqa: E402
from phonetrain.plan import Plan  # noqa: E402

VERIFY_ATOL = MeasureConfig.verify_atol  # the study's tolerance

CONFIGS = [("cpu", None, None), ("opencl", "resident", "copy"), ("opencl", "resident", "map"),
           ("opencl", "staged", "copy"), ("opencl", "staged", "map")]
SMALL = ("mlp_16_16", "mlp_16_16_16_16", "mlp_256_256")  # synthetic input of their width


def lower_all(root: Path, models: list[str], kernels: list[str], a) -> list[str]:
    """Write one bundle per (model, config, kernel) under ``root``; return the plan ids."""
    from phonetrain.lowering import LowerSpec, write_bundle

    ids = []
    for m in models:
        for backend, placement, transfer in CONFIGS:
            for k in kernels if backend == "opencl" else ["baseline"]:
                spec = LowerSpec(model=m, batch_size=a.batch, backend=backend,
                                 placement=placement, transfer=transfer, kernel=k,
                                 warmup=a.warmup, iterations=a.iterations, num_batches=8,
                                 momentum=0.9, dumps="params",
                                 dataset="synthetic" if m in SMALL else "digits")
                write_bundle(spec, root)
                ids.append(spec.resolved_plan_id())
    (root / "plan_ids.json").write_text(json.dumps(ids))
    return ids


def run_all(root: Path, ids: list[str], runner: Path, sel: rt.DeviceSelector,
            threads: int = 0) -> list[dict]:
    rows = []
    for pid in ids:
        plan = Plan.load(root / "plans" / pid / "plan.json")
        out = root / "out" / pid
        row = {"plan": plan.name, "max_err": float("nan"), "median_ms": float("nan")}
        try:
            doc = rt.run_plan(runner, root / "plans" / pid / "plan.json", root, out,
                              threads=threads,
                              device_selector=sel if plan.backend == "opencl" else None)
        except rt.RunnerError as e:
            row["status"] = f"failed: {e.message}"
            rows.append(row)
            continue
        v = reference.verify_run_dir(plan, root, out)
        wall = sorted(it["wall_ms"] for it in doc["iters"] if not it["warmup"])
        row.update(status="ok" if v["max_abs_err"] <= VERIFY_ATOL else "WRONG",
                   max_err=v["max_abs_err"], median_ms=wall[len(wall) // 2],
                   moved_bytes=sum(s.bytes for s in plan.steps if s.op in ("h2d", "d2h", "map")),
                   mflop=sum(s.flops for s in plan.steps if s.op == "kernel") / 1e6,
                   device=(doc.get("device") or {}).get("name", "host CPU"))
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, help="bundle folder (default: a temp folder)")
    ap.add_argument("--runner", type=Path, help="runner binary (default: build one with cc)")
    ap.add_argument("--platform", default=None), ap.add_argument("--device", default=None)
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--kernels", nargs="*", default=["baseline"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--lower-only", action="store_true")
    ap.add_argument("--no-lower", action="store_true", help="reuse the bundles in --root")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = a.root or Path(tmp) / "bundle"
        if a.no_lower:
            ids = json.loads((root / "plan_ids.json").read_text())
        else:
            from phonetrain.models import MODELS
            ids = lower_all(root, a.models or sorted(MODELS), a.kernels, a)
        if a.lower_only:
            print(f"{len(ids)} plans in {root}")
            return
        runner = a.runner or toolchains.build_runner(Path(tmp) / "build")
        rows = run_all(root, ids, runner, rt.DeviceSelector(a.platform, a.device), a.threads)
    print("| plan | device | status | max err | median ms/iter | moved bytes/iter | MFLOP/iter |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['plan']} | {r.get('device', '')} | {r['status']} | {r['max_err']:.1e} | "
              f"{r['median_ms']:.2f} | {r.get('moved_bytes', 0):,} | {r.get('mflop', 0):.2f} |")


if __name__ == "__main__":
    main()
