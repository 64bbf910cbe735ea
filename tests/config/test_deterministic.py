"""Nothing that changes between calls enters a composed config: an interpolation through a
resolver that may give another value on the next call (a time, a volatile variable) is
refused at composition, naming the key and the file or override that set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from phonetrain.config import ConfigError, compose_one, compose_sweep


@pytest.mark.parametrize("override, key, why", [
    ("report.title=x ${now:%H:%M:%S}", "report.title", "'now' gives the time"),
    ("results_dir=results-${now:%H%M%S}", "results_dir", "'now' gives the time"),
    ("measure.seed=${now:%S}", "measure.seed", "'now'"),
    ("dataset.path=/data/${oc.env:RANDOM,x}", "dataset.path", "'RANDOM'"),
    ("report.title=${oc.env:PWD}", "report.title", "'PWD'"),
    ("report.title=${hydra:run.dir}", "report.title", "hydra.run.dir"),
])
def test_volatile_override_is_refused(override, key, why):
    for compose in (lambda o: compose_sweep(["sweep=test", o]), lambda o: compose_one([o])):
        with pytest.raises(ConfigError) as e:
            compose(override)
        msg = str(e.value)
        assert f"key '{key}'" in msg and why in msg and override in msg, msg


def test_volatile_value_in_a_file_names_the_file(conf: Path):
    cfg = conf / "config.yaml"
    cfg.write_text(cfg.read_text() + "report:\n  title: run at ${now:%H:%M:%S}\n")
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test"], conf_dir=conf)
    assert str(e.value).startswith(f"{cfg}: key 'report.title'"), str(e.value)


def test_resolver_of_a_member_file_names_that_file(conf: Path):
    model = conf / "model" / "lenet5.yaml"
    model.write_text(model.read_text().replace("lr: 0.05", "lr: ${oc.decode:'0.0${now:%S}'}"))
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.models=[lenet5]"], conf_dir=conf)
    assert f"{model}: key 'model.lr'" in str(e.value), str(e.value)


def test_deterministic_interpolations_pass():
    sweep = compose_sweep(["sweep=test", "report.title=${sweep.name} on ${oc.env:HOME}",
                           "results_dir=${oc.select:sweep.name,x}-out"])
    assert sweep.root["report"]["title"].startswith("test on /")
    assert sweep.results_dir == "test-out"
