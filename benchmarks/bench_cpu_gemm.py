"""CPU backend GEMM against numpy (OpenBLAS) at the same thread count: a table of GFLOPS.

For each size n (default 256, 512, 1024) the runner executes a plan of one ``gemm_nn``
launch, ``C[n,n] = A @ B``, with warm-up and measured iterations on its CPU backend; GFLOPS
per iteration come from the trace's kernel rows (``2*n^3`` FLOPs over the host time of the
row). numpy runs ``np.matmul(A, B, out=C)`` the same number of times in a subprocess whose
BLAS is pinned to the same thread count (OPENBLAS_NUM_THREADS and friends, checked with
threadpoolctl); OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed from that subprocess's
environment so OpenBLAS picks its kernel for this CPU itself. The two alternate ``--repeats``
times (runner, numpy, runner, ...) so both see the same background load. Prints a markdown
table: median GFLOPS and [min-max] over every measured iteration of every repeat, the ratio of
the medians and that of the best iterations (less sensitive to other processes on a shared
machine); the load average before and after says how shared it was.

    /work/venv/bin/python benchmarks/bench_cpu_gemm.py [--threads 2] [--sizes 256,512,1024]
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import click
import numpy as np

from phonetrain.devices.cpus import usable_cpus
from phonetrain import runner as rt
from phonetrain.devices import toolchains  # noqa: E402
from phonetrain.plan import Plan, Step, Tensor

NUMPY_BENCH = r"""
import json, sys, time
import numpy as np
n_list, warmup, iters = json.loads(sys.argv[1])
out = {"seconds": {}}
for n, it in zip(n_list, iters):
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    for _ in range(warmup):
        np.matmul(a, b, out=c)
    ts = []
    for _ in range(it):
        t0 = time.perf_counter_ns()
        np.matmul(a, b, out=c)
        ts.append(time.perf_counter_ns() - t0)
    out["seconds"][str(n)] = [t * 1e-9 for t in ts]
try:
    from threadpoolctl import threadpool_info
    out["blas"] = [{k: i.get(k) for k in ("internal_api", "version", "architecture",
                                          "num_threads", "threading_layer")}
                   for i in threadpool_info() if i.get("user_api") == "blas"]
except ImportError:
    out["blas"] = []
print(json.dumps(out))
"""


def iterations_for(n: int) -> int:
    """Measured iterations: about 2e10 FLOPs per size, between 20 and 100."""
    return int(min(100, max(20, 2e10 // (2 * n ** 3))))


def gemm_plan(n: int, threads: int, warmup: int, iterations: int) -> Plan:
    """One ``gemm_nn`` of ``[n,n] x [n,n]`` on the CPU backend, inputs from seeded fills."""
    def fill(seed: int) -> dict:
        return {"kind": "uniform", "seed": seed, "low": -1.0, "high": 1.0}

    tensors = [Tensor(0, "A", [n, n], "scratch", init=fill(1)),
               Tensor(1, "B", [n, n], "scratch", init=fill(2)), Tensor(2, "C", [n, n], "scratch")]
    args = [{"i": n}, {"i": n}, {"i": n}, {"f": 1.0}, {"t": 0}, {"t": 1}, {"f": 0.0}, {"t": 2}]
    step = Step(op="kernel", name="gemm_nn", args=args, global_size=[n, n], flops=2 * n ** 3,
                bytes=4 * 3 * n * n, layer=f"gemm{n}", phase="forward")
    return Plan(name=f"bench/cpu_gemm/{n}", backend="cpu", tensors=tensors, steps=[step],
                warmup=warmup, iterations=iterations)


def runner_gflops(runner: Path, work: Path, n: int, threads: int, warmup: int,
                  iterations: int) -> np.ndarray:
    """GFLOPS of each measured iteration's gemm_nn row in the runner's trace."""
    root = work / f"n{n}"
    root.mkdir(parents=True, exist_ok=True)
    gemm_plan(n, threads, warmup, iterations).save(root / "plan.json")
    rt.run_plan(runner, root / "plan.json", root, root / "out", threads=threads)
    tr = rt.read_trace(root / "out")
    rows = tr[(tr["kind"] == "kernel") & ~tr["warmup"]]
    ns = (rows["host_end_ns"] - rows["host_begin_ns"]).to_numpy(dtype=float)
    return rows["flops"].to_numpy(dtype=float) / ns


def numpy_gflops(sizes: list[int], threads: int, warmup: int,
                 iters: list[int]) -> tuple[dict, list]:
    """GFLOPS per size of numpy's matmul at ``threads`` BLAS threads, and the BLAS info."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    proc = subprocess.run([sys.executable, "-c", NUMPY_BENCH, json.dumps([sizes, warmup, iters])],
                          env=env, capture_output=True, text=True, check=True)
    doc = json.loads(proc.stdout)
    return ({int(n): 2 * int(n) ** 3 / np.array(s) / 1e9 for n, s in doc["seconds"].items()},
            doc["blas"])


