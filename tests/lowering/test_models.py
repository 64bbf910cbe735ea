"""Model zoo: shapes, parameter counts, FLOPs by hand formula, the generated docs table."""

import subprocess
import sys

import pytest

from helpers import REPO
from phonetrain.models import MODELS, Linear, ShapeError, get_model, mlp
from phonetrain.lowering import flops_per_step
from phonetrain.lowering.model_table import markdown

def test_model_names_are_registered_and_unknown_names_listed():
    assert set(MODELS) == {"mlp_784_256_128_16", "mlp_16_16", "mlp_16_16_16_16", "mlp_256_256",
                           "lenet5", "vgg_small", "vgg_small_32x32x3", "mobilenetv2_small",
                           "mobilenetv2_small_32x32x3"}
    with pytest.raises(KeyError, match="known models: .*lenet5"):
        get_model("resnet")


def test_param_counts_match_hand_formulas():
    assert get_model("mlp_784_256_128_16").param_count() == (784 * 256 + 256) + (
        256 * 128 + 128) + (128 * 16 + 16)
    assert get_model("mlp_16_16").param_count() == 16 * 16 + 16
    assert get_model("mlp_16_16_16_16").param_count() == 3 * (16 * 16 + 16)
    assert get_model("mlp_256_256").param_count() == 256 * 256 + 256
    # LeNet-5 as its docstring states: conv 1->6 5x5, conv 6->16 5x5, fc 400-120-84-10
    assert get_model("lenet5").param_count() == (6 * 25 + 6) + (16 * 6 * 25 + 16) + (
        400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10) == 61706


def test_lenet5_layer_shapes_match_its_architecture():
    shapes = get_model("lenet5").shapes()
    assert shapes[0] == (1, 28, 28)
    assert (6, 28, 28) in shapes and (6, 14, 14) in shapes and (16, 10, 10) in shapes
    assert (16, 5, 5) in shapes and (400,) in shapes and shapes[-1] == (10,)


def test_mlp_flops_match_hand_formulas():
    B = 32
    f = flops_per_step(get_model("mlp_784_256_128_16"), B)
    pairs = [(784, 256), (256, 128), (128, 16)]
    gemm = sum(2 * B * i * o for i, o in pairs)
    bias = B * (256 + 128 + 16)
    relu = B * (256 + 128)
    loss = 5 * B * 16 + B  # softmax_xent + mean
    assert f["forward"] == gemm + bias + relu + loss
    # backward: dW for every layer, dX for all but the first, bias grads, relu grads
    dx = sum(2 * B * i * o for i, o in pairs[1:])
    assert f["backward"] == gemm + dx + bias + relu
    params = get_model("mlp_784_256_128_16").param_count()
    assert f["update"] == 2 * params
    assert flops_per_step(get_model("mlp_784_256_128_16"), B, momentum=0.9)["update"] == 4 * params


def test_lenet5_forward_flops_match_hand_formula():
    B = 2
    f = flops_per_step(get_model("lenet5"), B)
    conv1 = 2 * 6 * (B * 28 * 28) * 25
    conv2 = 2 * 16 * (B * 10 * 10) * 150
    fcs = 2 * B * (400 * 120 + 120 * 84 + 84 * 10)
    elementwise = B * (6 * 784 + 6 * 784 + 16 * 100 + 16 * 100 + 120 + 120 + 84 + 84 + 10)
    pools = B * (6 * 196 + 16 * 25) * 4
    assert f["forward"] == conv1 + conv2 + fcs + elementwise + pools + 5 * B * 10 + B


def test_backward_flops_omit_the_first_layers_input_gradient():
    small, bigger = mlp([8, 4]), mlp([8, 8, 4])
    # one Linear: backward = dW + db only; two: + dX of the second layer
    assert flops_per_step(small, 2)["backward"] == 2 * 2 * 8 * 4 + 2 * 4
    assert flops_per_step(bigger, 2)["backward"] == (2 * 2 * 8 * 8 + 2 * 2 * 8 * 4 + 2 * 2 * 4 * 8
                                                    + 2 * (8 + 4) + 2 * 8)


def test_wrong_input_shape_error_names_the_layer():
    with pytest.raises(ShapeError, match="layer fc1"):
        Linear("fc1", 10, 3).out_shape((11,))


def test_docs_models_table_is_up_to_date():
    doc = (REPO / "docs" / "models.md").read_text()
    assert doc == markdown() + "\n", \
        "docs/models.md is stale: run python -m phonetrain.lowering.model_table --markdown > docs/models.md"


def test_model_table_module_prints_the_markdown_table():
    out = subprocess.run([sys.executable, "-m", "phonetrain.lowering.model_table", "--markdown"],
                         capture_output=True, text=True, check=True).stdout
    assert "| `lenet5` | 1x28x28 | 10 | 61,706 |" in out
