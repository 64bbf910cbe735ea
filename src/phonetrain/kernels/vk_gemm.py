"""GEMM timing on a Vulkan device: the Vulkan counterpart of the runner's ``bench-gemm`` mode,
for tuning a version's GEMM shaders (:func:`phonetrain.kernels.tuning.tune`) and
``benchmarks/bench_vk_gemm.py``.

The runner's ``bench-gemm`` mode runs OpenCL kernels and the CPU backend only. On Vulkan a
bench-gemm spec (:func:`phonetrain.kernels.gemm.gemm_spec` with ``backend="vulkan"``: the
SPIR-V folder as ``source``, the specialization constants as ``options``, each case's kernel,
sizes and launch) becomes one plan (:func:`gemm_plan`): per case its own A, B (seeded uniform
in [-1, 1], the plan's ``uniform`` fill) and C, one dispatch per case and iteration, C dumped
at the end. The runner's ``run`` mode executes it; :func:`gemm_document` turns its trace and
dumps into bench-gemm's ``gemm.json`` layout (``cases``: kernel, M, N, K, global, local,
status, gflops, median_ms, low_ms, high_ms, max_err, iterations, error), so the tuner reads
either the same way.

Method. Each dispatch is timed by its two timestamp queries (the trace row's device
interval: no submission or fence wait, so no host-clock calibration to ``min_time_ms`` is
needed; the spec's ``repeats`` sets the timed iterations, at least :data:`MIN_ITERATIONS`,
after :data:`WARMUP` untimed ones); a case's time is the median over the timed iterations.
C is checked against float64 numpy on every row (M <= :data:`CHECK_ALL_UP_TO`) or on
:data:`CHECK_ROWS` rows including the first and last: ``max_err = max |C - ref| / K``,
status ``wrong`` above :data:`ERR_TOL` (bench-gemm's bound, ``src/runner/bench_gemm.c``).
Needs numpy only (no pandas: the trace is read with :mod:`csv`).
"""

from __future__ import annotations

import csv
import functools
import math
import statistics
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..plan import Plan, Program, Step, Tensor, uniform_fill
from .abi import KERNEL_ARGS

WARMUP = 2
MIN_ITERATIONS = 5
ERR_TOL = 1e-5          # max |C - ref| / K above this is "wrong" (src/runner/bench_gemm.c)
CHECK_ALL_UP_TO = 256   # every row of C checked up to this M, else CHECK_ROWS rows
CHECK_ROWS = 32


def _seeds(spec: dict[str, Any], i: int) -> tuple[int, int]:
    """The uniform-fill seeds of case ``i``'s A and B."""
    base = int(spec.get("seed", 1)) * 1000 + 2 * i
    return base + 1, base + 2


def iterations(spec: dict[str, Any]) -> int:
    """Timed iterations of a spec's plan: its ``repeats``, at least :data:`MIN_ITERATIONS`."""
    return max(MIN_ITERATIONS, int(spec.get("repeats", MIN_ITERATIONS)))


def gemm_plan(spec: dict[str, Any], name: str = "vk-gemm") -> Plan:
    """The Vulkan plan of a bench-gemm spec (module docstring): tensors ``A<i>``, ``B<i>``,
    ``C<i>`` per case (device-resident), one dispatch per case and iteration, programs
    ``<source>/<kernel>.spv`` with the spec's ``options``, ``C<i>`` dumped. Raises
    ``ValueError`` for a spec that is not a Vulkan one."""
    if spec.get("backend") != "vulkan":
        raise ValueError(f"not a Vulkan bench-gemm spec: backend {spec.get('backend')!r}")
    tensors, steps = [], []
    for i, c in enumerate(spec["cases"]):
        m, n, k = int(c["M"]), int(c["N"]), int(c["K"])
        sa, sb = _seeds(spec, i)
        base = len(tensors)
        tensors += [Tensor(base, f"A{i}", [m * k], "param", home="device",
                           init={"kind": "uniform", "seed": sa, "low": -1.0, "high": 1.0}),
                    Tensor(base + 1, f"B{i}", [k * n], "param", home="device",
                           init={"kind": "uniform", "seed": sb, "low": -1.0, "high": 1.0}),
                    Tensor(base + 2, f"C{i}", [m * n], "activation", home="device")]
        vals = {"M": m, "N": n, "K": k, "alpha": 1.0, "beta": 0.0, "A": base, "B": base + 1,
                "C": base + 2}
        args = []
        for arg in KERNEL_ARGS[c["kernel"]]:
            kind, arg_name = arg.split(":")
            args.append({kind if kind in ("i", "f") else "t": vals[arg_name]})
        steps.append(Step("kernel", name=c["kernel"], args=args, global_size=list(c["global"]),
                          local_size=list(c["local"]) if c.get("local") else None,
                          flops=2 * m * n * k, bytes=4 * (m * k + k * n + m * n),
                          phase="forward"))
    kernels = dict.fromkeys(c["kernel"] for c in spec["cases"])
    programs = [Program(kn, f"{spec['source']}/{kn}.spv", spec.get("options", ""))
                for kn in kernels]
    return Plan(name=name, backend="vulkan", tensors=tensors, steps=steps, warmup=WARMUP,
                iterations=iterations(spec), programs=programs,
                dumps=[t.id for t in tensors if t.name.startswith("C")])


