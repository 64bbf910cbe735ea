"""The check of run folders acts by moving outputs aside, and only when jobs execute: a dry run
lists what it would move and changes no file; `phonetrain check --dry-run` lists, `phonetrain
check` moves each finding into quarantine/ (with its note) -- also damage that only SHA-256
sees, which the check at workflow start does not look for -- and Snakemake's dry run then
plans exactly those runs again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.workflow import TINY, clone_workspace, env, planned_jobs, snakemake

CUT = "mlp_16_16.cpu.none"          # trace cut: seen by sizes and row counts
FLIPPED = "mlp_16_16.opencl.baseline"   # one dump byte flipped: seen by SHA-256 only


def _cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phonetrain.cli", *args], cwd=ws, env=env(ws),
                          capture_output=True, text=True, timeout=300)


def _snapshot(R: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in R.rglob("*") if p.is_file()}


def _plant(R: Path) -> None:
    trace = R / "runs" / "host" / CUT / "trace.csv"
    trace.write_text(trace.read_text().splitlines(keepends=True)[0])
    dump = sorted((R / "runs" / "host" / FLIPPED / "dumps").glob("*.f32"))[0]
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dump.write_bytes(bytes(data))


def test_a_dry_run_moves_nothing(completed_workspace: Path, tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    R = ws / "results"
    _plant(R)
    before = _snapshot(R)
    p = snakemake(ws, "--dry-run", "all")
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"would move aside results/runs/host/{CUT}: damaged" in p.stderr, p.stderr[-3000:]
    assert FLIPPED not in p.stderr  # the check at workflow start hashes nothing
    for mode in (["--summary"], ["--list-changes", "params"], ["--lint"]):
        snakemake(ws, *mode)
    assert _snapshot(R) == before and not (R / "quarantine").exists()


def test_check_moves_findings_aside_and_snakemake_plans_them(completed_workspace: Path,
                                                             tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    R = ws / "results"
    _plant(R)
    before = _snapshot(R)
    dry = _cli(ws, "check", "--dry-run", *TINY)
    assert dry.returncode == 0, dry.stderr
    lines = {ln.split(": ")[0]: ln for ln in dry.stdout.splitlines()}
    assert sorted(lines) == sorted(f"would move aside results/runs/host/{e}"
                                   for e in (CUT, FLIPPED)), dry.stdout
    assert "rows, the runner wrote" in lines[f"would move aside results/runs/host/{CUT}"]
    assert "SHA-256" in lines[f"would move aside results/runs/host/{FLIPPED}"]
    assert _snapshot(R) == before

    st = _cli(ws, "stale", *TINY)  # what the next snakemake all moves, and what it keeps
    assert st.returncode == 0, st.stderr
    assert f"move aside results/runs/host/{CUT}: damaged" in st.stdout, st.stdout
    assert f"check results/runs/host/{FLIPPED}: damaged" in st.stdout, st.stdout
    assert f"move aside results/runs/host/{FLIPPED}" not in st.stdout, st.stdout
    assert _snapshot(R) == before

    p = _cli(ws, "check", *TINY)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 2 and "2 moved aside" in p.stderr, p.stdout + p.stderr
    for exp in (CUT, FLIPPED):
        assert not (R / "runs" / "host" / exp).exists()
        [moved] = (R / "quarantine").glob(f"*/runs/host/{exp}")
        assert (moved / "run.json").exists() and (moved / "trace.csv").exists()
        note = json.loads(moved.with_name(exp + ".why.json").read_text())
        assert note["from"] == f"runs/host/{exp}" and note["why"].startswith("damaged")

    jobs = planned_jobs(ws)
    assert sorted(w["exp"] for r, w in jobs if r == "train") == sorted([CUT, FLIPPED])
    assert not {r for r, _ in jobs} & {"build_runner", "build_kernels", "lower", "data", "gemm"}
    st = _cli(ws, "stale", *TINY)
    assert st.returncode == 0, st.stderr
    assert not [ln for ln in st.stdout.splitlines() if ln.startswith("move aside")]
    trains = sorted(ln.split(" ")[1].split("/")[3] for ln in st.stdout.splitlines()
                    if ln.startswith("train "))
    assert trains == sorted([CUT, FLIPPED]), st.stdout
    assert _cli(ws, "check", *TINY).stdout == ""  # nothing left to move
