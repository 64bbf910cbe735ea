"""docs/configuration.md is generated from the structured config and up to date: every key the
config accepts is on it, with a meaning, its default and the values the checks allow."""

from __future__ import annotations

import subprocess
import sys

from helpers import REPO
from phonetrain.cli.config_table import keys, markdown
from phonetrain.config import CONF_DIR, MeasureConfig
from phonetrain.config.compose import _compose, _private_hydra

DOC = REPO / "docs" / "configuration.md"
REGENERATE = "python -m phonetrain.cli.config_table --markdown > docs/configuration.md"


def test_docs_configuration_page_is_up_to_date():
    assert DOC.read_text() == markdown() + "\n", f"docs/configuration.md is stale: run {REGENERATE}"


def test_every_key_has_a_meaning():
    """A field added to a dataclass without the docstring under it fails here."""
    assert [k.path for k in keys() if not k.meaning] == []


def test_the_page_lists_every_key_of_the_composed_default_config():
    """Every leaf of conf/ composed as the study composes it (what an override may set) is a
    row of the page, and the page has no row the config lacks."""
    def leaves(node, prefix=""):
        for name, value in node.items():
            if isinstance(value, dict) and name != "backend_kernels":
                yield from leaves(value, f"{prefix}{name}.")
            else:
                yield prefix + name
    with _private_hydra(CONF_DIR):
        composed, _, _ = _compose(CONF_DIR, [])
    rows = {k.path for k in keys()}
    assert set(leaves(composed)) == rows
    text = DOC.read_text()
    assert [k for k in sorted(rows) if f"| `{k}` |" not in text] == []


def test_defaults_and_limits_come_from_the_config():
    row = {k.path: k for k in keys()}
    assert row["measure.repeats"].default == str(MeasureConfig().repeats)
    assert row["measure.repeats"].type == "int: >= 1"
    assert row["device.transport"].type == "str: local, adb"
    assert row["model.momentum"].type == "float: in [0, 1)"
    assert row["model.name"].default == "required"
    assert row["device.adb_port"].type == "int or null"
    assert row["sweep.backend_kernels"].type == "map of str to list of str"


def test_module_prints_the_page():
    out = subprocess.run([sys.executable, "-m", "phonetrain.cli.config_table", "--markdown"],
                         capture_output=True, text=True, check=True).stdout
    assert out == markdown() + "\n"
