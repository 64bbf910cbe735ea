"""The structured config's schema (Hydra + OmegaConf) and the records of a composed sweep.

The dataclasses below are the schema, registered in Hydra's ConfigStore as ``base_config``
(:func:`register_schema`, before each composition):
one group per axis (``model``, ``device``, ``backend``, ``kernel``) plus ``dataset`` and
``sweep``, and the ``measure``, ``report`` and ``lower`` sections of ``conf/config.yaml``; a
wrong key or type in a YAML file is an error naming the file and key. :class:`Experiment` and
:class:`Sweep` are what composition (:mod:`phonetrain.config.compose`) returns.

Documentation: the docstring under each dataclass field is that key's meaning;
``docs/configuration.md`` is generated from them (``phonetrain.cli.config_table``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional, get_type_hints

from phonetrain.errors import PhonetrainError
from phonetrain.io import short_hash
from phonetrain.plan import DEFAULT_ITERATIONS, DEFAULT_WARMUP

# A mandatory value: OmegaConf's spelling (omegaconf.MISSING), written out so that importing
# the schema loads no OmegaConf (a cached workflow parse composes nothing).
MISSING: Any = "???"
REPO_ROOT = Path(__file__).resolve().parents[3]
CONF_DIR = REPO_ROOT / "conf"
AXES = ("model", "device", "backend", "kernel")
NO_KERNEL = "none"  # the kernel axis value of CPU experiments
NAME_RE = re.compile(r"^[A-Za-z0-9_-]+$")  # ids go into paths and wildcards: no dots


class ConfigError(PhonetrainError, ValueError):
    """A config file, key or override that cannot be used; the message names it."""


@dataclass
class ModelConfig:
    """A model of :data:`phonetrain.models.MODELS` and its training settings."""

    name: str = MISSING
    """A model of the zoo (layers, FLOPs and launches: docs/models.md); must equal the file name."""
    dataset: Optional[str] = None
    """The dataset this model trains on; null: the sweep's `dataset.name`."""
    batch_size: int = 32
    """Samples per iteration."""
    lr: float = 0.05
    """Step size, as PyTorch defines it for the optimizer (this value for every optimizer:
    PyTorch's own Adam default is 1e-3, set it)."""
    momentum: float = 0.0
    """SGD momentum (at 1 or above SGD diverges); 0 for adam/adamw."""
    weight_decay: float = 0.0
    """L2 factor added to the gradient; adamw: decoupled decay, `W *= 1 - lr * weight_decay`."""
    optimizer: str = "sgd"
    """The update rule, as PyTorch's `torch.optim.SGD`, `Adam` and `AdamW`; the `fused` kernel
    version takes sgd only. An sgd model's experiment config leaves `optimizer`, `betas` and
    `eps` out (ADAM_KEYS), so its config hash is what it was before these keys existed."""
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """adam/adamw: the decay rates of the first and second moment estimates, each in [0, 1)."""
    eps: float = 1e-8
    """adam/adamw: added to the second moment's root."""


@dataclass
class DeviceFacts:
    """Datasheet facts for the report's reference lines only; null = unknown."""

    soc: Optional[str] = None
    """The system on chip, as the report names it."""
    gpu: Optional[str] = None
    """The GPU, as the report names it."""
    peak_gflops: Optional[float] = None
    """Peak GFLOPS from the datasheet (OpenCL's clock figures lie on Adreno); positive."""
    bandwidth_gbps: Optional[float] = None
    """Memory bandwidth in GB/s from the datasheet; positive."""


