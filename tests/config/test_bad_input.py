"""Careless input: each mistake gives one clear error naming the file, key or override and
what to do, before any job runs, and never a Python traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from phonetrain.config import validate as C
from phonetrain.cli import main
from phonetrain.config import ConfigError, compose_one, compose_sweep, normalize_overrides
from phonetrain.data import DatasetError, load
from phonetrain.kernels import KERNELS_ROOT, KernelVersionError, load_version


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch) -> Path:
    """A private copy of src/kernels that the config validation reads."""
    dest = tmp_path / "kernels"
    shutil.copytree(KERNELS_ROOT, dest)
    monkeypatch.setattr(C, "KERNELS_ROOT", dest)
    return dest


@pytest.mark.parametrize("override, needles", [
    ("measure.timeout_s=0", ["config.yaml", "measure.timeout_s", "> 0"]),
    ("measure.timeout_s=-5", ["measure.timeout_s", "> 0"]),
    ("measure.verify_atol=-1", ["measure.verify_atol", ">= 0"]),
    ("measure.cooldown_s=-1", ["measure.cooldown_s", ">= 0"]),
    ("measure.gemm_min_time_ms=0", ["measure.gemm_min_time_ms", "> 0"]),
    ("measure.gemm_sizes=[256,0]", ["measure.gemm_sizes", "[0]"]),
    ("report.dpi=0", ["report.dpi", ">= 1"]),
    ("results_dir=", ["results_dir", "empty"]),
    ("results_dir='/tmp/r-{device}'", ["results_dir", "braces", "wildcards"]),
    ("model.lr=-1", ["model/lenet5.yaml", "'lr'", ">= 0"]),
    ("dataset.name=mnsit", ["dataset.name", "mnsit", "mnist"]),
])
def test_bad_values_fail_at_composition(override, needles):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.models=[lenet5]", override])
    for n in needles:
        assert n in str(e.value), str(e.value)


def test_model_dataset_shape_mismatch_names_the_model_file():
    with pytest.raises(ConfigError) as e:
        compose_one(["model=mlp_16_16", "model.dataset=digits"])
    msg = str(e.value)
    assert "model/mlp_16_16.yaml" in msg and "(16,)" in msg and "(1, 28, 28)" in msg, msg
    with pytest.raises(ConfigError, match="model/lenet5.yaml.*cifar10"):
        compose_sweep(["sweep=test", "sweep.models=[lenet5]", "dataset.name=cifar10"])


def _pixel_refused(conf: Path, text: str, devices: str) -> str:
    """The message of the ConfigError that a ``device/pixel.yaml`` holding ``text`` raises
    in the test sweep over ``sweep.devices=<devices>``."""
    (conf / "device" / "pixel.yaml").write_text(text)
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", f"sweep.devices={devices}"], conf_dir=conf)
    return str(e.value)


def test_device_yaml_syntax_error_names_file_and_line(conf: Path):
    msg = _pixel_refused(conf, "name: pixel\ntransport: [local\n", "[host,pixel]")
    assert "device/pixel.yaml" in msg and "line" in msg, msg


def test_device_yaml_missing_name_names_the_file(conf: Path):
    text = (conf / "device" / "host.yaml").read_text().replace("name: host", "")
    msg = _pixel_refused(conf, text, "[pixel]")
    assert "device/pixel.yaml" in msg and "'name'" in msg, msg


def test_device_yaml_typo_key_names_file_and_key(conf: Path):
    text = (conf / "device" / "host.yaml").read_text().replace("name: host", "name: pixel")
    msg = _pixel_refused(conf, text.replace("toolchain:", "toolchian:"), "[pixel]")
    assert "device/pixel.yaml" in msg and "toolchian" in msg, msg
    assert "raised while composing" not in msg, msg


def _version(kernels: Path, conf: Path, name: str, yaml_text: str) -> None:
    (kernels / name).mkdir()
    (kernels / name / "version.yaml").write_text(yaml_text)
    (conf / "kernel" / f"{name}.yaml").write_text(f"name: {name}\n")


@pytest.mark.parametrize("versions, needles", [
    ({"bad": "inherits: baseline\ndefines: {TSM: 64\n"}, ["bad/version.yaml", "not valid YAML"]),
    ({"bad": "- inherits\n"}, ["bad/version.yaml", "mapping"]),
    ({"bad": "inherits: basline\n"}, ["bad/version.yaml", "'inherits'", "basline"]),
    ({"bad": "inherits: other\n", "other": "inherits: bad\n"}, ["cycle", "bad -> other -> bad"]),
    ({"bad": "inherits: tiled\ngeometry: tiles\n"}, ["bad/version.yaml", "'geometry'", "tiles"]),
    ({"bad": "inherits: tiled\ndefines: {WPTM: 6}\n"},
     ["bad/version.yaml", "'defines'", "violates", "TSM % WPTM == 0"]),
])
def test_bad_kernel_version_fails_at_composition(conf, kernels, versions, needles):
    for name, text in versions.items():
        _version(kernels, conf, name, text)
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.kernels=[baseline,bad]"], conf_dir=conf)
    msg = str(e.value)
    assert "kernel/bad.yaml" in msg, msg
    for n in needles:
        assert n in msg, msg
    with pytest.raises(KernelVersionError):
        load_version("bad", kernels)


def test_mnist_without_folder_says_to_set_dataset_path():
    with pytest.raises(DatasetError) as e:
        load("mnist", folder=None)
    assert "dataset.path" in str(e.value) and " in ;" not in str(e.value), str(e.value)


@pytest.mark.parametrize("args, needle", [
    (["dataset.name=nosuch"], "dataset.name"),
    (["model=mlp_16_16", "model.dataset=digits"], "mlp_16_16.yaml"),
    (["measure.timeout_s=0"], "measure.timeout_s"),
])
def test_phonetrain_run_bad_config_is_one_message_no_traceback(args, needle):
    res = CliRunner().invoke(main, ["run", *args])
    assert res.exit_code == 1, res.output
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert needle in res.output and "Traceback" not in res.output, res.output


def _truncated_mnist(folder: Path) -> Path:
    """IDX files whose image body is cut short (a partial download)."""
    folder.mkdir()
    (folder / "train-images-idx3-ubyte").write_bytes(
        bytes([0, 0, 8, 3]) + (100).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
        + b"\0" * 5000)
    (folder / "train-labels-idx1-ubyte").write_bytes(
        bytes([0, 0, 8, 1]) + (100).to_bytes(4, "big") + b"\0" * 100)
    return folder


def test_data_stage_truncated_idx_is_one_message_and_no_batches(tmp_path: Path, capsys):
    import json

    from phonetrain.stages.job import main as stage_main
    from phonetrain.stages.train import STAGES
    folder = _truncated_mnist(tmp_path / "mnist")
    p = {"batch_size": 32, "dataset": "mnist", "dir": "data/mnist/b32", "input_shape": None,
         "classes": None, "seed": 0, "heldout": None,
         "dataset_config": {"allow_download": False, "name": "mnist",
                                       "num_batches": 2, "path": str(folder)}}
    log = tmp_path / "logs" / "data.log"
    rc = stage_main(STAGES, ["data", "--log", str(log), "--params", json.dumps(p), "--output",
                             f"dir={tmp_path / 'results' / 'data' / 'mnist' / 'b32'}"])
    err = capsys.readouterr().err
    assert rc == 1 and "train-images-idx3-ubyte" in err and "truncated" in err, err
    assert "Traceback" not in err and "FAILED" in log.read_text()
    assert not (tmp_path / "results" / "data" / "mnist").exists()


def test_phonetrain_run_missing_mnist_folder_is_one_message(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["run", "model=lenet5", "dataset.name=mnist",
                                    f"dataset.path={tmp_path / 'nowhere'}",
                                    f"results_dir={tmp_path / 'results'}"])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), res.output
    assert "nowhere" in res.output and "dataset.path" in res.output, res.output


def test_failed_workflow_partial_report_does_not_hide_missing_runs(tmp_path: Path):
    """The partial report written on failure must not make the next run a no-op. (One model
    on the CPU backend: the runner's compile fails whatever the sweep.)"""
    from helpers.workflow import TINY, make_workspace, planned, snakemake
    small = TINY + ["sweep.models=[mlp_16_16]", "sweep.backends=[cpu]"]
    ws = make_workspace(tmp_path / "ws")
    src = ws / "src" / "runner" / "main.c"
    src.write_text(src.read_text() + "\nthis is not C;\n")
    p = snakemake(ws, "all", overrides=small)
    assert p.returncode != 0
    assert (ws / "results" / "report" / "report.md").exists(), p.stderr[-2000:]
    assert not (ws / "results" / "report" / "COMPLETE").exists()
    jobs = planned(ws, small)
    assert jobs["build_runner"] == 1 and jobs["train"] >= 1 and jobs["report"] == 1, jobs


def test_unknown_snakemake_config_key_is_refused(tmp_path: Path):
    """`--config override=[...]` (or any key but `overrides`) would otherwise be ignored."""
    import subprocess

    from helpers.workflow import SNAKEMAKE, env, make_workspace
    ws = make_workspace(tmp_path / "ws")
    p = subprocess.run([str(SNAKEMAKE), "--cores", "1", "--dry-run", "all", "--config",
                        'override=["measure.iterations=5"]'], cwd=ws, env=env(ws),
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "unknown --config key(s) ['override']" in out, out[-2000:]
    assert "Traceback" not in out


def test_local_transport_timeout_stops_a_hung_runner(tmp_path: Path):
    """measure.timeout_s must hold even when the process never closes its stdout."""
    import time

    from phonetrain.devices.base import TransportError
    from phonetrain.devices.local import LocalTransport
    t = LocalTransport("host", tmp_path)
    t0 = time.monotonic()
    with pytest.raises(TransportError, match="timed out after 1 s"):
        t.run(["sleep", "30"], timeout_s=1)
    assert time.monotonic() - t0 < 10
    res = t.run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout_s=10)
    assert (res.returncode, res.stdout, res.stderr) == (3, "out\n", "err\n")


def test_stage_interrupted_is_one_line(tmp_path: Path, monkeypatch, capsys):
    """Ctrl-C reaches every running job's process: one line each, not a traceback, naming
    the flag a rerun needs (Snakemake refuses a plain one while the interrupted job's
    outputs, e.g. a previous measurement, exist and are marked incomplete)."""
    from phonetrain.stages.job import main as stage_main

    def interrupted(*args):
        raise KeyboardInterrupt

    rc = stage_main({"data": interrupted}, ["data", "--log", str(tmp_path / "data.log")])
    err = capsys.readouterr().err
    assert rc == 130 and "data: interrupted" in err and "Traceback" not in err, err
    assert "rerun the same snakemake command with --rerun-incomplete" in err, err


def test_workflow_refuses_another_checkouts_package(tmp_path: Path):
    """Snakemake in a copy whose src/ is not the imported phonetrain would silently run the
    other checkout's stages and kernels."""
    import os
    import subprocess

    from helpers.workflow import SNAKEMAKE, make_workspace
    ws = make_workspace(tmp_path / "ws")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([str(SNAKEMAKE), "--cores", "1", "--dry-run", "all"], cwd=ws, env=env,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and f"PYTHONPATH={ws / 'src'}" in out, out[-2000:]


def test_stale_run_is_not_reported_as_current(tmp_path: Path):
    """Settings changed, then the summary is rebuilt before re-measuring: the old run.json is
    kept (the aggregate writes nothing into the folder), the summary gets a failed row, not
    the old measurement under the new params, and the check moves the folder aside."""
    import json

    from phonetrain.layout import Layout
    from phonetrain.results.check import run_finding
    from phonetrain.stages.aggregate import absent_runs
    from phonetrain.stages.params import job_params
    key = ("host", "mlp_16_16.cpu.none")
    jp = {n: job_params(compose_sweep(["sweep=test", "sweep.backends=[cpu]",
                                       f"measure.iterations={n}"])) for n in (3, 4)}
    jp = {n: {"run": {key: j["run"][key]}} for n, j in jp.items()}
    rdir = tmp_path / "runs" / "host" / "mlp_16_16.cpu.none"
    rdir.mkdir(parents=True)
    (rdir / "params.json").write_text(json.dumps(jp[3]["run"][key]))
    (rdir / "run.json").write_text('{"status": "ok"}')
    files = sorted(rdir.iterdir())
    assert absent_runs(jp[3]["run"], Layout(str(tmp_path))) == {}  # up to date
    [(params, why)] = absent_runs(jp[4]["run"], Layout(str(tmp_path))).values()
    assert params == jp[4]["run"][key] and "measured under other settings" in why
    assert "iterations" in why and sorted(rdir.iterdir()) == files  # nothing written
    assert run_finding(rdir, jp[4]["run"][key])  # (this hollow run.json is damaged, too)


def _bad_phone(conf: Path, line: str) -> pytest.ExceptionInfo:
    """Compose the test sweep with a phone whose device file carries ``line``; the
    ConfigError it raises."""
    (conf / "device" / "badphone.yaml").write_text(
        f"name: badphone\ntransport: adb\nserial: emulator-5554\n{line}\n")
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.devices=[host,badphone]"], conf_dir=conf)
    return e


@pytest.mark.parametrize("line, needles", [
    ("adb_port: 99999", ["device/badphone.yaml", "adb_port", "99999", "1..65535"]),
    ("adb_port: 0", ["adb_port", "1..65535"]),
    ("facts: {peak_gflops: -5}", ["device/badphone.yaml", "facts.peak_gflops", "> 0"]),
    ("facts: {bandwidth_gbps: .nan}", ["facts.bandwidth_gbps", "finite"]),
], ids=["port-too-high", "port-zero", "negative-peak", "nan-bandwidth"])
def test_device_numbers_out_of_range_name_file_and_key(conf: Path, line, needles):
    e = _bad_phone(conf, line)
    for n in needles:
        assert n in str(e.value), str(e.value)


@pytest.mark.parametrize("override", ["~measure", "~results_dir", "~measure.iterations"])
def test_deleting_a_key_is_refused_naming_it(override):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", override])
    key = override.lstrip("~")
    assert f"deletes '{key}'" in str(e.value) and f"{key}=VALUE" in str(e.value)


def test_a_config_file_that_is_not_utf8_is_named(conf: Path):
    f = conf / "model" / "lenet5.yaml"
    f.write_bytes(b"# caf\xe9\n" + f.read_bytes())
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.models=[lenet5]"], conf_dir=conf)
    assert str(f) in str(e.value) and "not UTF-8" in str(e.value), str(e.value)


def test_a_dataset_folder_without_samples_is_one_error(tmp_path: Path):
    from phonetrain import data as datasets
    from phonetrain.data.idx import write_idx
    import numpy as np
    write_idx(tmp_path / "train-images-idx3-ubyte", np.zeros((0, 28, 28), np.uint8))
    write_idx(tmp_path / "train-labels-idx1-ubyte", np.zeros((0,), np.uint8))
    with pytest.raises(datasets.DatasetError, match="holds no samples"):
        datasets.write_batches("mnist", 8, 2, tmp_path / "out", folder=tmp_path)


@pytest.mark.parametrize("override", ["model=[lenet5,mlp_16_16]", "kernel=[baseline]"])
def test_phonetrain_run_of_a_list_of_members_names_the_override(override):
    """``phonetrain run model=[a,b]``: Hydra merges both models into one and the axis has no
    single choice; the run is refused naming the override and the sweep key, not a KeyError."""
    with pytest.raises(ConfigError) as e:
        compose_one([override, "backend=opencl"])
    axis = override.split("=")[0]
    for needle in (repr(override), "one experiment", f"sweep.{axis}s=[...]"):
        assert needle in str(e.value), str(e.value)


@pytest.mark.parametrize("line, value, needles", [
    ("opencl_platform: ${oc.env:PT_TEST_PLATFORM}", None,
     ["'PT_TEST_PLATFORM' not found", "device.opencl_platform"]),
    ("android_api: ${oc.env:PT_TEST_API}", "abc",
     ["'abc'", "Integer", "device.android_api"]),
])
def test_an_environment_variable_a_device_file_reads_names_that_file(conf: Path, monkeypatch,
                                                                     line, value, needles):
    """``${oc.env:VAR}`` in a device file, the variable unset or of the wrong type: the
    message names the device file (not the overrides, which set nothing of it) and says to
    set the variable or write the value."""
    var = line.split(":")[-1].rstrip("}")
    monkeypatch.delenv(var, raising=False)
    if value is not None:
        monkeypatch.setenv(var, value)
    msg = _pixel_refused(conf, f"name: pixel\n{line}\n", "[pixel]")
    for needle in ("device/pixel.yaml", "set that environment variable", *needles):
        assert needle in msg, msg
    assert not msg.startswith("override"), msg


@pytest.mark.parametrize("line, needles", [
    ("cc: [cc]", ["key 'device.cc'", "takes one string: write it without brackets"]),
    ("facts: {gpu: {name: adreno}}", ["key 'device.facts.gpu'", "takes one string"]),
    ("adb_port: abc", ["key 'device.adb_port'", "write an integer"]),
    ("facts: {peak_gflops: fast}", ["key 'device.facts.peak_gflops'", "write a number"]),
], ids=["list-for-string", "map-for-string", "word-for-int", "word-for-float"])
def test_device_values_of_the_wrong_type_say_what_to_write(conf: Path, line, needles):
    e = _bad_phone(conf, line)
    assert f"{conf / 'device' / 'badphone.yaml'}: key" in str(e.value), str(e.value)
    for n in needles:
        assert n in str(e.value), str(e.value)


@pytest.mark.parametrize("given", ['["measure.iterations=2",', "[measure.iterations=2",
                                   ' ["a=1"'])
def test_an_unclosed_overrides_list_is_named_as_a_list(given):
    """Snakemake's --config parses a value as YAML and gives an unclosed list back as its
    string; that string was read as one override with key '["measure.iterations'."""
    with pytest.raises(ConfigError) as e:
        compose_sweep(given)
    assert str(e.value).startswith(f"overrides is the string {given!r}: a list that did not "
                                   "parse"), str(e.value)
    assert "--config 'overrides=[" in str(e.value)
    assert normalize_overrides("measure.iterations=2") == ["measure.iterations=2"]


@pytest.mark.parametrize("override, needle", [
    ("sweep.models=[mlp_16_16,mlp_16_16]", "lists a model twice: ['mlp_16_16', 'mlp_16_16']; "
                                           "list each once"),
    ("+sweep.backend_kernels.nosuch=[baseline]", "names backend 'nosuch', which has no "),
    ("sweep.backend_kernels.vulkan=[nosuch]", "is ['nosuch']; list one or more kernel"),
])
def test_a_bad_sweep_value_names_its_override_not_the_sweep_file(override, needle):
    """The sweep file was named though it holds no such value."""
    with pytest.raises(ConfigError) as e:
        compose_sweep([override])
    assert str(e.value).startswith(f"override {override!r} (on "), str(e.value)
    assert needle in str(e.value)


@pytest.mark.parametrize("rel, needle", [
    ("config.yaml", "config.yaml: is a list, not a mapping of the config's sections"),
    ("sweep/test.yaml", "sweep/test.yaml: Invalid type assigned: list is not a subclass of "
                        "SweepConfig. value: ['a']; the file must be a mapping of keys"),
    ("kernel/baseline.yaml", "kernel/baseline.yaml: Invalid type assigned: list is not a "
                             "subclass of KernelConfig"),
])
def test_a_config_file_that_is_a_list_names_itself_and_the_shape(conf: Path, rel, needle):
    """config.yaml as a list blamed the overrides; a group file said no remedy."""
    (conf / rel).write_text("- a\n")
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test"], conf_dir=conf)
    assert str(e.value).startswith(str(conf)) and needle in str(e.value), str(e.value)


@pytest.mark.parametrize("override, group", [("kernel.name=zzz", "kernel"),
                                             ("device.name=pixel", "device")])
def test_a_name_set_by_an_override_is_blamed_on_the_override(override, group):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", override])
    msg = str(e.value)
    assert f"override '{override}'" in msg and "drop the override" in msg, msg
    assert f"sweep.{group}s" in msg and "rename the file" not in msg, msg


@pytest.mark.parametrize("serial", ["null", "''"])
def test_an_adb_device_without_a_serial_is_refused_before_any_job(conf: Path, serial: str):
    (conf / "device" / "noserial.yaml").write_text(
        f"name: noserial\ntransport: adb\nserial: {serial}\n")
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.devices=[host,noserial]"], conf_dir=conf)
    msg = str(e.value)
    assert str(conf / "device" / "noserial.yaml") in msg and "key 'serial'" in msg, msg
    assert "phonetrain devices" in msg, msg


def test_kernel_none_for_one_run_says_a_cpu_run_takes_no_kernel():
    with pytest.raises(ConfigError) as e:
        compose_one(["model=mlp_16_16", "backend=cpu", "kernel=none"])
    msg = str(e.value)
    assert "kernel/none.yaml" in msg and "leave the kernel out" in msg, msg
    assert "'baseline'" in msg, msg


@pytest.mark.parametrize("command", ["stale", "check", "aggregate", "report", "run"])
def test_an_unknown_option_of_a_study_command_is_named(command):
    got = CliRunner().invoke(main, [command, "--bogus", "measure.iterations=3"])
    assert got.exit_code == 2, got.output
    assert "No such option: --bogus" in got.output and "--conf" in got.output, got.output
    assert "Traceback" not in got.output and "Hydra" not in got.output, got.output


def test_a_new_map_entry_without_a_plus_says_add_the_plus():
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "sweep.backend_kernels.opencl=[baseline]"])
    msg = str(e.value)
    assert msg.startswith("override 'sweep.backend_kernels.opencl=[baseline]': "), msg
    assert "not an entry of 'sweep.backend_kernels' yet" in msg, msg
    assert "'+sweep.backend_kernels.opencl=[baseline]'" in msg, msg


def test_a_kernel_named_for_a_cpu_run_is_refused_not_ignored():
    with pytest.raises(ConfigError) as e:
        compose_one(["model=mlp_16_16", "backend=cpu", "kernel=tiled"])
    msg = str(e.value)
    assert msg.startswith("override 'kernel=tiled': backend 'cpu'"), msg
    assert "mlp_16_16.cpu.none" in msg and "leave the kernel out" in msg, msg
    compose_one(["model=mlp_16_16", "backend=cpu"])   # no kernel named: fine
