"""The reference's float32 sequential GEMM (the per-step verification's model of a device
kernel's K loop) gives the loop's sums bit for bit where it reduces a product tensor instead:
random float32 operands of LeNet-5's and the MLP's small-output shapes against a plain K loop."""

from __future__ import annotations

import numpy as np
import pytest

from phonetrain.reference import kernels


def _loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    prod = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        prod += a[:, k, None] * b[None, k, :]
    return prod


@pytest.mark.parametrize("M, N, K", [(6, 25, 25088), (16, 150, 3200), (10, 16, 32),
                                     (1, 1, 7), (32, 16, 784), (6, 25, 1), (150, 16, 3200)])
def test_the_sequential_sum_is_the_k_loop_bit_for_bit(M, N, K):
    rng = np.random.default_rng(M * 7919 + N * 31 + K)
    a = rng.standard_normal((M, K), dtype=np.float32) * 3
    b = rng.standard_normal((K, N), dtype=np.float32)
    got = kernels._sequential_sum(a, b)
    assert got.dtype == np.float32 and got.shape == (M, N)
    assert np.array_equal(got, _loop(a, b))
    # transposed operand views, as the GEMM kernels pass them
    got_t = kernels._sequential_sum(np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T)
    assert np.array_equal(got_t, _loop(a, b))


def test_the_reduction_is_taken_for_small_outputs_only():
    assert 6 * 25 <= kernels.SEQUENTIAL_REDUCE_MAX_MN < 150 * 16
