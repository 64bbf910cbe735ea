"""The Vulkan shaders' tuning space (vk/tuning.yaml) and their specialization-constant options."""

import shutil

import pytest

from phonetrain.kernels import KERNELS_ROOT, load_version
from phonetrain.kernels.spirv import ShaderError, shader_candidates, shader_files, spec_options


def test_tiled_space_starts_with_the_defaults_and_keeps_file_order():
    cands = shader_candidates("tiled")
    assert cands[0] == {"defines": {"TSM": 64, "TSN": 64, "TSK": 8, "WPTM": 8, "WPTN": 4,
                                    "PAD": 1}, "local": None}
    assert len(cands) > 1 and all(c["local"] is None for c in cands)
    assert shader_candidates("baseline") == [{"defines": {}, "local": None}]
    assert spec_options(load_version("tiled")) == \
        "-DPAD=1 -DTSK=8 -DTSM=64 -DTSN=64 -DWPTM=8 -DWPTN=4"


def test_the_included_body_is_a_shader_file():
    """The build key of a version's SPIR-V covers the bodies its shaders include."""
    names = [p.name for p in shader_files("tiled")]
    assert "gemm_tiled.glsl" in names and "gemm_nn.comp" in names


@pytest.mark.parametrize("bad,match", [
    ("  - {defines: {TSM: 64, TSN: 64, WPTM: 6}}\n", "breaks the constraint"),
    ("  - {defines: {VW: 2}}\n", "NAME among"),
])
def test_a_bad_candidate_names_the_file(tmp_path, bad, match):
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    yml = root / "tiled" / "vk" / "tuning.yaml"
    text = yml.read_text().replace("candidates:\n", "candidates:\n" + bad, 1)
    yml.write_text(text)
    with pytest.raises(ShaderError, match=match) as e:
        shader_candidates("tiled", root)
    assert str(yml) in str(e.value)
