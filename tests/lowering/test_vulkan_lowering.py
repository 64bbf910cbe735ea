"""Lowering for backend=vulkan: the same steps as OpenCL, one SPIR-V program per kernel,
and clear refusals for what the Vulkan backend has no shaders or placement for."""

import shutil

import pytest

from phonetrain.kernels import KERNELS_ROOT
from phonetrain.lowering import LowerError, LowerSpec, lower


def test_vulkan_plan_has_the_opencl_steps_and_a_program_per_kernel():
    vk = lower(LowerSpec(model="mlp_784_256_128_16", backend="vulkan", placement="staged",
                         transfer="copy"))
    cl = lower(LowerSpec(model="mlp_784_256_128_16", backend="opencl", placement="staged",
                         transfer="copy"))
    assert vk.backend == "vulkan"
    assert [(s.op, s.name, s.args) for s in vk.steps] == [(s.op, s.name, s.args) for s in cl.steps]
    kernels = sorted({s.name for s in vk.steps if s.op == "kernel"})
    assert [p.name for p in vk.programs] == kernels
    assert all(p.source == f"spirv/baseline/{p.name}.spv" for p in vk.programs)


def test_a_version_without_shaders_is_refused():
    """regblock rewrites the OpenCL GEMM and has no vk/ folder: it must not run the baseline
    shaders under its own name."""
    with pytest.raises(LowerError, match="no Vulkan shader"):
        lower(LowerSpec(model="mlp_16_16", backend="vulkan", placement="resident",
                        transfer="copy", kernel="regblock"))


def test_tiled_gemm_programs_carry_the_specialization_constants():
    """tiled's own vk/ folder replaces the GEMM shaders; its GEMM programs get the version's
    tile defines as -D options (the runner's specialization constants), the inherited
    shaders too (they ignore them); baseline's programs get none."""
    plan = lower(LowerSpec(model="lenet5", backend="vulkan", placement="resident",
                           transfer="copy", kernel="tiled"))
    progs = {p.name: p for p in plan.programs}
    assert progs["gemm_nn"].source == "spirv/tiled/gemm_nn.spv"
    assert progs["gemm_nn"].options == \
        "-DDBUF=0 -DPAD=1 -DPREFETCH=0 -DTSK=8 -DTSM=64 -DTSN=64 -DVW=1 -DWPTM=8 -DWPTN=4"
    gemm = [s for s in plan.steps if s.op == "kernel" and s.name == "gemm_nn"][0]
    m, n = gemm.args[0]["i"], gemm.args[1]["i"]
    assert gemm.local_size == [16, 8]
    assert gemm.global_size == [-(-n // 64) * 16, -(-m // 64) * 8]
    base = lower(LowerSpec(model="lenet5", backend="vulkan", placement="resident",
                           transfer="copy"))
    assert {p.options for p in base.programs} == {""}


def test_missing_shaders_are_named(tmp_path):
    """A copy of the kernels whose baseline lacks one shader: the lowering names it."""
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    (root / "baseline" / "vk" / "dwconv3x3_fwd.comp").unlink()
    with pytest.raises(LowerError, match=r"\['dwconv3x3_fwd'\]"):
        lower(LowerSpec(model="mobilenetv2_small", backend="vulkan", placement="resident",
                        transfer="copy"), kernels_root=root)


def test_pipelined_is_refused_on_vulkan():
    with pytest.raises(LowerError, match="vulkan backend needs one of"):
        LowerSpec(model="mlp_16_16", backend="vulkan", placement="pipelined",
                  transfer="copy").check()


def test_fused_plans_take_the_fused_shaders_and_inherit_the_rest():
    """fused's own vk/ folder: the fused step's kernels from its shaders, maxpool_fwd (which
    the fused step keeps) from baseline's along `inherits`, all compiled into
    spirv/fused/; every program gets the version's defines as specialization constants and
    each launch its version.yaml work-group, as on OpenCL."""
    vk = lower(LowerSpec(model="lenet5", backend="vulkan", placement="resident",
                         transfer="copy", kernel="fused"))
    cl = lower(LowerSpec(model="lenet5", backend="opencl", placement="resident",
                         transfer="copy", kernel="fused"))
    launches = [(s.name, s.global_size, s.local_size) for s in vk.steps if s.op == "kernel"]
    assert launches == [(s.name, s.global_size, s.local_size) for s in cl.steps
                        if s.op == "kernel"]
    names = {n for n, _, _ in launches}
    assert {"conv_fwd", "conv_sgd", "softmax_xent_bwd", "maxpool_fwd"} <= names
    assert not names & {"gemm_nn", "im2col", "sgd_update"}
    assert {p.name for p in vk.programs} == names
    assert all(p.source == f"spirv/fused/{p.name}.spv" for p in vk.programs)
    assert {p.options for p in vk.programs} == {"-DLIN_T=16 -DLIN_TK=64 -DLOSS_WG=64"}
    assert (KERNELS_ROOT / "fused" / "vk" / "conv_sgd.comp").is_file()
    assert not (KERNELS_ROOT / "fused" / "vk" / "maxpool_fwd.comp").exists()
    assert next(ls for n, _, ls in launches if n == "conv_sgd") == [256, 1]
