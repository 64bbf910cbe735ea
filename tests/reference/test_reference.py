"""The numpy reference: float64 finite-difference gradient checks, a hand-derived SGD run,
placement invariance, transfer modelling, verification policy."""

from dataclasses import replace

import numpy as np
import pytest

from phonetrain.config import MeasureConfig
from phonetrain import reference
from phonetrain.lowering import LowerSpec, init_params, write_bundle
from phonetrain.models import MODELS, get_model
from phonetrain.plan import Plan
from phonetrain.reference.interpreter import Interpreter

# Small instances: batch 2, and 2 batches of data.
VERIFY_ATOL = MeasureConfig.verify_atol  # the study's tolerance


GRAD_BATCH = 2


def _bundle(tmp_path, **kw):
    spec = LowerSpec(**{"batch_size": GRAD_BATCH, "num_batches": 2, "warmup": 0,
                        "iterations": 1, **kw})
    return spec, Plan.load(write_bundle(spec, tmp_path, seed=3))


def _forward_loss(plan, root, overrides=None) -> float:
    """Iteration 0's loss in float64 from the plan's load, forward and loss steps only (the
    backward and update steps come after the loss and cannot change it; a cpu-backend plan
    keeps one copy of each tensor, so nothing is left to copy back)."""
    assert plan.backend == "cpu"
    interp = Interpreter(plan, root, np.float64)
    for name, arr in (overrides or {}).items():
        interp.set_tensor(plan.by_name(name).id, arr)
    for s in plan.steps:
        if s.phase in ("backward", "update"):
            break
        interp.run_step(s, 0)
    return float(interp.host[plan.loss_tensor][0])


@pytest.mark.parametrize("model", sorted(MODELS))
def test_gradients_match_central_differences_float64(tmp_path, model):
    """Every parameter tensor: analytic gradient (the plan's backward kernels, run in float64)
    vs (L(p + eps) - L(p - eps)) / 2 eps at 6 random elements; relative error <= 1e-6."""
    spec, plan = _bundle(tmp_path, model=model, dataset="synthetic", dumps="grads")
    whole = reference.run_plan(plan, tmp_path, dtype=np.float64, max_iterations=1)
    grads = whole.dumps
    assert _forward_loss(plan, tmp_path) == whole.losses[0]  # the loss of the whole iteration
    params = {k: v.astype(np.float64) for k, v in init_params(get_model(model), 0).items()}
    rng = np.random.default_rng(1)
    eps = 1e-6
    for name, p in params.items():
        g = grads[f"{name}.grad"]
        assert g.shape == (p.size,) and np.all(np.isfinite(g))
        for idx in rng.choice(p.size, size=min(6, p.size), replace=False):
            losses = []
            for sign in (1, -1):
                q = p.ravel().copy()
                q[idx] += sign * eps
                losses.append(_forward_loss(plan, tmp_path, {name: q}))
            fd = (losses[0] - losses[1]) / (2 * eps)
            assert abs(fd - g[idx]) <= 1e-6 * max(1.0, abs(fd)) + 1e-9, (name, idx, fd, g[idx])


def _hand_mlp_16_16(x, y, W, b, lr, momentum, wd, iters):
    """Softmax regression by hand: logits = x W^T + b, L = mean(-log softmax[y]),
    dL/dlogits = (softmax - onehot) / B; PyTorch SGD with momentum and weight decay."""
    W, b = W.astype(np.float64), b.astype(np.float64)
    vW, vb = np.zeros_like(W), np.zeros_like(b)
    losses = []
    for it in range(iters):
        xb, yb = x[it % len(x)].astype(np.float64), y[it % len(y)]
        B = len(yb)
        z = xb @ W.T + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        losses.append(-np.log(p[np.arange(B), yb]).mean())
        d = p.copy()
        d[np.arange(B), yb] -= 1
        d /= B
        gW, gb = d.T @ xb + wd * W, d.sum(0) + wd * b
        vW, vb = momentum * vW + gW, momentum * vb + gb
        W, b = W - lr * vW, b - lr * vb
    return np.array(losses), W, b


