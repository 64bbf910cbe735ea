"""Held-out evaluation of a finished run (``measure.eval_every`` > 0), part of the train stage.

The plan's checkpoints include :func:`phonetrain.config.eval_iterations`, so the runner keeps
its own parameters after every ``eval_every``-th measured iteration and the last one. For each
of those it kept, :func:`evaluate_run` runs the plan's forward kernels in numpy on those
parameters over the dataset's held-out split (:func:`phonetrain.data.load` with
``split="heldout"``; :func:`phonetrain.reference.evaluate`) and writes ``eval.json``::

    {"eval_every": 5, "dataset": "digits", "n_heldout": 359,
     "points": [{"iteration": 6, "measured_iteration": 5, "cumulative_wall_ms": 12.3,
                 "heldout_loss": 1.9, "heldout_accuracy": 0.41, "n_heldout": 359}, ...]}

``iteration`` counts from 0 with the warm-up included (as ``run.json``'s ``iters``);
``measured_iteration`` from 1 over the measured ones; ``cumulative_wall_ms`` is the sum of the
runner's per-iteration ``wall_ms`` over iterations ``0..iteration`` (warm-up included: the
warm-up iterations train too), so evaluation time itself is never counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from phonetrain import data as datasets
from phonetrain import layout, reference
from phonetrain.errors import StageError
from phonetrain.io import read_json, write_json
from phonetrain.models import get_model
from phonetrain.plan import Plan
from phonetrain.stages.specs import RunSpec


def heldout_split(s: RunSpec) -> tuple[np.ndarray, np.ndarray]:
    """The held-out split of a run's dataset: ``(images float32 [n, *shape], labels int32
    [n])``, read from the same folder as its batches (``dataset.path``). Raises
    :class:`~phonetrain.data.DatasetError` naming missing files."""
    m = get_model(s.model)
    opts: dict[str, Any] = {"folder": s.dataset_path} if s.dataset_path else {}
    return datasets.load(s.dataset, tuple(m.input_shape), m.classes,
                         seed=s.measure.seed, split="heldout", **opts)


def eval_points(run: dict[str, Any], every: int) -> list[dict[str, Any]]:
    """``[{"iteration", "measured_iteration", "cumulative_wall_ms"}]`` of a runner's
    ``run.json`` for ``eval_every`` = ``every``: every ``every``-th measured iteration and the
    last iteration, in order."""
    iters = run.get("iters", [])
    walls = np.cumsum([float(i["wall_ms"]) for i in iters])
    warm = sum(1 for i in iters if i.get("warmup"))
    out = []
    for it in range(len(iters)):
        m = it - warm + 1
        if m >= 1 and (m % every == 0 or it == len(iters) - 1):
            out.append({"iteration": it, "measured_iteration": m,
                        "cumulative_wall_ms": float(walls[it])})
    return out


def evaluate_run(plan_json: str | Path, root: str | Path, out_dir: str | Path,
                 s: RunSpec) -> dict[str, Any] | None:
    """Evaluate the runner output in ``out_dir`` (module docstring) and write
    ``out_dir/eval.json``; None (and no file) when ``measure.eval_every`` is 0. Raises
    :class:`StageError` when the runner kept none of the evaluation iterations' parameters
    (a plan lowered without them)."""
    every = s.measure.eval_every
    if every <= 0:
        return None
    out_dir = Path(out_dir)
    plan = Plan.load(plan_json)
    run = read_json(out_dir / layout.RUN)
    kept = {int(c["iteration"]) for c in run.get("checkpoints", [])}
    points = [q for q in eval_points(run, every) if q["iteration"] in kept]
    if not points:
        raise StageError(f"{out_dir}: measure.eval_every is {every} but the runner kept no "
                         "parameters at the evaluation iterations; re-lower the plan (its "
                         "checkpoints must include them)")
    x, y = heldout_split(s)
    for q in points:
        params = reference.read_checkpoint(out_dir, plan, q["iteration"])
        r = reference.evaluate(plan, root, params, x, y)
        q.update(heldout_loss=r.loss, heldout_accuracy=r.accuracy, n_heldout=r.n)
    doc = {"eval_every": every, "dataset": s.dataset, "n_heldout": int(len(y)),
           "points": points}
    write_json(doc, out_dir / layout.EVAL)
    return doc
