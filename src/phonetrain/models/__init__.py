"""The model zoo: layer graphs named for config (``get_model("lenet5")``).

See :mod:`phonetrain.models.zoo` for the models and :mod:`phonetrain.models.layers` for the
layer types. ``python -m phonetrain.lowering.model_table --markdown`` prints parameter counts and per-step
FLOPs (the source of ``docs/models.md``).
"""

from .layers import Conv2d, Flatten, Layer, Linear, MaxPool2d, ReLU, ShapeError
from .model import Model
from .zoo import MODELS, get_model, lenet5, mlp

__all__ = ["Conv2d", "Flatten", "Layer", "Linear", "MaxPool2d", "ReLU", "ShapeError", "Model",
           "MODELS", "get_model", "lenet5", "mlp"]
