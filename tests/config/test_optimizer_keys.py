"""The optimizer keys of a model (``optimizer``, ``betas``, ``eps``): a bad value is refused
with a message naming the key; an SGD experiment's config, config hash and plan params hold
none of them (so runs measured before the keys existed keep their hashes); adam/adamw reach
the lowered plan."""

from __future__ import annotations

import json

import pytest

from phonetrain.config import ADAM_KEYS, ConfigError, compose_one, compose_sweep
from phonetrain.stages.params import plan_spec, run_params
from phonetrain.stages.specs import as_json, parse_plan, plan_params

CPU = ["model=mlp_16_16", "backend=cpu"]
# The model keys an experiment's config held before the optimizer keys existed.
SGD_MODEL_KEYS = {"name", "dataset", "batch_size", "lr", "momentum", "weight_decay"}


@pytest.mark.parametrize("override, key", [
    ("model.optimizer=rmsprop", "optimizer"),
    ("model.betas=[0.9,1.0]", "betas"),
    ("model.betas=[0.9]", "betas"),
    ("model.eps=0.0", "eps"),
    ("model.momentum=0.9", "momentum"),
])
def test_bad_adam_value_names_its_key(override, key):
    with pytest.raises(ConfigError, match=rf"key '{key}' is .*mlp_16_16|"
                                          rf"mlp_16_16.*key '{key}' is") as e:
        compose_one(CPU + ["model.optimizer=adam", override])
    assert f"'{override}'" in str(e.value) or "mlp_16_16.yaml" in str(e.value)


def test_fused_kernels_refuse_adam_naming_the_versions_that_take_it():
    with pytest.raises(ConfigError, match=r"key 'optimizer' is 'adamw'.*'fused'.*fused_step"
                                          r".*'baseline'") as e:
        compose_one(["model=mlp_16_16", "backend=opencl", "kernel=fused",
                     "model.optimizer=adamw"])
    assert "'fused'" not in str(e.value).split("take 'adamw':")[1].split("]")[0]
    compose_one(["model=mlp_16_16", "backend=opencl", "kernel=fused"])   # sgd: fine


def test_sgd_config_hash_and_plan_params_hold_no_adam_key():
    base = compose_sweep()
    for e in base.experiments:
        assert set(e.config["model"]) == SGD_MODEL_KEYS
        params = json.loads(as_json(plan_params(plan_spec(e), "data")))
        assert "optimizer" not in params
        assert parse_plan(params, "lower").optimizer == "sgd"
    # the adam keys do not enter an sgd run: setting them changes no hash
    same = compose_sweep(["model.betas=[0.5,0.6]", "model.eps=0.1", "model.optimizer=sgd"])
    assert [e.config_hash for e in same.experiments] == \
        [e.config_hash for e in base.experiments]
    assert [run_params(e) for e in same.experiments] == [run_params(e) for e in base.experiments]


def test_adamw_reaches_the_plan_and_changes_the_hash():
    _, sgd = compose_one(CPU)
    _, adamw = compose_one(CPU + ["model.optimizer=adamw", "model.weight_decay=0.01",
                                  "model.lr=0.001"])
    assert set(ADAM_KEYS) <= set(adamw.config["model"])
    assert adamw.config_hash != sgd.config_hash
    params = plan_params(plan_spec(adamw), "data")
    assert params["optimizer"] == {"name": "adamw", "betas": [0.9, 0.999], "eps": 1e-8}
    low = parse_plan(json.loads(as_json(params)), "lower")
    assert (low.optimizer, low.betas, low.eps, low.lr, low.weight_decay) == \
        ("adamw", (0.9, 0.999), 1e-8, 0.001, 0.01)
    assert low == plan_spec(adamw)
    assert plan_spec(sgd).optimizer == "sgd"


@pytest.mark.parametrize("override, needle", [
    ("model.optimizer=null", "takes no null"),
    ("model.eps=null", "takes no null"),
    ("model.betas=[0.9,null]", "takes no null"),
    ("model.betas=0.9", "write a list, e.g. 'model.betas=[0.9]'"),
    ("model.betas='0.9,0.999'", "write a list, e.g. 'model.betas=[0.9,0.999]'"),
])
def test_a_null_or_a_bare_value_says_what_to_write_for_its_own_key(override, needle):
    with pytest.raises(ConfigError) as e:
        compose_one(CPU + ["model.optimizer=adam", override])
    assert f"override {override!r}" in str(e.value) and needle in str(e.value)
    assert "sweep.models" not in str(e.value)


@pytest.mark.parametrize("line, needle", [
    ("optimizer: null", "takes no null"), ("eps: ~", "takes no null"),
    ("betas: 0.9", "write a YAML list")])
def test_a_null_or_a_bare_value_in_the_model_file_says_what_to_write(conf, line, needle):
    f = conf / "model" / "mlp_16_16.yaml"
    f.write_text(f.read_text() + ("" if line.startswith("optimizer") else "optimizer: adam\n")
                 + line + "\n")
    with pytest.raises(ConfigError) as e:
        compose_one(CPU, conf_dir=conf)
    assert str(f) in str(e.value) and needle in str(e.value)
