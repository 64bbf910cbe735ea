"""The kernel ABI written once: src/runner/kernel_abi.h and the README's ABI table are generated
from phonetrain.kernels.abi (and are not stale), every `__kernel` signature of the .cl files
agrees with the table, a kernel's bodies live in files of one name (`<stem>.cl`, and its C
function in src/runner/cpu_<stem>.c)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from phonetrain.kernels import KERNELS_ROOT, abi_gen, load_version
from phonetrain.kernels.abi import KERNEL_ARGS
from phonetrain.kernels.abi_gen import cl_kernels, kernel_files

VERSIONS = sorted(p.name for p in KERNELS_ROOT.iterdir() if p.is_dir())


def test_generated_files_are_up_to_date():
    stale = abi_gen.stale_files()
    assert stale == [], (f"{', '.join(str(p) for p in stale)} out of date: run "
                         "python -m phonetrain.kernels.abi_gen")


def test_check_names_a_planted_stale_header(tmp_path, monkeypatch):
    header = tmp_path / "kernel_abi.h"
    header.write_text(abi_gen.HEADER.read_text().replace('"n X Y"', '"n X Z"', 1))
    monkeypatch.setattr(abi_gen, "HEADER", header)
    result = CliRunner().invoke(abi_gen.main, ["--check"])
    assert result.exit_code == 1
    assert "kernel_abi.h is out of date: run python -m phonetrain.kernels.abi_gen" in \
        result.output
    assert CliRunner().invoke(abi_gen.main, []).exit_code == 0      # regenerates it
    assert header.read_text() == abi_gen.c_header()
    assert CliRunner().invoke(abi_gen.main, ["--check"]).exit_code == 0


def test_readme_without_markers_is_refused_naming_them():
    with pytest.raises(ValueError, match="kernel-abi-table"):
        abi_gen.with_readme_table("# Kernel ABI\n", abi_gen.readme_table())


def test_every_kernel_is_defined_in_files_of_one_name(tmp_path):
    files = kernel_files()
    assert sorted(set(KERNEL_ARGS) - set(files)) == []
    assert files["relu_fwd"] == "elementwise" and files["gemm_tn"] == "gemm"
    planted = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, planted)
    (planted / "tiled" / "pool.cl").write_text(
        (KERNELS_ROOT / "baseline" / "elementwise.cl").read_text())
    with pytest.raises(ValueError, match=r"kernel bias_add: defined in elementwise.cl, pool.cl"):
        kernel_files(planted)
    with pytest.raises(ValueError, match="kernel extra: no .cl file"):
        list(abi_gen.rows(table={"extra": ("i:n",)}))


def test_rows_give_the_c_kinds_and_element_types():
    rows = {k.name: k for k in abi_gen.rows()}
    assert rows["gemm_nn"].cpu_kinds == "iiifttft"
    assert rows["gemm_nn"].arg_names == "M N K alpha A B beta C"
    assert [a.c_decl for a in rows["softmax_xent"].args] == [
        "int B", "int C", "const float *logits", "const int *labels", "float *dlogits",
        "float *row_loss"]
    assert "X(maxpool_fwd, \"iiiiiiiittt\", \"B C H W K stride OH OW X Y argmax\")" in \
        abi_gen.c_header()


# ---- the .cl files against the table ---------------------------------------------------


def _parsed(decl: str) -> tuple[str, str, str]:
    """(kind, element type, name) of one OpenCL parameter: kind i/f for a scalar, r for a
    const pointer or a read-only image, w for another pointer."""
    words = decl.replace("*", " * ").split()
    name = words[-1]
    if "image2d_t" in words:
        return "r", "image", name
    dtype = next(w for w in words if w in ("int", "float"))
    if "*" not in words:
        return {"int": "i", "float": "f"}[dtype], dtype, name
    return ("r" if "const" in words else "w"), dtype, name


def _cl_files():
    return [(v, p) for v in VERSIONS for p in sorted((KERNELS_ROOT / v).glob("*.cl"))]


def signature_errors(path: Path, image: str | None = None) -> list[str]:
    """One line per ``__kernel`` of ``path`` that is not in the ABI table, is in another file
    than its row names, or whose parameters differ from its row (``image``: the argument a
    version reads through an ``image2d_t``)."""
    rows = {k.name: k for k in abi_gen.rows()}
    errors = []
    for name, decls in cl_kernels(path).items():
        if name not in rows:
            errors.append(f"{path}: __kernel {name} is not in the ABI table")
            continue
        if rows[name].file != path.stem:
            errors.append(f"{path}: __kernel {name} belongs in {rows[name].file}.cl")
        want = [("w" if a.kind == "rw" else a.kind,
                 "image" if a.name == image else a.dtype, a.name) for a in rows[name].args]
        if [_parsed(d) for d in decls] != want:
            errors.append(f"{path}: __kernel {name}({', '.join(decls)}) differs from the "
                          f"ABI {want}")
    return errors


@pytest.mark.parametrize("version,path", _cl_files(), ids=lambda x: getattr(x, "name", x))
def test_cl_signatures_agree_with_the_table(version, path):
    assert cl_kernels(path), f"{path}: no __kernel found"
    assert signature_errors(path, load_version(version).image_operand) == []


def test_every_kernel_has_an_opencl_body():
    defined = {n for _, p in _cl_files() for n in cl_kernels(p)}
    assert sorted(set(KERNEL_ARGS) - defined) == []


@pytest.mark.parametrize("old,new", [
    ("__global const float *X, __global float *Y)", "__global float *X, __global float *Y)"),
    ("__global const float *X, __global float *Y)", "__global const float *X)"),
    ("relu_fwd(const int n", "relu_fwd(const float n"),
])
def test_a_planted_signature_mismatch_is_found(tmp_path, old, new):
    src = (KERNELS_ROOT / "baseline" / "elementwise.cl").read_text()
    planted = tmp_path / "elementwise.cl"
    head = "__kernel void relu_fwd(const int n, __global const float *X, __global float *Y)"
    assert head in src
    planted.write_text(src.replace(head, head.replace(old, new)))
    errors = signature_errors(planted)
    assert len(errors) == 1 and "__kernel relu_fwd(" in errors[0], errors


def test_a_kernel_in_the_wrong_file_is_found(tmp_path):
    planted = tmp_path / "pool.cl"
    planted.write_text((KERNELS_ROOT / "baseline" / "elementwise.cl").read_text())
    errors = signature_errors(planted)
    assert any("__kernel relu_fwd belongs in elementwise.cl" in e for e in errors), errors


def test_macro_defined_kernels_are_read():
    assert cl_kernels(KERNELS_ROOT / "regblock" / "gemm.cl").keys() == {
        "gemm_nn", "gemm_nt", "gemm_tn"}


# ---- the CPU backend's files against the table -------------------------------------------

RUNNER_SRC = abi_gen.REPO / "src" / "runner"


def cpu_kernels(path: Path) -> dict[str, str]:
    """``{kernel: kinds}`` of every ``CPU_KERNEL(name, kinds)`` definition of a C file."""
    return dict(re.findall(r"^CPU_KERNEL\((\w+), (\w+)\)", path.read_text(), flags=re.M))


def test_every_kernel_has_one_c_function_in_the_file_of_its_name():
    rows = {k.name: k for k in abi_gen.rows()}
    found: dict[str, list[str]] = {}
    for path in sorted(RUNNER_SRC.glob("cpu_*.c")):
        for name, kinds in cpu_kernels(path).items():
            found.setdefault(name, []).append(path.name)
            assert kinds == rows[name].cpu_kinds, f"{path.name}: CPU_KERNEL({name}, {kinds})"
    assert {n: files for n, files in found.items() if files != [f"cpu_{rows[n].file}.c"]} \
        == {}
    assert sorted(set(KERNEL_ARGS) - set(found)) == []


def test_the_cpu_backend_has_a_file_per_kernel_file_and_none_over_800_lines():
    assert {f"cpu_{stem}.c" for stem in kernel_files().values()} <= \
        {p.name for p in RUNNER_SRC.glob("cpu_*.c")}
    long = {p.name: n for p in RUNNER_SRC.glob("*.c")
            if (n := len(p.read_text().splitlines())) > 800}
    assert long == {}
