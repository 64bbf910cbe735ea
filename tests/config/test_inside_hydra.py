"""The composition API works inside a caller's own Hydra (a Hydra app, a notebook that called
``initialize_config_dir``) and leaves that Hydra as it found it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from phonetrain.config import compose_one, compose_sweep


def _callers_conf(tmp_path: Path) -> Path:
    d = tmp_path / "app_conf"
    d.mkdir()
    (d / "app.yaml").write_text("greeting: hello\n")
    return d


@pytest.mark.fresh_compose   # each composition by Hydra, inside and after the caller's
def test_compose_inside_and_after_a_callers_hydra(tmp_path: Path):
    alone = compose_sweep(["sweep=test"])
    with initialize_config_dir(version_base=None, config_dir=str(_callers_conf(tmp_path)),
                               job_name="app"):
        gh = GlobalHydra.instance()
        hydra = gh.hydra
        inside = compose_sweep(["sweep=test"])
        _, exp = compose_one(["model=lenet5"])
        assert GlobalHydra.instance() is gh and gh.hydra is hydra
        assert compose(config_name="app").greeting == "hello"  # the caller's config dir
    assert [e.config_hash for e in inside.experiments] == \
        [e.config_hash for e in alone.experiments]
    assert exp.model == "lenet5"
    assert not GlobalHydra.instance().is_initialized()
    after = compose_sweep(["sweep=test"])
    assert [e.id for e in after.experiments] == [e.id for e in alone.experiments]
