"""A kernel version owns its knowledge: ``src/kernels/<version>/version.yaml`` and its ``.cl``
files state the version (defaults, launch-geometry rule, device requirements, GEMM library,
image operand, tuning space and constraints); the Python modules know no version by name.

Checks here: the ``.cl`` defaults equal the resolved defines; every version.yaml mistake is one
KernelVersionError naming the file and key; constraints reject bad candidates and defaults;
the tuning space comes from version.yaml (defaults first, inherited along the chain); no
module under src/phonetrain names a version outside the registries of names."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

import phonetrain
from phonetrain.kernels import KERNELS_ROOT, KernelVersionError, load_version, resolve_sources
from phonetrain.kernels import tuning
from phonetrain.kernels.gemm import GemmShape, gemm_spec
from phonetrain.kernels.versions import parse_constraint

VERSIONS = sorted(p.name for p in KERNELS_ROOT.iterdir() if p.is_dir())
DEFAULT_RE = re.compile(r"^\s*#ifndef\s+(\w+)\s*\n\s*#define\s+\1\s+(\S+)", re.MULTILINE)


# ---------------------------------------------------------------- .cl defaults

def cl_defaults(path: Path) -> dict[str, str]:
    """``{NAME: value}`` of every ``#ifndef NAME`` / ``#define NAME value`` pair of a file."""
    return dict(DEFAULT_RE.findall(path.read_text()))


@pytest.mark.parametrize("version", VERSIONS)
def test_cl_defaults_match_version_yaml(version):
    """Every ``#ifndef`` default of every .cl file the version compiles equals its resolved
    define, and every define a file uses has such a default (the file builds alone, CLBlast's
    style); each file opens with a banner comment."""
    kv = load_version(version)
    for fname, path in resolve_sources(version).items():
        text = path.read_text()
        assert text.lstrip().startswith("/*"), f"{path}: no banner comment at the top"
        defaults = cl_defaults(path)
        for name, value in defaults.items():
            assert name in kv.defines, (f"{path}: #ifndef {name} default {value}, but "
                                        f"version {version} has no define {name}")
            assert value == str(kv.defines[name]), (
                f"{path}: #define {name} {value}, version {version} defines "
                f"{name}={kv.defines[name]}")
        words = set(re.findall(r"\w+", text))
        for name in kv.defines:
            if name in words:
                assert name in defaults, f"{path} uses {name} with no #ifndef default"
    for name in kv.tuned_defines():   # every tuning parameter has a default in some file
        assert any(name in cl_defaults(p) for p in resolve_sources(version).values()), name


def test_cl_defaults_parser_reads_only_matching_ifndef_define_pairs():
    text = ("/* x */\n#ifndef TSM\n#define TSM 64\n#endif\n#ifndef A\n#define B 2\n#endif\n"
            "  #ifndef RN\n  #define RN 4 /* one pixel */\n#endif\n")
    assert DEFAULT_RE.findall(text) == [("TSM", "64"), ("RN", "4")]


# ---------------------------------------------------------------- version.yaml errors

def _write(root: Path, name: str, yaml_text: str | None) -> Path:
    (root / name).mkdir(parents=True, exist_ok=True)
    yml = root / name / "version.yaml"
    if yaml_text is not None:
        yml.write_text(yaml_text)
    return yml


