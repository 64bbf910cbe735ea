"""The models of the study, by config name.

The paper's MLPs (Das et al., PerCom Workshops 2022) are named by their layer widths, input
first: ``mlp_784_256_128_16`` has Linear 784->256, ReLU, Linear 256->128, ReLU,
Linear 128->16. Every hidden Linear is followed by a ReLU; the last Linear produces the logits
of a softmax cross-entropy loss.
"""

from __future__ import annotations

from .layers import (BatchNorm2d, Conv2d, DepthwiseConv2d, Flatten, GlobalAvgPool2d, Layer,
                     Linear, MaxPool2d, ReLU, ReLU6, Residual)
from .model import Model

# The two input formats of the CNNs below: digits/MNIST/Fashion-MNIST, and CIFAR-10 (or
# synthetic data of that shape when CIFAR-10's files are not provided).
GRAY28 = (1, 28, 28)
RGB32 = (3, 32, 32)


def _variant(base: str, input_shape: tuple[int, int, int]) -> tuple[str, str]:
    """Model name and default dataset of a CNN for ``input_shape``: ``<base>`` on digits for
    28x28x1, ``<base>_32x32x3`` on synthetic data for 32x32x3 (CIFAR-10 needs its files:
    set ``dataset: cifar10`` and ``dataset.path``)."""
    if tuple(input_shape) == GRAY28:
        return base, "digits"
    if tuple(input_shape) == RGB32:
        return f"{base}_32x32x3", "synthetic"
    raise ValueError(f"{base}: input shape {input_shape}; use {GRAY28} or {RGB32}")


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


