"""Each job's params: exactly what its result depends on, from the composed sweep.

The rules pass these dicts to the jobs as Snakemake ``params`` (canonical JSON), so
Snakemake's ``params`` rerun trigger reruns exactly the jobs whose settings changed, and a dry
run changes no file. Run-time knobs (``timeout_s``, ``progress``) are not params
(:class:`phonetrain.stages.job.Runtime`); device facts only feed the report.

- ``device[d]``: the device config (runner build) and its staging root;
- ``bandwidth[d]``: plus the sweep's transfer-size limit;
- ``kernel[(d, k)]``: one kernel version on one device, with the resolved sources' hash;
- ``data[data_dir]``: one dataset split into batches for an input shape and batch size;
- ``plan[exp]``: what the lowered plan depends on (the device excluded);
- ``run[(d, exp)]``: one run (written to its run folder as ``params.json``);
- ``gemm``: the GEMM study's models and settings (:func:`gemm_job`, :func:`tune_job` and
  :func:`squares_job` take from it what each needs).
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from phonetrain.config import Experiment, Sweep, config_hash, plan_config
from phonetrain.data import HELDOUT_FRACTION, HELDOUT_SEED, batch_dir, dataset_info
from phonetrain.kernels import source_hash, tuning
from phonetrain.kernels.gemm import GemmShape, plan_shapes
from phonetrain.layout import Layout
from phonetrain.lowering import LowerSpec, lower
from phonetrain.models import get_model
from phonetrain.results.schema import TABLES

RUN_MEASURE_KEYS = ("warmup", "iterations", "repeats", "seed", "threads", "cooldown_s",
                    "cooldown_threshold_c", "cooldown_limit_s", "verify_atol", "checkpoints",
                    "ci_target", "max_iterations", "max_seconds", "max_other_cpu_share",
                    "bootstrap_resamples", "power_sample_ms")
HELDOUT_HOLDS_BACK = ("digits", "synthetic")  # datasets whose held-out split is cut from training
CPU_VERSION = "cpu"  # the GEMM study's name for the runner's CPU backend


def kernel_hash(version: str) -> str:
    """16 hex digits of the version's resolved sources and build options."""
    return source_hash(version)[:16]


def dataset_of(exp: Experiment) -> str:
    """The dataset an experiment trains on: its model's, else the sweep's."""
    return exp.config["model"].get("dataset") or exp.config["dataset"]["name"]


def data_dir_rel(dataset: str, batch_size: int, model_name: str) -> str:
    """Batch folder of a dataset for a model, relative to a staging root (``data/...``)."""
    m = get_model(model_name)
    return batch_dir(dataset, batch_size, m.input_shape, m.classes)


def run_params(exp: Experiment) -> dict[str, Any]:
    """``params.json`` of a run folder: identity and settings read by
    :mod:`phonetrain.results.runs`, plus the config the run depends on under ``config``
    (measurement keys limited to :data:`RUN_MEASURE_KEYS`)."""
    c = dict(exp.config)
    ms = c["measure"]
    c["measure"] = {k: ms[k] for k in RUN_MEASURE_KEYS if k in ms}
    if ms.get("eval_every"):
        # only when on: a run measured before the key existed keeps its config hash
        c["measure"]["eval_every"] = ms["eval_every"]
    b = c["backend"]
    return {
        "run_id": exp.id, "model": exp.model, "device": exp.device, "backend": exp.backend,
        "placement": None if b["kind"] == "cpu" else b["placement"],
        "transfer": None if b["kind"] == "cpu" else b["transfer"],
        "kernel": None if b["kind"] == "cpu" else exp.kernel,
        "dataset": dataset_of(exp), "batch_size": c["model"]["batch_size"],
        "warmup": c["measure"]["warmup"], "iterations": c["measure"]["iterations"],
        "threads": c["measure"]["threads"], "verify_atol": c["measure"]["verify_atol"],
        "config_hash": config_hash(c),
        "kernel_hash": kernel_hash(exp.kernel) if exp.is_opencl else None,
        "config": c,
    }


@functools.lru_cache(maxsize=None)
def model_gemm_shapes(model: str, batch_size: int,
                      kernel: str = "baseline") -> tuple[GemmShape, ...]:
    """Distinct GEMM calls of one model's training step at ``batch_size`` as ``kernel``
    lowers it, in first-use order (the placement and transfer do not change them)."""
    plan = lower(LowerSpec(model=model, batch_size=int(batch_size), backend="opencl",
                           placement="resident", transfer="copy", kernel=kernel))
    return tuple(dict.fromkeys(plan_shapes(plan)))