@pytest.mark.parametrize("yaml_text, key, needles", [
    ("tile: 4\n", "tile", ["unknown key"]),
    ("geometry: tiles\n", "'geometry'", ["tiles", "regblock"]),
    ("requires: [imgs]\n", "'requires'", ["imgs", "images"]),
    ("requires: images\n", "'requires'", ["list"]),
    ("gemm_library: cublas\n", "'gemm_library'", ["cublas"]),
    ("image_operand: C\n", "'image_operand'", ["A, B"]),
    ("local_sizes: {gemm_xx: [4, 4]}\n", "'local_sizes.gemm_xx'", ["ABI"]),
    ("local_sizes: {gemm_nn: [0, 4]}\n", "'local_sizes.gemm_nn'", ["positive"]),
    ("defines: [A, B]\n", "'defines'", ["mapping"]),
    ("tuning: {cands: []}\n", "'tuning'", ["cands"]),
    ("tuning: {candidates: {A: 1}}\n", "'tuning.candidates'", ["list"]),
    ("defines: {A: 1}\ntuning: {candidates: [{defines: {A: 2}, locl: [4, 4]}]}\n",
     "'tuning.candidates[0]'", ["locl"]),
    ("defines: {A: 1}\ntuning: {candidates: [{defines: {A: 2}, local: [4]}]}\n",
     "'tuning.candidates[0].local'", ["[LX, LY]"]),
    ("defines: {A: 1}\ntuning: {candidates: [{defines: {B: 2}}]}\n",
     "'tuning.candidates[0].defines.B'", ["no default"]),
    ("tuning: {constraints: [\"__import__('os').system('true') == 0\"]}\n",
     "'tuning.constraints[0]'", ["malformed"]),
    ("tuning: {constraints: ['A % 2']}\n", "'tuning.constraints[0]'", ["comparison"]),
    ("tuning: {constraints: ['2 ** A > 1']}\n", "'tuning.constraints[0]'", ["Pow"]),
    ("tuning: {constraints: ['A > ']}\n", "'tuning.constraints[0]'", ["not an expression"]),
    ("defines: {A: 4}\ntuning: {candidates: [{defines: {A: 3}}], constraints: ['A % 2 == 0']}\n",
     "'tuning.candidates[0]'", ["violates", "A % 2 == 0", "'tuning.constraints[0]'"]),
    ("defines: {A: 3}\ntuning: {candidates: [{defines: {A: 4}}], constraints: ['A % 2 == 0']}\n",
     "'defines'", ["the defaults", "violates", "A % 2 == 0"]),
    ("defines: {A: 4}\ntuning: {candidates: [{defines: {A: 2}}], constraints: ['LX <= 8']}\n",
     "'tuning.constraints[0]'", ["LX", "does not define"]),
    ("defines: {A: 0}\ntuning: {constraints: ['8 % A == 0']}\n", "'tuning.constraints[0]'",
     ["cannot be evaluated"]),
    ("inherits: ''\n", "'inherits'", ["folder name"]),          # was: the kernels root itself
    ("inherits: .\n", "'inherits'", ["folder name"]),
    ("inherits: ../v\n", "'inherits'", ["folder name"]),
    ("defines: {A: true}\n", "'defines.A'", ["number or string"]),   # was: -DA=True
    ("defines: {1: 2}\n", "'defines.1'", ["not a name"]),
])
def test_version_yaml_error_names_file_and_key(tmp_path, yaml_text, key, needles):
    yml = _write(tmp_path, "v", yaml_text)
    with pytest.raises(KernelVersionError) as e:
        load_version("v", tmp_path)
    msg = str(e.value)
    assert str(yml) in msg and key in msg, msg
    for n in needles:
        assert n in msg, msg
    assert len(msg.splitlines()) == 1, msg


def test_inherited_constraint_checks_the_childs_defaults(tmp_path):
    """Constraints and candidates are inherited; a child's own defaults must satisfy them and
    the error names the child's file."""
    _write(tmp_path, "parent", "defines: {TSM: 64, WPTM: 8}\n"
           "tuning: {candidates: [{defines: {TSM: 32, WPTM: 4}}],"
           " constraints: ['TSM % WPTM == 0']}\n")
    child = _write(tmp_path, "child", "inherits: parent\ndefines: {WPTM: 6}\n")
    with pytest.raises(KernelVersionError) as e:
        load_version("child", tmp_path)
    assert str(child) in str(e.value) and "'defines'" in str(e.value), str(e.value)
    assert "TSM % WPTM == 0" in str(e.value)


def test_real_version_rejects_a_candidate_violating_its_constraints(tmp_path):
    """regblock's vector widths: RN = 5 (no float5) is refused at load, not at compile time."""
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    yml = root / "regblock" / "version.yaml"
    text = yml.read_text().replace(
        "  constraints:", "    - {defines: {RM: 4, RN: 5, VK: 8}, local: [4, 4]}\n  constraints:")
    yml.write_text(text)
    n = len(load_version("regblock").tuning_candidates)
    with pytest.raises(KernelVersionError) as e:
        load_version("regblock", root)
    msg = str(e.value)
    assert str(yml) in msg and f"'tuning.candidates[{n}]'" in msg, msg
    assert "RN == 2 or RN == 4 or RN == 8 or RN == 16" in msg, msg
    # image inherits regblock: its own constraints apply to it, regblock's to regblock only
    assert load_version("image", root).constraints == load_version("image").constraints


