"""The composed study is kept between invocations (phonetrain.stages.study_cache): used again
exactly while its config files, sources, overrides and the environment variables they name
are unchanged, composed again when any of them changes, never kept when composing fails, and
checked against the host on every use."""

from __future__ import annotations

import os
import pickle
import shutil
from pathlib import Path

import pytest

from helpers import REPO
from phonetrain.config import ConfigError
from phonetrain.config import compose as compose_mod
from phonetrain.stages import study_cache
from phonetrain.stages.study_cache import Composed, load_or_compose, study_key


def _tree(tmp_path: Path) -> Path:
    """A workflow folder: the checkout's conf/ and a small src/ of its own."""
    base = tmp_path / "wf"
    shutil.copytree(REPO / "conf", base / "conf")
    (base / "src" / "kernels" / "v").mkdir(parents=True)
    (base / "src" / "kernels" / "v" / "k.cl").write_text("kernel void k() {}\n")
    return base


def _composed(tag: str) -> Composed:
    from phonetrain.config import Sweep

    sweep = Sweep(root={"tag": tag}, members={"model": {}}, experiments=[])
    return Composed(sweep, {}, {}, {}, {}, {}, {}, {}, [], {}, {}, {}, {}, {}, {})


class Counting:
    """A compose function that counts its calls and can be told to fail."""

    def __init__(self):
        self.calls = 0
        self.fail = False

    def __call__(self, base, overrides):
        self.calls += 1
        if self.fail:
            raise ConfigError("planted: bad config")
        return _composed(f"call {self.calls}")


@pytest.fixture
def host_checks(monkeypatch):
    """The host checks a cached study gets, recorded instead of run."""
    seen = []
    monkeypatch.setattr(compose_mod, "check_host", lambda *a: seen.append(a))
    return seen


def test_the_key_moves_with_each_input_and_with_nothing_else(tmp_path, monkeypatch):
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PT_CACHE_VAR", raising=False)
    k0 = study_key(base, ["sweep=test"])
    assert study_key(base, ["sweep=test"]) == k0   # nothing changed
    os.utime(base / "conf" / "config.yaml")        # a touch is no edit
    assert study_key(base, ["sweep=test"]) == k0
    assert study_key(base, ["sweep=test", "measure.iterations=20"]) != k0
    (base / "src" / "kernels" / "v" / "k.cl").write_text("kernel void k() { }\n")
    k1 = study_key(base, ["sweep=test"])
    assert k1 != k0
    (base / "src" / "kernels" / "v" / "new.cl").write_text("")   # a new file
    k2 = study_key(base, ["sweep=test"])
    assert k2 != k1
    m = base / "conf" / "model" / "lenet5.yaml"
    m.write_text(m.read_text() + "# a comment\n")
    k3 = study_key(base, ["sweep=test"])
    assert k3 != k2
    # a variable named by ${oc.env:...} in a config file: unset, empty and set all differ
    m.write_text(m.read_text() + "# lr: ${oc.env:PT_CACHE_VAR,0.1}\n")
    k4 = study_key(base, ["sweep=test"])
    monkeypatch.setenv("PT_CACHE_VAR", "")
    k5 = study_key(base, ["sweep=test"])
    monkeypatch.setenv("PT_CACHE_VAR", "0.2")
    k6 = study_key(base, ["sweep=test"])
    assert len({k3, k4, k5, k6}) == 4
    monkeypatch.setenv("PT_OTHER_VAR", "x")   # a variable no config names: the same key
    assert study_key(base, ["sweep=test"]) == k6
    # a variable named in an override
    ov = ["report.title=${oc.env:PT_TITLE_VAR}"]
    monkeypatch.setenv("PT_TITLE_VAR", "a")
    ka = study_key(base, ov)
    monkeypatch.setenv("PT_TITLE_VAR", "b")
    assert study_key(base, ov) != ka
    monkeypatch.chdir(base)   # another working directory
    assert study_key(base, ["sweep=test"]) != k6


