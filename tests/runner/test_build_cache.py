"""Kernel builds measure a compile, not the OpenCL implementation's kernel cache: the runner's
build mode runs with an empty private PoCL cache and says so (``cached`` false), so the same
source gives the same binary size each time; with the user's cache (where PoCL hands back
binaries holding kernels compiled by earlier runs) ``cached`` is unknown (null)."""

from __future__ import annotations

import json
from pathlib import Path

from phonetrain import runner as rt
from phonetrain.kernels import resolve_sources, stage_kernels
from phonetrain.results import readers

N_SOURCES = len(resolve_sources("baseline"))


def _build(runner, pocl, out: Path, cold: bool) -> dict:
    """Build the baseline's staged programs (common.cl in front of each file, as the build
    stage compiles them)."""
    staged = stage_kernels("baseline", out.parent / "stage")
    r = rt.Runner.local_binary(runner, out.parent, pocl)
    return r.build([str(p) for p in sorted(staged.glob("*.cl"))], "", out, cold_cache=cold)


def test_cold_builds_are_compiles_and_repeat(runner, pocl, tmp_path):
    first = _build(runner, pocl, tmp_path / "a", cold=True)
    second = _build(runner, pocl, tmp_path / "b", cold=True)
    for a, b in zip(first["programs"], second["programs"]):
        assert a["cached"] is False and b["cached"] is False
        assert a["binary_size_bytes"] == b["binary_size_bytes"], a["program"]
    warm = _build(runner, pocl, tmp_path / "c", cold=False)
    assert {p["cached"] for p in warm["programs"]} == {None}  # the user's cache: unknown


def test_builds_table_carries_cached(runner, pocl, tmp_path):
    out = tmp_path / "build" / "host" / "kernels" / "baseline"
    doc = _build(runner, pocl, out / "pulled", cold=True)
    (out / "build.json").write_text(json.dumps(doc))
    df = readers.read_build(out / "build.json")
    assert list(df["cached"]) == [False] * N_SOURCES