@pytest.mark.parametrize("text", ["f(1) == 1", "A.b == 1", "A[0] == 1", "'a' == 'a'",
                                  "True == 1", "(lambda: 1)() == 1", "not A == 1", "A if B else C",
                                  "A == 1.5", "A == (1, 2)", "A << 1 == 2"])
def test_constraint_language_rejects_everything_but_arithmetic(text):
    with pytest.raises(ValueError):
        parse_constraint(text)


def test_constraint_language_accepts_arithmetic_and_logic(tmp_path):
    _write(tmp_path, "v", "defines: {A: 8, B: 4}\nlocal_sizes: {gemm_nn: [4, 4], gemm_nt: [4, 4],"
           " gemm_tn: [4, 4]}\ntuning:\n  candidates: [{defines: {A: 16}, local: [8, 2]}]\n"
           "  constraints: ['A % B == 0 and (A // B >= 2 or -A < 0)', '0 < LX * LY <= 16',"
           " 'A / B != 3', 'A - B + 1 > 0']\n")
    v = load_version("v", tmp_path)
    assert v.candidates == [{"defines": {"A": 8}, "local": [4, 4]},
                            {"defines": {"A": 16}, "local": [8, 2]}]


# ---------------------------------------------------------------- what versions state

def test_versions_state_their_attributes():
    lib = load_version("clblast")
    assert lib.gemm_library == "clblast" and lib.requires == ["clblast"]
    img = load_version("image")
    assert img.image_operand == "B" and img.requires == ["images"] and img.geometry == "image"
    assert load_version("regblock").geometry == "regblock" and \
        load_version("tiled").geometry == "tiled"
    base = load_version("baseline")
    assert (base.geometry, base.requires, base.gemm_library, base.image_operand) == (
        "baseline", [], None, None)
    spec = gemm_spec(img, [GemmShape("gemm_nn", 8, 8, 8)], source="g.cl")
    assert "b_image_width4" in spec and spec["source"] == "g.cl"
    spec = gemm_spec(lib, [GemmShape("gemm_nn", 8, 8, 8)], source="g.cl")
    assert spec["source"] == "clblast" and spec["options"] == ""


def test_tuning_space_comes_from_version_yaml(tmp_path):
    """Defaults first (the version's values of the tuned defines; the GEMM local size when
    candidates tune it), then the listed candidates; a child inherits the candidates but its
    own defaults lead; untunable versions have only the defaults."""
    for name in VERSIONS:
        kv = load_version(name)
        assert kv.candidates[0] == kv.default_candidate()
        assert kv.candidates[1:] == kv.tuning_candidates
        assert tuning.tunable(name) == tuning.tunable(kv) == (len(kv.tuning_candidates) > 0)
    assert not tuning.tunable("baseline") and not tuning.tunable("clblast")
    assert tuning.tunable("tiled") and tuning.tunable("regblock") and tuning.tunable("image")
    assert load_version("tiled").candidates[0] == {
        "defines": {"TSM": 64, "TSN": 64, "TSK": 8, "WPTM": 8, "WPTN": 4, "PAD": 1, "VW": 1,
                    "PREFETCH": 0, "DBUF": 0},
        "local": None}
    assert load_version("regblock").candidates[0] == {
        "defines": {"RM": 8, "RN": 16, "VK": 16}, "local": [4, 4]}
    assert load_version("image").candidates[0] == {"defines": {"RM": 4, "RN": 4},
                                                   "local": [8, 8]}
    root = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, root)
    (root / "tiled_child").mkdir()
    (root / "tiled_child" / "version.yaml").write_text("inherits: tiled\ndefines: {TSK: 16}\n")
    child = load_version("tiled_child", root)
    assert child.geometry == "tiled" and tuning.tunable(child)
    assert child.candidates[0]["defines"]["TSK"] == 16
    assert child.candidates[1:] == load_version("tiled").candidates[1:]


