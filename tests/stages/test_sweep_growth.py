"""Adding the zoo's models to the default study changes nothing a default-study run depends
on: its run and deploy params, its plan's and data's params, its kernel build and the
tuning classes its deploy reads are the same in ``sweep=zoo`` (so Snakemake plans none of
those jobs again)."""

from __future__ import annotations

from helpers import REPO
from phonetrain.config import compose_sweep
from phonetrain.stages.params import job_params, tune_job, tuning_classes


def test_the_zoo_sweep_leaves_every_default_run_as_it_is():
    default = compose_sweep([], conf_dir=REPO / "conf")
    zoo = compose_sweep(["sweep=zoo"], conf_dir=REPO / "conf")
    jd, jz = job_params(default), job_params(zoo)
    assert set(jd["run"]) < set(jz["run"])
    for key, params in jd["run"].items():
        assert jz["run"][key] == params, key
        assert jz["plan"][key[1]] == jd["plan"][key[1]], key
        assert jz["data"][params["data_dir"]] == jd["data"][params["data_dir"]], key
    assert {k: jz["kernel"][k] for k in jd["kernel"]} == jd["kernel"]
    cd, cz = tuning_classes(default), tuning_classes(zoo)
    assert cd and {e: cz[e] for e in cd} == cd
    for exp, classes in cd.items():
        kernel = exp.rsplit(".", 1)[1]
        for cls in classes:
            assert tune_job(jd, "host", kernel, cls) == tune_job(jz, "host", kernel, cls)