@dataclass
class DeviceConfig:
    """Where and how the runner runs: transport, toolchain, OpenCL selection, facts."""

    name: str = MISSING
    """Device id used in the results' paths; must equal the file name."""
    transport: str = "local"
    """`local`: this host; `adb`: a phone through an adb server."""
    serial: Optional[str] = None
    """adb: the phone's serial (`phonetrain devices` lists them)."""
    adb_host: Optional[str] = None
    """adb: host of the phone's adb server; null: this host."""
    adb_port: Optional[int] = None
    """adb: port of the phone's adb server, 1..65535; null: the default 5037, the only server
    phonetrain starts itself."""
    toolchain: str = "host"
    """How the runner is built: the host's `cc`, the Android NDK's clang, or Debian's
    aarch64 cross gcc (static)."""
    cc: str = "cc"
    """C compiler of the `host` toolchain."""
    ndk: Optional[str] = None
    """Android NDK root; null: `$ANDROID_NDK_HOME`."""
    android_api: int = 28
    """Android API level the runner is built for (28 = Android 9)."""
    opencl_library: Optional[str] = None
    """Explicit libOpenCL path; null: the runner's search list."""
    opencl_platform: str = ""
    """Name substring selecting the OpenCL platform; empty: the first."""
    opencl_device: str = ""
    """Name substring selecting the OpenCL device; empty: the first."""
    facts: DeviceFacts = field(default_factory=DeviceFacts)


@dataclass
class BackendConfig:
    """``cpu``, or ``opencl`` with a placement (resident | staged | pipelined) and a transfer
    (copy | map; pipelined takes copy only), or ``vulkan`` with a placement (resident |
    staged) and a transfer (copy | map)."""

    name: str = MISSING
    """Must equal the file name."""
    kind: str = "cpu"
    """`cpu`: the runner's C kernels (OpenMP); `opencl`: the kernel version's OpenCL kernels;
    `vulkan`: the kernel version's Vulkan compute shaders (its `vk/` folder, docs/vulkan.md)."""
    placement: str = "none"
    """opencl: `resident` (tensors live on the device; per iteration only the batch goes up and
    the loss comes down), `staged` (the host owns every tensor; each kernel's inputs are written
    before it and its outputs read after it) or `pipelined` (staged, with the moves on a
    second queue ordered by event wait lists, plan version 2); cpu: `none`."""
    transfer: str = "none"
    """opencl: `copy` (read/write buffer) or `map` (map/unmap of host-allocated buffers:
    zero-copy on phones); `pipelined` takes `copy` only; cpu: `none`."""


@dataclass
class KernelConfig:
    """A kernel version: a folder under ``src/kernels``. Its build options, defines, local
    sizes and ``inherits`` live beside the sources in ``src/kernels/<name>/version.yaml``."""

    name: str = MISSING
    """A folder `src/kernels/<name>` (its `version.yaml`: src/kernels/README.md)."""


@dataclass
class DatasetConfig:
    """The training data: name, number of distinct batches, optional folder."""

    name: str = "digits"
    """digits (scikit-learn's 8x8 digits upsampled to 28x28), mnist, fashion_mnist, cifar10,
    synthetic; the held-out split is the t10k files or `test_batch.bin`, else a fixed seeded
    20% that training batches never use."""
    num_batches: int = 8
    """Distinct batches cycled over the iterations; refused when writing them would need more
    host memory than is available (batches_bytes: about three copies of the data)."""
    path: Optional[str] = None
    """Folder of the IDX or CIFAR files; it must exist and hold them (only it is read)."""
    allow_download: bool = False
    """Download a missing dataset (checksummed) only when true."""


@dataclass
class SweepConfig:
    """The members of each axis that the workflow crosses."""

    name: str = MISSING
    """Must equal the file name: `sweep=<name>` selects `conf/sweep/<name>.yaml`."""
    models: list[str] = field(default_factory=list)
    """Models crossed (files of `conf/model/`)."""
    devices: list[str] = field(default_factory=list)
    """Devices crossed (files of `conf/device/`)."""
    backends: list[str] = field(default_factory=list)
    """Backends crossed (files of `conf/backend/`); a cpu backend runs once per model and device."""
    kernels: list[str] = field(default_factory=list)
    """Kernel versions crossed with the opencl backends (files of `conf/kernel/`)."""
    backend_kernels: dict[str, list[str]] = field(default_factory=dict)
    """Backend -> the only kernel versions it is crossed with (those also in `kernels`); a
    backend not named runs every kernel. The default study sets `{opencl_pipelined:
    [baseline]}`: pipelined vs staged is a question about transfers, not kernels. An
    override adds or replaces one entry: `+sweep.backend_kernels.opencl=[tiled]`."""
    batches: list[int] = field(default_factory=list)
    """Batch sizes crossed with the other axes (run folders `<model>.b<batch>.<backend>.<kernel>`;
    a batch that does not fit the device is recorded `oom`; the report names the largest that
    fits, figure `batch_sweep`); empty: each model's `batch_size`."""


