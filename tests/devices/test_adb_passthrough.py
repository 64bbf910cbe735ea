"""No system adb is on PATH: every adb command the README, the docs and the error messages
give is spelled `phonetrain adb ...`, which runs the adb of the adbutils wheel on the study's
server, and works as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from helpers.adb import connect_vdev, disconnect_vdev

REPO = Path(__file__).resolve().parents[2]
# An adb command as a user would type it: in quotes or backticks, starting with "adb ".
BARE_ADB = re.compile(r"""(?<![\w-])(?<!phonetrain )[`'"]adb (connect|reconnect|disconnect|"""
                      r"""kill-server|start-server|devices|shell|push|pull|-a|-P)\b""")


def _phonetrain(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "phonetrain.cli", *args], capture_output=True,
                          text=True, timeout=60, env=dict(os.environ))


def test_phonetrain_adb_reaches_the_studys_server(adb_server, tmp_path):
    vd = connect_vdev(adb_server, tmp_path / "dev")
    try:
        p = _phonetrain("adb", "devices")
        assert p.returncode == 0, p.stderr
        assert f"{vd.serial}\tdevice" in p.stdout, p.stdout
        p = _phonetrain("adb", "disconnect", vd.serial)
        assert p.returncode == 0 and "disconnected" in p.stdout, p.stdout + p.stderr
        p = _phonetrain("adb", "connect", vd.serial)
        assert p.returncode == 0 and "connected" in p.stdout, p.stdout + p.stderr
        p = _phonetrain("adb", "-s", vd.serial, "shell", "echo", "hi")
        assert p.returncode == 0 and p.stdout.strip() == "hi", p.stdout + p.stderr
    finally:
        disconnect_vdev(adb_server, vd)


def test_no_bare_adb_command_is_given_to_users():
    texts = [REPO / "README.md", *(REPO / "docs").glob("*.md"),
             *(REPO / "src" / "phonetrain").rglob("*.py")]
    found = [f"{t.relative_to(REPO)}:{n}: {line.strip()}"
             for t in texts for n, line in enumerate(t.read_text().splitlines(), 1)
             if BARE_ADB.search(line)]
    assert found == [], "\n".join(found)
