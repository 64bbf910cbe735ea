"""Values that compose but cannot work are refused at composition with the file and key: a
model file naming another model, optimizer factors that make SGD diverge, batch files larger
than the host's memory; an explicit iteration count raises an unset cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from phonetrain.config import validate as C
from phonetrain.config import ConfigError, compose_one, compose_sweep


def test_model_file_naming_another_model(conf: Path):
    (conf / "model" / "lenet_fast.yaml").write_text(
        (conf / "model" / "lenet5.yaml").read_text().replace("lr: 0.05", "lr: 0.1"))
    for compose in (lambda: compose_sweep(["sweep=test", "sweep.models=[lenet_fast]"],
                                          conf_dir=conf),
                    lambda: compose_one(["model=lenet_fast"], conf_dir=conf)):
        with pytest.raises(ConfigError) as e:
            compose()
        msg = str(e.value)
        assert str(conf / "model" / "lenet_fast.yaml") in msg and "'lenet5'" in msg, msg
        assert "must equal the file name 'lenet_fast'" in msg, msg


@pytest.mark.parametrize("override", ["model.momentum=1", "model.momentum=1.5",
                                      "model.weight_decay=1"])
def test_diverging_optimizer_factors(override):
    key = override.split("=")[0].split(".")[1]
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.models=[lenet5]", override])
    msg = str(e.value)
    assert "model/lenet5.yaml" in msg and f"'{key}'" in msg and "[0, 1)" in msg, msg
    sweep = compose_sweep(["sweep=test", "sweep.models=[lenet5]", f"model.{key}=0.9"])
    assert sweep.experiments[0].config["model"][key] == 0.9


def test_batches_beyond_host_memory_name_the_key(monkeypatch):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "dataset.num_batches=1000000000"])
    msg = str(e.value)
    assert "dataset.num_batches" in msg and "bytes available" in msg, msg
    # the condition built: the default 8 batches against a host with 1 MB available
    monkeypatch.setattr(C, "available_memory_bytes", lambda: 1 << 20)
    need = C.batches_bytes((1, 28, 28), 32, 8)
    assert need > 1 << 20
    with pytest.raises(ConfigError) as e:
        compose_one(["model=lenet5"])
    msg = str(e.value)
    assert f"need {need} bytes" in msg and f"{1 << 20} bytes available" in msg, msg
    assert "dataset/digits.yaml" in msg and "lower dataset.num_batches to" in msg, msg
    monkeypatch.setattr(C, "available_memory_bytes", lambda: need)
    compose_one(["model=lenet5"])


def test_explicit_iterations_raise_an_unset_cap(conf: Path):
    sweep = compose_sweep(["sweep=test", "measure.iterations=200"])
    assert sweep.root["measure"]["max_iterations"] == 200
    assert sweep.experiments[0].config["measure"]["max_iterations"] == 200
    with pytest.raises(ConfigError) as e:  # both set: the message names the key to change
        compose_sweep(["sweep=test", "measure.iterations=200", "measure.max_iterations=60"])
    assert "set measure.max_iterations to 200 or more" in str(e.value), str(e.value)
    cfg = conf / "config.yaml"
    cfg.write_text(cfg.read_text() + "measure:\n  max_iterations: 60\n")
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "measure.iterations=200"], conf_dir=conf)
    assert str(e.value).startswith(str(cfg)), str(e.value)


@pytest.mark.parametrize("override, key, allowed", [
    ("measure.cooldown_s=1e300", "measure.cooldown_s", "0..604800"),
    ("measure.bootstrap_resamples=1000000000000", "measure.bootstrap_resamples", "2..100000"),
    ("measure.threads=1000000000000", "measure.threads", "0..1024"),
    ("measure.threads=4294967298", "measure.threads", "0..1024"),  # 2**32 + 2: 2 as a C int
    ("measure.seed=4294967296", "measure.seed", f"0..{2**31 - 1}"),
    ("measure.timeout_s=1e20", "measure.timeout_s", "> 0 and <= 604800"),
    ("model.batch_size=4294967298", "batch_size", f"1..{2**31 - 1}"),
])
def test_huge_numbers_are_refused_naming_the_key_and_range(override, key, allowed):
    """A value that would overflow a timer, exhaust memory in the bootstrap or be cut to 32
    bits by the runner (running another count than the config records) is refused at
    composition, naming the key and its allowed range."""
    for compose in (lambda: compose_sweep(["sweep=test", override]),
                    lambda: compose_one([override])):
        with pytest.raises(ConfigError) as e:
            compose()
        msg = str(e.value)
        assert f"key '{key}'" in msg and f"must be {allowed}" in msg and override in msg, msg
    name, value = override.split("=")
    within = {"measure.cooldown_s": "604800", "measure.threads": "1024",
              "measure.bootstrap_resamples": "100000"}.get(name)
    if within:  # the bound itself is allowed
        assert compose_sweep(["sweep=test", f"{name}={within}"]).root["measure"][
            name.split(".")[1]] == float(within)