@dataclass
class MeasureConfig:
    """Measurement settings shared by every run: the one place their defaults live."""

    warmup: int = DEFAULT_WARMUP
    """Warm-up iterations per run, discarded from statistics."""
    iterations: int = DEFAULT_ITERATIONS
    """Measured iterations per run (the least, when measuring adaptively)."""
    repeats: int = 2
    """Runner processes per run, one after the other; the estimate pools their iterations and
    its interval covers the variation between processes."""
    seed: int = 0
    """Seeds parameter init and the batches."""
    threads: int = 0
    """CPU backend threads; 0: the CPUs the runner may use (affinity mask and cgroup quota,
    the smaller). A run setting, never part of a plan."""
    cooldown_s: float = 0.0
    """Seconds to wait on the device before each measurement."""
    cooldown_threshold_c: float = 45.0
    """On adb devices, before each measurement, wait until the hottest sensor reads at most this
    (degrees C) ..."""
    cooldown_limit_s: float = 120.0
    """... for at most this long (s), then measure and record it."""
    timeout_s: float = 600.0
    """Limit of one runner invocation (s); a run-time knob: changing it reruns nothing."""
    progress: bool = True
    """The runner prints one line per iteration; a run-time knob."""
    verify_atol: float = 1e-3
    """Whole-trajectory tolerance, for runs without checkpoints."""
    checkpoints: list[int] = field(default_factory=lambda: [0, 1, -2, -1])
    """Iterations (warm-up included; negative: from the end) after which the runner keeps the
    state for the per-step verification; []: none (`verify_atol` judges the trajectory); a
    list the run never reaches is refused."""
    eval_every: int = 0
    """Held-out loss and accuracy every this many measured iterations and at the last (those
    iterations become checkpoints); 0: off. Costs train-stage time, not measured time
    (docs/results.md)."""
    ci_target: float = 0.05
    """Each runner process measures until its estimate's 95% interval is within +-this; a run
    still wider gets more processes (`max_attempts`), then is kept usable with its interval
    noted; 0: exactly `iterations`, no interval judged."""
    max_iterations: int = 60
    """Adaptive limit per runner process: measured iterations. A larger `iterations` raises it,
    unless this is set too (then both are named)."""
    max_seconds: float = 1.5
    """Adaptive limit per runner process: once measuring took this long (s), it decides no more."""
    max_other_cpu_share: float = 0.25
    """Only for a run measured without a calibration probe (an older runner): unstable when
    other processes took more of the CPU than this share (1: never)."""
    max_probe_slowdown: float = 1.5
    """Unstable when a calibration probe ran this many times slower than the device's quiet
    figure (`results/probe/<device>.json`; remedy: `phonetrain refresh --unstable` once the
    host is quieter); 0: never."""
    max_attempts: int = 3
    """Attempts of a run in one train job: an unstable or too-wide attempt is followed by one
    of `repeats` more processes, up to this many; then the run is kept as it is."""
    events_apart: bool = True
    """OpenCL runs on one queue: the step time comes from runner processes that record no
    per-command events; the per-command breakdown (data movement, launches, Perfetto) from one
    more process of the same run (`events/` in the run folder), fitted into the step."""
    events_adaptive: bool = False
    """The `events_apart` process measures exactly `iterations` iterations (false: its
    iteration times are not the step time; the breakdown averages its per-command times over
    them) or stops adaptively as the timed processes do (true: up to `max_iterations` or
    `max_seconds` more). A run measured before this key existed is not measured again."""
    bootstrap_resamples: int = 1000
    """Resamples of the estimate's and the median's bootstrap intervals."""
    power_sample_ms: int = 100
    """Period of the runner's battery power and clock sampling (docs/device-sensors.md); 0: off."""
    bandwidth_max_bytes: int = 1024 * 1024 * 1024
    """Cap of the bandwidth sweep in bytes (1 GiB), which stops earlier at each transfer kind's
    knee."""
    gemm_sizes: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096])
    """Square sizes of the GEMM sweep."""
    gemm_min_time_ms: float = 30.0
    """bench-gemm calibration: each timed repeat lasts this long (ms). 30 ms spans several
    scheduler time slices (a Linux CFS slice is 0.75-6 ms) and the median of a shape's
    repeats sets one slow repeat aside; 100 ms cost the default study's sweeps 2.7 times the
    time with no narrower spread between sweeps (docs/notebook/2026-12-08.md)."""
    gemm_max_launch_s: float = 2.0
    """Skip a version's larger sizes once one launch would take longer than this (s), as
    estimated from the GFLOPS of the square before it. A square past it still takes at least
    3 repeats and a checked launch: at 5 s, CLBlast's 4096^3 on PoCL (estimated 4.9 s, took
    7.8 s a launch) cost one default study 30 s (docs/notebook/2026-12-08.md)."""
    gemm_max_shape_s: float = 2.0
    """Timed repeats of one GEMM sweep shape fit in about this (s): a square whose launch is
    expected (from the GFLOPS of the square before it) to take over a fifth of it gets
    `floor(this / launch)` of the 5 repeats, at least 3 (a median with an interval); the rows
    record `repeats`. 0: always 5. A side-by-side rerun keeps its own 5 per process."""
    gemm_plateau_gain: float = 0.05
    """A version's square sweep stops once two squares in a row each reached less than (1 +
    this) x the best GFLOPS of the squares before them (its curve has plateaued or fallen,
    like the bandwidth sweep's knee); the larger sizes are rows `skipped`. 0: every size up
    to `gemm_max_launch_s`."""
    tune: bool = True
    """Tune the tunable versions per device and GEMM class; a local device's tuning is reused
    from this machine's records (`$PHONETRAIN_TUNING_DIR`) for the same sources."""
    tune_min_time_ms: float = 20.0
    """Calibration target of each tuning trial (ms): 3 timed repeats of this each."""
    tune_finalists: int = 3
    """Tuning in two passes: every candidate is screened on every class (one repeat of
    `tune_screen_min_time_ms`, correctness checked), then per class only this many fastest,
    with the version's defaults, are timed at `tune_min_time_ms`; the choice (ties to the
    earlier candidate) is among them. 0: every candidate timed in full (one pass)."""
    tune_screen_min_time_ms: float = 5.0
    """Calibration target of the screening pass of `tune_finalists` (ms, one repeat)."""
    tune_max_launch_s: float = 0.1
    """Square sizes are tuned as their own class while one launch takes at most this (s);
    larger ones reuse the largest tuned square's configuration."""


