"""A C kernel that disagrees with the generated ABI table (src/runner/kernel_abi.h) fails the
runner's build with a message naming the kernel: a table changed without its C function, a C
function declared with other kinds, and a kernel of the table without a C function."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from phonetrain.devices import toolchains
from phonetrain.devices.toolchains import RUNNER_SRC, RunnerCompileError
from phonetrain.kernels import abi_gen
from phonetrain.kernels.abi import KERNEL_ARGS

pytestmark = pytest.mark.skipif(toolchains.which_cc() is None, reason="needs a C compiler")


def _copy(tmp_path: Path) -> Path:
    src = tmp_path / "runner"
    shutil.copytree(RUNNER_SRC, src)
    return src


def _build(tmp_path: Path, src: Path) -> str:
    """The compiler's output of a build of ``src`` that must fail (-O0: only the errors
    matter)."""
    with pytest.raises(RunnerCompileError) as err:
        toolchains.build_runner(tmp_path / "build", extra_flags=("-O0",), src_dir=src)
    return str(err.value)


def _plant(src: Path, fname: str, old: str, new: str) -> None:
    path = src / fname
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} not once in {fname}"
    path.write_text(text.replace(old, new))


def test_the_unchanged_copy_builds(tmp_path):
    runner = toolchains.build_runner(tmp_path / "build", extra_flags=("-O0",),
                                     src_dir=_copy(tmp_path))
    assert runner.is_file()


def test_a_table_row_changed_without_its_c_function_fails_naming_the_kernel(tmp_path):
    src = _copy(tmp_path)
    table = {**KERNEL_ARGS, "relu_fwd": ("i:n", "f:slope", "r:X", "w:Y")}   # one more arg
    (src / "kernel_abi.h").write_text(abi_gen.c_header(list(abi_gen.rows(table))))
    out = _build(tmp_path, src)
    assert "relu_fwd" in out and "another argument count than kernel_abi.h" in out, out


def test_a_c_function_with_other_kinds_fails_naming_the_kernel(tmp_path):
    src = _copy(tmp_path)
    _plant(src, "cpu_elementwise.c", "CPU_KERNEL(relu_bwd, ittt)", "CPU_KERNEL(relu_bwd, iftt)")
    out = _build(tmp_path, src)
    assert "KABI_SIG_relu_bwd_iftt" in out, out


def test_a_kernel_without_a_c_function_fails_to_link_naming_it(tmp_path):
    src = _copy(tmp_path)
    _plant(src, "cpu_elementwise.c", "CPU_KERNEL(copy, itt)",
           "static int k_copy_gone(const kctx *k);\nstatic int k_copy_gone(const kctx *k)")
    out = _build(tmp_path, src)
    assert "k_copy" in out, out
