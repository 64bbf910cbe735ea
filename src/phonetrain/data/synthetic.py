"""Seeded synthetic classification data of any shape (for the paper's 16-16 and 256-256 MLPs)."""

from __future__ import annotations

import math

import numpy as np


def make_synthetic(n: int, input_shape: tuple[int, ...], classes: int, seed: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(images float32 [n, *input_shape], labels int32 [n])``.

    Inputs ~ N(0, 1) iid; labels are the argmax of a fixed random linear "teacher"
    ``x @ T`` (T ~ N(0, 1), shape ``[numel, classes]``), so the task is learnable. Both
    come from numpy's PCG64 seeded with ``seed``.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, math.prod(input_shape)))
    teacher = rng.standard_normal((x.shape[1], classes))
    labels = np.argmax(x @ teacher, axis=1)
    return x.reshape(n, *input_shape).astype(np.float32), labels.astype(np.int32)
