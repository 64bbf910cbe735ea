"""The Vulkan dispatch table and shader interface are generated from the kernel ABI table."""

from phonetrain.kernels import KERNEL_ARGS
from phonetrain.kernels import vk_abi


def test_generated_files_are_current():
    """src/runner/vk_abi.h and src/kernels/vk_abi.glsl are what KERNEL_ARGS generates now;
    after an ABI change run `python -m phonetrain.kernels.vk_abi`."""
    assert vk_abi.stale_files() == [], "regenerate with `python -m phonetrain.kernels.vk_abi`"


def test_a_changed_abi_row_makes_the_files_stale(monkeypatch):
    """A planted ABI change (an argument added to relu_fwd) shows in both generated files."""
    monkeypatch.setitem(KERNEL_ARGS, "relu_fwd", ("i:n", "f:slope", "r:X", "w:Y"))
    assert set(vk_abi.stale_files()) == {vk_abi.C_HEADER, vk_abi.GLSL_HEADER}
    assert '{"relu_fwd", "iftt", {0, 4, 0, 1}, 8, 2}' in vk_abi.c_header()
    assert "int n; float slope;" in vk_abi.glsl_header()


def test_layout_numbers_scalars_and_buffers_separately():
    """Scalars at 4-byte push-constant offsets, buffers at bindings, both in ABI order; the
    integer buffers are int in GLSL and a GLSL keyword gets an underscore."""
    assert vk_abi.layout("gemm_nn") == [("M", "i", 0), ("N", "i", 4), ("K", "i", 8),
                                        ("alpha", "f", 12), ("A", "r", 0), ("B", "r", 1),
                                        ("beta", "f", 16), ("C", "rw", 2)]
    glsl = vk_abi.glsl_header()
    assert "readonly buffer PtBuf_labels { int labels[]; };" in glsl
    assert "buffer PtBuf_out { float out_[]; };" in glsl


def test_tiled_shader_defaults_are_the_version_defines():
    """gemm_tiled.glsl's specialization-constant defaults (its #ifndef defaults) equal
    tiled/version.yaml's defines of the same names and, for the constants the OpenCL kernel
    lacks, vk/tuning.yaml's defaults; it declares each through the generated PT_SPEC_<name>
    id."""
    import re

    from phonetrain.kernels import KERNELS_ROOT, load_version
    from phonetrain.kernels.spirv import shader_defaults
    text = (KERNELS_ROOT / "tiled" / "vk" / "gemm_tiled.glsl").read_text()
    declared = dict(re.findall(r"constant_id = PT_SPEC_(\w+)\) const int \1 = (\d+);", text))
    assert set(declared) == set(vk_abi.SPEC_CONSTANTS)
    defines = load_version("tiled").defines
    assert {k: int(v) for k, v in declared.items()} == shader_defaults("tiled")
    assert all(shader_defaults("tiled")[k] == v for k, v in defines.items() if k in declared)
    for name, cid in vk_abi.SPEC_CONSTANTS.items():
        assert f"#define PT_SPEC_{name} {cid}" in vk_abi.glsl_header()
        assert f'{{"{name}", {cid}}},' in vk_abi.c_header()