def gemm_models(sweep: Sweep) -> list[list[Any]]:
    """``[[model, batch_size]]`` of the sweep: what the GEMM study's model shapes come from."""
    return [[name, int(mcfg["batch_size"])] for name, mcfg in sweep.members["model"].items()]


def models_gemm_shapes(models: list[list[Any]]) -> list[dict[str, Any]]:
    """Distinct GEMM calls of the models' training steps (``models``: :func:`gemm_models`):
    ``[{"kernel", "M", "N", "K", "source": "model:<name>"}]`` (first model wins a tie)."""
    out: dict[Any, str] = {}
    for name, batch in models:
        for g in model_gemm_shapes(name, batch):
            out.setdefault(g, f"model:{name}")
    return [{"kernel": g.kernel, "M": g.M, "N": g.N, "K": g.K, "source": s}
            for g, s in out.items()]


def sweep_gemm_shapes(sweep: Sweep) -> list[dict[str, Any]]:
    """:func:`models_gemm_shapes` of every model of the sweep at its batch size."""
    return models_gemm_shapes(gemm_models(sweep))


def tuning_classes(sweep: Sweep) -> dict[str, list[str]]:
    """The GEMM tuning classes (:func:`phonetrain.kernels.tuning.gemm_class`) each experiment
    of a tunable kernel version uses, by experiment id: its deploy's tuning files."""
    tunable = {k: tuning.tunable(k) for k in sweep.kernels}
    out = {}
    for exp in sweep.experiments:
        if exp.is_opencl and tunable.get(exp.kernel):
            shapes = model_gemm_shapes(exp.model, plan_config(exp)["model"]["batch_size"],
                                       exp.kernel)
            out[exp.id] = list(dict.fromkeys(tuning.gemm_class(g) for g in shapes))
    return out


def sweep_tuning_classes(sweep: Sweep) -> list[str]:
    """The tuning classes of the GEMM study's model shapes (:func:`sweep_gemm_shapes`)."""
    return list(dict.fromkeys(
        tuning.gemm_class(GemmShape(s["kernel"], s["M"], s["N"], s["K"]))
        for s in sweep_gemm_shapes(sweep)))


def gemm_params(sweep: Sweep) -> dict[str, Any]:
    """What the tune/gemm jobs depend on besides the device and kernel version: the models
    whose GEMM calls are measured (with a hash of those calls, so a lowering that changes them
    reruns the GEMM sweep) and the study's GEMM settings."""
    ms = sweep.root["measure"]
    shapes = json.dumps(sweep_gemm_shapes(sweep), sort_keys=True)
    return {"models": gemm_models(sweep),
            "shapes_sha256": hashlib.sha256(shapes.encode()).hexdigest()[:16],
            "sizes": sorted(int(n) for n in ms["gemm_sizes"]),
            "min_time_ms": float(ms["gemm_min_time_ms"]),
            "max_launch_s": float(ms["gemm_max_launch_s"]), "tune": bool(ms["tune"]),
            "tune_min_time_ms": float(ms["tune_min_time_ms"]),
            "tune_max_launch_s": float(ms["tune_max_launch_s"]), "threads": int(ms["threads"])}


