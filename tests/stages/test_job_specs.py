"""Job specs: small params, no results-folder spelling in them, and no stage fallback defaults.

Every job's params is a spec of :mod:`phonetrain.stages.specs`; these tests hold the specs of
the default study under 1 KB, identical for a relative and an absolute ``results_dir``, and
equal to the config's values, and scan the stages for settings read with a fallback of their
own (a planted fallback shows the scan is not vacuous).
"""

from __future__ import annotations

import ast
import json
import dataclasses

import pytest

from helpers import REPO
from phonetrain.config import DatasetConfig, MeasureConfig, ModelConfig, compose_sweep
from phonetrain.errors import StageError
from phonetrain.lowering import LowerSpec
from phonetrain.stages import specs
from phonetrain.stages.params import (gemm_job, gemm_versions, job_params, tune_version_job,
                                      version_tuning_classes)

CONF = REPO / "conf"
MAX_PARAM_BYTES = 1024


def all_params(sweep) -> dict[str, dict]:
    """Every job's params of ``sweep`` by a readable job key (``rule[key]``)."""
    jp = job_params(sweep)
    out = {f"{kind}[{k}]": v for kind, group in jp.items() if kind not in ("gemm", "shapes")
           for k, v in group.items()}
    out.update({f"gemm[{d},{v}]": gemm_job(jp, d, v)
                for d in sweep.devices for v in gemm_versions(sweep)})
    out.update({f"tune[{d},{k}]": tune_version_job(jp, d, k, classes)
                for d in sweep.devices for k, classes in version_tuning_classes(sweep).items()})
    out["gemm_shapes"] = jp["shapes"]
    return out


@pytest.fixture(scope="module")
def default_study():
    return compose_sweep([], conf_dir=CONF)


def test_no_job_param_is_larger_than_1_kb(default_study):
    sizes = {k: len(specs.as_json(v)) for k, v in all_params(default_study).items()}
    big = {k: n for k, n in sizes.items() if n > MAX_PARAM_BYTES}
    assert not big, big


def test_params_do_not_depend_on_the_results_folders_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rel = all_params(compose_sweep(["results_dir=out/results"], conf_dir=CONF))
    absolute = all_params(compose_sweep([f"results_dir={tmp_path}/out/results"],
                                        conf_dir=CONF))
    assert rel == absolute
    assert str(tmp_path) not in specs.as_json(rel) and "out/results" not in specs.as_json(rel)


def test_every_job_param_parses_as_its_spec(default_study):
    jp = job_params(default_study)
    kinds = {"device": specs.DeviceSpec, "runner": specs.RunnerSpec,
             "bandwidth": specs.BandwidthSpec, "kernel": specs.KernelSpec,
             "data": specs.DataSpec, "run": specs.RunSpec}
    for kind, cls in kinds.items():
        for p in jp[kind].values():
            assert specs.to_params(specs.parse(cls, p, kind)) == p
    for p in jp["plan"].values():   # the plan spec is a LowerSpec
        assert specs.plan_params(specs.parse_plan(p, "lower"), p["data_dir"]) == p
    d = default_study.devices[0]
    for v in gemm_versions(default_study):
        specs.parse(specs.GemmSpec, gemm_job(jp, d, v), "gemm")
    specs.parse(specs.ShapesSpec, jp["shapes"], "gemm_shapes")


def test_a_missing_or_unknown_key_is_one_error_naming_job_and_key(default_study):
    p = dict(next(iter(job_params(default_study)["run"].values())))
    del p["stage_root"]
    p["stage_rot"] = "stage/host"
    with pytest.raises(StageError) as e:
        specs.parse(specs.RunSpec, p, "logs/train/host/x.log")
    msg = str(e.value)
    assert "logs/train/host/x.log" in msg and "'stage_root'" in msg and "'stage_rot'" in msg
    p = dict(next(iter(job_params(default_study)["run"].values())))
    p["measure"] = {k: v for k, v in p["measure"].items() if k != "ci_target"}
    with pytest.raises(StageError, match="ci_target"):
        specs.parse(specs.RunSpec, p, "train")


def test_spec_values_are_the_configs(default_study):
    """For the default study every setting a spec carries is the composed config's value, so
    no stage can hold a value that disagrees with the config."""
    jp = job_params(default_study)
    ms = default_study.root["measure"]
    by_id = {e.id: e for e in default_study.experiments}
    for (dev, eid), p in jp["run"].items():
        s = specs.parse(specs.RunSpec, p, "train")
        c = by_id[eid].config
        assert dataclasses.asdict(s.measure) == {k: ms[k] for k in p["measure"]}
        assert s.device_config == c["device"] and s.dataset_path == c["dataset"]["path"]
        assert s.batch_size == c["model"]["batch_size"]
    for eid, p in jp["plan"].items():
        s = specs.parse_plan(p, "lower")
        c = by_id[eid].config
        assert (s.warmup, s.iterations, s.seed, list(s.checkpoints)) == \
            (ms["warmup"], ms["iterations"], ms["seed"], ms["checkpoints"])  # eval_every off
        assert (s.batch_size, s.lr, s.momentum, s.weight_decay) == tuple(
            c["model"][k] for k in ("batch_size", "lr", "momentum", "weight_decay"))
        assert s.num_batches == c["dataset"]["num_batches"]
    for p in jp["data"].values():
        assert p["seed"] == ms["seed"]
    g = specs.parse(specs.GemmSpec, gemm_job(jp, default_study.devices[0], "cpu"), "gemm")
    assert (g.sizes, g.min_time_ms, g.max_launch_s, g.tune, g.tune_min_time_ms,
            g.tune_max_launch_s, g.threads) == (
        sorted(ms["gemm_sizes"]), ms["gemm_min_time_ms"], ms["gemm_max_launch_s"], ms["tune"],
        ms["tune_min_time_ms"], ms["tune_max_launch_s"], ms["threads"])


