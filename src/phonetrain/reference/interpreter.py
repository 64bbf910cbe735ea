"""The plan interpreter: executes any plan step by step with the kernel ABI's semantics.

It keeps a host copy and, for the opencl backend, a device copy of every tensor, so a plan
that forgets a transfer computes on stale data here exactly as on a real device. Math is
float32 by default (numpy's BLAS for GEMM); ``dtype=np.float64`` gives the float64 oracle
(gradient checks, the per-step verification).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from phonetrain.plan import Plan, PlanError, Step, uniform_fill

from .kernels import run_kernel


@dataclass
class ReferenceResult:
    """``losses``: float array, one per iteration (warm-up included); ``dumps``: the plan's
    dump tensors at the end, by tensor name, flat arrays of the tensor's dtype."""

    losses: np.ndarray
    dumps: dict[str, np.ndarray]


def _initial(t, root: Path, dtype) -> np.ndarray:
    kind = t.init.get("kind")
    npdt = np.int32 if t.dtype == "i32" else dtype
    if kind == "zeros":
        return np.zeros(t.numel, npdt)
    if kind == "uniform":
        return uniform_fill(int(t.init["seed"]), t.numel, float(t.init["low"]),
                            float(t.init["high"])).astype(npdt)
    if kind == "file":
        path = root / t.init["path"]
        raw = np.fromfile(path, "<i4" if t.dtype == "i32" else "<f4")
        if raw.size != t.numel:
            raise PlanError(f"{path}: {raw.size} elements, tensor {t.name} needs {t.numel}")
        return raw.astype(npdt)
    raise PlanError(f"tensor {t.name}: init kind {kind!r} unknown")


def _batches(plan: Plan, root: Path, dtype) -> dict[int, np.ndarray]:
    out = {}
    for b in plan.batches:
        t = plan.tensor(b.tensor)
        path = root / b.path
        raw = np.fromfile(path, "<i4" if t.dtype == "i32" else "<f4")
        if raw.size < b.count * t.numel:
            raise PlanError(f"{path}: {raw.size} elements, {b.count} batches of tensor "
                            f"{t.name} need {b.count * t.numel}")
        out[b.tensor] = raw[: b.count * t.numel].reshape(b.count, t.numel).astype(
            np.int32 if t.dtype == "i32" else dtype)
    return out


class Interpreter:
    """One plan's tensors (host copies, and device copies on the opencl backend) in ``dtype``,
    initialized as the plan says; :meth:`run_step` executes one plan step in place.
    ``sequential_gemm``: float32 GEMMs sum over K in sequence (:mod:`.kernels`).

    ``root``: the staging folder the plan's relative paths resolve under. Raises
    :class:`~phonetrain.plan.PlanError` naming a missing or short file.
    """

    def __init__(self, plan: Plan, root: str | Path, dtype=np.float32, *,
                 sequential_gemm: bool = False):
        self.plan = plan
        self.dtype = dtype
        self.sequential_gemm = sequential_gemm
        root = Path(root)
        self.host = [_initial(t, root, dtype) for t in plan.tensors]
        self.on_device = plan.backend == "opencl"
        self.dev = [h.copy() for h in self.host] if self.on_device else self.host
        self.batches = _batches(plan, root, dtype)
        self.counts = {b.tensor: b.count for b in plan.batches}

    def set_tensor(self, tid: int, values: np.ndarray) -> None:
        """Both copies of tensor ``tid`` := ``values`` (flat, cast to the tensor's dtype)."""
        arr = np.asarray(values).ravel().astype(self.host[tid].dtype)
        if arr.size != self.host[tid].size:
            raise PlanError(f"tensor {self.plan.tensor(tid).name}: {arr.size} values for "
                            f"{self.host[tid].size} elements")
        self.host[tid][:] = arr
        if self.on_device:
            self.dev[tid][:] = arr

    def run_step(self, s: Step, iteration: int) -> None:
        """Execute one plan step of iteration ``iteration`` (0-based, warm-up included)."""
        if s.op == "kernel":
            run_kernel(s.name, s.args, self.dev, sequential_gemm=self.sequential_gemm)
        elif s.op == "load":
            self.host[s.tensor][:] = self.batches[s.tensor][iteration % self.counts[s.tensor]]
        elif s.op == "h2d" or (s.op == "map" and s.access == "write"):
            self.dev[s.tensor][:] = self.host[s.tensor]
        elif s.op == "d2h" or (s.op == "map" and s.access == "read"):
            self.host[s.tensor][:] = self.dev[s.tensor]

    def iteration(self, iteration: int) -> float:
        """Run every step of one iteration; return the loss (NaN without a loss tensor)."""
        for s in self.plan.steps:
            self.run_step(s, iteration)
        lt = self.plan.loss_tensor
        return float(self.host[lt][0]) if lt >= 0 else math.nan

    def home(self, tid: int) -> np.ndarray:
        """The authoritative copy of tensor ``tid`` (its ``home``), as the runner dumps it."""
        t = self.plan.tensor(tid)
        return (self.dev if t.home == "device" else self.host)[tid]


def run_plan(plan: Plan | str | Path, root: str | Path, *, dtype=np.float32,
             overrides: Mapping[str, np.ndarray] | None = None,
             max_iterations: int | None = None) -> ReferenceResult:
    """Execute ``plan`` (a Plan or a plan.json path) with files under staging ``root``.

    Runs ``warmup + iterations`` iterations (or ``max_iterations``), reading the loss from the
    loss tensor's host copy after each. ``overrides`` replaces tensors' initial contents by
    name (gradient checks). Raises :class:`~phonetrain.plan.PlanError` naming a missing or
    short file, ``ValueError`` naming a kernel that fails.
    """
    if not isinstance(plan, Plan):
        plan = Plan.load(plan)
    interp = Interpreter(plan, root, dtype)
    for name, arr in (overrides or {}).items():
        interp.set_tensor(plan.by_name(name).id, arr)
    n_iter = plan.warmup + plan.iterations if max_iterations is None else max_iterations
    losses = np.array([interp.iteration(it) for it in range(n_iter)], np.float64)
    dumps = {plan.tensor(tid).name: interp.home(tid).copy() for tid in plan.dumps}
    return ReferenceResult(losses=losses, dumps=dumps)