def test_tune_defaults_only_tries_the_defaults():
    kv = load_version("regblock")
    seen = []

    def run_spec(spec):
        seen.append(spec["options"])
        return {"status": "ok", "cases": [
            {"kernel": c["kernel"], "M": c["M"], "N": c["N"], "K": c["K"], "status": "ok",
             "gflops": 1.0, "max_err": 0.0} for c in spec["cases"]]}
    shapes = [GemmShape("gemm_nn", 8, 8, 8)]
    doc = tuning.tune(kv, shapes, run_spec, source="g.cl", defaults_only=True)
    assert seen == [kv.options] and len(doc["trials"]) == 1
    assert doc["classes"]["gemm_nn_8x8x8"]["defines"] == kv.candidates[0]["defines"]
    seen.clear()
    doc = tuning.tune(kv, shapes, run_spec, source="g.cl")
    assert len(seen) == len(doc["trials"]) == len(kv.candidates)
    assert [{"defines": t["defines"], "local": t["local"]} for t in doc["trials"]] == \
        kv.candidates


# ---------------------------------------------------------------- no version names in code

SRC = Path(phonetrain.__file__).parent
# "baseline" is the default version (LowerSpec.kernel), so code may name it.
NAMED = set(VERSIONS) - {"baseline"}
# Modules allowed to name versions, and why; each entry must still be needed.
ALLOWED = {
    "report/analysis.py": "the report's kernel guideline names the versions it compares",
    "report/findings/gemm.py": "the report's kernel guideline names the versions it compares",
}


def _registry_literals(tree: ast.AST) -> set[int]:
    """ids of the string constants that are names in a registry: arguments of
    ``register_geometry(...)`` (launch-geometry rule names) and keys of the
    ``REQUIREMENTS`` / ``GEMM_LIBRARIES`` tables (requirement and library names)."""
    ok: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_geometry":
            ok |= {id(a) for a in node.args}
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(getattr(t, "id", None) in ("REQUIREMENTS", "GEMM_LIBRARIES") for t in targets) \
                and isinstance(node.value, ast.Dict):
            ok |= {id(k) for k in node.value.keys}
    return ok


def _version_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    ok = _registry_literals(tree)
    return [f"{path.relative_to(SRC)}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in NAMED
            and id(n) not in ok]


def test_no_module_names_a_kernel_version():
    """What a version is lives in its folder: no module under src/phonetrain branches on a
    version's name (string literals equal to a version folder's name), except the registries
    of rule, requirement and library names and the modules in :data:`ALLOWED`."""
    found = [hit for p in sorted(SRC.rglob("*.py")) for hit in _version_literals(p)]
    bad = [h for h in found if h.split(":")[0] not in ALLOWED]
    assert not bad, "modules naming kernel versions:\n" + "\n".join(bad)
    stale = [m for m in ALLOWED if not any(h.startswith(m + ":") for h in found)]
    assert not stale, f"ALLOWED entries no longer needed: {stale}"
    # the registries do hold the names (the exemption is not vacuous)
    assert any(_registry_literals(ast.parse((SRC / "kernels" / m).read_text()))
               for m in ("launch.py", "versions.py"))


def test_an_inheritance_cycle_names_the_file_that_closes_it(tmp_path):
    _write(tmp_path, "a", "inherits: b\n")
    yml_b = _write(tmp_path, "b", "inherits: a\n")
    with pytest.raises(KernelVersionError) as e:
        load_version("a", tmp_path)
    assert str(e.value).startswith(f"{yml_b}: key 'inherits' names 'a', closing the "
                                   "inheritance cycle a -> b -> a; make one")


def test_a_version_yaml_that_is_not_text_names_the_file(tmp_path):
    yml = _write(tmp_path, "v", None)
    yml.write_bytes(b"\xff\xfe\x00inherits: baseline\n")
    with pytest.raises(KernelVersionError, match="not a UTF-8 text file") as e:
        load_version("v", tmp_path)
    assert str(e.value).startswith(str(yml))
