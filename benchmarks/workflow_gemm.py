#!/usr/bin/env python3
"""The GEMM study exactly as the workflow measures it, without Snakemake or Hydra: the tune
stage (``phonetrain.stages.gemm.tune``: the models' shapes per size class and the sweep's
square sizes, each its own class, up to ``--tune-max-launch-s`` per launch) then the gemm
stage (``phonetrain.stages.gemm.gemm``: every shape with the configuration tuned for it), on one
OpenCL device of this host. Prints one markdown row per shape: GFLOPS, the tuned class used
and its defines -- the numbers the workflow's kernel table reports, to set beside
``benchmarks/bench_gemm.py --tune`` on the same machine::

    python benchmarks/workflow_gemm.py --platform NVIDIA --versions tiled,regblock
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain.devices.toolchains import build_runner  # noqa: E402
from phonetrain.kernels import tuning  # noqa: E402
from phonetrain.kernels.gemm import GemmShape  # noqa: E402
from phonetrain.stages import gemm as gemm_stage  # noqa: E402
from phonetrain.stages.job import Job, Runtime, files  # noqa: E402
from phonetrain.stages.params import models_gemm_shapes  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner"), ap.add_argument("--platform"), ap.add_argument("--device")
    ap.add_argument("--versions", default="tiled,regblock")
    ap.add_argument("--models", default="mlp_784_256_128_16,lenet5")
    ap.add_argument("--sizes", default="128,256,512,1024,2048,4096")
    ap.add_argument("--min-time-ms", type=float, default=100.0)   # measure.gemm_min_time_ms
    ap.add_argument("--max-launch-s", type=float, default=5.0)    # measure.gemm_max_launch_s
    ap.add_argument("--tune-min-time-ms", type=float, default=20.0)
    ap.add_argument("--tune-max-launch-s", type=float, default=0.1)
    ap.add_argument("--out", help="folder for the tuning and gemm documents")
    a = ap.parse_args()
    root = Path(a.out or tempfile.mkdtemp(prefix="phonetrain-wgemm-"))
    runner = Path(a.runner) if a.runner else build_runner(root / "build")
    models = [[m, 32] for m in a.models.split(",")]
    classes = list(dict.fromkeys(
        tuning.gemm_class(GemmShape(s["kernel"], s["M"], s["N"], s["K"]))
        for s in models_gemm_shapes(models)))
    dev = {"name": "bench", "transport": "local", "opencl_library": None,
           "opencl_platform": a.platform or "", "opencl_device": a.device or ""}
    base = {"device": "bench", "device_config": dev, "stage_root": str(root / "stage"),
            "kernel_hash": "bench", "threads": 0, "tune": True,
            "models": models,
            "sizes": [int(s) for s in a.sizes.split(",")], "min_time_ms": a.min_time_ms,
            "max_launch_s": a.max_launch_s, "tune_min_time_ms": a.tune_min_time_ms,
            "tune_max_launch_s": a.tune_max_launch_s}
    rt = Runtime(600.0, False)
    print("| version | shape | source | GFLOPS | tuned class | defines |")
    print("|---|---|---|---:|---|---|")
    for v in a.versions.split(","):
        inputs = {"runner": str(runner), "sources": [], "tuning": []}
        if tuning.tunable(v):
            t0 = time.time()
            for cls in classes + [tuning.SQUARES]:
                tj = root / v / "tuning" / f"{cls}.json"
                stage = gemm_stage.tune_squares if cls == tuning.SQUARES else gemm_stage.tune
                stage(Job(files({"runner": str(runner), "sources": []}),
                          files({"tuning": str(tj)}), {**base, "kernel": v, "class": cls},
                          root / f"{v}.{cls}.tune.log", rt))
                inputs["tuning"].append(str(tj))
            print(f"tune {v}: {time.time() - t0:.0f} s", file=sys.stderr)
        gj = root / f"{v}.gemm.json"
        t0 = time.time()
        doc = gemm_stage.gemm(Job(files(inputs), files({"gemm": str(gj)}),
                                  {**base, "kernel": v, "version": v}, root / f"{v}.gemm.log",
                                  rt))
        print(f"gemm {v}: {time.time() - t0:.0f} s", file=sys.stderr)
        tuned = tuning.load_tunings(inputs["tuning"])
        for r in doc["rows"]:
            cls = r.get("tuned_class")
            defines = (tuned["classes"].get(cls) or {}).get("defines") if cls else None
            g = f"{r['gemm'] if 'gemm' in r else r['kernel']} {r['M']}x{r['N']}x{r['K']}"
            gf = f"{r['gflops']:.1f}" if r.get("gflops") else r.get("status", "")
            print(f"| {v} | {g} | {r['source']} | {gf} | {cls or '-'} | "
                  f"{' '.join(f'{k}={x}' for k, x in (defines or {}).items()) or '-'} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
