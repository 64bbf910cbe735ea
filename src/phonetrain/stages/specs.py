"""Each stage's job spec: a frozen dataclass of exactly the fields the stage reads. The
``lower`` job's is the one plan spec, :class:`phonetrain.lowering.LowerSpec`, spelled in its
params by :func:`plan_params` and read back by :func:`parse_plan`.

:mod:`phonetrain.stages.params` derives the specs from the composed sweep; the rules pass
each spec as the job's ``params`` (canonical JSON, :func:`as_json`) and the stage parses it
back with :func:`parse`, which requires every field and refuses unknown ones. Defaults live
in the structured config (:mod:`phonetrain.config`) only: no spec field has one, except a
field marked :data:`OMIT_NONE`, which is left out of the params while it is None (so the
params, and the stamp of every job made before the field existed, stay as they were) and
parses back as None when absent.

Paths in specs are relative to the results folder (``stage/<device>``,
``build/.runner-cache``): the same study spelled relatively or absolutely, or moved, has the
same specs. A job resolves them with :meth:`phonetrain.stages.job.Runtime.at`.

Values too large for a param (the GEMM study's shape list) travel as a file an upstream job
writes; the spec holds its hash (``shapes_hash``), so a change still reruns the job.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, TypeVar, get_type_hints

from phonetrain.errors import StageError
from phonetrain.io import short_hash
from phonetrain.lowering.spec import LowerSpec

S = TypeVar("S")
OMIT_NONE = {"omit_none": True}   # field metadata: left out of the params while None
CPU_VERSION = "cpu"   # GemmSpec.version of the runner's CPU backend (the GEMM study's series)


@dataclass(frozen=True)
class DeviceSpec:
    """A job on one device (``peaks``): its config (``facts`` excluded) and staging root."""

    device: str
    device_config: dict
    stage_root: str          # relative to the results folder


@dataclass(frozen=True)
class RunnerSpec:
    """``build-runner``: the device's toolchain settings and the shared compile cache."""

    device: str
    device_config: dict
    cache: str               # relative to the results folder


@dataclass(frozen=True)
class BandwidthSpec:
    """``bandwidth``: the device and the sweep's largest transfer (bytes)."""

    device: str
    device_config: dict
    stage_root: str
    bandwidth_max_bytes: int


@dataclass(frozen=True)
class KernelSpec:
    """``build-kernels``: one kernel version on one device, with its sources' hash."""

    device: str
    device_config: dict
    stage_root: str
    kernel: str
    kernel_hash: str


@dataclass(frozen=True)
class GemmSpec:
    """``gemm``: one version (a kernel version, or :data:`CPU_VERSION`) on one device and the
    study's GEMM settings. The models' shapes are the ``shapes`` input file (see
    :func:`phonetrain.stages.gemm.read_shapes`), whose hash is ``shapes_hash``."""

    device: str
    device_config: dict
    stage_root: str
    version: str
    kernel_hash: Optional[str]     # None for ``cpu``
    shapes_hash: str
    sizes: list                    # square sizes n (M = N = K), ascending
    min_time_ms: float
    max_launch_s: float
    tune: bool
    tune_min_time_ms: float
    tune_max_launch_s: float
    threads: int
    # measure.gemm_max_shape_s (None, left out: 5 timed repeats of every shape)
    max_shape_s: Optional[float] = dataclasses.field(default=None, metadata=OMIT_NONE)
    # measure.tune_finalists and tune_screen_min_time_ms (None, left out: every candidate timed
    # in full, one pass, as before the keys existed)
    tune_finalists: Optional[int] = dataclasses.field(default=None, metadata=OMIT_NONE)
    tune_screen_min_time_ms: Optional[float] = dataclasses.field(default=None, metadata=OMIT_NONE)
    # measure.gemm_plateau_gain (None, left out: every square up to max_launch_s)
    plateau_gain: Optional[float] = dataclasses.field(default=None, metadata=OMIT_NONE)


def shapes_hash(shapes: list[dict[str, Any]]) -> str:
    """16 hex digits of a GEMM shape list (the ``shapes_hash`` of :class:`GemmSpec`)."""
    return short_hash(shapes)