def job_params(sweep: Sweep) -> dict[str, Any]:
    """Every job's params dict, keyed by job: ``device[d]``, ``bandwidth[d]``,
    ``kernel[(d, k)]``, ``data[data_dir]``, ``plan[exp_id]``, ``run[(d, exp_id)]``, and
    ``gemm`` (one dict)."""
    L = Layout(sweep.results_dir)
    out: dict[str, Any] = {"device": {}, "bandwidth": {}, "kernel": {}, "data": {}, "plan": {},
                           "run": {}}
    ms = sweep.root["measure"]
    for d, dcfg in sweep.members["device"].items():
        dev = {k: v for k, v in dcfg.items() if k != "facts"}
        base = {"device": d, "device_config": dev, "stage_root": L.stage_root(d)}
        out["device"][d] = base
        out["bandwidth"][d] = {**base, "bandwidth_max_bytes": ms["bandwidth_max_bytes"]}
        for k in sweep.kernels:
            out["kernel"][(d, k)] = {**base, "kernel": k, "kernel_hash": kernel_hash(k)}
    for exp in sweep.experiments:
        pc = plan_config(exp)
        ds = dataset_of(exp)
        ddir = data_dir_rel(ds, pc["model"]["batch_size"], exp.model)
        pc["data_dir"] = ddir
        # Not the model: every model reading a dataset shares its batch files. Only synthetic
        # data takes its shape and classes from the model (checked at composition).
        m = get_model(exp.model)
        synth = dataset_info(ds).input_shape is None
        out["data"][ddir] = {"dataset": ds,
                             "input_shape": list(m.input_shape) if synth else None,
                             "classes": m.classes if synth else None,
                             "batch_size": pc["model"]["batch_size"], "dir": ddir,
                             "dataset_config": exp.config["dataset"],
                             "seed": pc["measure"]["seed"]}
        if ds in HELDOUT_HOLDS_BACK:
            # the training split lost its held-out share: a changed param rewrites old batches
            out["data"][ddir]["heldout"] = {"fraction": HELDOUT_FRACTION, "seed": HELDOUT_SEED}
        out["plan"][exp.id] = pc
        rp = run_params(exp)
        rp["stage_root"] = L.stage_root(exp.device)
        rp["data_dir"] = ddir
        out["run"][(exp.device, exp.id)] = rp
    out["gemm"] = gemm_params(sweep)
    return out


def expected_files(sweep: Sweep) -> dict[str, list[str]]:
    """Every raw file (or run folder) a complete study of ``sweep`` has, by kind: ``runs``
    (run folders), ``bandwidth``, ``builds``, ``gemm``, ``peaks``. The aggregate rule, the
    partial report after a failure and ``phonetrain aggregate`` share this list."""
    L = Layout(sweep.results_dir)
    used = {(e.device, e.kernel) for e in sweep.experiments if e.is_opencl}
    return {
        "runs": [L.run_dir(e.device, e.id) for e in sweep.experiments],
        "bandwidth": [L.bandwidth(d) for d in sweep.devices],
        "builds": [L.kernel_build(d, k) for d in sweep.devices for k in sweep.kernels
                   if (d, k) in used],
        "gemm": [L.gemm(d, v) for d in sweep.devices for v in gemm_versions(sweep)],
        "peaks": [L.peaks(d) for d in sweep.devices],
    }


def gemm_job(jp: dict[str, Any], device: str, version: str) -> dict[str, Any]:
    """A GEMM sweep job's params (``version``: a kernel version, or ``cpu``): the device (and
    kernel version's) params of ``jp`` (:func:`job_params`) and the study's GEMM settings."""
    base = jp["device"][device] if version == CPU_VERSION else jp["kernel"][(device, version)]
    return {**base, **jp["gemm"], "version": version}


def tune_job(jp: dict[str, Any], device: str, kernel: str, cls: str) -> dict[str, Any]:
    """A tune job's params: one kernel version on one device, the class (the GEMM call it is
    tuned on, :func:`phonetrain.kernels.tuning.class_shape`) and the tuning settings; nothing
    of the sweep, so a class's result stays whatever else the study holds."""
    g = jp["gemm"]
    return {**jp["kernel"][(device, kernel)], "class": cls, "tune": g["tune"],
            "tune_min_time_ms": g["tune_min_time_ms"]}


def squares_job(jp: dict[str, Any], device: str, kernel: str) -> dict[str, Any]:
    """A tune_squares job's params: the version on the device, the GEMM sweep's square sizes
    and the tuning settings."""
    g = jp["gemm"]
    return {**jp["kernel"][(device, kernel)],
            **{k: g[k] for k in ("sizes", "tune", "tune_min_time_ms", "tune_max_launch_s")}}


def gemm_versions(sweep: Sweep) -> list[str]:
    """The GEMM study's versions: the sweep's kernel versions and the runner's CPU backend."""
    return list(sweep.kernels) + [CPU_VERSION]


def summary_outputs(sweep: Sweep) -> dict[str, str]:
    """Table name -> its Parquet path under the sweep's results folder."""
    L = Layout(sweep.results_dir)
    return {t: L.summary(t) for t in TABLES}


def facts(sweep: Sweep) -> list[dict[str, Any]]:
    """The devices' datasheet facts for the report (one dict per device)."""
    return [{"device": d, **sweep.members["device"][d]["facts"]} for d in sweep.devices]
