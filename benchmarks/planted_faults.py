#!/usr/bin/env python3
"""What the per-step verification and the whole-trajectory comparison make of planted kernel
faults: each fault edits a copy of the baseline kernels, LeNet-5 is trained on the chosen
OpenCL device (batch 32, digits, 1 warm-up + 3 measured iterations, resident placement) and
verified. Prints one markdown row per fault: the per-step verdict (worst error / its bound,
and where), and the trajectory's drift against the old whole-run tolerance 1e-3::

    python benchmarks/planted_faults.py --platform Portable
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from phonetrain import reference  # noqa: E402
from phonetrain import runner as rt  # noqa: E402
from phonetrain.devices.toolchains import build_runner  # noqa: E402
from phonetrain.kernels import KERNELS_ROOT  # noqa: E402
from phonetrain.lowering import LowerSpec, write_bundle  # noqa: E402
from phonetrain.plan import Plan  # noqa: E402

FAULTS = {
    "none (the baseline kernels)": None,
    "pool backward: one index off (last window column gets no gradient)": (
        "pool.cl", "ow1 = min(w / stride, OW - 1)", "ow1 = min(w / stride, OW - 2)"),
    "bias_add: the last channel's bias dropped": (
        "elementwise.cl", "Y[i] += bias[(i / HW) % C];",
        "if ((i / HW) % C != C - 1) Y[i] += bias[(i / HW) % C];"),
    "gemm_nt: 1e-4 relative error": (
        "gemm.cl", "        acc += a[k] * b[k];\n    GEMM_STORE(",
        "        acc += a[k] * b[k];\n    acc *= 1.0001f;\n    GEMM_STORE("),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runner"), ap.add_argument("--platform"), ap.add_argument("--device")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="phonetrain-faults-"))
    runner = Path(a.runner) if a.runner else build_runner(tmp / "build")
    sel = rt.DeviceSelector(a.platform, a.device)
    print("| planted fault | per-step verdict | worst error / bound (step, tensor) "
          "| trajectory drift | old verdict (drift <= 1e-3) |")
    print("|---|---|---|---|---|")
    for i, (name, fault) in enumerate(FAULTS.items()):
        root = tmp / f"k{i}"
        shutil.copytree(KERNELS_ROOT, root)
        if fault:
            f = root / "baseline" / fault[0]
            f.write_text(f.read_text().replace(fault[1], fault[2]))
        spec = LowerSpec(model="lenet5", batch_size=32, backend="opencl", placement="resident",
                         transfer="copy", kernel="baseline", dataset="digits", warmup=1,
                         iterations=3, num_batches=8)
        bundle = tmp / f"b{i}"
        plan_path = write_bundle(spec, bundle, kernels_root=root, seed=0)
        rt.run_plan(runner, plan_path, bundle, bundle / "out", device_selector=sel)
        doc = reference.verify_run_dir(Plan.load(plan_path), bundle, bundle / "out")
        w, drift = doc["worst"], doc["trajectory"]["drift_max"]
        verdict = "pass" if doc["ok"] else f"FAIL at steps {doc['failed_iterations']}"
        print(f"| {name} | {verdict} | {doc['max_abs_err']:.2g} / {doc['tolerance']:.2g} = "
              f"{doc['max_abs_err'] / doc['tolerance']:.3g}x ({w['iteration']}, {w['tensor']}) "
              f"| {drift:.2g} | {'pass' if drift <= 1e-3 else 'fail'} |", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
