"""Each job's params: exactly what its result depends on, from the composed sweep.

Each params dict is a job spec of :mod:`phonetrain.stages.specs` as a dict (every field set
here, from the structured config; none defaulted by a stage). The rules pass these dicts to
the jobs as Snakemake ``params`` (canonical JSON, at most 1 KB each), so Snakemake's
``params`` rerun trigger reruns exactly the jobs whose settings changed, and a dry
run changes no file. Run-time knobs (``timeout_s``, ``progress``) are not params
(:class:`phonetrain.stages.job.Runtime`); device facts only feed the report.

Paths in params are relative to the results folder (:func:`phonetrain.layout.stage_root_rel`),
so the study's params do not depend on how the results folder is spelled.

- ``device[d]``: the device config and its staging root (:class:`DeviceSpec`);
- ``runner[d]``: the device config and the runner compile cache (:class:`RunnerSpec`);
- ``bandwidth[d]``: plus the sweep's transfer-size limit;
- ``kernel[(d, k)]``: one kernel version on one device, with the resolved sources' hash;
- ``data[data_dir]``: one dataset split into batches for an input shape and batch size;
- ``plan[exp]``: what the lowered plan depends on (the device excluded);
- ``run[(d, exp)]``: one run (written to its run folder as ``params.json``);
- ``gemm``: the GEMM study's settings and its shapes' hash (:func:`gemm_job`,
  :func:`tune_job` and :func:`squares_job` take from it what each needs); ``shapes``: the
  models whose GEMM shapes the ``gemm-shapes`` job writes (the list is too large for a param).
"""

from __future__ import annotations

import functools
from typing import Any

from phonetrain.config import Experiment, Sweep, config_hash, plan_config
from phonetrain.data import HELDOUT_FRACTION, HELDOUT_SEED, batch_dir, dataset_info
from phonetrain.kernels import build_hash, source_hash, tuning
from phonetrain.kernels.gemm import GemmShape, plan_shapes
from phonetrain.kernels.spirv import has_shaders, shader_candidates, shader_hash
from phonetrain.layout import RUNNER_CACHE_REL, Layout, stage_root_rel
from phonetrain.lowering import LowerSpec, lower
from phonetrain.models import get_model
from phonetrain.results.schema import TABLES
from phonetrain.stages.specs import (CPU_VERSION, BandwidthSpec, DataSpec, DeviceSpec, GemmSpec,
                                     KernelSpec, MeasureSpec, RunnerSpec, RunSpec, ShapesSpec,
                                     TuneVersionSpec, classes_hash, plan_params, shapes_hash,
                                     to_params)

RUN_MEASURE_KEYS = ("warmup", "iterations", "repeats", "seed", "threads", "cooldown_s",
                    "cooldown_threshold_c", "cooldown_limit_s", "verify_atol", "checkpoints",
                    "ci_target", "max_iterations", "max_seconds", "max_other_cpu_share",
                    "bootstrap_resamples", "power_sample_ms", "max_attempts",
                    "max_probe_slowdown")
HELDOUT_HOLDS_BACK = ("digits", "synthetic")  # datasets whose held-out split is cut from training


def kernel_hash(version: str) -> str:
    """16 hex digits of the version's resolved sources and build options."""
    return source_hash(version)[:16]


@functools.lru_cache(maxsize=None)
def tuning_hash(version: str) -> str:
    """16 hex digits of what the device compiles for the version
    (:func:`phonetrain.kernels.build_hash`): the ``kernel_hash`` a tuning file records, so an
    edit of comments or white space keeps every tuning file (a tune job that reruns for it
    re-measures nothing). Cached per process: the sources do not change during a parse."""
    return build_hash(version)[:16]


