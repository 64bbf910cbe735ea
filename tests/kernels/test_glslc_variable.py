"""``$GLSLC`` set to something that is not an executable: the shader compile is refused naming
the variable and what to set, not a FileNotFoundError traceback from the deploy job."""

from __future__ import annotations

import pytest

from phonetrain.kernels import spirv


@pytest.mark.parametrize("make", ["missing", "not_executable", "folder"])
def test_glslc_variable_naming_no_executable_is_named(tmp_path, monkeypatch, make):
    given = tmp_path / "glslc"
    if make == "not_executable":
        given.write_text("#!/bin/sh\n")
    elif make == "folder":
        given.mkdir()
    monkeypatch.setenv("GLSLC", str(given))
    with pytest.raises(spirv.ShaderError) as e:
        spirv.stage_spirv("baseline", tmp_path / "stage")
    msg = str(e.value)
    for needle in ("GLSLC", str(given), "glslc's path", "unset it"):
        assert needle in msg, msg
    assert not (tmp_path / "stage" / "spirv" / "baseline").exists()
