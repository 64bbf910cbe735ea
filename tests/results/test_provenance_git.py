"""The ``git_rev`` provenance column names the project's own revision: a copy of the project
without its ``.git`` inside another repository records ``not a git checkout`` and a hash of
its sources, never that repository's commit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO

_IGNORE = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
GIT = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", "-c", "init.defaultBranch=m"]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def _rev_of_copy(project: Path) -> str:
    """git_rev() as the copied package computes it (its own interpreter, its own files)."""
    code = "from phonetrain.results.provenance import git_rev; print(git_rev())"
    return subprocess.run([sys.executable, "-c", code], cwd=project, check=True, text=True,
                          capture_output=True, env={"PYTHONPATH": str(project / "src"),
                                                    "PATH": "/usr/bin:/bin"}).stdout.strip()


def test_copy_inside_another_repository(tmp_path: Path):
    outer = tmp_path / "thesis"
    outer.mkdir()
    _git(outer, "init", "-q")
    (outer / "notes.md").write_text("another project\n")
    _git(outer, "add", "notes.md")
    _git(outer, "commit", "-qm", "notes")
    outer_rev = _git(outer, "rev-parse", "--short=12", "HEAD")
    project = outer / "phonetrain"
    project.mkdir()
    shutil.copy2(REPO / "Snakefile", project / "Snakefile")
    for d in ("src", "rules", "conf"):
        shutil.copytree(REPO / d, project / d, ignore=_IGNORE)

    rev = _rev_of_copy(project)  # untracked inside the outer repository
    assert rev.startswith("not a git checkout, sources ") and outer_rev not in rev, rev
    assert _rev_of_copy(project) == rev  # the same sources, the same hash
    kernel = project / "src" / "kernels" / "baseline" / "gemm.cl"
    kernel.write_text(kernel.read_text() + "\n// edited\n")
    edited = _rev_of_copy(project)
    assert edited.startswith("not a git checkout, sources ") and edited != rev

    _git(outer, "add", "phonetrain")  # now the outer repository tracks the project's files
    _git(outer, "commit", "-qm", "vendor phonetrain")
    tracked = _git(outer, "rev-parse", "--short=12", "HEAD")
    assert _rev_of_copy(project) == tracked
    kernel.write_text(kernel.read_text() + "// again\n")
    assert _rev_of_copy(project) == tracked + "-dirty"
    (outer / "notes.md").write_text("edits outside the project do not make it dirty\n")
    _git(outer, "checkout", "-q", "--", "phonetrain")
    assert _rev_of_copy(project) == tracked


def test_project_with_its_own_repository(tmp_path: Path):
    project = tmp_path / "phonetrain"
    project.mkdir()
    for d in ("src", "conf"):
        shutil.copytree(REPO / d, project / d, ignore=_IGNORE)
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "import")
    assert _rev_of_copy(project) == _git(project, "rev-parse", "--short=12", "HEAD")