def exp_kernel_hash(exp: Experiment) -> str | None:
    """The kernel hash of what an experiment's device compiles: the version's OpenCL sources
    (:func:`kernel_hash`), its Vulkan shaders (:func:`phonetrain.kernels.spirv.shader_hash`),
    or None for the CPU backend."""
    if exp.is_opencl:
        return kernel_hash(exp.kernel)
    return shader_hash(exp.kernel)[:16] if exp.is_vulkan else None


def dataset_of(exp: Experiment) -> str:
    """The dataset an experiment trains on: its model's, else the sweep's."""
    return exp.config["model"]["dataset"] or exp.config["dataset"]["name"]


def data_dir_rel(dataset: str, batch_size: int, model_name: str) -> str:
    """Batch folder of a dataset for a model, relative to a staging root (``data/...``)."""
    m = get_model(model_name)
    return batch_dir(dataset, batch_size, m.input_shape, m.classes)


def run_measure(exp: Experiment) -> MeasureSpec:
    """The run's ``measure`` settings: :data:`RUN_MEASURE_KEYS` and ``eval_every``."""
    ms = exp.config["measure"]
    return MeasureSpec(**{k: ms[k] for k in RUN_MEASURE_KEYS + ("eval_every",)})


def run_config_hash(exp: Experiment) -> str:
    """Hash of the config a run depends on (measurement keys limited to
    :data:`RUN_MEASURE_KEYS`; ``eval_every`` only when on, so a run measured before the key
    existed keeps its hash)."""
    c = dict(exp.config)
    ms = c["measure"]
    c["measure"] = {k: ms[k] for k in RUN_MEASURE_KEYS}
    if ms["eval_every"]:
        c["measure"]["eval_every"] = ms["eval_every"]
    if events_apart_of(exp):
        c["measure"]["events_apart"] = True
    if events_adaptive_of(exp):
        c["measure"]["events_adaptive"] = True
    return config_hash(c)


def events_adaptive_of(exp: Experiment) -> bool | None:
    """True when an ``events_apart`` run's events process stops adaptively
    (``measure.events_adaptive``); None otherwise (it measures exactly the plan's
    iterations), so the params and hash of every run with the key off stay as they were."""
    on = events_apart_of(exp) and exp.config["measure"]["events_adaptive"]
    return True if on else None


def events_apart_of(exp: Experiment) -> bool | None:
    """True when a run's step time comes from runner processes that record no per-command
    event and its breakdown from one more process that does (``measure.events_apart`` on an
    OpenCL run on one queue; the pipelined placement's wait lists need every command's
    event); None otherwise, so the params and hash of a CPU or pipelined run, or of any run
    with the key off, stay those of a run whose every process recorded events."""
    c = exp.config
    on = c["measure"].get("events_apart", True) and c["backend"]["kind"] == "opencl" \
        and c["backend"]["placement"] != "pipelined"
    return True if on else None


def run_spec(exp: Experiment, data_dir: str) -> RunSpec:
    """The :class:`RunSpec` of one experiment (``params.json`` of its run folder)."""
    c = exp.config
    cpu = c["backend"]["kind"] == "cpu"
    return RunSpec(
        run_id=exp.id, model=exp.model, device=exp.device, backend=exp.backend,
        placement=None if cpu else c["backend"]["placement"],
        transfer=None if cpu else c["backend"]["transfer"], kernel=None if cpu else exp.kernel,
        dataset=dataset_of(exp), batch_size=c["model"]["batch_size"],
        config_hash=run_config_hash(exp),
        kernel_hash=exp_kernel_hash(exp),
        stage_root=stage_root_rel(exp.device), data_dir=data_dir,
        device_config=c["device"], dataset_path=c["dataset"]["path"],
        measure=run_measure(exp), reuse_buffers=reuse_of(exp),
        events_apart=events_apart_of(exp), events_adaptive=events_adaptive_of(exp))


def run_params(exp: Experiment) -> dict[str, Any]:
    """``params.json`` of a run folder (:class:`RunSpec`)."""
    pc = plan_config(exp)
    return to_params(run_spec(exp, data_dir_rel(dataset_of(exp), pc["model"]["batch_size"],
                                                exp.model)))