def cpu_model() -> str:
    """lscpu's model name (or platform's processor string)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return platform.processor() or "unknown"


def fmt(g: np.ndarray) -> str:
    return f"{np.median(g):.1f} [{g.min():.1f}-{g.max():.1f}]"


@click.command()
@click.option("--threads", type=int, default=usable_cpus(), show_default=True,
              help="threads for both the runner's CPU backend (OpenMP) and numpy's BLAS")
@click.option("--sizes", default="256,512,1024", show_default=True, help="n of n^3 GEMMs")
@click.option("--warmup", type=int, default=3, show_default=True)
@click.option("--repeats", type=int, default=3, show_default=True,
              help="alternating runner/numpy rounds")
@click.option("--build-dir", type=click.Path(path_type=Path), default=None,
              help="where the runner is built (default: a temporary folder)")
def main(threads: int, sizes: str, warmup: int, repeats: int, build_dir: Path | None) -> None:
    """Print the CPU backend's GEMM GFLOPS against numpy's as a markdown table."""
    load_before = os.getloadavg()[0]
    ns = [int(s) for s in sizes.split(",")]
    iters = [iterations_for(n) for n in ns]
    ours: dict[int, list] = {n: [] for n in ns}
    theirs: dict[int, list] = {n: [] for n in ns}
    with tempfile.TemporaryDirectory(prefix="bench_cpu_gemm.") as tmp:
        runner = toolchains.build_runner(build_dir or Path(tmp) / "build")
        for r in range(repeats):
            for n, it in zip(ns, iters):
                ours[n].append(runner_gflops(runner, Path(tmp) / f"r{r}", n, threads, warmup, it))
            got, blas = numpy_gflops(ns, threads, warmup, iters)
            for n in ns:
                theirs[n].append(got[n])
    ours = {n: np.concatenate(v) for n, v in ours.items()}
    theirs = {n: np.concatenate(v) for n, v in theirs.items()}
    print(f"CPU: {cpu_model()}, {os.cpu_count()} logical cores; threads: {threads}; "
          f"runner flags: {' '.join(toolchains.BASE_FLAGS)}")
    for b in blas:
        print(f"numpy {np.__version__} BLAS: {b['internal_api']} {b['version']} "
              f"kernel {b['architecture']}, {b['num_threads']} threads")
    print(f"1-minute load average: {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"GFLOPS, median [min-max] over {repeats} repeats x the measured iterations "
          f"(warm-up {warmup} per repeat):\n")
    print("| n | iterations per repeat | runner cpu gemm_nn | numpy matmul "
          "| runner / numpy (medians) | runner / numpy (best) |")
    print("|---|---|---|---|---|---|")
    for n, it in zip(ns, iters):
        ratio = np.median(ours[n]) / np.median(theirs[n])
        best = ours[n].max() / theirs[n].max()
        print(f"| {n} | {it} | {fmt(ours[n])} | {fmt(theirs[n])} | {ratio:.0%} | {best:.0%} |")


if __name__ == "__main__":
    main()