@dataclass
class ReportConfig:
    """Report settings."""

    title: str = "phonetrain: on-device training, CPU vs OpenCL GPU"
    """Title of the report."""
    paper_reference: bool = True
    """Draw the seed paper's published figures beside the study's."""
    figure_format: str = "png"
    """Format the report links its figures in; each figure is also written in the other."""
    dpi: int = 120
    """Resolution of the PNG figures."""


@dataclass
class LowerConfig:
    """Options of the lowering that change the plan but not what it computes."""

    reuse_buffers: bool = False
    """Tensors whose lifetimes in the step do not overlap share one buffer
    (phonetrain.lowering.reuse: activations, scratch and activation gradients only; bytes per
    model: docs/models.md; runs.parquet `plan_buffer_bytes`). Off, an experiment's config holds
    no `lower` section, so hashes, plans and params stay as they were."""


@dataclass
class Config:
    """The root schema (``base_config``)."""

    model: ModelConfig = MISSING
    device: DeviceConfig = MISSING
    backend: BackendConfig = MISSING
    kernel: KernelConfig = MISSING
    dataset: DatasetConfig = MISSING
    sweep: SweepConfig = MISSING
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    lower: LowerConfig = field(default_factory=LowerConfig)
    results_dir: str = "results"
    """Output folder, relative to the working directory; no braces (the workflow's paths
    would read them as wildcards)."""


