"""A transport is one module and one line of ``phonetrain.devices.TRANSPORTS``: the config
accepts the registered names only, ``get_transport`` builds the registered class, and the
stages learn what they need from its traits, never from its name."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from helpers import REPO
from helpers.board_transport import BoardTransport
from phonetrain.config import CONF_DIR, ConfigError, compose_sweep
from phonetrain.devices import (TRANSPORTS, TransportError, get_transport, is_this_host,
                                shares_host_cpu, transport_class)
from phonetrain.stages.schedule import MEASURE, host_share


@pytest.fixture
def conf_with_board(tmp_path: Path) -> Path:
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    text = (conf / "device" / "host.yaml").read_text()
    text = text.replace("name: host ", "name: board").replace("transport: local", "transport: board")
    (conf / "device" / "board.yaml").write_text(text)
    return conf


def test_an_unregistered_transport_is_refused_naming_the_file_and_the_known_ones(
        conf_with_board: Path):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.devices=[board]"], conf_dir=conf_with_board)
    msg = str(e.value)
    assert "device/board.yaml" in msg and "'board'" in msg and "'local', 'adb'" in msg, msg
    with pytest.raises(TransportError, match="use one of local, adb"):
        transport_class("board")


def test_one_registry_line_adds_a_transport(conf_with_board: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(TRANSPORTS, "board", "helpers.board_transport:BoardTransport")
    sweep = compose_sweep(["sweep=test", "sweep.devices=[board]"], conf_dir=conf_with_board)
    device = sweep.members["device"]["board"]
    assert device["transport"] == "board"
    t = get_transport(device, tmp_path / "stage")
    assert type(t) is BoardTransport and t.name == "board" and t.root == tmp_path / "stage"
    # the stages read the traits: a board measures beside this host's jobs, keeps no
    # per-machine record of this host
    assert not shares_host_cpu(device) and not is_this_host(device)
    assert host_share(MEASURE, shares_host_cpu(device), 4) == 0
    local = {"name": "host", "transport": "local"}
    assert shares_host_cpu(local) and is_this_host(local)
    assert host_share(MEASURE, shares_host_cpu(local), 4) == 4


def test_no_stage_compares_a_transport_name():
    """``stages/`` asks a transport's traits; a comparison with a registered name there
    would make a new transport an edit of the stages."""
    names = set(TRANSPORTS)
    found = []
    for path in sorted((REPO / "src" / "phonetrain" / "stages").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                consts = [c.value for c in [node.left, *node.comparators]
                          if isinstance(c, ast.Constant)]
                if names & {c for c in consts if isinstance(c, str)}:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == []
