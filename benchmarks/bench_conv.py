"""Per conv shape: im2col + GEMM against the direct ``conv2d_fwd`` kernel, inside a real training
step on one device; optionally records the faster lowering in a tuning.json ``conv`` section.

For each model (default ``lenet5``) the runner executes two lowered plans of one training step
on the chosen backend (``--backend opencl``: the first OpenCL device, or ``--platform``; PoCL
here): every conv lowered with im2col (``im2col`` + the version's GEMM + ``swap01``) and every
conv lowered directly (``conv2d_fwd``, plus the ``im2col`` its backward then needs for the
weight gradient). A conv's cost in each lowering is the sum, per step, of its layer's forward
kernels and its backward ``im2col`` (what differs between the two; ``bias_add`` is in both)
from the trace: device time (OpenCL profiling events) where the backend has it, host time on
the CPU backend. The two plans alternate ``--repeats`` times; each lowering's first repeat is
verified per step against the numpy reference (``phonetrain.reference.verify_run_dir``). Prints a markdown table of
median ms per step [p10-p90] per conv shape and the faster lowering; with ``--tuning PATH`` the
choice (:func:`phonetrain.kernels.tuning.choose_conv`) is merged into that tuning.json's
``conv`` section (created with no GEMM classes if the file does not exist), which
:func:`phonetrain.kernels.tuning.conv_lowerings` hands to the lowering.

    PYTHONPATH=$PWD/src /work/main/.venv/bin/python benchmarks/bench_conv.py \
        [--backend opencl] [--kernel baseline] [--batch 32] [--tuning results/.../tuning.json]
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import click
import numpy as np

from phonetrain.devices.cpus import usable_cpus
from phonetrain import reference
from phonetrain import runner as rt
from phonetrain.devices import toolchains
from phonetrain.io import write_text
from phonetrain.kernels import tuning
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.models import Conv2d, get_model
from phonetrain.plan import Plan


def conv_shapes(model: str, batch: int) -> dict[str, str]:
    """``{layer name: conv_key}`` of every Conv2d of ``model`` at ``batch``."""
    m = get_model(model)
    out = {}
    for layer, xs in zip(m.layers, m.shapes()):
        if isinstance(layer, Conv2d):
            c, h, w = xs
            out[layer.name] = tuning.conv_key(batch, c, h, w, layer.out_channels, layer.kernel,
                                              layer.stride, layer.pad)
    return out


def layer_ms(out: Path, layers: list[str]) -> dict[str, np.ndarray]:
    """Per conv layer, per measured iteration: ms of its forward kernels + backward im2col."""
    tr = rt.read_trace(out)
    tr = tr[(tr["kind"] == "kernel") & ~tr["warmup"]]
    dev = (tr["end_ns"] - tr["start_ns"]).astype("float64")
    host = (tr["host_end_ns"] - tr["host_begin_ns"]).astype("float64")
    tr = tr.assign(ms=dev.fillna(host) / 1e6)
    res = {}
    for layer in layers:
        rows = tr[(tr["layer"] == layer) & ((tr["phase"] == "forward") |
                                            ((tr["phase"] == "backward") &
                                             (tr["name"] == "im2col")))]
        rows = rows[rows["name"] != "bias_add"]
        res[layer] = rows.groupby("iteration")["ms"].sum().to_numpy()
    return res


@click.command()
@click.option("--models", default="lenet5", show_default=True)
@click.option("--backend", type=click.Choice(["opencl", "cpu"]), default="opencl",
              show_default=True)
@click.option("--platform", default=None, help="OpenCL platform name (default: the first)")
@click.option("--kernel", default="baseline", show_default=True,
              help="kernel version whose GEMM the im2col lowering uses")
@click.option("--batch", type=int, default=32, show_default=True)
@click.option("--threads", type=int, default=usable_cpus(), show_default=True)
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--iterations", type=int, default=20, show_default=True)
@click.option("--repeats", type=int, default=2, show_default=True)
@click.option("--tuning", "tuning_path", type=click.Path(path_type=Path), default=None,
              help="merge the choice into this tuning.json's conv section")
@click.option("--build-dir", type=click.Path(path_type=Path), default=None)
def main(models: str, backend: str, platform: str | None, kernel: str, batch: int, threads: int,
         warmup: int, iterations: int, repeats: int, tuning_path: Path | None,
         build_dir: Path | None) -> None:
    """Time both conv lowerings per shape and print (and optionally record) the faster."""
    load_before = os.getloadavg()[0]
    sel = rt.DeviceSelector(platform=platform) if backend == "opencl" and platform else None
    times: dict[str, dict[str, list]] = {}
    verdicts: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench_conv.") as tmp:
        runner = toolchains.build_runner(build_dir or Path(tmp) / "build")
        root = Path(tmp) / "root"
        for model in models.split(","):
            shapes = conv_shapes(model, batch)
            for r in range(repeats):
                for lowering in tuning.CONV_LOWERINGS:
                    opencl = backend == "opencl"
                    # the first repeat keeps the default checkpoints: verified per step
                    checks = {} if r == 0 else {"dumps": "none", "checkpoints": ()}
                    spec = LowerSpec(model=model, batch_size=batch, backend=backend,
                                     placement="resident" if opencl else None,
                                     transfer="copy" if opencl else None, kernel=kernel,
                                     warmup=warmup, iterations=iterations, num_batches=4,
                                     plan_id=f"{model}-{lowering}", **checks)
                    choice = {key: lowering for key in shapes.values()}
                    plan = write_bundle(spec, root, conv_lowering=choice)
                    out = root / "out" / f"{model}-{lowering}-{r}"
                    rt.run_plan(runner, plan, root, out, threads=threads, device_selector=sel)
                    if r == 0:
                        v = reference.verify_run_dir(Plan.load(plan), root, out)
                        verdicts[f"{model} {lowering}"] = (
                            "verified per step" if v.get("ok") else
                            f"VERIFY FAILED (max error {v.get('max_abs_err')})")
                    for layer, ms in layer_ms(out, list(shapes)).items():
                        times.setdefault(shapes[layer], {}).setdefault(lowering, []).append(ms)
    med = {k: {lw: float(np.median(np.concatenate(v))) for lw, v in t.items()}
           for k, t in times.items()}
    chosen = tuning.choose_conv(med)
    print(f"backend {backend}{' ' + platform if platform else ''}, kernel version {kernel}, "
          f"threads {threads}; 1-minute load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    print(f"ms per step of a conv's forward kernels + backward im2col, median [p10-p90] over "
          f"{repeats} x {iterations} steps:\n")
    print("| conv shape | im2col + GEMM | direct conv2d_fwd | faster |")
    print("|---|---|---|---|")
    for key, t in times.items():
        cells = []
        for lw in tuning.CONV_LOWERINGS:
            x = np.concatenate(t[lw])
            p10, p50, p90 = np.percentile(x, [10, 50, 90])
            cells.append(f"{p50:.3f} [{p10:.3f}-{p90:.3f}]")
        print(f"| {key} | {cells[0]} | {cells[1]} | {chosen[key]['lowering']} |")
    print("\nper-step verification of the first repeat (checkpoints against the numpy "
          "reference):")
    for run, verdict in verdicts.items():
        print(f"- {run}: {verdict}")
    if tuning_path:
        doc = (tuning.load_tuning(tuning_path) if tuning_path.exists() else
               {"version": kernel, "classes": {}, "default": None})
        doc.setdefault("conv", {}).update(chosen)
        write_text(tuning_path, json.dumps(doc, indent=1))
        print(f"\nwrote the conv section of {tuning_path}")


if __name__ == "__main__":
    main()