@functools.lru_cache(maxsize=4)
def _fill(seed: int, n: int) -> np.ndarray:
    """The plan's uniform fill in [-1, 1] (cached: a benchmark checks many configurations of
    one size, and at 4096^2 one fill takes about a second)."""
    return uniform_fill(seed, n, -1.0, 1.0)


def checked_rows(m: int) -> np.ndarray:
    """The rows of an M-row C that are checked (module docstring)."""
    return np.arange(m) if m <= CHECK_ALL_UP_TO else \
        np.unique(np.linspace(0, m - 1, CHECK_ROWS).round().astype(int))


def max_err(spec: dict[str, Any], i: int, c: np.ndarray) -> float:
    """``max |C - ref| / K`` of case ``i``'s C (flat float32) on :func:`checked_rows`, the
    reference op(A) @ op(B) in float64 from the plan's seeded fills; infinite for a C that
    is not finite or has the wrong size."""
    case = spec["cases"][i]
    m, n, k = int(case["M"]), int(case["N"]), int(case["K"])
    if c.size != m * n:
        return math.inf
    sa, sb = _seeds(spec, i)
    rows = checked_rows(m)
    a = _fill(sa, m * k).astype(np.float64)
    b = _fill(sb, k * n).astype(np.float64)
    op_a = a.reshape(k, m).T if case["kernel"] == "gemm_tn" else a.reshape(m, k)
    op_b = b.reshape(n, k).T if case["kernel"] == "gemm_nt" else b.reshape(k, n)
    got = c.reshape(m, n)[rows].astype(np.float64)
    if not np.isfinite(got).all():
        return math.inf
    return float(np.abs(got - op_a[rows] @ op_b).max() / k)


def device_ns(trace_csv: str | Path) -> dict[int, list[float]]:
    """Step index -> device ns of each timed (not warm-up) dispatch in a run's ``trace.csv``
    (``end_ns - start_ns``; rows without device times are left out)."""
    out: dict[int, list[float]] = {}
    with open(trace_csv, newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] != "kernel" or row["warmup"] not in ("0", "false", "False"):
                continue
            if row["start_ns"] and row["end_ns"]:
                out.setdefault(int(row["step"]), []).append(
                    float(int(row["end_ns"]) - int(row["start_ns"])))
    return out


def gemm_document(spec: dict[str, Any], run: dict[str, Any], trace_csv: str | Path,
                  dump: Callable[[str], np.ndarray]) -> dict[str, Any]:
    """bench-gemm's ``gemm.json`` layout (module docstring) from a run of :func:`gemm_plan`:
    ``run`` its ``run.json``, ``trace_csv`` its trace, ``dump(name)`` the flat float32 dump
    of tensor ``name``. A case without device times is an ``error``; ``device``: the run's
    device document (its limits included)."""
    times = device_ns(trace_csv)
    cases = []
    for i, c in enumerate(spec["cases"]):
        ns = [t for t in times.get(i, []) if t > 0]
        out = {k: c.get(k) for k in ("kernel", "M", "N", "K", "global", "local")}
        err = max_err(spec, i, dump(f"C{i}"))
        out["max_err"] = err if math.isfinite(err) else None
        if not ns:
            cases.append(out | {"status": "error", "gflops": None, "iterations": 0,
                                "error": "no device times (timestamps off or below the "
                                         "timer's resolution)"})
            continue
        med = statistics.median(ns)
        flops = 2.0 * int(c["M"]) * int(c["N"]) * int(c["K"])
        cases.append(out | {"status": "ok" if err <= ERR_TOL else "wrong",
                            "gflops": flops / med, "median_ms": med / 1e6,
                            "low_ms": min(ns) / 1e6, "high_ms": max(ns) / 1e6,
                            "iterations": len(ns), "error": "" if err <= ERR_TOL else
                            f"max |C - ref| / K = {err:.3g} > {ERR_TOL:g}"})
    return {"backend": "vulkan", "source": spec["source"], "options": spec.get("options", ""),
            "device": run.get("device") or {}, "cases": cases}
