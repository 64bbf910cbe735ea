"""The models of the study, by config name.

The paper's MLPs (Das et al., PerCom Workshops 2022) are named by their layer widths, input
first: ``mlp_784_256_128_16`` has Linear 784->256, ReLU, Linear 256->128, ReLU,
Linear 128->16. Every hidden Linear is followed by a ReLU; the last Linear produces the logits
of a softmax cross-entropy loss.
"""

from __future__ import annotations

from .layers import Conv2d, Flatten, Layer, Linear, MaxPool2d, ReLU
from .model import Model


def mlp(widths: list[int], input_shape: tuple[int, ...] | None = None,
        dataset: str = "synthetic") -> Model:
    """An MLP with Linear layers ``widths[i] -> widths[i+1]`` and ReLU between them.

    ``input_shape`` defaults to ``(widths[0],)``; an image shape gets a leading Flatten.
    Classes = ``widths[-1]``.
    """
    shape = input_shape or (widths[0],)
    layers: list[Layer] = [Flatten("flatten")] if len(shape) > 1 else []
    n = len(widths) - 1
    for i in range(n):
        layers.append(Linear(f"fc{i + 1}", widths[i], widths[i + 1]))
        if i < n - 1:
            layers.append(ReLU(f"relu{i + 1}"))
    name = "mlp_" + "_".join(str(w) for w in widths)
    return Model(name, shape, widths[-1], tuple(layers), dataset)


def lenet5() -> Model:
    """LeNet-5 (LeCun et al. 1998) adapted to 28x28x1 MNIST-shaped input, as in most modern
    re-implementations: ReLU instead of scaled tanh, max pooling instead of trainable
    subsampling, full C3 connectivity, 10 linear outputs instead of RBF units. Exact layers::

        conv1  Conv2d(1 -> 6, 5x5, stride 1, pad 2)   (1,28,28) -> (6,28,28)    156 params
        relu1, pool1 MaxPool2d(2, stride 2)           -> (6,14,14)
        conv2  Conv2d(6 -> 16, 5x5, stride 1, pad 0)  -> (16,10,10)            2416 params
        relu2, pool2 MaxPool2d(2, stride 2)           -> (16,5,5)
        flatten                                       -> (400,)
        fc1    Linear(400 -> 120), relu3                                      48120 params
        fc2    Linear(120 -> 84), relu4                                       10164 params
        fc3    Linear(84 -> 10)  (logits)                                       850 params

    61,706 parameters in all.
    """
    layers: tuple[Layer, ...] = (
        Conv2d("conv1", 1, 6, 5, 1, 2), ReLU("relu1"), MaxPool2d("pool1", 2, 2),
        Conv2d("conv2", 6, 16, 5, 1, 0), ReLU("relu2"), MaxPool2d("pool2", 2, 2),
        Flatten("flatten"),
        Linear("fc1", 400, 120), ReLU("relu3"),
        Linear("fc2", 120, 84), ReLU("relu4"),
        Linear("fc3", 84, 10),
    )
    return Model("lenet5", (1, 28, 28), 10, layers, "digits")


def _build() -> dict[str, Model]:
    models = [
        mlp([784, 256, 128, 16], input_shape=(1, 28, 28), dataset="digits"),
        mlp([16, 16]),
        mlp([16, 16, 16, 16]),
        mlp([256, 256]),
        lenet5(),
    ]
    return {m.name: m for m in models}


MODELS: dict[str, Model] = _build()


def get_model(name: str) -> Model:
    """The model called ``name``; raises ``KeyError`` listing the known names."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(MODELS)} "
                       "(add one in src/phonetrain/models/zoo.py)") from None
