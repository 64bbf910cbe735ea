"""A shader compiled once is not compiled again: the SPIR-V of an earlier compile with the same
key (glslc, flags, the shader's folder and bytes, every ``*.glsl`` it may include) is copied
from this user's cache (``$PHONETRAIN_CACHE/spirv``). The real glslc behind a wrapper that
counts its runs; a copy of the kernels folder whose included body is then edited."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from phonetrain.kernels import spirv


@pytest.fixture
def counted_glslc(tmp_path, monkeypatch) -> Path:
    real = shutil.which("glslc")
    if real is None:
        pytest.skip("glslc is not installed")
    calls = tmp_path / "calls"
    wrapper = tmp_path / "bin" / "glslc"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho x >> "{calls}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("GLSLC", str(wrapper))
    monkeypatch.setenv("PHONETRAIN_CACHE", str(tmp_path / "cache"))
    return calls


def _runs(calls: Path) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_a_shader_compiled_once_is_copied_the_next_time(tmp_path, counted_glslc):
    root = tmp_path / "kernels"
    shutil.copytree(spirv.KERNELS_ROOT, root)
    src = root / "fused" / "vk" / "linear_fwd.comp"
    assert src.is_file() and '#include "fused.glsl"' in src.read_text()
    spirv.compile_shader(src, tmp_path / "a.spv", root)
    spirv.compile_shader(src, tmp_path / "b.spv", root)
    assert _runs(counted_glslc) == 1
    assert (tmp_path / "b.spv").read_bytes() == (tmp_path / "a.spv").read_bytes()
    # an edit of a body the shader includes (not the shader): compiled again
    body = root / "fused" / "vk" / "fused.glsl"
    body.write_text(body.read_text() + "\n// edited\n")
    spirv.compile_shader(src, tmp_path / "c.spv", root)
    assert _runs(counted_glslc) == 2


def test_a_shader_that_does_not_compile_is_never_cached(tmp_path, counted_glslc):
    root = tmp_path / "kernels"
    shutil.copytree(spirv.KERNELS_ROOT, root)
    src = root / "baseline" / "vk" / "relu_fwd.comp"
    src.write_text(src.read_text() + "\nthis is not GLSL\n")
    for _ in range(2):
        with pytest.raises(spirv.ShaderError, match="does not compile"):
            spirv.compile_shader(src, tmp_path / "x.spv", root)
    assert _runs(counted_glslc) == 2
    assert not list((tmp_path / "cache" / "spirv").glob("*.spv"))
