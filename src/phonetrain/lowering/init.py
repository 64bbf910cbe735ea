"""Seeded parameter initialization, written as bundle files so runner and reference start
from identical bytes."""

from __future__ import annotations

import math

import numpy as np

from ..models import Model


def init_params(model: Model, seed: int) -> dict[str, np.ndarray]:
    """``{"<layer>.weight": array, "<layer>.bias": array}`` (float32, C-contiguous).

    Scheme (PyTorch's default for ``nn.Linear`` and ``nn.Conv2d``: kaiming_uniform with
    ``a = sqrt(5)``, i.e. bound ``1/sqrt(fan_in)``): weight and bias ~ U(-1/sqrt(fan_in),
    1/sqrt(fan_in)), ``fan_in = in_features`` (Linear) or ``C*KH*KW`` (Conv2d). Each tensor
    draws from numpy's PCG64 seeded with ``[seed, index of the tensor]`` in float64, then
    rounds to float32.
    """
    shapes = model.shapes()
    out: dict[str, np.ndarray] = {}
    index = 0
    for layer, x in zip(model.layers, shapes):
        pshapes = layer.param_shapes(x)
        if not pshapes:
            continue
        bound = 1.0 / math.sqrt(layer.fan_in())
        for pname, shape in pshapes.items():
            rng = np.random.default_rng([seed, index])
            out[f"{layer.name}.{pname}"] = rng.uniform(-bound, bound, shape).astype(np.float32)
            index += 1
    return out
