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


def _declared(version: str) -> dict[str, int]:
    """``{NAME: default}`` of the specialization constants a version's own shaders and
    bodies declare through the generated ``PT_SPEC_<NAME>`` ids."""
    import re

    from phonetrain.kernels import KERNELS_ROOT
    out: dict[str, int] = {}
    for f in sorted((KERNELS_ROOT / version / "vk").glob("*.[cg]*")):
        for name, val in re.findall(r"constant_id = PT_SPEC_(\w+)\) const int \1 = (\d+);",
                                    f.read_text()):
            assert out.setdefault(name, int(val)) == int(val), f"{f}: {name} default differs"
    return out


def test_shader_defaults_are_the_version_defines():
    """The specialization-constant defaults of gemm_tiled.glsl and of the fused shaders
    (their #ifndef defaults) equal their version.yaml's defines of the same names and, for
    the constants the OpenCL kernel lacks, vk/tuning.yaml's defaults; every constant of the
    table is declared by some shader, each through the generated PT_SPEC_<name> id."""
    from phonetrain.kernels import load_version
    from phonetrain.kernels.spirv import shader_defaults
    seen: set[str] = set()
    for version in ("tiled", "fused"):
        declared = _declared(version)
        assert declared and declared == shader_defaults(version), version
        defines = load_version(version).defines
        assert {k for k in defines if k in vk_abi.SPEC_CONSTANTS} <= set(declared), version
        seen |= set(declared)
    assert seen == set(vk_abi.SPEC_CONSTANTS)
    for name, cid in vk_abi.SPEC_CONSTANTS.items():
        assert f"#define PT_SPEC_{name} {cid}" in vk_abi.glsl_header()
        assert f'{{"{name}", {cid}}},' in vk_abi.c_header()
