"""One SGD training step on the runner's CPU backend against PyTorch CPU eager, side by side.

For each model (default: the paper MLP ``mlp_784_256_128_16`` and ``lenet5``) at batch 32 the
runner executes a lowered ``backend=cpu`` plan (plain SGD, lr 0.05, digits batches) at
``--threads`` OpenMP threads; per-step wall times come from ``run.json``'s measured
iterations (load of the batch from host memory + every kernel; the loss is a host float the
runner reads after the step). If ``import torch`` works in ``--torch-python`` (default
``/work/peers-venv/bin/python``, run as a subprocess so the runner's side never imports torch),
PyTorch does the same step: the same layers, batch 32, ``torch.optim.SGD(lr)``, per iteration
the batch copied from a host array into the model's input tensor, forward, cross-entropy,
backward, update, loss read back with ``.item()``; ``torch.set_num_threads(threads)``.
Both sides alternate ``--repeats`` times (runner, torch, runner, ...) so both see the same
background load. Prints one markdown table: median ms per step and p10-p90 over every
measured iteration of every repeat, and the ratio of the medians (runner / torch: below 1
means the runner is faster); ``--kernels baseline,fused`` times both CPU lowerings (the
kernel-by-kernel step and the fused one) as columns of the same rounds; ``--profile`` adds
the runner's median ms per step of each (kernel, layer, phase) from its trace;
``--baseline-runner`` times another runner binary (on the first of ``--kernels``) in the same
rounds (a before/after column). The 1-minute load average before and after says how shared
the machine was.

    PYTHONPATH=$PWD/src /work/main/.venv/bin/python benchmarks/bench_cpu_step.py \
        --threads 2 [--models mlp_784_256_128_16,lenet5] [--iterations 200] \
        [--kernels baseline,fused] [--profile] \
        [--baseline-runner OLD/runner]
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import click
import numpy as np

from phonetrain.devices.cpus import usable_cpus
from phonetrain import runner as rt
from phonetrain.devices import toolchains
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.models import get_model

BATCH = 32
LR = 0.05

# The torch side, run by --torch-python; argv[1] is a JSON job. Layers mirror phonetrain's
# model zoo (src/phonetrain/models/zoo.py); inputs are random (the timing does not depend on
# the values) and copied in each step from a host array like the runner's batch load.
TORCH_BENCH = r"""
import json, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
job = json.loads(sys.argv[1])
torch.set_num_threads(job["threads"])
torch.manual_seed(0)
def build(name):
    if name == "lenet5":
        return nn.Sequential(nn.Conv2d(1, 6, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2, 2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                             nn.Linear(84, 10))
    widths = [int(w) for w in name.split("_")[1:]]
    layers = [nn.Flatten()]
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)
out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "ms": {}}
for name, shape, classes in job["models"]:
    m = build(name)
    opt = torch.optim.SGD(m.parameters(), lr=job["lr"])
    g = torch.Generator().manual_seed(0)
    hx = [torch.rand((job["batch"], *shape), generator=g) for _ in range(8)]
    hy = [torch.randint(0, classes, (job["batch"],), generator=g) for _ in range(8)]
    sx, sy = torch.empty_like(hx[0]), torch.empty_like(hy[0])
    ms = []
    for i in range(job["warmup"] + job["iterations"]):
        t0 = time.perf_counter_ns()
        sx.copy_(hx[i % 8]); sy.copy_(hy[i % 8])
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(m(sx), sy)
        loss.backward()
        opt.step()
        loss.item()
        t1 = time.perf_counter_ns()
        if i >= job["warmup"]:
            ms.append((t1 - t0) / 1e6)
    out["ms"][name] = ms
