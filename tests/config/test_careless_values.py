"""Careless values and paths get one line naming them: a negative seed, a non-finite rate, a
results folder that is a file, an adb port out of range."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from phonetrain.cli import main
from phonetrain.config import ConfigError, compose_sweep


@pytest.mark.parametrize("override, needle", [
    ("measure.seed=-5", "key 'measure.seed' is -5; it must be >= 0"),
    ("model.lr=inf", "it must be a finite number"),
    ("measure.ci_target=nan", "it must be a finite number"),
    ("measure.checkpoints=[100]", "lists [100], outside the run's iterations"),
    ("measure.checkpoints=[-100]", "lists [-100], outside the run's iterations"),
    # a key without a lower bound: nan passed every comparison (the cooldown waited for it)
    ("measure.cooldown_threshold_c=nan", "'measure.cooldown_threshold_c' is nan; it must be "
                                         "a finite number"),
    ("measure.gemm_sizes=[128,99999999]", "lists [99999999]; sizes must be 1..65536"),
    ("measure.gemm_sizes=[256,128,256]", "lists a size twice: [256, 128, 256]; list each once"),
])
def test_values_no_run_could_use_are_refused_at_composition(override, needle):
    with pytest.raises(ConfigError, match="override") as e:
        compose_sweep(["sweep=test", override])
    assert needle in str(e.value)


@pytest.mark.parametrize("under", [False, True], ids=["the-file", "under-the-file"])
@pytest.mark.parametrize("command", [
    ["run", "model=mlp_16_16", "device=host", "backend=cpu", "measure.iterations=2"],
    ["aggregate", "sweep=test"], ["report", "sweep=test"], ["check", "sweep=test"]],
    ids=lambda c: c[0])
def test_a_results_folder_that_is_a_file_is_one_line(tmp_path: Path, command, under):
    """Every study command says what the workflow says (the override, the file, a folder to
    give), before the results folder's lock or any stage."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    results = afile / "sub" if under else afile
    res = CliRunner().invoke(main, [*command, f"results_dir={results}"])
    assert res.exit_code == 1, res.output
    errors = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert "Traceback" not in res.output and len(errors) == 1, res.output
    assert (f"Error: override 'results_dir={results}' (on " in errors[0]
            and f"results_dir '{results}' " in errors[0]
            and "not a folder; give results_dir a folder (new or existing)" in errors[0]), errors
    assert (f"lies under the file {afile}" in errors[0]) == under, errors
    assert afile.read_text() == "not a folder"


def test_adb_port_out_of_range_is_refused():
    res = CliRunner().invoke(main, ["devices", "--adb-port", "99999"])
    assert res.exit_code == 2 and "99999 is not in the range 1<=x<=65535" in res.output


@pytest.mark.parametrize("override, needle", [
    ("measure.iterations=abc", "override 'measure.iterations=abc' on"),
    ("measure.iterations=abc", "could not be converted to Integer; write an integer"),
    ("model.lr=fast", "could not be converted to Float; write a number"),
    ("backend.placement=[a]", "this key takes one string: write it without brackets"),
    ("sweep.models=lenet5", "write a list, e.g. 'sweep.models=[lenet5]'"),
])
def test_a_value_of_the_wrong_type_names_its_own_override(override, needle):
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", "measure.warmup=1", override])
    assert needle in str(e.value) and "measure.warmup=1" not in str(e.value)


@pytest.mark.parametrize("under", [False, True], ids=["the-file", "under-the-file"])
def test_a_results_folder_that_is_a_file_is_refused_at_composition(tmp_path: Path, under):
    """Before any job, a dry run included (Snakemake would fail listing the folder)."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    results = afile / "sub" if under else afile
    with pytest.raises(ConfigError) as e:
        compose_sweep(["sweep=test", f"results_dir={results}"])
    msg = str(e.value)
    assert f"override 'results_dir={results}'" in msg and "not a folder" in msg, msg
    assert (f"lies under the file {afile}" in msg) == under, msg
    assert afile.read_text() == "not a folder"