def vgg_small(input_shape: tuple[int, int, int] = GRAY28) -> Model:
    """A small VGG-style CNN (Simonyan & Zisserman, ICLR 2015: stacks of 3x3 convolutions with
    padding 1, then 2x2 max pooling, then fully connected layers), narrowed to 8 and 16
    channels. Exact layers for 28x28x1 (``vgg_small``; 32x32x3 is ``vgg_small_32x32x3``:
    conv1a takes 3 channels, the pooled map is 16x8x8 and fc1 takes 1024)::

        conv1a Conv2d(1 -> 8, 3x3, stride 1, pad 1), relu1a     (1,28,28) -> (8,28,28)      80
        conv1b Conv2d(8 -> 8, 3x3, stride 1, pad 1), relu1b     -> (8,28,28)               584
        pool1  MaxPool2d(2, stride 2)                           -> (8,14,14)
        conv2a Conv2d(8 -> 16, 3x3, stride 1, pad 1), relu2a    -> (16,14,14)             1168
        conv2b Conv2d(16 -> 16, 3x3, stride 1, pad 1), relu2b   -> (16,14,14)             2320
        pool2  MaxPool2d(2, stride 2)                           -> (16,7,7)
        flatten                                                 -> (784,)
        fc1    Linear(784 -> 64), relu3                                                  50240
        fc2    Linear(64 -> 10)  (logits)                                                  650

    55,042 parameters (28x28x1); 70,546 (32x32x3).
    """
    name, dataset = _variant("vgg_small", input_shape)
    c, h, w = input_shape
    flat = 16 * (h // 4) * (w // 4)
    layers: tuple[Layer, ...] = (
        Conv2d("conv1a", c, 8, 3, 1, 1), ReLU("relu1a"),
        Conv2d("conv1b", 8, 8, 3, 1, 1), ReLU("relu1b"), MaxPool2d("pool1", 2, 2),
        Conv2d("conv2a", 8, 16, 3, 1, 1), ReLU("relu2a"),
        Conv2d("conv2b", 16, 16, 3, 1, 1), ReLU("relu2b"), MaxPool2d("pool2", 2, 2),
        Flatten("flatten"),
        Linear("fc1", flat, 64), ReLU("relu3"),
        Linear("fc2", 64, 10),
    )
    return Model(name, tuple(input_shape), 10, layers, dataset)


def inverted_residual(prefix: str, cin: int, cout: int, stride: int,
                      expand: int) -> tuple[Layer, ...]:
    """MobileNetV2's inverted residual block (Sandler et al., CVPR 2018, Table 1): 1x1 expand
    convolution to ``cin*expand`` channels + BN + ReLU6, 3x3 depthwise (``stride``, pad 1) +
    BN + ReLU6, 1x1 linear projection to ``cout`` + BN (no activation). Convolutions have no
    bias (BN follows each). With ``stride == 1`` and ``cin == cout`` the block is wrapped in a
    :class:`Residual` named ``prefix``; otherwise its layers are returned in sequence."""
    hid = cin * expand
    body = (
        Conv2d(f"{prefix}_expand", cin, hid, 1, 1, 0, bias=False),
        BatchNorm2d(f"{prefix}_expand_bn", hid), ReLU6(f"{prefix}_expand_relu6"),
        DepthwiseConv2d(f"{prefix}_dw", hid, stride, 1),
        BatchNorm2d(f"{prefix}_dw_bn", hid), ReLU6(f"{prefix}_dw_relu6"),
        Conv2d(f"{prefix}_project", hid, cout, 1, 1, 0, bias=False),
        BatchNorm2d(f"{prefix}_project_bn", cout),
    )
    if stride == 1 and cin == cout:
        return (Residual(prefix, body),)
    return body


def mobilenetv2_small(input_shape: tuple[int, int, int] = GRAY28) -> Model:
    """A small MobileNetV2-style CNN (Sandler et al., CVPR 2018): a stride-2 stem, three
    inverted residual blocks with expansion 4 (two of them residual), a 1x1 head convolution,
    global average pooling and a linear classifier. Exact layers for 28x28x1
    (``mobilenetv2_small``; 32x32x3 is ``mobilenetv2_small_32x32x3``: the stem takes 3
    channels and the maps are 16x16 then 8x8)::

        stem     Conv2d(1 -> 8, 3x3, stride 2, pad 1, no bias)   (1,28,28) -> (8,14,14)    72
        stem_bn  BatchNorm2d(8), stem_relu6                                                16
        b1       Residual (8,14,14) -> (8,14,14):                                          944
                   b1_expand Conv2d(8 -> 32, 1x1), b1_expand_bn, b1_expand_relu6
                   b1_dw DepthwiseConv2d(32, 3x3, stride 1, pad 1), b1_dw_bn, b1_dw_relu6
                   b1_project Conv2d(32 -> 8, 1x1), b1_project_bn        + input
        b2_expand Conv2d(8 -> 32, 1x1), b2_expand_bn, b2_expand_relu6       (32,14,14)
        b2_dw DepthwiseConv2d(32, 3x3, stride 2, pad 1), b2_dw_bn, b2_dw_relu6  (32,7,7)
        b2_project Conv2d(32 -> 16, 1x1), b2_project_bn (no residual)       (16,7,7)  1216
        b3       Residual (16,7,7) -> (16,7,7), expand 16 -> 64, as b1                    2912
        head     Conv2d(16 -> 32, 1x1, no bias), head_bn, head_relu6        (32,7,7)    576
        pool     GlobalAvgPool2d                                             (32,)
        fc       Linear(32 -> 10)  (logits)                                               330

    6,066 parameters (28x28x1); 6,210 (32x32x3: 216 stem weights). The 11 batch norms hold
    672 running statistics besides: state, not parameters.
    """
    name, dataset = _variant("mobilenetv2_small", input_shape)
    c = input_shape[0]
    layers: tuple[Layer, ...] = (
        Conv2d("stem", c, 8, 3, 2, 1, bias=False), BatchNorm2d("stem_bn", 8),
        ReLU6("stem_relu6"),
        *inverted_residual("b1", 8, 8, 1, 4),
        *inverted_residual("b2", 8, 16, 2, 4),
        *inverted_residual("b3", 16, 16, 1, 4),
        Conv2d("head", 16, 32, 1, 1, 0, bias=False), BatchNorm2d("head_bn", 32),
        ReLU6("head_relu6"),
        GlobalAvgPool2d("pool"),
        Linear("fc", 32, 10),
    )
    return Model(name, tuple(input_shape), 10, layers, dataset)


def _build() -> dict[str, Model]:
    models = [
        mlp([784, 256, 128, 16], input_shape=(1, 28, 28), dataset="digits"),
        mlp([16, 16]),
        mlp([16, 16, 16, 16]),
        mlp([256, 256]),
        lenet5(),
        vgg_small(GRAY28), vgg_small(RGB32),
        mobilenetv2_small(GRAY28), mobilenetv2_small(RGB32),
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
