"""Seeded parameter initialization, written as bundle files so runner and reference start
from identical bytes."""

from __future__ import annotations

import math

import numpy as np

from ..models import Model, walk


def init_params(model: Model, seed: int) -> dict[str, np.ndarray]:
    """``{"<layer>.weight": array, "<layer>.bias": array}`` (float32, C-contiguous).

    Scheme (PyTorch's default for ``nn.Linear`` and ``nn.Conv2d``: kaiming_uniform with
    ``a = sqrt(5)``, i.e. bound ``1/sqrt(fan_in)``): weight and bias ~ U(-1/sqrt(fan_in),
    1/sqrt(fan_in)), ``fan_in = in_features`` (Linear) or ``C*KH*KW`` (Conv2d). Each tensor
    draws from numpy's PCG64 seeded with ``[seed, index of the tensor]`` in float64, then
    rounds to float32. Layers with a ``constant_init`` (batch norm: weight 1, bias 0, as
    PyTorch) take those values instead and draw nothing. Layers inside a residual block come
    in :func:`~phonetrain.models.walk` order; fan_in of a depthwise 3x3 convolution is 9.
    """
    out: dict[str, np.ndarray] = {}
    index = 0
    for layer, x in walk(model.layers, tuple(model.input_shape)):
        pshapes = layer.param_shapes(x)
        if not pshapes:
            continue
        const = getattr(layer, "constant_init", None)
        if const is not None:
            for pname, shape in pshapes.items():
                out[f"{layer.name}.{pname}"] = np.full(shape, const[pname], np.float32)
            continue
        bound = 1.0 / math.sqrt(layer.fan_in())
        for pname, shape in pshapes.items():
            rng = np.random.default_rng([seed, index])
            out[f"{layer.name}.{pname}"] = rng.uniform(-bound, bound, shape).astype(np.float32)
            index += 1
    return out


def init_state(model: Model) -> dict[str, np.ndarray]:
    """Initial non-trained state (float32): batch norm's ``running_mean`` zeros and
    ``running_var`` ones (PyTorch's), ``{"<layer>.running_mean": array, ...}``."""
    out: dict[str, np.ndarray] = {}
    for layer, _ in walk(model.layers, tuple(model.input_shape)):
        for sname, shape in getattr(layer, "state_shapes", dict)().items():
            out[f"{layer.name}.{sname}"] = np.full(shape, layer.constant_init[sname],
                                                   np.float32)
    return out