def test_an_unchanged_study_is_read_and_an_edited_one_composed_again(tmp_path, monkeypatch,
                                                                     host_checks):
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    compose = Counting()
    first, hit = load_or_compose(base, ["sweep=test"], compose)
    assert (hit, compose.calls, host_checks) == (False, 1, [])
    again, hit = load_or_compose(base, ["sweep=test"], compose)
    assert hit and compose.calls == 1 and again == first
    assert len(host_checks) == 1   # the cached study is checked against this host
    (base / "conf" / "sweep" / "test.yaml").write_text(
        (base / "conf" / "sweep" / "test.yaml").read_text() + "\n# edited\n")
    edited, hit = load_or_compose(base, ["sweep=test"], compose)
    assert not hit and compose.calls == 2 and edited.sweep.root == {"tag": "call 2"}
    assert load_or_compose(base, "sweep=test", compose)[1]   # one string: the same overrides


def test_a_failed_composition_is_not_kept(tmp_path, monkeypatch, host_checks):
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    compose = Counting()
    compose.fail = True
    for calls in (1, 2):   # the same message stops each invocation
        with pytest.raises(ConfigError, match="planted"):
            load_or_compose(base, ["sweep=test"], compose)
        assert compose.calls == calls
    assert not list((tmp_path / study_cache.CACHE_DIR).glob("study-*"))


def test_a_host_check_that_fails_now_stops_a_cached_study(tmp_path, monkeypatch):
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    compose = Counting()
    load_or_compose(base, [], compose)

    def refuse(*a):
        raise ConfigError("planted: the dataset folder is gone")
    monkeypatch.setattr(compose_mod, "check_host", refuse)
    with pytest.raises(ConfigError, match="dataset folder is gone"):
        load_or_compose(base, [], compose)
    assert compose.calls == 1


def test_a_damaged_entry_is_composed_again_and_replaced(tmp_path, monkeypatch, host_checks):
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    compose = Counting()
    load_or_compose(base, [], compose)
    (entry,) = (tmp_path / study_cache.CACHE_DIR).glob("study-*.pickle")
    entry.write_bytes(entry.read_bytes()[:20])   # truncated
    got, hit = load_or_compose(base, [], compose)
    assert not hit and compose.calls == 2
    assert pickle.loads(entry.read_bytes()) == got   # written whole again
    assert not list(entry.parent.glob(".study-*"))   # no temporary file left


def test_the_newest_entries_are_kept(tmp_path, monkeypatch, host_checks):
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    compose = Counting()
    for i in range(study_cache.KEEP + 3):
        load_or_compose(base, [f"measure.iterations={i + 1}"], compose)
    assert len(list((tmp_path / study_cache.CACHE_DIR).glob("study-*.pickle"))) \
        == study_cache.KEEP


def test_a_folder_that_cannot_be_written_leaves_the_study_uncached(tmp_path, monkeypatch,
                                                                   host_checks):
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".snakemake").write_text("a file where the folder would be")
    compose = Counting()
    assert not load_or_compose(base, [], compose)[1]
    assert not load_or_compose(base, [], compose)[1] and compose.calls == 2


def test_the_schemas_missing_marker_is_omegaconfs():
    """The schema spells OmegaConf's mandatory-value marker itself (no OmegaConf import)."""
    import omegaconf

    from phonetrain.config import schema
    assert schema.MISSING == omegaconf.MISSING


def test_an_editors_dangling_lock_link_in_conf_is_keyed_not_a_traceback(tmp_path, monkeypatch):
    """Emacs keeps ``.#host.yaml``, a link to ``user@host.pid`` that does not exist, beside a
    config file being edited: the workflow's parse reads every file under conf/ for the key,
    and this one cannot be read. The key takes the link's target instead, so it still moves
    when the lock comes or goes, and the study composes (Hydra reads the chosen files only)."""
    base = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    k0 = study_key(base, ["sweep=test"])
    lock = base / "conf" / "device" / ".#host.yaml"
    lock.symlink_to("someone@host.4242")
    k1 = study_key(base, ["sweep=test"])
    assert k1 != k0
    lock.unlink()
    lock.symlink_to("someone@host.4343")
    assert study_key(base, ["sweep=test"]) not in (k0, k1)
    assert compose_mod.compose_sweep(["sweep=test"], base / "conf").experiments
