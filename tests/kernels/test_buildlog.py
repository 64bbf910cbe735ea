"""Compiler messages pointed back at the kernel sources through the #line directives."""

from __future__ import annotations

from phonetrain.kernels import KERNELS_ROOT, assemble_source
from phonetrain.kernels.buildlog import compiler_messages, explain, line_table

GEMM = KERNELS_ROOT / "tiled" / "gemm.cl"
NAME = "src/kernels/tiled/gemm.cl"


def _assembled_line(text: str, own_line: int) -> int:
    """The line of the assembled source that is line ``own_line`` of tiled/gemm.cl."""
    table = line_table(text)
    return next(i + 1 for i, (f, n) in enumerate(table) if f == NAME and n == own_line)


def test_a_compiler_that_ignores_line_directives_is_mapped_back():
    text = assemble_source(GEMM)
    n = _assembled_line(text, 31)
    assert n > 31                  # common.cl comes first
    log = (f"/tmp/pocl-xyz/program.cl:{n}:5: error: unknown type name 'this'\n"
           f"<source>:{n}: warning: something\n"
           "/data/local/tmp/phonetrain/kernels/tiled/gemm.cl:2:1: note: here\n")
    got = explain(log, line_table(text))
    assert f"{NAME}:31:5: error: unknown type name 'this'" in got
    assert f"{NAME}:31: warning: something" in got
    assert "pocl-xyz" not in got and "<source>" not in got
    common = line_table(text)[1]   # line 2 of the assembled file is common.cl's first line
    assert f"{common[0]}:{common[1]}:1: note: here" in got


def test_a_log_that_names_the_sources_is_kept():
    text = assemble_source(GEMM)
    log = f"{NAME}:31:1: error: unknown type name 'this'\n"
    assert explain(log, line_table(text)) == log


def test_compiler_messages_keep_the_diagnoses():
    log = ("2 errors generated.\nerror: a.cl:3:1: unknown type name 'this'\n"
           "Device pthread failed to build the program\n"
           "runner: kernel build failed: /tmp/k/gemm.cl (options \"\"): CL_BUILD_PROGRAM_FAILURE")
    got = compiler_messages(log)
    assert "a.cl:3:1: unknown type name 'this'" in got and "runner:" not in got
