"""src/kernels/common.cl: the shared helpers staged in front of every version's programs.
An edit of it changes every version's source hash (so every version rebuilds and reruns), it
is neither a version nor a version's file, and a compile error in a version's file is
reported with that file's path and its own line numbers (the #line directives)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from phonetrain import runner as rt
from phonetrain.kernels import (KERNELS_ROOT, KernelVersionError, assemble_source, common_source,
                                load_version, resolve_sources, source_files, source_hash,
                                stage_kernels)

VERSIONS = sorted(p.name for p in KERNELS_ROOT.iterdir() if p.is_dir())


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    return root


def test_common_is_neither_a_version_nor_a_version_file():
    assert common_source() == KERNELS_ROOT / "common.cl"
    with pytest.raises(KernelVersionError):
        load_version("common.cl")
    for v in VERSIONS:
        assert "common.cl" not in resolve_sources(v)
        assert source_files(v)[0] == KERNELS_ROOT / "common.cl"


def test_an_edit_of_common_changes_every_version_hash(tmp_path):
    root = _copy(tmp_path)
    before = {v: source_hash(v, root) for v in VERSIONS}
    common = root / "common.cl"
    common.write_text(common.read_text() + "\n/* edited */\n")
    after = {v: source_hash(v, root) for v in VERSIONS}
    assert [v for v in VERSIONS if before[v] == after[v]] == []


def test_staged_files_are_common_then_the_file_with_line_directives(tmp_path):
    root = _copy(tmp_path)
    dest = stage_kernels("fused", tmp_path / "stage", root)
    for fname, path in resolve_sources("fused", root).items():
        text = (dest / fname).read_text()
        assert text == assemble_source(path, root)
        common = (root / "common.cl").read_text()
        assert text == (f'#line 1 "{(root / "common.cl").resolve()}"\n{common}'
                        f'#line 1 "{path.resolve()}"\n{path.read_text()}')


def test_a_compile_error_names_the_version_file_and_line(runner, pocl, tmp_path):
    root = _copy(tmp_path)
    path = root / "fused" / "fused.cl"
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, s in enumerate(lines) if s.startswith("__kernel void linear_fwd("))
    lines.insert(at, "this is not OpenCL C;\n")   # line at + 1 of the file
    path.write_text("".join(lines))
    staged = stage_kernels("fused", tmp_path / "stage", root)
    r = rt.Runner.local_binary(runner, tmp_path / "run", pocl)
    with pytest.raises(rt.KernelBuildError) as e:
        r.build([str(staged / "fused.cl")], load_version("fused", root).options, tmp_path / "out")
    assert re.search(rf"{re.escape(str(path.resolve()))}:{at + 1}:\d+: ", e.value.stderr), \
        e.value.stderr[-2000:]
