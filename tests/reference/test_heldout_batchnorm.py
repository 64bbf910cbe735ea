"""Held-out evaluation normalizes with batch norm's running statistics (inference mode), not
with the held-out batch's own: the test builds running statistics that differ from the batch's
and checks which ones the held-out forward used."""

from __future__ import annotations

import numpy as np
import pytest

from phonetrain import data, reference
from phonetrain.lowering import LowerSpec, write_plan_dir
from phonetrain.plan import Plan
from phonetrain.reference.heldout import logits_tensor
from phonetrain.reference.kernels import run_kernel

MODEL = "mobilenetv2_small"
BATCH = 8


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("bn_eval")
    spec = LowerSpec(model=MODEL, batch_size=BATCH, dataset="digits", num_batches=1,
                     warmup=0, iterations=1, plan_id="bn_eval")
    data.write_batches("digits", BATCH, 1, root, seed=0)
    plan = Plan.load(write_plan_dir(spec, root) / "plan.json")
    it = reference.Interpreter(plan, root)
    params = {t.name: it.home(t.id).copy() for t in plan.tensors
              if t.role in ("param", "state")}
    x, y = data.load("digits", split="heldout")
    return plan, root, params, x[:BATCH], y[:BATCH]


def _training_forward(plan, root, params, x, y):
    """The plan's forward in training mode: (mean loss, per-layer batch mean and biased
    variance of every batch norm, by running-statistic tensor name)."""
    it = reference.Interpreter(plan, root)
    for name, v in params.items():
        it.set_tensor(plan.by_name(name).id, v)
    it.set_tensor(plan.by_name("input").id, x)
    it.set_tensor(plan.by_name("labels").id, y)
    stats = {}
    for s in (s for s in plan.steps if s.op == "kernel" and s.phase == "forward"):
        run_kernel(s.name, s.args, it.dev)
        if s.name == "batchnorm_stats":
            t = [int(a["t"]) for a in s.args if "t" in a]   # X, mean, invstd, rm, rv
            eps = s.args[3]["f"]
            stats[plan.tensor(t[3]).name] = it.dev[t[1]].copy()
            stats[plan.tensor(t[4]).name] = 1.0 / it.dev[t[2]].astype(np.float64) ** 2 - eps
    z = it.dev[logits_tensor(plan)].reshape(BATCH, -1).astype(np.float64)
    lse = z.max(1) + np.log(np.exp(z - z.max(1)[:, None]).sum(1))
    return float((lse - z[np.arange(BATCH), y]).mean()), stats


def test_heldout_uses_running_statistics(setup):
    plan, root, params, x, y = setup
    train_loss, batch_stats = _training_forward(plan, root, params, x, y)
    # initial running statistics (mean 0, variance 1) differ from this batch's
    assert any(np.abs(v - params[k]).max() > 0.1 for k, v in batch_stats.items())
    initial = reference.evaluate(plan, root, params, x, y)
    assert abs(initial.loss - train_loss) > 1e-3
    # running statistics set to this batch's statistics: inference mode equals training mode
    matched = {**params, **{k: v.astype(np.float32) for k, v in batch_stats.items()}}
    same = reference.evaluate(plan, root, matched, x, y)
    assert same.loss == pytest.approx(train_loss, rel=1e-4)
    # the running statistics given are read, never updated
    assert all(np.array_equal(matched[k], batch_stats[k].astype(np.float32))
               for k in batch_stats)


def test_heldout_sample_result_does_not_depend_on_its_batch(setup):
    plan, root, params, x, y = setup
    one = reference.evaluate(plan, root, params, x[:1], y[:1])   # a batch of copies of x[0]
    full = reference.evaluate(plan, root, params, x, y)
    alone = [reference.evaluate(plan, root, params, x[i:i + 1], y[i:i + 1]).loss
             for i in range(BATCH)]
    assert one.loss == alone[0]
    assert full.loss == pytest.approx(np.mean(alone), rel=1e-5)