def plan_spec(exp: Experiment) -> LowerSpec:
    """The plan spec of one experiment (:func:`phonetrain.config.plan_config`): a
    :class:`~phonetrain.lowering.LowerSpec` named by the experiment id. A CPU plan keeps
    LowerSpec's default kernel (lowered with the baseline's ops, run by the runner's C
    kernels)."""
    pc = plan_config(exp)
    m, b, ms = pc["model"], pc["backend"], pc["measure"]
    device = b["kind"] != "cpu"   # a device backend: OpenCL or Vulkan
    name = m.get("optimizer", "sgd")   # an sgd config holds none of ADAM_KEYS
    adam = {} if name == "sgd" else {"optimizer": name, "eps": float(m["eps"]),
                                     "betas": tuple(float(x) for x in m["betas"])}
    on_device = {"placement": b["placement"], "transfer": b["transfer"],
                 "kernel": pc["kernel"]["name"]} if device else {}
    return LowerSpec(plan_id=exp.id, model=m["name"], dataset=dataset_of(exp),
                     batch_size=m["batch_size"], lr=m["lr"], momentum=m["momentum"],
                     weight_decay=m["weight_decay"], backend=b["kind"],
                     num_batches=pc["dataset"]["num_batches"], warmup=ms["warmup"],
                     iterations=ms["iterations"], seed=ms["seed"],
                     checkpoints=tuple(ms["checkpoints"]),
                     reuse_buffers=bool(reuse_of(exp)), **on_device, **adam)


def reuse_of(exp: Experiment) -> bool | None:
    """``lower.reuse_buffers`` of an experiment: True when on, None when off (the params of
    a plan or run without it keep their bytes)."""
    on = "lower" in exp.config and exp.config["lower"]["reuse_buffers"]   # absent: off
    return True if on else None