def test_three_sgd_iterations_match_hand_derivation(tmp_path):
    spec = LowerSpec(model="mlp_16_16", batch_size=4, num_batches=2, warmup=0, iterations=3,
                     lr=0.5, momentum=0.9, weight_decay=0.01, dumps="params")
    plan = Plan.load(write_bundle(spec, tmp_path, seed=5))
    res = reference.run_plan(plan, tmp_path)
    x = np.fromfile(tmp_path / plan.batches[0].path, "<f4").reshape(2, 4, 16)
    y = np.fromfile(tmp_path / plan.batches[1].path, "<i4").reshape(2, 4)
    p0 = init_params(get_model("mlp_16_16"), 0)
    losses, W, b = _hand_mlp_16_16(x, y, p0["fc1.weight"], p0["fc1.bias"], 0.5, 0.9, 0.01, 3)
    np.testing.assert_allclose(res.losses, losses, rtol=2e-6)
    assert losses[2] < losses[0]  # batch 0 again after one step on each batch: it learned
    np.testing.assert_allclose(res.dumps["fc1.weight"], W.ravel(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res.dumps["fc1.bias"], b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_placements_give_identical_losses(tmp_path, model):
    base = LowerSpec(model=model, batch_size=4, num_batches=2, warmup=1, iterations=2,
                     momentum=0.9, dataset="synthetic", dumps="all")
    results = {}
    for backend, placement, transfer in [("cpu", None, None), ("opencl", "resident", "copy"),
                                         ("opencl", "staged", "copy"),
                                         ("opencl", "staged", "map"),
                                         ("opencl", "resident", "map")]:
        spec = replace(base, backend=backend, placement=placement, transfer=transfer)
        results[(backend, placement, transfer)] = reference.run_plan(
            write_bundle(spec, tmp_path), tmp_path)
    first = results[("cpu", None, None)]
    assert np.all(np.isfinite(first.losses)) and len(first.losses) == 3
    for key, r in results.items():
        np.testing.assert_array_equal(r.losses, first.losses, err_msg=str(key))
        assert r.dumps.keys() == first.dumps.keys()
        for name in first.dumps:
            np.testing.assert_array_equal(r.dumps[name], first.dumps[name], err_msg=name)


def test_dropped_input_upload_changes_the_losses(tmp_path):
    """The reference keeps separate host and device copies: dropping the input upload from a
    resident plan makes the device train on zeros, and the losses change."""
    spec = LowerSpec(model="mlp_16_16", batch_size=4, num_batches=2, backend="opencl",
                     placement="resident", transfer="copy", warmup=0, iterations=3)
    plan = Plan.load(write_bundle(spec, tmp_path))
    good = reference.run_plan(plan, tmp_path).losses
    x = plan.by_name("input").id
    plan.steps = [s for s in plan.steps if not (s.op == "h2d" and s.tensor == x)]
    bad = reference.run_plan(plan, tmp_path).losses
    assert not np.allclose(good, bad)


def test_im2col_col2im_are_adjoint():
    rng = np.random.default_rng(0)
    B, C, H, W, K, s, p = 2, 3, 7, 6, 3, 2, 1
    OH, OW = (H + 2 * p - K) // s + 1, (W + 2 * p - K) // s + 1
    x = rng.standard_normal(B * C * H * W).astype(np.float64)
    c = rng.standard_normal(C * K * K * B * OH * OW).astype(np.float64)
    col, dx = np.zeros_like(c), np.zeros_like(x)
    ints = [{"i": v} for v in (B, C, H, W, K, K, s, p, OH, OW)]
    reference.run_kernel("im2col", ints + [{"t": 0}, {"t": 1}], [x, col])
    reference.run_kernel("col2im", ints + [{"t": 0}, {"t": 1}], [c, dx])
    assert np.isclose(col @ c, x @ dx)
    # spot check one entry of im2col against the ABI formula
    ci, kh, kw, b, oh, ow = 1, 2, 0, 1, 1, 2
    h, w = oh * s - p + kh, ow * s - p + kw
    row, colidx = (ci * K + kh) * K + kw, (b * OH + oh) * OW + ow
    assert col[row * (B * OH * OW) + colidx] == x.reshape(B, C, H, W)[b, ci, h, w]


def test_maxpool_argmax_is_first_maximum():
    x = np.array([1, 5, 5, 0, 2, 2, 2, 2, 7, 7, 0, 0, 7, 7, 0, 0], np.float32)  # 1x1x4x4
    y, am, dx = np.zeros(4, np.float32), np.zeros(4, np.int32), np.zeros(16, np.float32)
    ints = [{"i": v} for v in (1, 1, 4, 4, 2, 2, 2, 2)]
    reference.run_kernel("maxpool_fwd", ints + [{"t": 0}, {"t": 1}, {"t": 2}], [x, y, am])
    assert y.tolist() == [5, 5, 7, 2] or y.tolist() == [5, 5, 7, 0]
    assert am.tolist()[:3] == [1, 2, 8]
    dy = np.array([1, 2, 3, 4], np.float32)
    reference.run_kernel("maxpool_bwd", ints + [{"t": 0}, {"t": 1}, {"t": 2}], [dy, am, dx])
    assert dx[1] == 1 and dx[2] == 2 and dx[8] == 3 and dx.sum() == 10


def test_run_kernel_rejects_bad_signature():
    with pytest.raises(ValueError, match="gemm_nn"):
        reference.run_kernel("gemm_nn", [{"i": 1}], [])
    with pytest.raises(ValueError, match="not in the kernel ABI"):
        reference.run_kernel("conv_magic", [], [])


def test_verify_error_is_absolute_below_1_relative_above_and_inf_when_missing():
    ref = {"w": np.array([1.0, -2.0, 300.0])}
    assert reference.verify({"w": ref["w"] + 1e-5}, ref) < VERIFY_ATOL
    # relative above magnitude 1: 0.03 off on 300 is 1e-4; absolute below
    assert reference.verify({"w": ref["w"] + [0, 0, 0.03]}, ref) == pytest.approx(1e-4)
    assert reference.verify({"w": ref["w"] + [0.01, 0, 0]}, ref) > VERIFY_ATOL
    assert reference.verify({}, ref) == np.inf
    assert reference.verify({"w": np.array([np.nan, 0, 0])}, ref) == np.inf
    assert reference.verify(ref, ref, [2.0, 1.0], [2.0, 1.0]) == 0
    assert reference.verify(ref, ref, None, [2.0]) == np.inf


def test_short_batch_file_error_names_the_file(tmp_path):
    spec, plan = _bundle(tmp_path, model="mlp_16_16", dataset="synthetic")
    path = tmp_path / plan.batches[0].path
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(Exception, match="images.f32"):
        reference.run_plan(plan, tmp_path)