def test_lower_spec_defaults_are_the_configs():
    """LowerSpec's defaults (used outside the workflow) are the structured config's."""
    cfg = {**{f.name: f.default if f.default_factory is dataclasses.MISSING
              else tuple(f.default_factory()) for f in dataclasses.fields(ModelConfig)},
           **{f.name: f.default for f in dataclasses.fields(MeasureConfig)
              if f.default is not dataclasses.MISSING},
           "num_batches": DatasetConfig.num_batches}
    shared = [f for f in dataclasses.fields(LowerSpec) if f.name in cfg and f.name != "name"
              and f.default is not dataclasses.MISSING and f.name != "dataset"]
    assert {f.name for f in shared} >= {"warmup", "iterations", "seed", "batch_size", "lr",
                                        "optimizer", "betas", "eps"}
    for f in shared:
        assert f.default == cfg[f.name], f.name


# Names a stage's params, spec or settings dicts go by: a ``.get(key, ...)`` on one of them
# is a fallback default of the stage's own.
PARAMISH = {"p", "params", "pc", "rp", "kp", "jp", "ms", "measure", "cfg", "dcfg", "config",
            "spec", "s", "dev", "device_config", "dataset_config"}


def _chain(node: ast.AST) -> list[str]:
    """The names along ``a.b["c"].d``: ``["a", "b", "d"]``."""
    out = []
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Attribute):
            out.append(node.attr)
        node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name):
        out.append(node.id)
    return out[::-1]


def fallbacks(source: str, filename: str = "<planted>") -> list[str]:
    """``file:line`` of each setting read with a fallback: ``X.get("key"[, default])`` on a
    params-like ``X`` (:data:`PARAMISH`), and ``getattr(obj, name, default)`` on anything but
    a job's files (``.input``/``.output``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "get" and node.args and \
                isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                and PARAMISH & set(_chain(f.value)):
            found.append(f"{filename}:{node.lineno}")
        if isinstance(f, ast.Name) and f.id == "getattr" and len(node.args) == 3 and \
                not {"input", "output"} & set(_chain(node.args[0])):
            found.append(f"{filename}:{node.lineno}")
    return found


def test_the_fallback_scan_finds_planted_fallbacks():
    planted = ("def train(job):\n"
               "    p = job.params\n"
               "    t = p['measure'].get('ci_target', 0)\n"
               "    u = job.params.get('power_sample_ms')\n"
               "    v = getattr(spec, 'max_other_cpu_share', 1.0)\n"
               "    w = getattr(job.input, 'tuning', None)\n"
               "    x = doc.get('status')\n")
    assert fallbacks(planted) == ["<planted>:3", "<planted>:4", "<planted>:5"]


def test_no_stage_reads_a_setting_with_its_own_fallback():
    stages = sorted((REPO / "src" / "phonetrain" / "stages").glob("*.py"))
    assert len(stages) > 5
    found = [x for f in stages for x in fallbacks(f.read_text(), f.name)]
    assert not found, found


def test_the_gemm_shapes_job_writes_the_shapes_its_hash_names(tmp_path):
    """What tune and gemm read (the gemm-shapes job's file, through JSON) has the hash their
    params hold."""
    from phonetrain.stages.gemm import read_shapes, write_shapes
    from phonetrain.stages.job import Job, files

    sweep = compose_sweep(["sweep=test"], conf_dir=CONF)
    jp = job_params(sweep)
    out = tmp_path / "shapes.json"
    params = json.loads(specs.as_json(jp["shapes"]))
    write_shapes(Job(files({}), files({"shapes": str(out)}), params, tmp_path / "s.log"))
    assert read_shapes(out, jp["gemm"]["shapes_hash"])
    with pytest.raises(StageError, match="gemm_shapes"):
        read_shapes(out, "0" * 16)


def test_plan_params_carry_every_field_of_the_plan_spec():
    """The lower job's params round-trip a LowerSpec whatever it sets: Adam, buffer reuse,
    dumps and split K (the last three only while not their defaults)."""
    spec = LowerSpec(model="lenet5", batch_size=4, backend="opencl", placement="staged",
                     transfer="map", kernel="fused", dataset="digits", optimizer="adamw",
                     betas=(0.8, 0.99), eps=1e-6, momentum=0.0, plan_id="p", dumps="all",
                     checkpoints=(0, -1), reuse_buffers=True, splitk_groups=1024)
    params = specs.plan_params(spec, "data/digits-b4")
    assert specs.parse_plan(json.loads(specs.as_json(params)), "lower") == spec
    plain = specs.plan_params(LowerSpec(model="lenet5", plan_id="p"), "d")
    assert not {"optimizer", "reuse_buffers", "dumps", "splitk_groups"} & set(plain)


def test_plan_params_without_a_key_or_with_a_stray_one_name_it(default_study):
    p = dict(next(iter(job_params(default_study)["plan"].values())))
    del p["seed"]
    p["sede"] = 0
    with pytest.raises(StageError) as e:
        specs.parse_plan(p, "logs/lower/x.log")
    assert all(s in str(e.value) for s in ("logs/lower/x.log", "'seed'", "'sede'"))
    with pytest.raises(StageError, match="plan_id"):
        specs.plan_params(LowerSpec(model="lenet5"), "d")
