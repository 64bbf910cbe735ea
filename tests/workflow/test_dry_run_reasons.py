"""Readable reruns: after a kernel edit, the dry run is short and each job that reads the
edited file names it as its reason."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.workflow import clone_workspace, snakemake

EDITED = "src/kernels/baseline/elementwise.cl"


def dry_run_jobs(out: str) -> list[dict[str, str]]:
    """The job blocks of a ``snakemake --dry-run`` listing: rule, input, reason per job."""
    jobs: list[dict[str, str]] = []
    for line in out.splitlines():
        m = re.match(r"^(?:local)?rule (\w+):$", line)
        if m:
            jobs.append({"rule": m.group(1), "input": "", "reason": ""})
            continue
        m = re.match(r"^\s+(input|reason): (.*)$", line)
        if m and jobs:
            jobs[-1][m.group(1)] = m.group(2)
    return jobs


def test_a_kernel_edit_dry_run_is_short_and_names_the_edited_file(completed_workspace: Path,
                                                                 tmp_path: Path):
    ws = clone_workspace(completed_workspace, tmp_path / "ws")
    f = ws / EDITED
    f.write_text(f.read_text() + "\n// an edit\n")
    p = snakemake(ws, "--dry-run")
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout + p.stderr
    assert len(out.encode()) < 20_000, out[:3000]
    jobs = dry_run_jobs(p.stdout)
    readers = [j for j in jobs if EDITED in j["input"].split(", ")]
    assert {j["rule"] for j in readers} >= {"build_kernels", "deploy"}
    # a job reading the file names it, or the upstream output it waits for (Snakemake gives
    # the first reason that applies); none reruns for a param
    assert EDITED in next(j for j in readers if j["rule"] == "build_kernels")["reason"]
    for j in readers:
        assert EDITED in j["reason"] or j["reason"].startswith(
            "Input files updated by another job"), j
    assert not [j for j in jobs if "Params have changed" in j["reason"]]
    assert max(len(j["reason"]) for j in jobs) < 1000
