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


def test_one_vulkan_run_of_the_fused_version_composes():
    """`phonetrain run backend=vulkan kernel=fused`: fused has its own vk/ folder, so the one
    cell is a Vulkan run of the fused step; the default sweep still crosses Vulkan with the
    baseline shaders only (its backend_kernels), so the default study does not grow."""
    _, exp = compose_one(["model=lenet5", "device=host", "backend=vulkan", "kernel=fused"],
                         CONF_DIR)
    assert exp.id == "lenet5.vulkan.fused" and exp.is_vulkan
    default = compose_sweep([], CONF_DIR)
    assert {e.kernel for e in default.experiments if e.is_vulkan} == {"baseline"}


def test_vulkan_pipelined_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="placement.*vulkan backend takes one of"):
        compose_one(["model=mlp_16_16", "device=host", "backend=vulkan", "kernel=baseline",
                     "backend.placement=pipelined"], CONF_DIR)


def test_one_vulkan_run_of_a_version_without_shaders_is_refused_naming_the_kernel():
    """`phonetrain run backend=vulkan kernel=regblock`: the one cell is crossed out (regblock
    has no vk/ folder), so the run is refused naming the kernel and the versions that have
    shaders, not left to fail on an empty list."""
    with pytest.raises(ConfigError) as e:
        compose_one(["model=mlp_16_16", "device=host", "backend=vulkan", "kernel=regblock"],
                    CONF_DIR)
    msg = str(e.value)
    for needle in ("kernel=regblock", "kernel/regblock.yaml", "no Vulkan shaders",
                   "regblock/vk", "baseline", "tiled", "fused", "backend 'vulkan'"):
        assert needle in msg, msg


@pytest.mark.parametrize("overrides, needles", [
    (["sweep.backends=[vulkan]", "sweep.kernels=[regblock]"],
     ["'vulkan' is Vulkan", "regblock"]),
    (["sweep.backends=[opencl]", "sweep.kernels=[baseline]",
      "+sweep.backend_kernels.opencl=[tiled]"],
     ["'opencl' is restricted to ['tiled']", "sweep.backend_kernels"]),
])
def test_a_sweep_that_crosses_no_experiment_is_refused(overrides, needles):
    """Every cell crossed out (a Vulkan backend over versions without shaders, a backend
    restricted to versions the sweep does not list): refused naming the sweep and why, before
    any job, not composed into an empty study."""
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.models=[mlp_16_16]", *overrides], CONF_DIR)
    msg = str(e.value)
    for needle in ("crosses no experiment", "sweep.kernels", *needles):
        assert needle in msg, msg