def register_schema() -> None:
    """Register :class:`Config` in Hydra's ConfigStore as ``base_config``, the first entry of
    ``conf/config.yaml``'s defaults list; composition calls it before Hydra reads the files.
    Not done at import: a workflow parse that reads its composed study from the cache
    (:mod:`phonetrain.stages.study_cache`) imports no Hydra."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=Config)

@dataclass(frozen=True)
class Experiment:
    """One cell of the sweep: a model trained on a device with a backend and kernel version.

    ``id`` is ``<model>.<backend>.<kernel>`` (``kernel`` is ``none`` for the CPU backend), or
    ``<model>.b<batch>.<backend>.<kernel>`` when the sweep crosses batch sizes
    (``sweep.batches``; ``batch`` is then set); the run lands in
    ``results/runs/<device>/<id>/``. ``config`` is the plain dict of everything
    the run depends on (device facts excluded: they only feed the report).
    """

    model: str
    device: str
    backend: str
    kernel: str
    config: dict[str, Any]
    batch: int | None = None

    @property
    def id(self) -> str:
        model = self.model if self.batch is None else f"{self.model}.b{self.batch}"
        return f"{model}.{self.backend}.{self.kernel}"

    @property
    def is_opencl(self) -> bool:
        return self.config["backend"]["kind"] == "opencl"

    @property
    def is_vulkan(self) -> bool:
        return self.config["backend"]["kind"] == "vulkan"

    @property
    def config_hash(self) -> str:
        return config_hash(self.config)


@dataclass
class Sweep:
    """The composed study: root settings, the member configs of each axis, the experiments."""

    root: dict[str, Any]
    members: dict[str, dict[str, dict[str, Any]]]
    experiments: list[Experiment]
    # every value read from the environment: dotted key (a member's as ``<axis>[<name>].<key>``)
    # -> {variable: its value at composition, None when unset (the default applied)}
    environment: dict[str, dict[str, str | None]] = field(default_factory=dict)

    @property
    def devices(self) -> list[str]:
        return list(self.members["device"])

    @property
    def kernels(self) -> list[str]:
        return list(self.members["kernel"])

    @property
    def results_dir(self) -> str:
        return self.root["results_dir"]


def config_hash(cfg: dict[str, Any]) -> str:
    """First 16 hex digits of SHA-256 over canonical JSON (sorted keys, no spaces)."""
    return short_hash(cfg)


def schema_class(section: str) -> Any:
    """The dataclass of the structured config's section (``"measure"``), or None."""
    hint = get_type_hints(Config).get(section)
    return hint if is_dataclass(hint) else None


def schema_keys(path: str) -> list[str] | None:
    """The keys of the structured config's section ``path`` (``""`` = the root,
    ``"measure"``, ``"device.facts"``), or None when ``path`` is not a section."""
    cls: Any = Config
    for part in [p for p in path.split(".") if p]:
        hints = get_type_hints(cls) if is_dataclass(cls) else {}
        if part not in hints or not is_dataclass(hints[part]):
            return None
        cls = hints[part]
    return [f.name for f in fields(cls)]


def _all_keys(section: str = "") -> list[str]:
    """Every dotted key of the structured config under ``section`` (sections included)."""
    out = []
    for k in schema_keys(section) or []:
        dotted = f"{section}.{k}" if section else k
        out.append(dotted)
        if schema_keys(dotted) is not None:
            out += _all_keys(dotted)
    return out