@dataclass(frozen=True)
class TuneSpec:
    """``tune``: one kernel version on one device, tuned for one class (``cls``: the GEMM call
    :func:`phonetrain.kernels.tuning.class_shape` gives); nothing of the sweep, so a class's
    result stays whatever else the study holds."""

    device: str
    device_config: dict
    stage_root: str
    kernel: str
    kernel_hash: str
    cls: str
    tune: bool
    tune_min_time_ms: float
    # "vulkan": the version's shaders on the device's Vulkan device; None (left out): OpenCL
    api: Optional[str] = dataclasses.field(default=None, metadata=OMIT_NONE)
    # measure.tune_finalists and tune_screen_min_time_ms (None, left out: every candidate timed
    # in full, one pass, as before the keys existed)
    tune_finalists: Optional[int] = dataclasses.field(default=None, metadata=OMIT_NONE)
    tune_screen_min_time_ms: Optional[float] = dataclasses.field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class SquaresSpec:
    """``tune_squares``: one kernel version on one device, tuned for the GEMM sweep's square
    sizes whose launch is expected within ``tune_max_launch_s``."""

    device: str
    device_config: dict
    stage_root: str
    kernel: str
    kernel_hash: str
    sizes: list                    # square sizes n (M = N = K), ascending
    tune: bool
    tune_min_time_ms: float
    tune_max_launch_s: float
    api: Optional[str] = dataclasses.field(default=None, metadata=OMIT_NONE)  # as TuneSpec's
    # measure.tune_finalists and tune_screen_min_time_ms (None, left out: every candidate timed
    # in full, one pass, as before the keys existed)
    tune_finalists: Optional[int] = dataclasses.field(default=None, metadata=OMIT_NONE)
    tune_screen_min_time_ms: Optional[float] = dataclasses.field(default=None, metadata=OMIT_NONE)


def classes_hash(classes: list[str]) -> str:
    """16 hex digits of a set of GEMM class names (the ``classes_hash`` of
    :class:`TuneVersionSpec`)."""
    return short_hash(sorted(classes))


@dataclass(frozen=True)
class TuneVersionSpec:
    """``tune-version``: one kernel version on one device, tuned for each GEMM class of its
    outputs (one file per class, ``tuning/<class>.json``; ``classes_hash``: of their names,
    :func:`classes_hash`, so a changed set reruns the job while the list, a hundred classes
    for the zoo, stays out of the params) and for the GEMM sweep's square sizes, in one job.
    Each output file records its own class's spec (:meth:`class_spec`, :meth:`squares_spec`),
    never this one: a class file stays current whatever other classes the study gains or
    loses."""

    device: str
    device_config: dict
    stage_root: str
    kernel: str
    kernel_hash: str               # stages.params.tuning_hash: comments and white space left out
    classes_hash: str              # classes_hash of the GEMM classes, one file each
    sizes: list                    # square sizes n (M = N = K), ascending
    tune: bool
    tune_min_time_ms: float
    tune_max_launch_s: float
    api: Optional[str] = dataclasses.field(default=None, metadata=OMIT_NONE)  # as TuneSpec's
    # measure.tune_finalists and tune_screen_min_time_ms (None, left out: every candidate timed
    # in full, one pass, as before the keys existed)
    tune_finalists: Optional[int] = dataclasses.field(default=None, metadata=OMIT_NONE)
    tune_screen_min_time_ms: Optional[float] = dataclasses.field(default=None, metadata=OMIT_NONE)

    def _version(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("device", "device_config", "stage_root",
                                              "kernel", "kernel_hash", "api")}

    def class_spec(self, cls: str) -> TuneSpec:
        """The spec of one class's file (the params its stamp records)."""
        return TuneSpec(**self._version(), cls=cls, tune=self.tune,
                        tune_min_time_ms=self.tune_min_time_ms, **self._passes())

    def squares_spec(self) -> SquaresSpec:
        """The spec of the square sizes' file, ``tuning/squares.json``."""
        return SquaresSpec(**self._version(), sizes=self.sizes, tune=self.tune,
                           tune_min_time_ms=self.tune_min_time_ms,
                           tune_max_launch_s=self.tune_max_launch_s, **self._passes())

    def _passes(self) -> dict[str, Any]:
        return {"tune_finalists": self.tune_finalists,
                "tune_screen_min_time_ms": self.tune_screen_min_time_ms}


