"""An edit that changes nothing the compiler sees is known without measuring: the build key of
the kernel sources after comment stripping and white-space collapsing (translation phases 2-3)."""

from __future__ import annotations

from phonetrain.kernels import KERNELS_ROOT, stage_kernels
from phonetrain.kernels.build_key import build_key, normalized

OPTS = ["gemm.cl:-DTS=16"]


def _staged(tmp_path, root=KERNELS_ROOT, version="baseline"):
    src = stage_kernels(version, tmp_path / "staged", kernels_root=root)
    return {f.name: f.read_text() for f in sorted(src.glob("*.cl"))}


def _copy_kernels(tmp_path):
    import shutil
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    return root


def test_comment_only_edits_keep_the_key(tmp_path):
    root = _copy_kernels(tmp_path)
    before = build_key(_staged(tmp_path / "a", root), OPTS)
    gemm = root / "baseline" / "gemm.cl"
    text = gemm.read_text()
    gemm.write_text("// a new first line\n" + text.replace(
        "float acc = 0.0f;", "float acc = 0.0f;   /* a block\n comment */", 1)
        + "\n\n/* trailing */\n")
    after = _staged(tmp_path / "b", root)
    assert after["gemm.cl"] != _staged(tmp_path / "c", KERNELS_ROOT)["gemm.cl"]
    assert build_key(after, OPTS) == before


def test_a_planted_slowdown_changes_the_key(tmp_path):
    root = _copy_kernels(tmp_path)
    before = build_key(_staged(tmp_path / "a", root), OPTS)
    gemm = root / "baseline" / "gemm.cl"
    gemm.write_text(gemm.read_text().replace("acc += a[k] * b[k];",
                                             "acc += a[k] * b[k] + 0.0f * a[k];", 1))
    assert build_key(_staged(tmp_path / "b", root), OPTS) != before


def test_options_and_tuning_are_part_of_the_key(tmp_path):
    src = _staged(tmp_path)
    assert build_key(src, ["gemm.cl:-DTS=16"]) != build_key(src, ["gemm.cl:-DTS=8"])
    assert build_key(src, ["gemm.cl:-DTS=16"]) == build_key(src, ["gemm.cl:-DTS=16 "])


def test_what_the_compiler_sees_stays():
    # a block comment inside a directive joins its lines (phase 3), it does not split them
    assert normalized("#define X 1 /* a\nb */ + 2\n") == "#define X 1 + 2"
    assert normalized("#define X 1 /* a\nb */ + 2\n") != normalized("#define X 1\n+ 2\n")
    # comment markers inside literals are text, not comments
    assert normalized('char c = \'/\'; const char *s = "// no /* no */";') == \
        'char c = \'/\'; const char *s = "// no /* no */";'
    # a spliced line is one line
    assert normalized("#define Y \\\n 3\n") == "#define Y 3"
    # a source that uses __LINE__ keeps every line: moving code changes the key
    assert normalized("int a = __LINE__;\n\n") != normalized("\nint a = __LINE__;\n")
    assert normalized("a  =\t1; // x\n\n#line 7 \"f.cl\"\nb = 2;") == "a = 1;\nb = 2;"
