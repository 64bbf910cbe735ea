"""Verification of one runner output folder: the per-step check (the verdict) and the
whole-trajectory comparison (a reported figure).

- Per step (:mod:`phonetrain.reference.steps`): every iteration the runner checkpointed, with
  its predecessor, recomputed from the runner's own state. The run passes when every checked
  step does.
- Whole trajectory: the reference runs the plan from the start for as many iterations as the
  runner did; the largest :func:`tensor_error` over the loss sequence and the final dumps is
  ``drift_max``, and ``drift_from_iteration`` the first iteration whose loss differs from the
  reference's by more than the per-step tolerance of the loss (the largest over the checked
  steps). Float32 trajectories drift apart through rounding and near-tie flips amplified by
  training; this says how far and from when, and judges nothing.
- A run without checkpoints (older plans, ``measure.checkpoints=[]``) falls back to judging
  the whole trajectory against ``atol`` (``measure.verify_atol``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from phonetrain import layout
from phonetrain.plan import Plan, PlanError

from .interpreter import run_plan
from .steps import TOLERANCE_SOURCE, check_step, checked_iterations


def tensor_error(run: np.ndarray, ref: np.ndarray) -> float:
    """``max_i |run_i - ref_i| / max(1, |ref_i|)``; ``inf`` for a shape mismatch or a non-finite
    value in ``run`` where ``ref`` is finite."""
    run = np.asarray(run, np.float64).ravel()
    ref = np.asarray(ref, np.float64).ravel()
    if run.shape != ref.shape:
        return math.inf
    if ref.size == 0:
        return 0.0
    diff = np.abs(run - ref)
    if not np.all(np.isfinite(diff)):
        return math.inf
    return float((diff / np.maximum(1.0, np.abs(ref))).max())


def verify(run_dumps, ref_dumps, run_losses=None, ref_losses=None):
    """Largest :func:`tensor_error` over every reference dump (a dump missing from the run
    counts as ``inf``) and over the loss sequence: how far two trajectories ended apart.

    Called as ``verify(plan, root, out_dir)`` (a :class:`~phonetrain.plan.Plan` first), it is
    :func:`verify_run_dir` and returns that dict.
    """
    if isinstance(run_dumps, Plan):
        return verify_run_dir(run_dumps, ref_dumps, run_losses)
    errs = [tensor_error(run_dumps[k], v) if k in run_dumps else math.inf
            for k, v in ref_dumps.items()]
    if ref_losses is not None:
        errs.append(math.inf if run_losses is None else tensor_error(run_losses, ref_losses))
    return max(errs, default=0.0)


def _read_tensors(folder: Path, plan: Plan, tids) -> dict[str, np.ndarray]:
    out = {}
    for tid in tids:
        t = plan.tensor(tid)
        p = folder / f"{t.name}.f32"
        if p.exists():
            out[t.name] = np.fromfile(p, "<i4" if t.dtype == "i32" else "<f4")
    return out


def read_dumps(dump_dir: str | Path, plan: Plan) -> dict[str, np.ndarray]:
    """The runner's ``dumps/<name>.f32`` files of ``plan``'s dump tensors (missing ones are
    left out, so :func:`verify` reports them as ``inf``)."""
    return _read_tensors(Path(dump_dir), plan, plan.dumps)


def read_checkpoint(out_dir: str | Path, plan: Plan, iteration: int) -> dict[str, np.ndarray]:
    """The runner's ``checkpoints/<iteration>/<name>.f32`` of the plan's checkpoint tensors."""
    return _read_tensors(Path(out_dir) / "checkpoints" / str(iteration), plan,
                         (plan.checkpoints or {}).get("tensors", []))


def check_steps(plan: Plan, root: str | Path, out_dir: str | Path,
                checkpointed: list[int]) -> list[dict]:
    """:func:`~phonetrain.reference.steps.check_step` of every checked iteration
    (:func:`~phonetrain.reference.steps.checked_iterations`), as JSON-ready dicts."""
    out = []
    for it in checked_iterations(checkpointed):
        before = None if it == 0 else read_checkpoint(out_dir, plan, it - 1)
        out.append(check_step(plan, root, it, before,
                              read_checkpoint(out_dir, plan, it)).to_json())
    return out


def _loss_bound(steps: list[dict], plan: Plan) -> float | None:
    if plan.loss_tensor < 0:
        return None
    name = plan.tensor(plan.loss_tensor).name
    bounds = [s["tensors"][name]["bound"] for s in steps if name in s["tensors"]]
    return max(bounds) if bounds else None


def trajectory(plan: Plan, root: str | Path, run: dict, run_dumps: dict, steps: list[dict]
               ) -> dict:
    """The whole-trajectory comparison (module docstring) of a run of ``len(run["iters"])``
    iterations."""
    run_losses = [math.nan if it.get("loss") is None else it["loss"] for it in run.get("iters", [])]
    ref = run_plan(plan, root, max_iterations=len(run_losses) or None)
    errs = {k: (tensor_error(run_dumps[k], v) if k in run_dumps else math.inf)
            for k, v in ref.dumps.items()}
    loss_err = tensor_error(np.asarray(run_losses, np.float64), ref.losses)
    bound = _loss_bound(steps, plan)
    since = None
    if bound is not None and len(run_losses) == len(ref.losses):
        over = np.nonzero(~(np.abs(np.asarray(run_losses) - ref.losses) <= bound))[0]
        since = int(over[0]) if over.size else None
    worst = max(errs, key=errs.get, default="loss")
    if not errs or loss_err >= errs[worst]:
        worst = "loss"
    return {"drift_max": max([loss_err, *errs.values()]), "drift_from_iteration": since,
            "loss_bound": bound, "loss_err": loss_err, "tensor_errs": errs, "worst": worst,
            "ref_losses": ref.losses.tolist(), "run_losses": run_losses}


def verify_run_dir(plan: Plan, root: str | Path, out_dir: str | Path,
                   atol: float | None = None) -> dict:
    """Verify one runner output folder (``run.json``, ``dumps/``, ``checkpoints/``) against
    the reference on ``plan`` and the files under staging ``root``.

    Returns ``{"method": "per-step" | "trajectory", "ok", "max_abs_err", "tolerance",
    "worst": {...}, "steps": [...], "trajectory": {...}, "tolerance_source"}``: with
    checkpoints, ``max_abs_err``/``tolerance`` are the worst checked tensor's error and bound
    (the largest ratio) and ``ok`` the per-step verdict; without, the trajectory's
    ``drift_max`` against ``atol`` (``ok`` None when ``atol`` is None). Raises
    :class:`~phonetrain.plan.PlanError` if ``run.json`` is missing or unreadable.
    """
    out_dir = Path(out_dir)
    try:
        run = json.loads((out_dir / layout.RUN).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise PlanError(f"{out_dir / 'run.json'}: cannot read the runner's output ({e})") from None
    checkpointed = [int(c["iteration"]) for c in run.get("checkpoints", [])]
    steps = check_steps(plan, root, out_dir, checkpointed) if checkpointed else []
    traj = trajectory(plan, Path(root), run, read_dumps(out_dir / layout.DUMPS, plan), steps)
    doc = {"trajectory": traj, "steps": steps, "tolerance_source": TOLERANCE_SOURCE}
    if steps:
        w = max(steps, key=lambda s: -1 if s["ratio"] is None else s["ratio"])
        bad = [s["iteration"] for s in steps if not s["ok"]]
        doc.update(method="per-step", ok=not bad, max_abs_err=w["error"], tolerance=w["bound"],
                   worst={"iteration": w["iteration"], "tensor": w["worst_tensor"],
                          "ratio": w["ratio"]},
                   failed_iterations=bad)
    else:
        err = traj["drift_max"]
        doc.update(method="trajectory", max_abs_err=err, tolerance=atol,
                   ok=None if atol is None else bool(err <= atol),
                   worst={"tensor": traj["worst"]}, failed_iterations=[],
                   tolerance_source="measure.verify_atol on the whole trajectory (the run "
                                    "has no checkpoints)")
    return doc
