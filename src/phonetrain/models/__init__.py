"""The model zoo: layer graphs named for config (``get_model("lenet5")``).

See :mod:`phonetrain.models.zoo` for the models and :mod:`phonetrain.models.layers` for the
layer types. ``python -m phonetrain.lowering.model_table --markdown`` prints parameter counts and per-step
FLOPs (the source of ``docs/models.md``).
"""

from .layers import (BatchNorm2d, Conv2d, DepthwiseConv2d, Flatten, GlobalAvgPool2d, Layer,
                     Linear, MaxPool2d, ReLU, ReLU6, Residual, ShapeError, walk)
from .model import Model
from .zoo import MODELS, get_model, lenet5, mlp

__all__ = ["BatchNorm2d", "Conv2d", "DepthwiseConv2d", "Flatten", "GlobalAvgPool2d", "Layer",
           "Linear", "MaxPool2d", "ReLU", "ReLU6", "Residual", "ShapeError", "walk", "Model",
           "MODELS", "get_model", "lenet5", "mlp"]
