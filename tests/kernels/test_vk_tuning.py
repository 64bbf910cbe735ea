"""The Vulkan shaders' tuning space (vk/tuning.yaml) and their specialization-constant options."""

import shutil

import pytest

from phonetrain.kernels import KERNELS_ROOT, load_version
from phonetrain.kernels.spirv import (ShaderError, device_misfit, shader_candidate,
                                      shader_candidates, shader_files, spec_options)


def test_tiled_space_starts_with_the_defaults_and_keeps_file_order():
    """The defaults: the version's defines that are specialization constants plus the
    shader-only GVW of tuning.yaml's defaults; every candidate is the defaults updated."""
    cands = shader_candidates("tiled")
    assert cands[0] == {"defines": {"TSM": 64, "TSN": 64, "TSK": 8, "WPTM": 8, "WPTN": 4,
                                    "PAD": 1, "VW": 1, "PREFETCH": 0, "DBUF": 0, "GVW": 1},
                        "local": None}
    assert len(cands) > 1 and all(c["local"] is None for c in cands)
    assert all(set(c["defines"]) == set(cands[0]["defines"]) for c in cands)
    assert {"VW": 4, "PREFETCH": 1, "DBUF": 1, "GVW": 4}.items() <= \
        next(c["defines"] for c in cands if c["defines"]["GVW"] == 4).items()
    assert shader_candidates("baseline") == [{"defines": {}, "local": None}]
    assert spec_options(load_version("tiled")) == \
        "-DDBUF=0 -DPAD=1 -DPREFETCH=0 -DTSK=8 -DTSM=64 -DTSN=64 -DVW=1 -DWPTM=8 -DWPTN=4"


def test_a_configuration_past_the_device_shared_memory_does_not_fit():
    """device_constraints: the shader's two shared tiles (vec4-rounded) against the limit the
    runner reports; a limit the device document lacks is not checked."""
    big = shader_candidate("tiled", {"TSM": 128, "TSN": 128, "TSK": 16, "WPTM": 8, "WPTN": 8,
                                     "PAD": 4, "DBUF": 1})
    need = 16 * ((2 * 16 * 132 + 3) // 4) * 2   # 33,792 bytes
    dev = {"name": "gpu", "max_compute_shared_memory_bytes": need,
           "max_compute_work_group_invocations": 1024}
    assert device_misfit("tiled", big, dev) is None
    why = device_misfit("tiled", big, dev | {"max_compute_shared_memory_bytes": need - 4})
    assert "does not fit device 'gpu'" in why and "max_compute_shared_memory_bytes" in why
    assert device_misfit("tiled", big, {"name": "gpu"}) is None
    small = {"max_compute_work_group_invocations": 64, "name": "phone"}
    assert "max_compute_work_group_invocations" in device_misfit("tiled", big, small)


def test_an_explicit_configuration_is_checked_against_the_constraints():
    assert shader_candidate("tiled", {"VW": 4, "WPTM": 8, "WPTN": 4})["VW"] == 4
    with pytest.raises(ShaderError, match="breaks the constraint"):
        shader_candidate("tiled", {"GVW": 4, "TSK": 6})
    with pytest.raises(ShaderError, match="NAME among"):
        shader_candidate("tiled", {"RM": 8})


def test_a_vulkan_plan_takes_the_tuned_specialization_constants():
    """tune_plan on a Vulkan plan: every program's options are the tuned class's
    specialization constants (no OpenCL-only define), the GEMM launches follow its tile."""
    from phonetrain.kernels import tuning
    from phonetrain.lowering import LowerSpec, lower

    plan = lower(LowerSpec(model="mlp_16_16", batch_size=32, backend="vulkan",
                           placement="resident", transfer="copy", kernel="tiled"))
    cand = shader_candidates("tiled")[-1]
    classes = {c: {**cand, "shapes": []} for c in tuning.plan_classes(plan)}
    out, cls = tuning.tune_plan(plan, load_version("tiled"),
                                {"classes": classes, "default": None})
    want = spec_options(tuning.candidate_version(load_version("tiled"), cand))
    assert cls in classes and "-DGVW=" in want
    assert {p.options for p in out.programs} == {want}
    gemm = [s for s in out.steps if s.op == "kernel" and s.name.startswith("gemm_")]
    d = cand["defines"]
    assert gemm and all(s.local_size == [d["TSN"] // d["WPTN"], d["TSM"] // d["WPTM"]]
                        for s in gemm)


def test_the_included_body_is_a_shader_file():
    """The build key of a version's SPIR-V covers the bodies its shaders include."""
    names = [p.name for p in shader_files("tiled")]
    assert "gemm_tiled.glsl" in names and "gemm_nn.comp" in names


@pytest.mark.parametrize("bad,match", [
    ("  - {defines: {TSM: 64, TSN: 64, WPTM: 6}}\n", "breaks the constraint"),
    ("  - {defines: {RM: 8}}\n", "NAME among"),   # regblock's, an OpenCL-only define
    ("  - {defines: {VW: 2}}\n", "breaks the constraint"),
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


@pytest.mark.parametrize("text,match", [
    ("candidates: [\n  - {defines: {TSM: 64}\n", "not valid YAML"),
    ("- {defines: {TSM: 64}}\n", "must be a mapping"),
    ("candidate:\n  - {defines: {TSM: 64}}\n", r"unknown key\(s\) \['candidate'\]"),
    ("candidates: {defines: {TSM: 64}}\n", "key 'candidates' is .*give a list"),
    ("constraints: TSM >= 1\n", "key 'constraints' is .*give a list"),
])
def test_a_tuning_file_of_the_wrong_shape_names_the_file(tmp_path, text, match):
    """vk/tuning.yaml that is not YAML, or YAML of the wrong shape: one ShaderError naming
    the file, from every reader of it (the tuning space, the defaults, the device check)."""
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    yml = root / "tiled" / "vk" / "tuning.yaml"
    yml.write_text(text)
    for read in (lambda: shader_candidates("tiled", root),
                 lambda: device_misfit("tiled", {}, {"name": "gpu"}, root)):
        with pytest.raises(ShaderError, match=match) as e:
            read()
        assert str(e.value).startswith(str(yml))


def test_a_candidate_that_is_not_a_mapping_is_quoted(tmp_path):
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    (root / "tiled" / "vk" / "tuning.yaml").write_text("candidates:\n  - TSM=64\n")
    with pytest.raises(ShaderError, match=r"candidates\[0\] is 'TSM=64'; give \{defines"):
        shader_candidates("tiled", root)


def test_a_candidate_with_an_opencl_local_size_is_refused(tmp_path):
    """A candidate copied from version.yaml with its `local`: the key was ignored."""
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    (root / "tiled" / "vk" / "tuning.yaml").write_text(
        "candidates:\n  - {defines: {TSM: 32, TSN: 32, WPTM: 4, WPTN: 4}, local: [8, 8]}\n")
    with pytest.raises(ShaderError, match=r"candidates\[0\] has key\(s\) \['local'\]; a shader "
                                          r"candidate is \{defines: \{NAME: int\}\} alone"):
        shader_candidates("tiled", root)
