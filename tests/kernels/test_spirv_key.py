"""A shader edit that changes nothing glslc compiles is known without measuring: the Vulkan
build key hashes the SPIR-V itself, which glslc (without -g) writes without comments or line
numbers."""

from __future__ import annotations

import shutil

import pytest

from phonetrain.kernels import KERNELS_ROOT
from phonetrain.kernels.build_key import spirv_key
from phonetrain.kernels.spirv import stage_spirv

KERNELS = {"gemm_nn", "sgd_update"}


def _spirv(root, dest, version):
    out = stage_spirv(version, dest, kernels_root=root, kernels=KERNELS)
    return {f.name: f.read_bytes() for f in sorted(out.glob("*.spv"))}


def test_comment_edits_keep_the_spirv_and_a_real_change_does_not(tmp_path):
    if not shutil.which("glslc"):
        pytest.skip("glslc is not installed (apt install glslc: .ci/setup)")
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    before = {v: _spirv(root, tmp_path / "a", v) for v in ("baseline", "tiled")}
    body = root / "tiled" / "vk" / "gemm_tiled.glsl"   # included by tiled's gemm_nn.comp
    body.write_text("// a new first line\n\n" + body.read_text().replace(
        "barrier();", "barrier();   /* a block\n   comment */", 1) + "\n\n// trailing\n")
    sgd = root / "baseline" / "vk" / "sgd_update.comp"
    head, rest = sgd.read_text().split("\n", 1)
    sgd.write_text(f"{head}\n// after #version\n\n{rest}")
    after = {v: _spirv(root, tmp_path / "b", v) for v in ("baseline", "tiled")}
    assert after == before
    assert spirv_key(after["tiled"], ["-DTSM=64"]) == spirv_key(before["tiled"], ["-DTSM=64"])
    sgd.write_text(sgd.read_text().replace("V[i] = v;", "V[i] = v; memoryBarrierBuffer();"))
    changed = _spirv(root, tmp_path / "c", "baseline")
    assert changed["sgd_update.spv"] != before["baseline"]["sgd_update.spv"]
    assert changed["gemm_nn.spv"] == before["baseline"]["gemm_nn.spv"]
    assert spirv_key(changed, []) != spirv_key(before["baseline"], [])


def test_the_key_covers_names_bytes_and_options():
    mods = {"a.spv": b"\x03\x02\x23\x07one", "b.spv": b"\x03\x02\x23\x07two"}
    key = spirv_key(mods, ["a.spv:-DTSM=64"])
    assert key == spirv_key(dict(reversed(mods.items())), ["a.spv:-DTSM=64  "])
    assert key != spirv_key(mods, ["a.spv:-DTSM=32"])
    assert key != spirv_key({"a.spv": mods["b.spv"], "b.spv": mods["a.spv"]}, ["a.spv:-DTSM=64"])
    assert key != spirv_key({"a.spv": mods["a.spv"]}, ["a.spv:-DTSM=64"])