print(json.dumps(out))
"""


def runner_step_ms(runner: Path, root: Path, model: str, threads: int, warmup: int,
                   iterations: int, profile: dict | None, kernel: str = "baseline") -> np.ndarray:
    """Wall ms of each measured iteration of a batch-32 CPU plan of ``model`` lowered with
    kernel version ``kernel`` (``baseline``: kernel by kernel; ``fused``: the fused step);
    with ``profile`` (a dict) also adds kernel name -> per-iteration ms arrays from the
    trace."""
    spec = LowerSpec(model=model, batch_size=BATCH, backend="cpu", lr=LR, warmup=warmup,
                     iterations=iterations, num_batches=8, dumps="none", checkpoints=(),
                     kernel=kernel, plan_id=f"{model}-t{threads}-{kernel}")
    plan_path = write_bundle(spec, root)
    out = root / "out" / spec.resolved_plan_id()
    doc = rt.run_plan(runner, plan_path, root, out, threads=threads)
    ms = np.array([it["wall_ms"] for it in doc["iters"][warmup:]])
    if profile is not None:
        tr = rt.read_trace(out)
        tr = tr[~tr["warmup"]]
        tr = tr.assign(ms=(tr["host_end_ns"] - tr["host_begin_ns"]) / 1e6,
                       kernel=tr["name"].where(tr["kind"] == "kernel", tr["op"]) + " "
                       + tr["layer"] + " " + tr["phase"])
        per_it = tr.groupby(["kernel", "iteration"])["ms"].sum()
        for name, s in per_it.groupby(level=0):
            profile.setdefault(name, []).append(s.to_numpy())
    return ms


def torch_step_ms(python: str, models: list[str], threads: int, warmup: int,
                  iterations: int) -> tuple[dict, str] | None:
    """Per-model measured ms of PyTorch CPU eager in a subprocess, and its version; None
    when that python cannot import torch."""
    try:
        if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode:
            return None
    except OSError:   # no such python
        return None
    job = {"threads": threads, "lr": LR, "batch": BATCH, "warmup": warmup,
           "iterations": iterations,
           "models": [[m, list(get_model(m).input_shape), get_model(m).classes] for m in models]}
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = str(threads)
    proc = subprocess.run([python, "-c", TORCH_BENCH, json.dumps(job)], env=env,
                          capture_output=True, text=True, check=True)
    doc = json.loads(proc.stdout)
    return {m: np.array(v) for m, v in doc["ms"].items()}, doc["torch"]


def fmt(x: np.ndarray) -> str:
    p10, p50, p90 = np.percentile(x, [10, 50, 90])
    return f"{p50:.3f} [{p10:.3f}-{p90:.3f}]"


@click.command()
@click.option("--threads", type=int, default=usable_cpus(), show_default=True,
              help="OpenMP threads of the runner and torch.set_num_threads")
@click.option("--models", default="mlp_784_256_128_16,lenet5", show_default=True)
@click.option("--warmup", type=int, default=20, show_default=True)
@click.option("--iterations", type=int, default=200, show_default=True,
              help="measured steps per repeat and side")
@click.option("--repeats", type=int, default=3, show_default=True,
              help="alternating runner/torch rounds")
@click.option("--torch-python", default="/work/peers-venv/bin/python", show_default=True,
              help="a python that can import torch (skipped when it cannot)")
@click.option("--kernels", default="baseline", show_default=True,
              help="the runner's CPU lowerings, comma-separated (baseline, fused): one column "
                   "each, timed in the same rounds")
@click.option("--profile", is_flag=True, help="also print the runner's per-kernel ms per step")
@click.option("--build-dir", type=click.Path(path_type=Path), default=None,
              help="where the runner is built (default: a temporary folder)")
@click.option("--baseline-runner", type=click.Path(path_type=Path, exists=True), default=None,
              help="another runner binary (e.g. built from an older commit) timed in the same "
                   "rounds, as a before/after column")
def main(threads: int, models: str, warmup: int, iterations: int, repeats: int,
         torch_python: str, kernels: str, profile: bool, build_dir: Path | None,
         baseline_runner: Path | None) -> None:
    """Print CPU-backend vs PyTorch CPU eager ms per training step as a markdown table."""
    load_before = os.getloadavg()[0]
    names = models.split(",")
    versions = kernels.split(",")
    for v in versions:
        if v not in ("baseline", "fused"):
            raise click.BadParameter(f"{v!r}: the CPU lowerings are baseline and fused",
                                     param_hint="--kernels")
    ours: dict[tuple, list] = {(m, v): [] for m in names for v in versions}
    theirs: dict[str, list] = {m: [] for m in names}
    before: dict[str, list] = {m: [] for m in names}
    prof: dict[tuple, dict] = {(m, v): {} for m in names for v in versions}
    torch_version = None
    with tempfile.TemporaryDirectory(prefix="bench_cpu_step.") as tmp:
        runner = toolchains.build_runner(build_dir or Path(tmp) / "build")
        for r in range(repeats):
            for m in names:
                for v in versions:
                    ours[m, v].append(runner_step_ms(runner, Path(tmp) / "root", m, threads,
                                                     warmup, iterations,
                                                     prof[m, v] if profile else None, v))
                if baseline_runner:
                    before[m].append(runner_step_ms(baseline_runner, Path(tmp) / "root", m,
                                                    threads, warmup, iterations, None,
                                                    versions[0]))
            got = torch_step_ms(torch_python, names, threads, warmup, iterations)
            if got is not None:
                torch_version = got[1]
                for m in names:
                    theirs[m].append(got[0][m])
    print(f"CPU: {os.cpu_count()} logical cores; threads: {threads}; batch {BATCH}; "
          f"runner flags: {' '.join(toolchains.BASE_FLAGS)}; "
          f"torch: {torch_version or 'not importable by ' + torch_python}")
    print(f"1-minute load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"ms per training step, median [p10-p90] over {repeats} repeats x {iterations} "
          f"measured steps (warm-up {warmup} per repeat):\n")
    if baseline_runner:
        print(f"baseline runner: {baseline_runner}\n")
    base_col = " runner cpu (baseline binary) |" if baseline_runner else ""
    cols = "".join(f" runner cpu {v} |" for v in versions)
    ratios = "".join(f" {v} / torch |" for v in versions)
    print(f"| model |{base_col}{cols} torch cpu eager |{ratios}")
    print("|---|" + "---|" * (bool(baseline_runner) + 2 * len(versions) + 1))
    for m in names:
        b = np.concatenate(theirs[m]) if theirs[m] else None
        base = f" {fmt(np.concatenate(before[m]))} |" if baseline_runner else ""
        mine = {v: np.concatenate(ours[m, v]) for v in versions}
        cells = "".join(f" {fmt(a)} |" for a in mine.values())
        ratio = "".join(f" {np.median(a) / np.median(b):.2f} |" if b is not None else " - |"
                        for a in mine.values())
        print(f"| {m} |{base}{cells} {fmt(b) if b is not None else '-'} |{ratio}")
    if profile:
        for (m, v), per_kernel in prof.items():
            print(f"\n{m}, {v}: runner ms per step by kernel, layer and phase "
                  "(median over measured steps):\n")
            print("| kernel layer phase | ms per step | share |")
            print("|---|---|---|")
            rows = {k: np.median(np.concatenate(x)) for k, x in per_kernel.items()}
            total = sum(rows.values())
            for k, x in sorted(rows.items(), key=lambda kv: -kv[1]):
                print(f"| {k} | {x:.4f} | {x / total:.0%} |")

if __name__ == "__main__":
    main()
