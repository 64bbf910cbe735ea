"""Finite-difference gradient checks, in float64, of the mobile CNN operators of the numpy
reference (src/phonetrain/reference/mobile.py; ABI: src/kernels/README.md, "Mobile CNN
operators") and of convolution with padding and stride (im2col + GEMM + col2im), plus the
whole lowered MobileNetV2-style step, whose residual blocks sum two gradients of one tensor.

Each check takes ``L = sum(G * f(inputs))`` for a fixed random ``G`` and compares the
backward kernels' gradient with central differences ``(L(x + h) - L(x - h)) / 2h``.
"""

from __future__ import annotations

import numpy as np
import pytest

from phonetrain import reference
from phonetrain.lowering import LowerSpec, write_bundle
from phonetrain.plan import Plan

H_STEP = 1e-6
RTOL = 1e-6


def run(name: str, *args) -> None:
    """One reference kernel on float64 arrays / ints / floats, in place."""
    arrays, enc = [], []
    for a in args:
        if isinstance(a, np.ndarray):
            enc.append({"t": len(arrays)})
            arrays.append(a)
        elif isinstance(a, float):
            enc.append({"f": a})
        else:
            enc.append({"i": a})
    reference.run_kernel(name, enc, arrays)


def numeric_grad(loss, x: np.ndarray) -> np.ndarray:
    """Central differences of ``loss()`` with respect to every element of ``x`` (in place)."""
    g = np.zeros_like(x)
    for i in range(x.size):
        old = x[i]
        x[i] = old + H_STEP
        up = loss()
        x[i] = old - H_STEP
        down = loss()
        x[i] = old
        g[i] = (up - down) / (2 * H_STEP)
    return g


def assert_grad(analytic: np.ndarray, numeric: np.ndarray, what: str) -> None:
    scale = max(1.0, float(np.abs(numeric).max()))
    err = float(np.abs(analytic - numeric).max()) / scale
    assert err < RTOL, f"{what}: max |analytic - numeric| / scale = {err:.2e}"


def rand(rng, n, low=-1.0, high=1.0) -> np.ndarray:
    return rng.uniform(low, high, n)


@pytest.mark.parametrize("B,C,H,W,stride,pad", [(2, 3, 5, 4, 1, 1), (1, 2, 7, 6, 2, 1),
                                                (2, 1, 4, 5, 2, 0), (1, 1, 1, 1, 1, 1)])
def test_depthwise_3x3_gradients(B, C, H, W, stride, pad):
    rng = np.random.default_rng(1)
    OH, OW = (H + 2 * pad - 3) // stride + 1, (W + 2 * pad - 3) // stride + 1
    dims = [B, C, H, W, stride, pad, OH, OW]
    x, wt, G = rand(rng, B * C * H * W), rand(rng, C * 9), rand(rng, B * C * OH * OW)

    def loss() -> float:
        y = np.zeros(B * C * OH * OW)
        run("dwconv3x3_fwd", *dims, x, wt, y)
        return float(G @ y)

    dx, dw = np.full(x.size, np.nan), np.full(wt.size, np.nan)
    run("dwconv3x3_bwd_data", *dims, G, wt, dx)
    run("dwconv3x3_bwd_weight", *dims, x, G, dw)
    assert_grad(dx, numeric_grad(loss, x), "dwconv3x3_bwd_data")
    assert_grad(dw, numeric_grad(loss, wt), "dwconv3x3_bwd_weight")


@pytest.mark.parametrize("B,C,H,W,OC,K,stride,pad", [(2, 2, 5, 6, 3, 3, 2, 1),
                                                     (1, 3, 6, 5, 2, 3, 1, 1),
                                                     (2, 1, 7, 7, 2, 1, 2, 0)])
def test_convolution_with_padding_and_stride_gradients(B, C, H, W, OC, K, stride, pad):
    """The Conv2d path (im2col, gemm_nn, swap01; backward swap01, gemm_nt, gemm_tn,
    col2im) already takes stride and padding; checked here as the lowering chains it."""
    rng = np.random.default_rng(2)
    OH, OW = (H + 2 * pad - K) // stride + 1, (W + 2 * pad - K) // stride + 1
    ckk, cols = C * K * K, B * OH * OW
    dims = [B, C, H, W, K, K, stride, pad, OH, OW]
    x, wt, G = rand(rng, B * C * H * W), rand(rng, OC * ckk), rand(rng, B * OC * OH * OW)

    def forward():
        col, yc, y = np.zeros(ckk * cols), np.zeros(OC * cols), np.zeros(OC * cols)
        run("im2col", *dims, x, col)
        run("gemm_nn", OC, cols, ckk, 1.0, wt, col, 0.0, yc)
        run("swap01", OC, B, OH * OW, yc, y)
        return col, y

    col, _ = forward()
    dyc, dw, dcol, dx = (np.zeros(OC * cols), np.zeros(OC * ckk), np.zeros(ckk * cols),
                         np.zeros(x.size))
    run("swap01", B, OC, OH * OW, G, dyc)
    run("gemm_nt", OC, ckk, cols, 1.0, dyc, col, 0.0, dw)
    run("gemm_tn", ckk, cols, OC, 1.0, wt, dyc, 0.0, dcol)
    run("col2im", *dims, dcol, dx)
    loss = lambda: float(G @ forward()[1])  # noqa: E731
    assert_grad(dx, numeric_grad(loss, x), "conv dX")
    assert_grad(dw, numeric_grad(loss, wt), "conv dW")


