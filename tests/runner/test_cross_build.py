"""Cross builds: the runner built with Debian's aarch64 cross compiler runs its CPU backend
under qemu-user and matches the numpy reference; the Android toolchain's error messages."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from phonetrain.config import MeasureConfig
from phonetrain.devices import toolchains
from phonetrain.devices.toolchains import ToolchainError

EM_AARCH64 = 183  # ELF e_machine of AArch64 (System V ABI, AArch64 supplement)


VERIFY_ATOL = MeasureConfig.verify_atol  # the study's tolerance


def elf_machine(path: Path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", f"{path} is not an ELF file"
    return int.from_bytes(head[18:20], "little")


@pytest.mark.skipif(shutil.which("aarch64-linux-gnu-gcc") is None or
                    shutil.which("qemu-aarch64") is None,
                    reason="needs Debian's gcc-aarch64-linux-gnu and qemu-user (.ci/setup)")
def test_linux_aarch64_runner_matches_reference_under_qemu(tmp_path):
    from phonetrain import reference
    from phonetrain.lowering import LowerSpec
    from phonetrain.lowering.files import write_bundle
    from phonetrain.plan import Plan
    from phonetrain.runner import run_plan

    tc = toolchains.resolve("linux-aarch64", device="board")
    runner = toolchains.build_runner(tmp_path / "build", cc=tc.cc, extra_flags=tc.extra_flags)
    assert elf_machine(runner) == EM_AARCH64
    root = tmp_path / "stage"
    spec = LowerSpec(model="mlp_16_16", batch_size=8, num_batches=2, warmup=1, iterations=3)
    plan_json = write_bundle(spec, root)
    run_plan(runner, plan_json, root, root / "out/qemu", threads=2, launcher=tc.emulator,
             timeout_s=300)
    doc = reference.verify(Plan.load(plan_json), root, root / "out/qemu")
    assert doc["max_abs_err"] <= VERIFY_ATOL, doc


def test_android_without_ndk_names_what_to_set(monkeypatch):
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    monkeypatch.delenv("ANDROID_NDK_ROOT", raising=False)
    with pytest.raises(ToolchainError, match="pixel_7.*ANDROID_NDK_HOME.*device.ndk"):
        toolchains.for_device({"name": "pixel_7", "toolchain": "android"})


def test_android_ndk_without_clang_names_the_expected_path(tmp_path, monkeypatch):
    monkeypatch.setenv("ANDROID_NDK_HOME", str(tmp_path / "ndk"))
    with pytest.raises(ToolchainError, match="aarch64-linux-android30-clang"):
        toolchains.resolve("android", android_api=30, device="p")


def test_android_ndk_layout_gives_clang_and_openmp_flags(tmp_path):
    clang = (tmp_path / "toolchains/llvm/prebuilt" / toolchains.NDK_HOST_TAG / "bin" /
             "aarch64-linux-android28-clang")
    clang.parent.mkdir(parents=True)
    clang.write_text("#!/bin/sh\n")
    tc = toolchains.resolve("android", ndk=str(tmp_path), device="p")
    assert tc.cc == str(clang) and tc.extra_flags == ("-fopenmp", "-static-openmp")
    assert tc.emulator is None  # a phone binary does not run on this host


def test_unknown_toolchain_and_missing_compiler_are_named():
    with pytest.raises(ToolchainError, match="unknown toolchain 'msvc'"):
        toolchains.resolve("msvc", device="x")
    with pytest.raises(ToolchainError, match="'no-such-cc' not found"):
        toolchains.resolve("host", cc="no-such-cc", device="x")
