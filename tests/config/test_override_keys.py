"""Overrides: a key the structured config lacks is refused before composing, naming the
closest key ("did you mean") or else listing the valid keys of its section, whether typed
plainly or with Hydra's `+`/`++` (which Hydra accepts and the study would ignore); a bad value set by an override is blamed on the override, not on
the file it overrode. `phonetrain aggregate --help` shows what it takes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from phonetrain.cli import main
from phonetrain.config import ConfigError, compose_one, compose_sweep


@pytest.mark.parametrize("override", ["measure.iteration=20", "+measure.iteration=20",
                                      "++measure.iteration=20"])
def test_unknown_key_is_refused_with_the_valid_keys(override):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", override])
    msg = str(e.value)
    assert "'measure.iteration' is not a key" in msg, msg
    assert "Did you mean 'measure.iterations'?" in msg, msg
    assert "use +" not in msg  # never Hydra's hint that leads to an ignored key


@pytest.mark.parametrize("override, guess", [
    ("measure.iteratoins=3", "measure.iterations"),
    ("model.btach_size=3", "model.batch_size"),
    ("mesure.warmup=3", "measure.warmup"),          # a typo in the section
    ("reslts_dir=x", "results_dir"),
    ("device.facts.peak_gflop=3", "device.facts.peak_gflops"),
])
def test_a_typo_names_the_closest_key_not_the_whole_list(override, guess):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", override])
    msg = str(e.value)
    assert f"Did you mean '{guess}'?" in msg, msg
    assert "bootstrap_resamples" not in msg, msg  # not the 28 keys of 'measure'


def test_a_key_far_from_any_lists_the_sections_keys():
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "measure.zzz=3"])
    msg = str(e.value)
    assert "Did you mean" not in msg and "'bootstrap_resamples'" in msg, msg


def test_a_typo_in_a_file_names_the_closest_key(conf):
    (conf / "config.yaml").write_text((conf / "config.yaml").read_text()
                                      + "measure:\n  iteratoins: 3\n")
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test"], conf_dir=conf)
    msg = str(e.value)
    assert "config.yaml" in msg and "Did you mean 'iterations'?" in msg, msg


def test_unknown_key_is_refused_for_one_run_too():
    with pytest.raises(ConfigError, match="'model.batchsize' is not a key.*'model.batch_size'"):
        compose_one(["model=lenet5", "+model.batchsize=4"])


def test_unknown_section_lists_the_roots_keys():
    with pytest.raises(ConfigError,
                       match="measur.iterations.*no such section.*'measure.iterations'"):
        compose_sweep(["sweep=test", "measur.iterations=3"])
    with pytest.raises(ConfigError, match="xyz.abc.*no such section.*'measure'"):
        compose_sweep(["sweep=test", "xyz.abc=3"])


def test_plus_on_an_existing_key_says_drop_the_plus():
    with pytest.raises(ConfigError, match="drop the '\\+'"):
        compose_sweep(["sweep=test", "+measure.iterations=3"])
    assert compose_sweep(["sweep=test", "++measure.iterations=3"]).root["measure"][
        "iterations"] == 3


@pytest.mark.parametrize("override, file", [
    ("model.batch_size=0", "model/mlp_16_16.yaml"),
    ("measure.timeout_s=0", "config.yaml"),
    ("backend.transfer=zero", "backend/opencl.yaml"),
])
def test_bad_value_from_an_override_names_the_override(override, file):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.models=[mlp_16_16]", "sweep.backends=[opencl]",
                       override])
    msg = str(e.value)
    assert msg.startswith(f"override '{override}'") and file in msg, msg
    assert "sweep.models" not in msg  # not blamed on the sweep listing the model


def test_bad_value_in_a_file_names_the_file(tmp_path):
    import shutil

    from phonetrain.config import CONF_DIR
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    f = conf / "model" / "mlp_16_16.yaml"
    f.write_text(f.read_text().replace("batch_size: 32", "batch_size: 0"))
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test"], conf)
    assert "override" not in str(e.value) and "model/mlp_16_16.yaml" in str(e.value)


def test_phonetrain_run_refuses_a_plus_key_in_one_message():
    res = CliRunner().invoke(main, ["run", "+measure.iteration=20"])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "'measure.iteration' is not a key" in res.output


def test_aggregate_help_names_overrides_not_a_folder():
    res = CliRunner().invoke(main, ["aggregate", "--help"])
    assert res.exit_code == 0
    usage = res.output.splitlines()[0]
    assert usage.endswith("[OVERRIDES]..."), usage
    assert "Hydra overrides the study ran with" in " ".join(res.output.split())


def test_a_map_entry_is_added_by_its_own_override_and_the_whole_map_says_how():
    """``sweep.backend_kernels`` is a map: an entry the sweep file lacks is added with
    ``+sweep.backend_kernels.<backend>=[...]`` (accepted, not refused as an unknown key); the
    whole-map override, which OmegaConf cannot add an entry by, names the entry and that
    form, instead of Hydra's '+' advice that the key check then refused."""
    base = ["sweep=test", "sweep.models=[mlp_16_16]", "sweep.kernels=[baseline,tiled]"]
    s = compose_sweep(base + ["+sweep.backend_kernels.opencl=[tiled]"])
    assert sorted(e.id for e in s.experiments) == ["mlp_16_16.cpu.none", "mlp_16_16.opencl.tiled"]
    with pytest.raises(ConfigError) as e:
        compose_sweep(base + ["sweep.backend_kernels={opencl:[tiled]}"])
    msg = str(e.value)
    for needle in ("'sweep.backend_kernels={opencl:[tiled]}'", "'sweep.backend_kernels.opencl'",
                   "'+sweep.backend_kernels.opencl=[...]'"):
        assert needle in msg, msg


@pytest.mark.parametrize("lines, needles", [
    ("cc_compiler: cc\n", ["'cc_compiler'", "Valid keys of 'device'", "'toolchain'"]),
    ("facts:\n  peak_gflop: 2.0\n", ["'peak_gflop'", "Did you mean 'peak_gflops'?"]),
    ("facts:\n  vendor: x\n", ["'vendor'", "Valid keys of 'device.facts'", "'bandwidth_gbps'"]),
])
def test_an_unknown_key_in_a_device_file_names_the_valid_keys(conf, lines, needles):
    (conf / "device" / "odd.yaml").write_text(f"name: odd\n{lines}")
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.devices=[host,odd]"], conf_dir=conf)
    msg = str(e.value)
    assert "odd.yaml" in msg and all(n in msg for n in needles), msg


def test_a_misspelled_bool_says_write_true_or_false():
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "measure.progress=flase"])
    msg = str(e.value)
    assert "override 'measure.progress=flase'" in msg and "write true or false" in msg, msg