@pytest.mark.parametrize("B,C,HW", [(3, 2, 5), (2, 3, 1), (1, 2, 7)])
def test_batchnorm_training_gradients_and_running_statistics(B, C, HW):
    rng = np.random.default_rng(3)
    n = B * C * HW
    x, gamma, beta, G = rand(rng, n, -2, 3), rand(rng, C, 0.5, 1.5), rand(rng, C), rand(rng, n)
    eps, momentum = 1e-5, 0.1

    def forward():
        mean, invstd, rm, rv = np.zeros(C), np.zeros(C), np.full(C, 0.5), np.full(C, 2.0)
        y = np.zeros(n)
        run("batchnorm_stats", B, C, HW, eps, momentum, x, mean, invstd, rm, rv)
        run("batchnorm_apply", B, C, HW, x, mean, invstd, gamma, beta, y)
        return mean, invstd, rm, rv, y

    mean, invstd, rm, rv, _ = forward()
    xc = x.reshape(B, C, HW).transpose(1, 0, 2).reshape(C, -1)
    # PyTorch's BatchNorm2d: biased variance normalizes, the unbiased one updates running_var
    np.testing.assert_allclose(mean, xc.mean(1), rtol=1e-12)
    np.testing.assert_allclose(invstd, 1 / np.sqrt(xc.var(1) + eps), rtol=1e-12)
    np.testing.assert_allclose(rm, 0.9 * 0.5 + 0.1 * xc.mean(1), rtol=1e-12)
    np.testing.assert_allclose(rv, 0.9 * 2.0 + 0.1 * xc.var(1, ddof=1), rtol=1e-12)
    dgamma, dbeta, dx = np.zeros(C), np.zeros(C), np.zeros(n)
    run("batchnorm_bwd_reduce", B, C, HW, x, G, mean, invstd, dgamma, dbeta)
    run("batchnorm_bwd_data", B, C, HW, x, G, mean, invstd, gamma, dgamma, dbeta, dx)
    loss = lambda: float(G @ forward()[4])  # noqa: E731
    assert_grad(dx, numeric_grad(loss, x), "batchnorm dX")
    assert_grad(dgamma, numeric_grad(loss, gamma), "batchnorm dgamma")
    assert_grad(dbeta, numeric_grad(loss, beta), "batchnorm dbeta")


def test_relu6_add_and_global_average_pool_gradients():
    rng = np.random.default_rng(4)
    n = 41
    x = rand(rng, n, -3, 9)
    x[np.abs(x) < 0.01] += 0.1          # keep finite differences away from the kinks
    x[np.abs(x - 6) < 0.01] += 0.1
    G = rand(rng, n)
    y = np.zeros(n)

    def relu6() -> float:
        run("relu6_fwd", n, x, y)
        return float(G @ y)

    relu6()
    dx = np.zeros(n)
    run("relu6_bwd", n, y.copy(), G, dx)
    assert_grad(dx, numeric_grad(relu6, x), "relu6_bwd")
    assert (dx[(x < 0) | (x > 6)] == 0).all() and (dx[(x > 0) & (x < 6)] != 0).all()

    a, b = rand(rng, n), rand(rng, n)

    def add() -> float:
        run("add", n, a, b, y)
        return float(G @ y)
    # the backward of add is the identity fan-out: both inputs get dY
    assert_grad(G, numeric_grad(add, a), "add dA")
    assert_grad(G, numeric_grad(add, b), "add dB")

    B, C, HW = 2, 3, 7
    xg, Gg, yg = rand(rng, B * C * HW), rand(rng, B * C), np.zeros(B * C)

    def gap() -> float:
        run("gap_fwd", B, C, HW, xg, yg)
        return float(Gg @ yg)

    dxg = np.zeros(B * C * HW)
    run("gap_bwd", B, C, HW, Gg, dxg)
    assert_grad(dxg, numeric_grad(gap, xg), "gap_bwd")


def test_lowered_mobilenet_step_gradients_match_finite_differences(tmp_path):
    """The whole lowered step of mobilenetv2_small in float64: the gradients the plan
    computes (through batch norm, depthwise convolutions, ReLU6, global average pooling and
    both residual blocks, whose inputs' gradients are the sum of the body's and the skip's)
    equal finite differences of the plan's own loss."""
    spec = LowerSpec(model="mobilenetv2_small", batch_size=2, backend="cpu", num_batches=1,
                     warmup=0, iterations=1, dumps="grads", checkpoints=())
    plan = Plan.load(write_bundle(spec, tmp_path, seed=0))
    base = reference.run_plan(plan, tmp_path, dtype=np.float64)
    init = {t.name: np.fromfile(tmp_path / t.init["path"], "<f4").astype(np.float64)
            for t in plan.tensors if t.role == "param"}
    # parameters before, inside and after the residual blocks; a few elements of each
    for name in ("stem.weight", "stem_bn.weight", "b1_expand.weight", "b1_dw.weight",
                 "b1_project_bn.bias", "b2_dw.weight", "b3_project.weight", "fc.bias"):
        grad = base.dumps[f"{name}.grad"]
        for i in np.random.default_rng(5).choice(init[name].size, 2, replace=False):
            losses = []
            for h in (H_STEP, -H_STEP):
                p = init[name].copy()
                p[i] += h
                losses.append(reference.run_plan(plan, tmp_path, dtype=np.float64,
                                                 overrides={name: p}).losses[0])
            numeric = (losses[0] - losses[1]) / (2 * H_STEP)
            assert abs(grad[i] - numeric) <= 1e-6 * max(1.0, abs(numeric)), \
                f"{name}[{i}]: plan gradient {grad[i]:.9g}, finite difference {numeric:.9g}"
