"""The Hydra config tree and its composition into a sweep (phonetrain.config)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from phonetrain.config import ConfigError, compose_one, compose_sweep, config_hash
from phonetrain.io import write_if_changed


def test_backend_kernels_must_name_listed_backends_and_kernels():
    with pytest.raises(ConfigError, match=r"sweep.backend_kernels.opencl_pipelined' is "
                                          r"\['nope'\]; list one or more kernel versions"):
        compose_sweep(["sweep.backend_kernels={opencl_pipelined:[nope]}"])
    # shrinking the sweep's lists by override keeps the file's restriction harmless
    ids = {e.id for e in compose_sweep(["sweep.kernels=[tiled]", "sweep.models=[mlp_16_16]"])
           .experiments}
    assert ids == {"mlp_16_16.cpu.none"} | {f"mlp_16_16.{b}.tiled" for b in (
        "opencl", "opencl_staged", "opencl_staged_map")}


def test_pipelined_backend_takes_copy_transfers_only():
    with pytest.raises(ConfigError, match=r"key 'transfer' is 'map'; a opencl backend takes "
                                          r"one of \('copy',\)"):
        compose_one(["backend=opencl_pipelined", "backend.transfer=map"])


@pytest.fixture(scope="module")
def default_sweep():
    """The default sweep, composed once for the tests that only read it (a composition of
    the default sweep is 36 experiments' members: the costliest call of this module)."""
    return compose_sweep()


def test_default_sweep_crosses_models_backends_kernels(default_sweep):
    sweep = default_sweep
    kernels = sweep.root["sweep"]["kernels"]
    assert "baseline" in kernels
    ids = sorted(e.id for e in sweep.experiments)
    expected = sorted([f"{m}.cpu.none" for m in ("mlp_784_256_128_16", "lenet5")] + [
        f"{m}.{b}.{k}" for m in ("mlp_784_256_128_16", "lenet5")
        for b in ("opencl", "opencl_staged", "opencl_staged_map") for k in kernels] + [
        f"{m}.{b}.baseline" for m in ("mlp_784_256_128_16", "lenet5")
        for b in ("opencl_pipelined", "vulkan")])
    assert ids == expected  # CPU runs once per model: they use no kernel version
    # sweep.backend_kernels keeps the pipelined placement and Vulkan to the baseline kernels
    assert {e.device for e in sweep.experiments} == {"host"}
    staged_map = next(e for e in sweep.experiments if e.backend == "opencl_staged_map")
    assert staged_map.config["backend"] == {"name": "opencl_staged_map", "kind": "opencl",
                                            "placement": "staged", "transfer": "map"}
    assert "facts" not in staged_map.config["device"]  # facts feed the report only


@pytest.mark.fresh_compose   # two compositions apart, each by Hydra
def test_composition_is_deterministic_and_hash_tracks_content(default_sweep):
    a, b = default_sweep, compose_sweep()   # composed apart, other compositions between
    assert [e.config_hash for e in a.experiments] == [e.config_hash for e in b.experiments]
    assert len({e.config_hash for e in a.experiments}) == len(a.experiments)
    assert config_hash({"x": 1, "y": [1, 2]}) == config_hash({"y": [1, 2], "x": 1})


def test_overrides_reach_every_experiment_and_select_a_sweep_file():
    sweep = compose_sweep(["measure.iterations=20", "sweep=test", "sweep.models=[lenet5]"])
    assert sweep.root["sweep"]["name"] == "test"
    assert {e.model for e in sweep.experiments} == {"lenet5"}
    assert all(e.config["measure"]["iterations"] == 20 for e in sweep.experiments)
    one = compose_sweep("sweep.backends=[opencl]")  # a single string is accepted too
    assert {e.backend for e in one.experiments} == {"opencl"}
    assert len(one.experiments) == 2 * len(one.root["sweep"]["kernels"])


def test_model_setting_changes_only_that_models_hashes(default_sweep):
    base = {e.id: e.config_hash for e in default_sweep.experiments}
    new = {e.id: e.config_hash for e in compose_sweep(["model.batch_size=16"]).experiments}
    assert all(base[i] != new[i] for i in base)  # applies to every model of the sweep
    conf_edit = compose_sweep(["sweep.models=[lenet5]"])
    assert all(e.model == "lenet5" for e in conf_edit.experiments)


def test_model_file_edit_changes_only_that_model(conf: Path):
    base = {e.id: e.config_hash for e in compose_sweep(conf_dir=conf).experiments}
    f = conf / "model" / "lenet5.yaml"
    f.write_text(f.read_text().replace("lr: 0.05", "lr: 0.01"))
    new = {e.id: e.config_hash for e in compose_sweep(conf_dir=conf).experiments}
    changed = {i for i in base if base[i] != new[i]}
    assert changed == {i for i in base if i.startswith("lenet5.")}


def test_compose_one_matches_the_sweep_cell(default_sweep):
    sweep = default_sweep
    _, exp = compose_one(["model=lenet5", "backend=opencl_staged", "kernel=baseline"])
    cell = next(e for e in sweep.experiments if e.id == exp.id)
    assert exp.id == "lenet5.opencl_staged.baseline"
    assert exp.config_hash == cell.config_hash


@pytest.mark.parametrize("overrides, needles", [
    (["sweep.models=[resnet9]"], ["model/resnet9.yaml", "sweep.models"]),
    (["sweep.devices=[host,pixel]"], ["device/pixel.yaml", "sweep.devices", "available"]),
    (["measure.iterations=many"], ["measure.iterations", "many"]),
    (["measure.iterations=[1"], ["malformed override"]),
    (["measure.iteratons=5"], ["measure.iteratons"]),
    (["measure.iterations=0"], ["config.yaml", "measure.iterations", ">= 1"]),
    (["model=lenet5"], ["sweep.models=[...]"]),
    (["sweep=nightly"], ["sweep/nightly.yaml"]),
])
def test_bad_overrides_name_the_key_or_file(overrides, needles):
    with pytest.raises(ConfigError) as e:
        compose_sweep(overrides)
    for n in needles:
        assert n in str(e.value), str(e.value)


@pytest.mark.parametrize("file, old, new, needles", [
    ("model/lenet5.yaml", "batch_size: 32", "batch_size: big",
     ["model/lenet5.yaml", "model.batch_size", "big"]),
    ("model/lenet5.yaml", "lr: 0.05", "lr: 0.05\nlearning_rate: 1",
     ["model/lenet5.yaml", "learning_rate"]),
    ("model/lenet5.yaml", "name: lenet5", "name: lenet7", ["model/lenet5.yaml", "'name'", "lenet7"]),
    ("backend/opencl.yaml", "placement: resident", "placement: pinned",
     ["backend/opencl.yaml", "'placement'", "pinned"]),
    ("device/host.yaml", "transport: local", "transport: usb",
     ["device/host.yaml", "'transport'", "usb"]),
    ("kernel/baseline.yaml", "name: baseline", "name: baseline2", ["kernel/baseline.yaml"]),
])
def test_bad_files_name_the_file_and_key(conf: Path, file, old, new, needles):
    f = conf / file
    f.write_text(f.read_text().replace(old, new))
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep.models=[lenet5]"], conf_dir=conf)
    for n in needles:
        assert n in str(e.value), str(e.value)


def test_new_device_file_plus_override_adds_only_its_experiments(conf: Path):
    text = (conf / "device" / "host.yaml").read_text().replace("name: host", "name: host2")
    (conf / "device" / "host2.yaml").write_text(text)
    base = compose_sweep(conf_dir=conf)
    both = compose_sweep(["sweep.devices=[host,host2]"], conf_dir=conf)
    old = {(e.device, e.id): e.config_hash for e in base.experiments}
    new = {(e.device, e.id): e.config_hash for e in both.experiments}
    assert {k: v for k, v in new.items() if k[0] == "host"} == old
    assert {k[1] for k in new if k[0] == "host2"} == {k[1] for k in old}


def test_write_if_changed_keeps_mtime_when_content_is_equal(tmp_path: Path):
    p = tmp_path / "a" / "params.json"
    assert write_if_changed(p, {"b": 1, "a": [1, 2]})
    past = time.time() - 100
    os.utime(p, (past, past))
    assert not write_if_changed(p, {"a": [1, 2], "b": 1})
    assert p.stat().st_mtime == pytest.approx(past)
    assert write_if_changed(p, {"a": [1, 2], "b": 2})
    assert p.stat().st_mtime > past + 50
    assert not list(p.parent.glob(".*tmp"))


def test_models_of_one_input_shape_share_the_data_job():
    """The batch files depend on dataset, shape, classes and batch size, not on which model
    reads them: a sweep of another model must not rewrite (and so re-measure) shared data."""
    from phonetrain.stages.params import job_params

    mlp = job_params(compose_sweep(["sweep.models=[mlp_784_256_128_16]"]))["data"]
    lenet = job_params(compose_sweep(["sweep.models=[lenet5]"]))["data"]
    assert mlp.keys() == lenet.keys() and mlp == lenet