@functools.lru_cache(maxsize=None)
def model_gemm_shapes(model: str, batch_size: int, kernel: str = "baseline",
                      backend: str = "opencl") -> tuple[GemmShape, ...]:
    """Distinct GEMM calls of one model's training step at ``batch_size`` as ``kernel``
    lowers it for ``backend`` (``opencl`` or ``vulkan``), in first-use order (the placement
    and transfer do not change them)."""
    plan = lower(LowerSpec(model=model, batch_size=int(batch_size), backend=backend,
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


@functools.lru_cache(maxsize=None)
def vk_tunable(kernel: str) -> bool:
    """Whether a version's Vulkan shaders have tuning candidates besides their defaults
    (:func:`phonetrain.kernels.spirv.shader_candidates`; the Vulkan :func:`tuning.tunable`)."""
    return has_shaders(kernel) and len(shader_candidates(kernel)) > 1


def vk_tuning_classes(sweep: Sweep) -> dict[str, list[str]]:
    """The GEMM tuning classes each Vulkan experiment of a version with shader candidates
    uses, by experiment id: its deploy's Vulkan tuning files (:meth:`Layout.vk_tuning`)."""
    out = {}
    for exp in sweep.experiments:
        if exp.is_vulkan and vk_tunable(exp.kernel):
            shapes = model_gemm_shapes(exp.model, plan_config(exp)["model"]["batch_size"],
                                       exp.kernel, "vulkan")
            out[exp.id] = list(dict.fromkeys(tuning.gemm_class(g) for g in shapes))
    return out


def vk_version_tuning_classes(sweep: Sweep) -> dict[str, list[str]]:
    """Vulkan-tunable kernel version of the sweep -> the classes of its Vulkan runs' plans
    (sorted): its Vulkan tune job's class files (no GEMM sweep runs on Vulkan)."""
    run_classes = vk_tuning_classes(sweep)
    out: dict[str, set[str]] = {}
    for e in sweep.experiments:
        if e.id in run_classes:
            out.setdefault(e.kernel, set()).update(run_classes[e.id])
    return {k: sorted(v) for k, v in out.items()}


def sweep_tuning_classes(sweep: Sweep) -> list[str]:
    """The tuning classes of the GEMM study's model shapes (:func:`sweep_gemm_shapes`)."""
    return list(dict.fromkeys(
        tuning.gemm_class(GemmShape(s["kernel"], s["M"], s["N"], s["K"]))
        for s in sweep_gemm_shapes(sweep)))


def gemm_params(sweep: Sweep) -> dict[str, Any]:
    """The GEMM settings of :class:`GemmSpec` shared by every gemm job (the tune jobs take
    theirs from it: :func:`tune_job`, :func:`squares_job`)."""
    ms = sweep.root["measure"]
    return {"shapes_hash": shapes_hash(sweep_gemm_shapes(sweep)),
            "sizes": sorted(int(n) for n in ms["gemm_sizes"]),
            "min_time_ms": float(ms["gemm_min_time_ms"]),
            "max_launch_s": float(ms["gemm_max_launch_s"]), "tune": bool(ms["tune"]),
            "tune_min_time_ms": float(ms["tune_min_time_ms"]),
            "tune_max_launch_s": float(ms["tune_max_launch_s"]), "threads": int(ms["threads"]),
            "max_shape_s": float(ms["gemm_max_shape_s"]),
            "tune_finalists": int(ms["tune_finalists"]),
            "tune_screen_min_time_ms": float(ms["tune_screen_min_time_ms"]),
            "plateau_gain": float(ms["gemm_plateau_gain"])}


def job_params(sweep: Sweep) -> dict[str, Any]:
    """Every job's params dict (a spec of :mod:`phonetrain.stages.specs`), keyed by job:
    ``device[d]``, ``runner[d]``, ``bandwidth[d]``, ``kernel[(d, k)]``, ``data[data_dir]``,
    ``plan[exp_id]``, ``run[(d, exp_id)]``, and ``gemm`` and ``shapes`` (one dict each)."""
    out: dict[str, Any] = {"device": {}, "runner": {}, "bandwidth": {}, "kernel": {},
                           "data": {}, "plan": {}, "run": {}}
    ms = sweep.root["measure"]
    for d, dcfg in sweep.members["device"].items():
        dev = {k: v for k, v in dcfg.items() if k != "facts"}
        root = stage_root_rel(d)
        out["device"][d] = to_params(DeviceSpec(d, dev, root))
        out["runner"][d] = to_params(RunnerSpec(d, dev, RUNNER_CACHE_REL))
        out["bandwidth"][d] = to_params(BandwidthSpec(d, dev, root, ms["bandwidth_max_bytes"]))
        for k in sweep.kernels:
            out["kernel"][(d, k)] = to_params(KernelSpec(d, dev, root, k, kernel_hash(k)))
    for exp in sweep.experiments:
        ds = dataset_of(exp)
        batch = exp.config["model"]["batch_size"]
        ddir = data_dir_rel(ds, batch, exp.model)
        out["data"][ddir] = to_params(data_spec(exp, ddir))
        out["plan"][exp.id] = plan_params(plan_spec(exp), ddir)
        rp = to_params(run_spec(exp, ddir))
        out["run"][(exp.device, exp.id)] = rp
    out["gemm"] = gemm_params(sweep)
    out["shapes"] = to_params(ShapesSpec(gemm_models(sweep)))
    return out


def data_spec(exp: Experiment, ddir: str) -> DataSpec:
    """The :class:`DataSpec` of the batch folder ``ddir`` an experiment reads. Not the model:
    every model reading a dataset shares its batch files; only synthetic data takes its shape
    and classes from the model (checked at composition)."""
    ds = dataset_of(exp)
    m = get_model(exp.model)
    synth = dataset_info(ds).input_shape is None
    held = {"fraction": HELDOUT_FRACTION, "seed": HELDOUT_SEED} \
        if ds in HELDOUT_HOLDS_BACK else None  # a changed share rewrites the batches
    return DataSpec(dataset=ds, input_shape=list(m.input_shape) if synth else None,
                    classes=m.classes if synth else None,
                    batch_size=exp.config["model"]["batch_size"], dir=ddir,
                    dataset_config=exp.config["dataset"],
                    seed=exp.config["measure"]["seed"], heldout=held)


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
    """A tune or GEMM sweep job's params (:class:`GemmSpec`; ``version``: a kernel version,
    or ``cpu``): the device's params of ``jp`` (:func:`job_params`), the version's hash and
    the study's GEMM settings."""
    base = jp["device"][device]
    kh = None if version == CPU_VERSION else jp["kernel"][(device, version)]["kernel_hash"]
    return to_params(GemmSpec(**base, version=version, kernel_hash=kh, **jp["gemm"]))


def tune_version_spec(jp: dict[str, Any], device: str, kernel: str,
                      classes: list[str], api: str | None = None) -> TuneVersionSpec:
    """The spec of one version's tune job on one device (:class:`TuneVersionSpec`): the
    version on the device, the hash of its ``classes`` (:func:`version_tuning_classes`), the
    GEMM sweep's square sizes and the tuning settings. ``api`` ``vulkan``: its shaders' tune
    job (:func:`vk_version_tuning_classes`; the shaders' hash, no square sizes)."""
    g = jp["gemm"]
    kh = tuning_hash(kernel) if api is None else shader_hash(kernel)[:16]
    version = dict(jp["kernel"][(device, kernel)], kernel_hash=kh)
    return TuneVersionSpec(**version, classes_hash=classes_hash(classes),
                           sizes=g["sizes"] if api is None else [],
                           **{k: g[k] for k in ("tune", "tune_min_time_ms",
                                                "tune_max_launch_s", "tune_finalists",
                                                "tune_screen_min_time_ms")}, api=api)


def tune_version_job(jp: dict[str, Any], device: str, kernel: str,
                     classes: list[str], api: str | None = None) -> dict[str, Any]:
    """A tune job's params (:func:`tune_version_spec` as a dict)."""
    return to_params(tune_version_spec(jp, device, kernel, classes, api))


def tune_job(jp: dict[str, Any], device: str, kernel: str, cls: str,
             api: str | None = None) -> dict[str, Any]:
    """The params one class's tuning file records: one kernel version on one device, the
    class (the GEMM call it is tuned on, :func:`phonetrain.kernels.tuning.class_shape`) and
    the tuning settings; nothing of the sweep, so a class's result stays whatever else the
    study holds (:meth:`TuneVersionSpec.class_spec`)."""
    return to_params(tune_version_spec(jp, device, kernel, [cls], api).class_spec(cls))


def squares_job(jp: dict[str, Any], device: str, kernel: str,
                api: str | None = None) -> dict[str, Any]:
    """The params ``tuning/squares.json`` records: the version on the device, the GEMM
    sweep's square sizes and the tuning settings (:meth:`TuneVersionSpec.squares_spec`)."""
    return to_params(tune_version_spec(jp, device, kernel, [], api).squares_spec())


def version_tuning_classes(sweep: Sweep) -> dict[str, list[str]]:
    """Tunable kernel version of the sweep -> the GEMM classes its tune job tunes (sorted):
    those of the GEMM study's model shapes and those of the version's runs' plans."""
    run_classes = tuning_classes(sweep)
    out = {k: set(sweep_tuning_classes(sweep)) for k in sweep.kernels if tuning.tunable(k)}
    for e in sweep.experiments:
        if e.kernel in out:
            out[e.kernel].update(run_classes.get(e.id, []))
    return {k: sorted(v) for k, v in out.items()}


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
