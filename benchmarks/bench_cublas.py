#!/usr/bin/env python3
"""cuBLAS FP32 GFLOPS of square ``torch.matmul`` (the reference column of the GEMM tables in
docs/benchmarks.md): TF32 off (matmul precision "highest"), CUDA events around 10 products,
5 warm-up products, median and range of --repeats such repeats. Needs PyTorch with CUDA::

    python benchmarks/bench_cublas.py --sizes 1024,2048,4096 --json cublas.json

``--json FILE`` keeps the rows as they complete (``"finished": false`` until the end;
benchmarks/bench_vk_gemm.py ``--cublas-json`` sets them beside the Vulkan GEMM).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys


def gflops_per_repeat(n: int, repeats: int, products: int = 10) -> list[float]:
    import torch
    a = torch.rand(n, n, device="cuda") * 2 - 1
    b = torch.rand(n, n, device="cuda") * 2 - 1
    for _ in range(5):
        torch.matmul(a, b)
    out = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(products):
            torch.matmul(a, b)
        stop.record()
        torch.cuda.synchronize()
        out.append(2.0 * n ** 3 * products / (start.elapsed_time(stop) * 1e-3) / 1e9)
    return out


def save(path: str | None, doc: dict) -> None:
    """``doc`` as JSON at ``path`` (temp file, then rename); nothing without a path."""
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(path + ".tmp", path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="keep the rows here as they complete")
    args = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    doc = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": [],
           "finished": False}
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}\n")
    print("| shape (M,N,K) | cuBLAS FP32 GFLOPS median | min | max |\n|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",") if s):
        g = gflops_per_repeat(n, args.repeats)
        print(f"| {n}x{n}x{n} | {statistics.median(g):.0f} | {min(g):.0f} | {max(g):.0f} |",
              flush=True)
        doc["rows"].append({"n": n, "median_gflops": statistics.median(g), "min_gflops": min(g),
                            "max_gflops": max(g), "gflops": g})
        save(args.json, doc)
    save(args.json, doc | {"finished": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
