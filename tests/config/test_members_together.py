"""compose_sweep's members composed together: one Hydra composition picks a member of every
axis (phonetrain.config.compose._compose_members_together) where no member's section can
depend on another axis's choice, and each member is composed alone where one can."""

from __future__ import annotations

import shutil

import pytest

from phonetrain.config import CONF_DIR, compose_sweep
from phonetrain.config import compose


def test_members_composed_together_equal_members_composed_alone(monkeypatch):
    for overrides in ([], ["sweep=test", "sweep.batches=[8,16]", "measure.iterations=3"]):
        together = compose_sweep(overrides)
        with monkeypatch.context() as m:
            m.setattr(compose, "_members_independent", lambda *a: False)
            alone = compose_sweep(overrides)
        assert together == alone, overrides


def test_the_default_sweep_takes_a_composition_per_member_of_its_longest_axis(monkeypatch):
    calls = []
    inner = compose._compose
    monkeypatch.setattr(compose, "_compose", lambda d, o: (calls.append(o), inner(d, o))[1])
    sweep = compose_sweep()
    longest = max(len(sweep.root["sweep"][a + "s"]) for a in compose.AXES)
    assert len(calls) == 1 + longest < 1 + sum(len(v) for v in sweep.members.values())


DEVICE_READS_MODEL = ("device/host.yaml", 'opencl_device: ""', "opencl_device: ${model.name}")


def _planted(tmp_path, where: str, old: str, new: str):
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    f = conf / where
    body = f.read_text()
    assert old in body
    f.write_text(body.replace(old, new, 1))
    return conf


@pytest.mark.parametrize("where, old, new", [
    DEVICE_READS_MODEL,                                                  # reads another section
    ("kernel/tiled.yaml", "name:", "# @package _global_\nname:"),        # writes beyond its own
    ("model/lenet5.yaml", "name:", "defaults:\n  - _self_\nname:"),     # chooses other files
    ("config.yaml", "defaults:", "hydra:\n  searchpath: [file:///x]\ndefaults:"),  # elsewhere
])
def test_a_file_that_may_couple_the_axes_makes_each_member_compose_alone(tmp_path, where, old,
                                                                          new):
    root = {"sweep": {a + "s": ["m"] for a in compose.AXES}}
    assert compose._members_independent(CONF_DIR, root, [])
    assert not compose._members_independent(_planted(tmp_path, where, old, new), root, [])


@pytest.mark.parametrize("override", ["measure.iterations=${oc.env:ITERS}",
                                      "hydra.searchpath=[file:///x]"])
def test_an_override_that_may_couple_the_axes_makes_each_member_compose_alone(override):
    root = {"sweep": {a + "s": ["m"] for a in compose.AXES}}
    assert not compose._members_independent(CONF_DIR, root, [override])


def test_a_device_reading_the_model_gets_the_value_it_has_composed_alone(tmp_path):
    """The device file reads the model's name: composed alone (config.yaml's model), not
    with whichever model a composition of several members would have picked beside it."""
    conf = _planted(tmp_path, *DEVICE_READS_MODEL)
    sweep = compose_sweep(["sweep.models=[mlp_16_16,lenet5]", "sweep.backends=[cpu]"], conf)
    assert sweep.members["device"]["host"]["opencl_device"] == "mlp_784_256_128_16"