@dataclass(frozen=True)
class ShapesSpec:
    """``gemm-shapes``: the models whose training GEMMs the study runs, in the sweep's order
    (``[[name, batch size]]``: a list, as the first model of a shared shape names it)."""

    models: list


@dataclass(frozen=True)
class DataSpec:
    """``data``: one dataset split into batch files. ``input_shape``/``classes`` only for
    synthetic data (else None); ``heldout`` the held-out share cut from training
    (``{"fraction", "seed"}``) or None."""

    dataset: str
    input_shape: Optional[list]
    classes: Optional[int]
    batch_size: int
    dir: str                       # relative to a staging root
    dataset_config: dict
    seed: int
    heldout: Optional[dict]


# The lower job's spec is the one plan spec, :class:`phonetrain.lowering.LowerSpec`; its
# params spell it as the workflow always has (``id`` for ``plan_id``, the Adam settings as one
# object) beside ``data_dir``, the batch folder (relative to a staging root) the plan's runs
# read, so the params, and the stamp of every plan lowered before, keep their bytes.
PLAN_KEYS = ("id", "model", "dataset", "batch_size", "lr", "momentum", "weight_decay",
             "backend", "placement", "transfer", "kernel", "num_batches", "warmup",
             "iterations", "seed", "checkpoints", "data_dir")
# LowerSpec fields the params hold only while they are not the default (value when absent).
PLAN_OPTIONAL = {"optimizer": None, "reuse_buffers": None, "dumps": "params",
                 "splitk_groups": 0}


def plan_params(spec: LowerSpec, data_dir: str) -> dict[str, Any]:
    """The ``lower`` job's params of a plan spec: :data:`PLAN_KEYS` (``id`` is
    ``spec.plan_id``, which must be set), ``optimizer`` ``{"name", "betas", "eps"}`` for
    adam/adamw (absent for sgd), ``reuse_buffers`` True when on, ``dumps`` and
    ``splitk_groups`` when not their defaults. Raises :class:`StageError` without a plan id."""
    if not spec.plan_id:
        raise StageError(f"lower: the plan spec of {spec.model} has no plan_id (the "
                         "experiment id names the plan's folder)")
    d = {k: getattr(spec, k) for k in PLAN_KEYS if k not in ("id", "data_dir")}
    d |= {"id": spec.plan_id, "data_dir": data_dir, "checkpoints": list(spec.checkpoints)}
    if spec.optimizer != "sgd":
        d["optimizer"] = {"name": spec.optimizer, "betas": [float(b) for b in spec.betas],
                          "eps": float(spec.eps)}
    if spec.reuse_buffers:
        d["reuse_buffers"] = True
    if spec.dumps != PLAN_OPTIONAL["dumps"]:
        d["dumps"] = spec.dumps
    if spec.splitk_groups != PLAN_OPTIONAL["splitk_groups"]:
        d["splitk_groups"] = spec.splitk_groups
    return d


def parse_plan(params: Mapping[str, Any], job: str) -> LowerSpec:
    """The plan spec of a ``lower`` job's params (:func:`plan_params`'s inverse; ``data_dir``
    is not the plan's). Raises :class:`StageError` naming ``job`` and every missing or
    unknown key."""
    missing = sorted(set(PLAN_KEYS) - set(params))
    unknown = sorted(set(params) - set(PLAN_KEYS) - set(PLAN_OPTIONAL))
    if missing or unknown:
        what = "; ".join(x for x in (missing and f"missing key(s) {missing}",
                                     unknown and f"unknown key(s) {unknown}") if x)
        raise StageError(f"{job}: params are not a plan spec (LowerSpec): {what}")
    p = {**PLAN_OPTIONAL, **params}   # an optional key left out: its default
    adam = {} if p["optimizer"] is None else {"optimizer": p["optimizer"]["name"],
                                              "betas": tuple(p["optimizer"]["betas"]),
                                              "eps": p["optimizer"]["eps"]}
    fields = {k: p[k] for k in PLAN_KEYS if k not in ("id", "data_dir", "checkpoints")}
    return LowerSpec(**fields, plan_id=p["id"], checkpoints=tuple(p["checkpoints"]),
                     reuse_buffers=bool(p["reuse_buffers"]), dumps=p["dumps"],
                     splitk_groups=p["splitk_groups"], **adam)


