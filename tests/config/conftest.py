"""Fixture of the config tests: an editable copy of the config tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from phonetrain.config import CONF_DIR


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    """A private copy of conf/ that a test may edit."""
    dest = tmp_path / "conf"
    shutil.copytree(CONF_DIR, dest)
    return dest
