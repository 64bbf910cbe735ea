"""The reference's summation order, shared by its kernel modules (:mod:`.kernels`,
:mod:`.mobile`): float32 sums run in sequence, as the baseline kernels and the runner's CPU
backend add them; wider types sum pairwise (numpy's default)."""

from __future__ import annotations

import numpy as np


def sum_last(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis: in sequence for float32 (``np.add.accumulate``), pairwise for
    wider types."""
    if x.dtype == np.float32 and x.shape[-1] > 0:
        return np.add.accumulate(x, axis=-1)[..., -1]
    return x.sum(axis=-1)