@dataclass(frozen=True)
class MeasureSpec:
    """A run's ``measure`` settings (:class:`phonetrain.config.MeasureConfig` documents each;
    the run-time knobs ``timeout_s``/``progress`` are not here)."""

    warmup: int
    iterations: int
    repeats: int
    seed: int
    threads: int
    cooldown_s: float
    cooldown_threshold_c: float
    cooldown_limit_s: float
    verify_atol: float
    checkpoints: list
    ci_target: float
    max_iterations: int
    max_seconds: float
    max_other_cpu_share: float
    bootstrap_resamples: int
    power_sample_ms: int
    eval_every: int
    max_attempts: int
    max_probe_slowdown: float


@dataclass(frozen=True)
class RunSpec:
    """``deploy``, ``train``: one run, also its ``params.json``. ``measure``: the run's
    ``measure`` settings; ``config_hash``: of the whole config the run depends on."""

    run_id: str
    model: str
    device: str
    backend: str
    placement: Optional[str]
    transfer: Optional[str]
    kernel: Optional[str]
    dataset: str
    batch_size: int
    config_hash: str
    kernel_hash: Optional[str]
    stage_root: str
    data_dir: str
    device_config: dict
    dataset_path: Optional[str]    # the dataset's folder (``dataset.path``; None: default)
    measure: MeasureSpec
    # lower.reuse_buffers: True when on; None (left out of the params) when off
    reuse_buffers: Optional[bool] = dataclasses.field(default=None, metadata=OMIT_NONE)
    # measure.events_apart on an OpenCL run on one queue: True; None (left out) otherwise
    events_apart: Optional[bool] = dataclasses.field(default=None, metadata=OMIT_NONE)
    # measure.events_adaptive on an events_apart run: True; None (left out) otherwise: the
    # events process measures exactly the plan's iterations
    events_adaptive: Optional[bool] = dataclasses.field(default=None, metadata=OMIT_NONE)


def to_params(spec: Any) -> dict[str, Any]:
    """A spec as its params dict (field name -> value; an :data:`OMIT_NONE` field only
    when it is not None)."""
    d = dataclasses.asdict(spec)
    for f in dataclasses.fields(spec):
        if f.metadata.get("omit_none") and d[f.name] is None:
            del d[f.name]
    return d


def as_json(spec_or_dict: Any) -> str:
    """Canonical JSON of a spec or params dict (sorted keys, no spaces): what Snakemake's
    ``params`` trigger compares and what the job parses."""
    d = spec_or_dict if isinstance(spec_or_dict, Mapping) else to_params(spec_or_dict)
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def parse(cls: type[S], params: Mapping[str, Any], job: str) -> S:
    """The ``cls`` spec of a job's params dict. Raises :class:`StageError` naming ``job`` and
    every missing or unknown key."""
    names = {f.name for f in dataclasses.fields(cls)}
    optional = {f.name for f in dataclasses.fields(cls) if f.metadata.get("omit_none")}
    params = {**{k: None for k in optional}, **params}
    missing, unknown = sorted(names - set(params)), sorted(set(params) - names)
    if missing or unknown:
        what = "; ".join(x for x in (missing and f"missing key(s) {missing}",
                                     unknown and f"unknown key(s) {unknown}") if x)
        raise StageError(f"{job}: params are not a {cls.__name__}: {what}")
    hints = get_type_hints(cls)
    return cls(**{k: _value(hints[k], params[k], f"{job}: {k}") for k in names})


def _value(kind: Any, v: Any, where: str) -> Any:
    """``v`` as field type ``kind``: a nested spec is parsed, anything else kept."""
    if dataclasses.is_dataclass(kind):
        if not isinstance(v, Mapping):
            raise StageError(f"{where}: expected an object, got {v!r}")
        return parse(kind, v, where)
    return v
