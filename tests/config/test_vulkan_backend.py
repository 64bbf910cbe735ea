"""backend=vulkan as a config value: crossed only with kernel versions that have shaders,
its placements checked like OpenCL's."""

import pytest

from phonetrain.config import CONF_DIR, ConfigError, compose_one, compose_sweep


def test_vulkan_crosses_only_versions_with_shaders():
    sweep = compose_sweep(["sweep.models=[mlp_16_16]", "sweep.backends=[cpu,vulkan]",
                           "sweep.kernels=[baseline,tiled,fused]"], CONF_DIR)
    ids = sorted(e.id for e in sweep.experiments)
    assert ids == ["mlp_16_16.cpu.none", "mlp_16_16.vulkan.baseline"]
    (vk,) = [e for e in sweep.experiments if e.is_vulkan]
    assert not vk.is_opencl and vk.config["backend"]["placement"] == "resident"


def test_vulkan_pipelined_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="placement.*vulkan backend takes one of"):
        compose_one(["model=mlp_16_16", "device=host", "backend=vulkan", "kernel=baseline",
                     "backend.placement=pipelined"], CONF_DIR)
