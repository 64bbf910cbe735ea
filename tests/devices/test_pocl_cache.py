"""Unwritable cache folders: PoCL's (it then hides its device) and phonetrain's own (the host
runner is built there). Real folders made unwritable with chmod; as root, whom permission bits
do not stop, the command runs as ``nobody`` (setpriv), so the bits mean what they say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import REPO
from helpers.workflow import seed_runner_build

NOBODY = 65534


def _as_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("running as root without setpriv: cannot make a folder unwritable")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]


@pytest.fixture
def base():
    """A folder the command's user owns (under /tmp, reachable by that user), removed after."""
    d = Path(tempfile.mkdtemp(prefix="phonetrain-cachetest-", dir="/tmp"))
    d.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(d, NOBODY, NOBODY)
    yield d
    for p in d.rglob("*"):
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(d, ignore_errors=True)


def _folder(base: Path, name: str, mode: int) -> Path:
    d = base / name
    d.mkdir()
    if os.geteuid() == 0:
        os.chown(d, NOBODY, NOBODY)
    d.chmod(mode)
    return d


def _seeded_cache(base: Path, runner: Path) -> Path:
    """phonetrain's own cache folder, writable, its runner folder holding the session's runner
    build (the same key: sources, ``cc``, flags), so ``phonetrain info`` compiles nothing: the
    subject here is PoCL's cache, not the runner's compile."""
    cache = _folder(base, "phonetrain-cache", 0o755)
    seed_runner_build(cache / "runner", runner)
    if os.geteuid() == 0:
        for p in [cache, *cache.rglob("*")]:
            os.chown(p, NOBODY, NOBODY)
    return cache


def _info(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "POCL_CACHE_DIR", "PHONETRAIN_CACHE")}
    env.update(PYTHONPATH=str(REPO / "src"), PYTHONDONTWRITEBYTECODE="1", **env_extra)
    return subprocess.run(_as_user([sys.executable, "-m", "phonetrain.cli", "info", *args]),
                          env=env, capture_output=True, text=True, timeout=600, cwd="/tmp")


def test_unwritable_home_names_phonetrains_cache_not_an_option(base):
    home = _folder(base, "home", 0o555)
    p = _info({"HOME": str(home)})
    assert p.returncode != 0
    err = p.stderr
    assert f"{home}/.cache/phonetrain/runner" in err and "PHONETRAIN_CACHE" in err, err
    assert "--results" not in err and "results_dir" not in err


def test_pocl_keeps_its_device_when_its_cache_folder_is_unwritable(base, runner):
    home = _folder(base, "home", 0o555)               # PoCL's ~/.cache/pocl cannot be made
    cache = _seeded_cache(base, runner)               # phonetrain's own cache is fine
    p = _info({"HOME": str(home), "PHONETRAIN_CACHE": str(cache)}, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    pocl = [pl for pl in doc["platforms"] if "portable" in pl["name"].lower()]
    if not pocl:
        pytest.skip("PoCL is not installed; apt install pocl-opencl-icd")
    assert pocl[0]["devices"], "PoCL hid its device: its cache folder was not writable"


def test_an_unwritable_pocl_cache_dir_is_named(base, runner):
    cache = _seeded_cache(base, runner)
    pocl = _folder(base, "pocl", 0o555)
    p = _info({"HOME": str(base), "PHONETRAIN_CACHE": str(cache),
               "POCL_CACHE_DIR": str(pocl)})
    assert p.returncode != 0
    assert f"POCL_CACHE_DIR={pocl} is not a folder you can write to" in p.stderr, p.stderr
