"""A version's build hash (what a tuning file records) ignores comments and white space and
follows every change of the compiled program."""

from __future__ import annotations

from phonetrain.kernels import build_hash, source_hash
from helpers.planted import planted_kernels

GEMM = "tiled/gemm.cl"
BANNER = "/* tiled: GEMM"


def test_a_comment_edit_keeps_the_build_hash_and_changes_the_source_hash(tmp_path):
    plain = planted_kernels(tmp_path / "a", GEMM, BANNER, BANNER)
    edited = planted_kernels(tmp_path / "b", GEMM, BANNER, "// a comment line\n\n   " + BANNER)
    assert source_hash("tiled", edited) != source_hash("tiled", plain)
    assert build_hash("tiled", edited) == build_hash("tiled", plain)


def test_a_code_edit_changes_the_build_hash(tmp_path):
    plain = planted_kernels(tmp_path / "a", GEMM, BANNER, BANNER)
    edited = planted_kernels(tmp_path / "b", GEMM, "+=", "+= 0.0f +")
    assert build_hash("tiled", edited) != build_hash("tiled", plain)


def test_an_edit_of_common_cl_changes_the_build_hash_of_every_version(tmp_path):
    plain = planted_kernels(tmp_path / "a", GEMM, BANNER, BANNER)
    edited = planted_kernels(tmp_path / "b", "common.cl", "/* Helpers",
                             "#define PLANTED 1\n/* Helpers")
    assert build_hash("baseline", edited) != build_hash("baseline", plain)
