"""Structured configs (Hydra + OmegaConf) and the composed sweep of experiments.

The config tree lives in ``conf/``: one group per axis (``model``, ``device``, ``backend``,
``kernel``) plus ``dataset`` and ``sweep``, and the ``measure`` and ``report`` sections of
``conf/config.yaml``. The dataclasses below are the schema, registered in Hydra's ConfigStore
as ``base_config``; a wrong key or type in a YAML file is an error naming the file and key.

:func:`compose_sweep` turns the tree plus Hydra override strings into a :class:`Sweep`: the
list of :class:`Experiment` records that the Snakefile and ``phonetrain run`` execute. Nothing
non-deterministic (time, host name, random state) enters a composed config, so the same files
and overrides always give the same configs and the same :func:`config_hash`: an interpolation
that may resolve differently on the next call is refused (:data:`DETERMINISTIC_RESOLVERS`,
:data:`VOLATILE_ENV`). A value read from the environment (``${oc.env:VAR}``) is kept beside
the config with its variable (:attr:`Sweep.environment`, not hashed); that it stays the same
between invocations of one study is checked against the study's record
(:mod:`phonetrain.results.environment`), by value, since no list of variables that change
between sessions is complete. Composition runs in its own Hydra context, so it also works
while the caller's Hydra is initialized.

Errors: every defect raises :class:`ConfigError` whose message names the file (or the override)
and the key, and says what to do.

Documentation: the docstring under each dataclass field is that key's meaning;
``docs/configuration.md`` is generated from them (``phonetrain.cli.config_table``).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Optional, Sequence, get_type_hints

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.global_hydra import GlobalHydra
from hydra.core.singleton import Singleton
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from phonetrain.data import DATASETS, check_compatible, source_folder
from phonetrain.devices import TRANSPORTS
from phonetrain.errors import PhonetrainError
from phonetrain.kernels import KERNELS_ROOT, KernelVersionError, load_version
from phonetrain.kernels.spirv import has_shaders
from phonetrain.models import MODELS
from phonetrain.plan import DEFAULT_ITERATIONS, DEFAULT_WARMUP
from phonetrain.io import short_hash

REPO_ROOT = Path(__file__).resolve().parents[2]
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
    [baseline]}`: pipelined vs staged is a question about transfers, not kernels."""
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
    bootstrap_resamples: int = 1000
    """Resamples of the estimate's and the median's bootstrap intervals."""
    power_sample_ms: int = 100
    """Period of the runner's battery power and clock sampling (docs/device-sensors.md); 0: off."""
    bandwidth_max_bytes: int = 1024 * 1024 * 1024
    """Cap of the bandwidth sweep in bytes (1 GiB), which stops earlier at each transfer kind's
    knee."""
    gemm_sizes: list[int] = field(default_factory=lambda: [128, 256, 512, 1024, 2048, 4096])
    """Square sizes of the GEMM sweep."""
    gemm_min_time_ms: float = 100.0
    """bench-gemm calibration: each timed repeat lasts this long (ms)."""
    gemm_max_launch_s: float = 5.0
    """Skip a version's larger sizes once one launch would take longer than this (s)."""
    tune: bool = True
    """Tune the tunable versions per device and GEMM class; a local device's tuning is reused
    from this machine's records (`$PHONETRAIN_TUNING_DIR`) for the same sources."""
    tune_min_time_ms: float = 20.0
    """Calibration target of each tuning trial (ms)."""
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


ConfigStore.instance().store(name="base_config", node=Config)

CHOICES = {
    ("device", "transport"): TRANSPORTS.keys(),   # the transport registry, read when checked
    ("device", "toolchain"): ("host", "android", "linux-aarch64"),
    ("backend", "kind"): ("cpu", "opencl", "vulkan"),
    ("report", "figure_format"): ("png", "svg"),
    ("model", "optimizer"): ("sgd", "adam", "adamw"),
}
# Model keys only Adam and AdamW read: an SGD experiment's config (and so its config hash,
# plan and run) leaves them out, as it did before the keys existed.
ADAM_KEYS = ("optimizer", "betas", "eps")
MIN_INT = {("model", "batch_size"): 1, ("measure", "warmup"): 0, ("measure", "iterations"): 1,
           ("measure", "repeats"): 1, ("measure", "threads"): 0, ("dataset", "num_batches"): 1,
           ("measure", "bandwidth_max_bytes"): 4096, ("report", "dpi"): 1,
           ("measure", "max_iterations"): 1, ("measure", "bootstrap_resamples"): 2,
           ("measure", "seed"): 0, ("measure", "power_sample_ms"): 0,
           ("measure", "eval_every"): 0, ("measure", "max_attempts"): 1}
# Floats that must be > 0 (a limit or calibration target of 0 makes every job fail or spin)
# or >= 0 (a negative tolerance fails every verification; a negative wait is meaningless).
POSITIVE = {("model", "eps"), ("measure", "timeout_s"), ("measure", "gemm_min_time_ms"),
            ("measure", "gemm_max_launch_s"), ("measure", "tune_min_time_ms"),
            ("measure", "tune_max_launch_s")}
# Optimizer factors that must stay below 1: momentum >= 1 makes SGD's velocity grow without
# bound; weight_decay >= 1 removes (or flips) a weight's whole value in one step.
BELOW_ONE = {("model", "momentum"), ("model", "weight_decay")}
# Upper bounds, past which a value breaks a stage rather than asking for more of something:
# the runner reads integers as C ints (a larger one is cut to 32 bits and runs another
# count than the config records), time.sleep and timers overflow, the bootstrap holds
# resamples x samples indices in memory. Every other int key of a section is bounded by
# INT_MAX. (section, key) -> (bound, why).
INT_MAX = 2**31 - 1
WEEK_S = 7 * 24 * 3600.0
AT_MOST: dict[tuple[str, str], tuple[float, str]] = {
    ("measure", "threads"): (1024, "threads of one runner process"),
    ("measure", "bootstrap_resamples"): (100_000, "the bootstrap holds resamples x samples "
                                         "indices in memory; 1000-10000 is the usual range"),
    ("measure", "bandwidth_max_bytes"): (2**40, "1 TiB"),
    ("measure", "cooldown_s"): (WEEK_S, "one week"),
    ("measure", "cooldown_limit_s"): (WEEK_S, "one week"),
    ("measure", "timeout_s"): (WEEK_S, "one week"),
    ("measure", "max_seconds"): (WEEK_S, "one week"),
    ("measure", "gemm_max_launch_s"): (WEEK_S, "one week"),
    ("measure", "tune_max_launch_s"): (WEEK_S, "one week"),
    ("measure", "gemm_min_time_ms"): (3_600_000, "one hour"),
    ("measure", "tune_min_time_ms"): (3_600_000, "one hour"),
    ("measure", "power_sample_ms"): (3_600_000, "one hour"),
    ("measure", "cooldown_threshold_c"): (150, "degrees C; a phone shuts down well below"),
    ("report", "dpi"): (2400, "dots per inch of the figures"),
}
NON_NEGATIVE = {("model", "lr"), ("measure", "verify_atol"), ("measure", "cooldown_s"),
                ("measure", "cooldown_limit_s"), ("model", "momentum"),
                ("model", "weight_decay"), ("measure", "ci_target"),
                ("measure", "max_seconds"), ("measure", "max_other_cpu_share"),
                ("measure", "max_probe_slowdown")}


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


def normalize_overrides(overrides: Any) -> list[str]:
    """Accept ``None``, one string or a list of strings (Snakemake ``--config overrides=...``)."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, (list, tuple)) and all(isinstance(o, str) for o in overrides):
        return list(overrides)
    raise ConfigError(f"overrides must be a list of Hydra override strings, got {overrides!r}; "
                      "write e.g. --config 'overrides=[\"measure.iterations=20\"]'")


def _group_file(conf_dir: Path, group: str, name: str) -> Path:
    return conf_dir / group / f"{name}.yaml"


def _tidy(msg: str) -> str:
    """One-paragraph form of an OmegaConf message: 'key X: what went wrong'."""
    lines = [ln.strip() for ln in msg.strip().splitlines()]
    key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), "")
    body = " ".join(ln for ln in lines if ln and not ln.startswith(
        ("full_key:", "reference_type=", "object_type=")))
    for kind in ("ValidationError", "ConfigKeyError"):
        body = body.replace(f"{kind} raised while composing config: ", "")
    return f"key '{key}': {body}" if key else body


def _explain(e: Exception, conf_dir: Path, overrides: list[str]) -> ConfigError:
    """Turn a Hydra/OmegaConf exception into a ConfigError naming the file or override."""
    msg = str(e).strip()
    if isinstance(e, OverrideParseException):
        return ConfigError(f"malformed override in {overrides}: {_tidy(msg)}. Overrides are "
                           "Hydra syntax, e.g. 'measure.iterations=20' or "
                           "'sweep.devices=[host,pixel]'")
    if isinstance(e, MissingConfigException):
        m = re.search(r"Could not find '([^/']+)/([^']+)'", msg)
        if m:
            group, name = m.groups()
            avail = sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))
            return ConfigError(f"{_group_file(conf_dir, group, name)} does not exist: "
                               f"'{name}' is not a {group} (key '{group}'); available: {avail}. "
                               f"Add the file or fix the name")
    m = re.search(r"In '([^']+)': (.*)", msg, re.S)
    if m:
        where, why = m.groups()
        hint = ("; write a YAML list, e.g. [a, b]" if "is not a ListConfig" in why
                else _null_hint(why))
        return ConfigError(f"{conf_dir / (where + '.yaml')}: {_tidy(why)}{hint}"
                           f"{_unknown_key_hint(why)}")
    m = re.search(r"full_key: (\w+)\.(\w+)", msg)
    if "Missing mandatory value" in msg and m and m.group(1) in AXES + ("sweep",):
        group, key = m.groups()
        chosen = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == group]
        where = (_group_file(conf_dir, group, chosen[-1]) if chosen
                 else f"the {group} chosen in {conf_dir / 'config.yaml'}")
        return ConfigError(f"{where}: key '{key}' is missing; add '{key}: ...' to the file")
    if e.__cause__ is not None:  # "Error merging override x=y" hides the reason in its cause
        msg = f"{msg}: {e.__cause__}"
    m = re.search(r"Error merging override (\S+)", msg)
    named = [o for o in overrides if m and o == m.group(1).rstrip(":")]
    which = f"override {named[-1]!r}" if named else f"override {overrides}"
    key, _, value = named[-1].partition("=") if named else ("sweep.models", "", "lenet5")
    hint = (f"; write a list, e.g. '{key}=[{value.strip(chr(39) + chr(34))}]'"
            if "is not a ListConfig" in msg
            else _null_hint(msg))
    return ConfigError(f"{which} on {conf_dir}: {_tidy(msg)}{hint}")


def _unknown_key_hint(msg: str) -> str:
    """". Did you mean 'iterations'?" for OmegaConf's "Key 'iteratoins' not in
    'MeasureConfig'" when a key of that section is close, else ''."""
    m = re.search(r"Key '([^']+)' not in '(\w+)'", msg)
    if not m:
        return ""
    section = next((f.name for f in fields(Config)
                    if getattr(schema_class(f.name), "__name__", None) == m.group(2)), None)
    guess = _did_you_mean(m.group(1), schema_keys(section) or []) if section else None
    return f". Did you mean '{guess}'?" if guess else ""


def _null_hint(msg: str) -> str:
    """What to do about a null given to a key whose schema type takes none."""
    if any(n in msg for n in ("is not Optional", "Incompatible value 'None'",
                              "NoneType is not a subclass")):
        return "; this key takes no null: give it a value, or leave it out for its default"
    return ""


# Resolvers whose value is a function of the config alone (OmegaConf's own); ``oc.env`` and
# ``hydra`` are checked further (VOLATILE_ENV; the Hydra key's own value). Any other resolver
# (``now``, a user's own) is refused: it may give another value on the next call.
DETERMINISTIC_RESOLVERS = {"oc.select", "oc.decode", "oc.create", "oc.deprecated",
                           "oc.dict.keys", "oc.dict.values", "oc.env", "hydra"}
# Variables the shell itself changes from one command to the next.
VOLATILE_ENV = {"PWD", "OLDPWD", "SHLVL", "_", "RANDOM", "SRANDOM", "SECONDS", "LINENO",
                "EPOCHSECONDS", "EPOCHREALTIME", "BASHPID", "PPID"}
# every resolver call, nested ones too (a lookahead, so matches may overlap): name, first arg
_RESOLVER_RE = re.compile(r"(?=\$\{\s*([^${}:\s]+)\s*:\s*([^,}$]*))")


def _volatile_reason(text: str, hydra_cfg: dict[str, Any], depth: int = 0) -> str | None:
    """Why the interpolations in ``text`` may resolve differently on another call, or None.
    ``hydra_cfg`` is the unresolved ``hydra`` node, which ``${hydra:key}`` reads."""
    for name, arg in _RESOLVER_RE.findall(text):
        arg = arg.strip().strip("'\"")
        if name == "now":
            return "the resolver 'now' gives the time of each call"
        if name not in DETERMINISTIC_RESOLVERS:
            return f"the resolver '{name}' is not known to give the same value on every call"
        if name == "oc.env" and (arg in VOLATILE_ENV or not arg):
            return (f"the environment variable {arg!r} changes from one command to the next"
                    if arg else "the environment variable is named by another interpolation")
        if name == "hydra":
            node: Any = hydra_cfg
            for part in arg.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            inner = _volatile_reason(str(node), hydra_cfg, depth + 1) if depth < 8 else None
            if inner:
                return f"Hydra's key 'hydra.{arg}' is {node!r}: {inner}"
    return None


def _raw_strings(node: Any, prefix: str = ""):
    """(dotted key, value) of every string holding an interpolation in an unresolved dict."""
    items = node.items() if isinstance(node, dict) else enumerate(node) \
        if isinstance(node, list) else ()
    for k, v in items:
        key = f"{prefix}{k}" if isinstance(k, str) else f"{prefix.rstrip('.')}[{k}]"
        if isinstance(v, (dict, list)):
            yield from _raw_strings(v, key + ".")
        elif isinstance(v, str) and "${" in v:
            yield key, v


def _refuse_volatile(cfg: DictConfig, conf_dir: Path, choices: dict[str, str],
                     overrides: Sequence[str]) -> None:
    """Refuse a value whose interpolation may resolve differently on the next composition
    (a time, a volatile variable): every invocation would see a changed config, plan its jobs
    again and, in ``results_dir``, write into a new folder. Raises :class:`ConfigError`
    naming the key and the file (or override) that set it."""
    hydra_cfg = OmegaConf.to_container(cfg.hydra, resolve=False)
    body = OmegaConf.to_container(cfg, resolve=False)
    body.pop("hydra", None)  # type: ignore[union-attr]
    for key, raw in _raw_strings(body):
        why = _volatile_reason(raw, hydra_cfg)  # type: ignore[arg-type]
        if why is None:
            continue
        group = key.split(".", 1)[0].split("[", 1)[0]
        path = (_group_file(conf_dir, group, choices[group]) if group in choices
                else conf_dir / "config.yaml")
        raise ConfigError(f"{_source(path, key, overrides)}: key '{key}' is {raw!r}: {why}, "
                          "so every invocation would see a changed config and rerun its jobs "
                          "(a results_dir would change folder). Write a fixed value")


@contextmanager
def _private_hydra(conf_dir: Path):
    """Hydra initialized on ``conf_dir`` for the block, whatever the caller had: the global
    Hydra of a Hydra app or of a notebook's ``initialize_config_dir`` is set aside and the
    same object, initialized as it was, is put back after."""
    gh = GlobalHydra.instance()
    held = gh.hydra
    gh.clear()
    try:
        with initialize_config_dir(version_base=None, config_dir=str(conf_dir),
                                   job_name="phonetrain"):
            yield
    finally:  # initialize_config_dir restores a copy of the cleared object: put back ours
        Singleton._instances[GlobalHydra] = gh
        gh.hydra = held


Reads = dict[str, dict[str, Optional[str]]]   # key -> {variable: value}: Sweep.environment


def _environment_reads(cfg: DictConfig) -> Reads:
    """Every value of the unresolved ``cfg`` that an ``${oc.env:VAR}`` interpolation reads:
    dotted key -> {VAR: its value now, None when unset}."""
    body = OmegaConf.to_container(cfg, resolve=False)
    body.pop("hydra", None)  # type: ignore[union-attr]
    out: Reads = {}
    for key, raw in _raw_strings(body):
        names = [arg.strip().strip("'\"") for name, arg in _RESOLVER_RE.findall(raw)
                 if name == "oc.env"]
        if names:
            out[key] = {v: os.environ.get(v) for v in names}
    return out


def _compose(conf_dir: Path, overrides: list[str]
             ) -> tuple[dict[str, Any], dict[str, str], Reads]:
    """Compose once; return the resolved config, the chosen option of each group and the
    values read from the environment (:func:`_environment_reads`)."""
    try:
        cfg: DictConfig = compose(config_name="config", overrides=overrides,
                                  return_hydra_config=True)
        choices = {g: str(v) for g, v in cfg.hydra.runtime.choices.items() if "/" not in g}
        _refuse_volatile(cfg, conf_dir, choices, overrides)
        reads = _environment_reads(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        return (OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True),  # type: ignore
                choices, reads)
    except ConfigError:
        raise
    except UnicodeDecodeError as e:   # a ValueError too: name the file, not the overrides
        raise ConfigError(f"{_undecodable(conf_dir) or conf_dir}: not UTF-8 text ({e.reason} "
                          f"at byte {e.start}); save the file as UTF-8") from e
    except (HydraException, OmegaConfBaseException, ValueError) as e:
        raise _explain(e, conf_dir, overrides) from e
    except yaml.YAMLError as e:  # the message names the file, line and column
        raise ConfigError(f"YAML syntax error: {' '.join(str(e).split())}; fix that file") from e


def _undecodable(conf_dir: Path) -> Path | None:
    """The first config file under ``conf_dir`` that is not UTF-8 (YAML 1.2, 5.2), or None."""
    for f in sorted(conf_dir.rglob("*.yaml")):
        try:
            f.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            return f
    return None


def _source(path: Path | str, dotted: str, overrides: Sequence[str]) -> str:
    """Where a value came from, for a message: the last override that set the key ``dotted``
    (with the file it overrode), else the file ``path``."""
    hits = [o for o in overrides if _override_key(o) == dotted]
    return f"override '{hits[-1]}' (on {path})" if hits else str(path)


def _validate_member(conf_dir: Path, group: str, name: str, node: dict[str, Any],
                     overrides: Sequence[str] = ()) -> None:
    path = _group_file(conf_dir, group, name)
    src = lambda key: _source(path, f"{group}.{key}", overrides)  # noqa: E731
    if node.get("name") != name:
        what = (" (the model of phonetrain.models the file trains, which the workflow looks up "
                "by the file name)" if group == "model" else "")
        raise ConfigError(f"{path}: key 'name' is {node.get('name')!r}; it must equal the "
                          f"file name {name!r}{what}: rename the file or fix key 'name'")
    if not NAME_RE.match(name):
        raise ConfigError(f"{path}: name {name!r} may use only letters, digits, '_' and '-'")
    for (g, key), allowed in CHOICES.items():
        if g == group and node[key] not in allowed:
            raise ConfigError(f"{src(key)}: key '{key}' is {node[key]!r}; "
                              f"use one of {tuple(allowed)}")
    for (g, key), low in MIN_INT.items():
        if g == group and node[key] < low:
            raise ConfigError(f"{src(key)}: key '{key}' is {node[key]}; it must be >= {low}")
    _check_signs(path, group, node, "", overrides)
    _check_at_most(path, group, node, "", overrides)
    if group == "backend":
        ok = (("none",), ("none",)) if node["kind"] == "cpu" else (
            ("resident", "staged") if node["kind"] == "vulkan" else
            ("resident", "staged", "pipelined"),
            ("copy",) if node["placement"] == "pipelined" else ("copy", "map"))
        for key, allowed in zip(("placement", "transfer"), ok):
            if node[key] not in allowed:
                raise ConfigError(f"{src(key)}: key '{key}' is {node[key]!r}; a {node['kind']} "
                                  f"backend takes one of {allowed}")
    if group == "kernel":
        if not (KERNELS_ROOT / name).is_dir():
            raise ConfigError(f"{path}: kernel version {name!r} has no folder "
                              f"{KERNELS_ROOT / name}; create it or fix key 'name'")
        try:  # version.yaml syntax, keys and the inherits chain, before any job
            load_version(name, KERNELS_ROOT)
        except KernelVersionError as e:
            raise ConfigError(f"{path}: {e}") from None
    if group == "model":
        _check_model_name(path, node["name"])
        _check_optimizer(path, node, overrides)
    if group == "device":
        _check_device_numbers(path, node, overrides)


def _check_optimizer(path: Path, node: dict[str, Any], overrides: Sequence[str]) -> None:
    """``betas``: two decay rates in [0, 1) (PyTorch's Adam checks the same); ``momentum``
    0 unless ``optimizer`` is sgd (Adam's first-moment decay is ``betas[0]``)."""
    src = lambda key: _source(path, f"model.{key}", overrides)  # noqa: E731
    if node["optimizer"] == "sgd":
        return
    betas = list(node["betas"])
    if len(betas) != 2 or not all(math.isfinite(b) and 0 <= b < 1 for b in betas):
        raise ConfigError(f"{src('betas')}: key 'betas' is {betas}; {node['optimizer']} takes "
                          "two decay rates in [0, 1), e.g. [0.9, 0.999] (PyTorch's default)")
    if node["momentum"] != 0:
        raise ConfigError(f"{src('momentum')}: key 'momentum' is {node['momentum']} with "
                          f"optimizer {node['optimizer']!r}, which has no momentum (its "
                          "first-moment decay is betas[0]); set momentum to 0.0")


def _check_optimizer_kernels(conf_dir: Path, exps: list[Experiment],
                             overrides: Sequence[str]) -> None:
    """An adam/adamw model crossed with a kernel version whose ``lowering`` is
    ``fused_step`` (its gradient kernels update with SGD) is refused before any job, naming
    the key and the versions that take the optimizer."""
    for e in exps:
        opt = e.config["model"].get("optimizer", "sgd")
        if opt == "sgd" or not e.is_opencl or \
                load_version(e.kernel, KERNELS_ROOT).lowering != "fused_step":
            continue
        takes = sorted(d.name for d in KERNELS_ROOT.iterdir() if d.is_dir() and
                       load_version(d.name, KERNELS_ROOT).lowering != "fused_step")
        where = _source(_group_file(conf_dir, "model", e.model), "model.optimizer", overrides)
        raise ConfigError(f"{where}: key 'optimizer' is {opt!r}, but kernel version "
                          f"{e.kernel!r} lowers the step with fused SGD kernels (lowering: "
                          f"fused_step) and takes optimizer 'sgd' only; the versions that "
                          f"take {opt!r}: {takes}. Drop {e.kernel!r} from sweep.kernels (or "
                          "restrict it with sweep.backend_kernels) or use optimizer sgd")


def experiment_lower(root: dict[str, Any]) -> dict[str, Any]:
    """``{"lower": {...}}`` when a lowering option is on, else ``{}`` (the config hash, plan
    and run of an experiment without one stay what they were before the section existed)."""
    lower = root.get("lower") or {}
    return {"lower": dict(lower)} if lower.get("reuse_buffers") else {}


def experiment_model(mcfg: dict[str, Any]) -> dict[str, Any]:
    """The model section an experiment's config holds: ``mcfg`` without :data:`ADAM_KEYS`
    when its optimizer is sgd (the config hash of an SGD run stays what it was)."""
    if mcfg.get("optimizer", "sgd") != "sgd":
        return mcfg
    return {k: v for k, v in mcfg.items() if k not in ADAM_KEYS}


def _check_device_numbers(path: Path, node: dict[str, Any], overrides: Sequence[str]) -> None:
    """``adb_port`` a TCP port (1..65535, RFC 793), datasheet facts positive, when set."""
    port = node.get("adb_port")
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"{_source(path, 'device.adb_port', overrides)}: key 'adb_port' is "
                          f"{port}; a TCP port is 1..65535 (the adb server's, default 5037)")
    for key in ("peak_gflops", "bandwidth_gbps"):
        v = (node.get("facts") or {}).get(key)
        if v is not None and not (math.isfinite(v) and v > 0):
            raise ConfigError(f"{_source(path, f'device.facts.{key}', overrides)}: key "
                              f"'facts.{key}' is {v}; a datasheet figure is a finite number "
                              "> 0, or null when unknown")


def _check_signs(path: Path, group: str, node: dict[str, Any], prefix: str,
                 overrides: Sequence[str] = ()) -> None:
    for (g, key) in sorted(POSITIVE | NON_NEGATIVE):
        if g != group:
            continue
        low_ok = node[key] > 0 if (g, key) in POSITIVE else node[key] >= 0
        if not math.isfinite(node[key]):
            raise ConfigError(f"{_source(path, f'{group}.{key}', overrides)}: key "
                              f"'{prefix}{key}' is {node[key]}; it must be a finite number")
        if not low_ok:
            bound = "> 0" if (g, key) in POSITIVE else ">= 0"
            raise ConfigError(f"{_source(path, f'{group}.{key}', overrides)}: key "
                              f"'{prefix}{key}' is {node[key]}; it must be {bound}")
        if (g, key) in BELOW_ONE and node[key] >= 1:
            raise ConfigError(f"{_source(path, f'{group}.{key}', overrides)}: key "
                              f"'{prefix}{key}' is {node[key]}; it must be in [0, 1) (at 1 "
                              f"or above SGD diverges), e.g. {'0.9' if key == 'momentum' else '1e-4'}")


def _allowed_range(group: str, key: str, high: float) -> str:
    """The range a numeric key takes, for a message: '0..1024', '> 0 and <= 604800'."""
    high = int(high) if float(high).is_integer() else high  # type: ignore[assignment]
    low = MIN_INT.get((group, key))
    if low is None and (group, key) in NON_NEGATIVE:
        low = 0
    if low is not None:
        return f"{low}..{high}"
    return f"> 0 and <= {high}" if (group, key) in POSITIVE else f"<= {high}"


def _check_at_most(path: Path, group: str, node: dict[str, Any], prefix: str,
                   overrides: Sequence[str] = ()) -> None:
    """Every number of section ``group`` at most its :data:`AT_MOST` bound (an int key
    without one: :data:`INT_MAX`). Raises :class:`ConfigError` naming the key and its range."""
    cls = schema_class(group)
    hints = get_type_hints(cls) if cls is not None else {}
    for key, hint in hints.items():
        v = node.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        high, why = AT_MOST.get((group, key), (INT_MAX, "the runner reads it as a C int")
                                if hint is int else (math.inf, ""))
        if v > high:
            raise ConfigError(f"{_source(path, f'{group}.{key}', overrides)}: key "
                              f"'{prefix}{key}' is {v}; it must be "
                              f"{_allowed_range(group, key, high)} ({why})")


def schema_class(section: str) -> Any:
    """The dataclass of the structured config's section (``"measure"``), or None."""
    hint = get_type_hints(Config).get(section)
    return hint if is_dataclass(hint) else None


def _check_dataset_fits(conf_dir: Path, root: dict[str, Any], model: str,
                        mcfg: dict[str, Any], overrides: Sequence[str] = ()) -> None:
    """A model's dataset must exist and have the model's input shape (before any job)."""
    name = mcfg.get("dataset") or root["dataset"]["name"]
    path = _source(_group_file(conf_dir, "model", model), "model.dataset", overrides)
    if name not in DATASETS:
        raise ConfigError(f"{path}: key 'dataset' is {name!r}; use one of {sorted(DATASETS)} "
                          "or null (the sweep's dataset.name)")
    m = MODELS.get(mcfg["name"])
    if m is None:
        return
    try:
        check_compatible(name, tuple(m.input_shape), m.classes, m.name)
    except ValueError as e:
        raise ConfigError(f"{path}: {e}; set key 'dataset' of this model or 'dataset.name'"
                          ) from None


def _check_dataset_source(conf_dir: Path, root: dict[str, Any], datasets: list[str],
                          overrides: Sequence[str]) -> None:
    """The folder each dataset of the study is read from exists and holds its files
    (:func:`phonetrain.data.source_folder`), before any job."""
    d = root["dataset"]
    where = _source(_group_file(conf_dir, "dataset", d["name"]), "dataset.path", overrides)
    for name in dict.fromkeys(datasets):
        try:
            source_folder(name, d["path"], d["allow_download"])
        except ValueError as e:
            raise ConfigError(f"{where}: key 'dataset.path': {e}") from None


def available_memory_bytes() -> int:
    """Memory this host can give a new process without swapping, in bytes: ``MemAvailable``
    of ``/proc/meminfo`` (Linux), else the free physical pages (``os.sysconf``)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def batches_bytes(input_shape: Sequence[int], batch_size: int, num_batches: int) -> int:
    """Host memory, in bytes, that writing a model's batch files takes: float32 images and
    int32 labels held about three times at once (the sampled array, its bytes and their
    hashed concatenation in :func:`phonetrain.data.write_batches`), plus the int64 sample
    order."""
    samples = batch_size * num_batches
    return samples * (3 * (4 * math.prod(input_shape) + 4) + 8)


def _check_batches_fit(conf_dir: Path, root: dict[str, Any],
                       models: dict[str, dict[str, Any]], overrides: Sequence[str]) -> None:
    """``dataset.num_batches`` of every model and batch size of the study fits in the memory
    this host has available (:func:`batches_bytes` vs :func:`available_memory_bytes`)."""
    n = root["dataset"]["num_batches"]
    batches = list((root.get("sweep") or {}).get("batches") or [])
    need, who = max((batches_bytes(MODELS[m["name"]].input_shape, b, n), (name, b))
                    for name, m in models.items() if m["name"] in MODELS
                    for b in (batches or [m["batch_size"]]))
    have = available_memory_bytes()
    if need > have:
        where = _source(_group_file(conf_dir, "dataset", root["dataset"]["name"]),
                        "dataset.num_batches", overrides)
        raise ConfigError(f"{where}: key 'dataset.num_batches' is {n}: the batch files of "
                          f"model {who[0]} at batch size {who[1]} need {need} bytes of host "
                          f"memory to write, more than the {have} bytes available; lower "
                          f"dataset.num_batches to {max(1, n * have // need)} or less")


def _check_model_name(path: Path, name: str) -> None:
    if name not in MODELS:
        raise ConfigError(f"{path}: key 'name' is {name!r}, not a model of phonetrain.models "
                          f"(known: {sorted(MODELS)})")


def _validate_root(conf_dir: Path, root: dict[str, Any], overrides: Sequence[str] = ()) -> None:
    path = conf_dir / "config.yaml"
    src = lambda key: _source(path, key, overrides)  # noqa: E731
    for (g, key), low in MIN_INT.items():
        if g in ("measure", "report") and root[g][key] < low:
            raise ConfigError(f"{src(f'{g}.{key}')}: key '{g}.{key}' is {root[g][key]}; it "
                              f"must be >= {low}")
    _check_signs(path, "measure", root["measure"], "measure.", overrides)
    for g in ("measure", "report"):
        _check_at_most(path, g, root[g], f"{g}.", overrides)
    ms = root["measure"]
    if ms["max_iterations"] < ms["iterations"]:
        _raise_iteration_cap(conf_dir, ms, overrides)
    total = ms["warmup"] + ms["iterations"]
    never = [c for c in ms["checkpoints"] if c >= total or c < -total]
    if ms["checkpoints"] and len(never) == len(ms["checkpoints"]):
        # no checkpoint reached would silently leave only the whole-trajectory comparison
        raise ConfigError(f"{src('measure.checkpoints')}: key 'measure.checkpoints' lists "
                          f"{never}, outside the run's iterations 0..{total - 1} (warm-up "
                          f"included; negative ones count from the end, down to -{total})")
    if ms["max_other_cpu_share"] > 1:
        raise ConfigError(f"{src('measure.max_other_cpu_share')}: key 'measure.max_other_cpu_share' "
                          f"is {ms['max_other_cpu_share']}; it is a share, 0..1 (1 judges none)")
    bad = [s for s in root["measure"]["gemm_sizes"] if s < 1]
    if bad:
        raise ConfigError(f"{src('measure.gemm_sizes')}: key 'measure.gemm_sizes' lists {bad}; "
                          "sizes must be >= 1")
    if not str(root["results_dir"]).strip():
        raise ConfigError(f"{src('results_dir')}: key 'results_dir' is empty; name the output "
                          "folder")
    if set("{}") & set(str(root["results_dir"])):  # Snakemake reads braces as wildcards
        raise ConfigError(f"{src('results_dir')}: key 'results_dir' is "
                          f"{root['results_dir']!r}; braces are not allowed in it (the "
                          "workflow's paths would read them as wildcards): name a folder "
                          "without '{' or '}'")
    if root["report"]["figure_format"] not in CHOICES[("report", "figure_format")]:
        raise ConfigError(f"{src('report.figure_format')}: key 'report.figure_format' must be "
                          "one of "
                          f"{CHOICES[('report', 'figure_format')]}")
    if root["dataset"]["name"] not in DATASETS:
        raise ConfigError(f"key 'dataset.name' is {root['dataset']['name']!r} (conf/dataset or "
                          f"an override); use one of {sorted(DATASETS)}")
    _validate_member(conf_dir, "dataset", root["dataset"]["name"], root["dataset"], overrides)
    sweep = root["sweep"]
    spath = _group_file(conf_dir, "sweep", sweep["name"])
    for axis in AXES:
        names = sweep[axis + "s"]
        if not names:
            raise ConfigError(f"{spath}: key 'sweep.{axis}s' is empty; list at least one {axis}")
        if len(set(names)) != len(names):
            raise ConfigError(f"{spath}: key 'sweep.{axis}s' lists a {axis} twice: {names}")
    for b, ks in (sweep.get("backend_kernels") or {}).items():
        # Checked against conf/, not the sweep's lists, so shrinking sweep.backends or
        # sweep.kernels by override never trips over the file's restriction.
        if not _group_file(conf_dir, "backend", b).is_file():
            raise ConfigError(f"{spath}: key 'sweep.backend_kernels' names backend {b!r}, "
                              f"which has no {_group_file(conf_dir, 'backend', b)}")
        bad = [k for k in ks if not _group_file(conf_dir, "kernel", k).is_file()]
        if not ks or bad:
            raise ConfigError(f"{spath}: key 'sweep.backend_kernels.{b}' is {list(ks)}; list "
                              f"one or more kernel versions of {conf_dir / 'kernel'}")
    batches = list(sweep.get("batches") or [])
    if any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in batches) or \
            len(set(batches)) != len(batches):
        raise ConfigError(f"{_source(spath, 'sweep.batches', overrides)}: key 'sweep.batches' is "
                          f"{batches}; list distinct batch sizes >= 1 (e.g. "
                          "'sweep.batches=[8,16,32]'), or [] for each model's model.batch_size")


def _raise_iteration_cap(conf_dir: Path, ms: dict[str, Any], overrides: Sequence[str]) -> None:
    """``measure.iterations`` above ``measure.max_iterations``: the cap follows (is set to
    ``iterations``) unless the cap was set too, by an override or in ``config.yaml``; then
    both were asked for and :class:`ConfigError` names the two keys."""
    path = conf_dir / "config.yaml"
    in_file = "max_iterations" in ((yaml.safe_load(path.read_text()) or {}).get("measure") or {})
    if in_file or any(_override_key(o) == "measure.max_iterations" for o in overrides):
        raise ConfigError(f"{_source(path, 'measure.max_iterations', overrides)}: key "
                          f"'measure.max_iterations' is {ms['max_iterations']}, below "
                          f"measure.iterations {ms['iterations']}: set measure.max_iterations "
                          f"to {ms['iterations']} or more, or drop it (it then follows "
                          "measure.iterations)")
    ms["max_iterations"] = ms["iterations"]


def _override_key(override: str) -> str:
    """The dotted key of a Hydra override (``+``, ``++`` and ``~`` prefixes stripped)."""
    return override.split("=", 1)[0].lstrip("+~").strip()


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


def _check_override_keys(overrides: list[str], axes_refused: bool = True) -> None:
    """Refuse, before composing, an override whose key the structured config does not have,
    listing the valid keys of its section; ``+``/``++`` overrides, which Hydra would accept
    and the study ignore, included. With ``axes_refused`` a single model/device/backend/kernel
    choice is refused too (a sweep crosses lists)."""
    for o in overrides:
        key = _override_key(o)
        if axes_refused and key in AXES:
            raise ConfigError(f"override {o!r} selects one {key} but a sweep crosses a list: "
                              f"write 'sweep.{key}s=[...]' instead")
        if o.startswith("~") and not key.startswith("hydra."):
            # a deleted key: every key of the structured config is needed by some stage
            raise ConfigError(f"override {o!r} deletes '{key}', which the study needs; set "
                              f"it instead ('{key}=VALUE'), or leave it at its default")
        if key.startswith("hydra.") or "=" not in o:
            continue
        section, _, leaf = key.rpartition(".")
        valid = schema_keys(section)
        if valid is not None and leaf in valid:
            if o.startswith("+") and not o.startswith("++"):
                raise ConfigError(f"override {o!r}: key '{key}' exists; drop the '+' "
                                  f"(write '{o.lstrip('+')}')")
            continue
        where = f"section '{section}'" if section else "the root"
        listed = valid if valid is not None else schema_keys("")
        guess = (_did_you_mean(leaf, valid) and f"{section}.{_did_you_mean(leaf, valid)}"
                 if valid is not None else
                 _did_you_mean(key, [k for k in _all_keys() if schema_keys(k) is None]))
        known = (f"Did you mean '{guess.lstrip('.')}'?" if guess else
                 f"Valid keys{' of ' + where if valid is not None else ' at the root'}: "
                 f"{listed}")
        raise ConfigError(f"override {o!r}: '{key}' is not a key of the config ("
                          f"{where if valid is not None else 'no such section'}); the "
                          f"structured config takes no additions, so a '+' does not help. "
                          f"{known} (docs/configuration.md)")


def _all_keys(section: str = "") -> list[str]:
    """Every dotted key of the structured config under ``section`` (sections included)."""
    out = []
    for k in schema_keys(section) or []:
        dotted = f"{section}.{k}" if section else k
        out.append(dotted)
        if schema_keys(dotted) is not None:
            out += _all_keys(dotted)
    return out


def _did_you_mean(key: str, candidates: Sequence[str]) -> str | None:
    """The candidate closest to a mistyped ``key`` (difflib's ratio >= 0.75), or None."""
    hit = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75)
    return hit[0] if hit else None


def compose_sweep(overrides: Any = None, conf_dir: Path | str = CONF_DIR) -> Sweep:
    """Compose ``conf_dir`` with Hydra overrides into the sweep of experiments.

    Each axis member is composed once (``model=<m>`` etc. plus ``overrides``), validated, and
    the experiments are the cross product (CPU backends once per model and device).
    Raises :class:`ConfigError` naming the file, key or override on any defect.
    """
    overrides = normalize_overrides(overrides)
    _check_override_keys(overrides)
    conf_dir = Path(conf_dir).resolve()
    if not (conf_dir / "config.yaml").is_file():
        raise ConfigError(f"{conf_dir / 'config.yaml'} does not exist: run from the repository "
                          "root or pass the conf folder")
    with _private_hydra(conf_dir):
        root, _, reads = _compose(conf_dir, overrides)
        _validate_root(conf_dir, root, overrides)
        env = {k: v for k, v in reads.items() if k.split(".")[0] not in AXES}
        members: dict[str, dict[str, dict[str, Any]]] = {}
        for axis in AXES:
            members[axis] = {}
            for name in root["sweep"][axis + "s"]:
                try:
                    cfg, _, reads = _compose(conf_dir, overrides + [f"{axis}={name}"])
                    env |= {f"{axis}[{name}]{k[len(axis):]}": v for k, v in reads.items()
                            if k.split(".")[0] == axis}
                    _validate_member(conf_dir, axis, name, cfg[axis], overrides)
                    if axis == "model":
                        _check_dataset_fits(conf_dir, cfg, name, cfg[axis], overrides)
                except ConfigError as e:
                    if str(e).startswith("override "):  # the override is to blame, not the file
                        raise
                    raise ConfigError(f"sweep '{root['sweep']['name']}' key 'sweep.{axis}s' "
                                      f"lists {name!r}: {e}") from e
                members[axis][name] = cfg[axis]
    _check_dataset_source(conf_dir, root, [m.get("dataset") or root["dataset"]["name"]
                                           for m in members["model"].values()], overrides)
    _check_batches_fit(conf_dir, root, members["model"], overrides)
    exps = _cross(root, members)
    _check_optimizer_kernels(conf_dir, exps, overrides)
    return Sweep(root=root, members=members, experiments=exps, environment=env)


def compose_one(overrides: Any = None, conf_dir: Path | str = CONF_DIR) -> tuple[Sweep, Experiment]:
    """Compose a single experiment (``model=... device=... backend=... kernel=...`` overrides;
    the defaults of ``conf/config.yaml`` fill the rest). Used by ``phonetrain run``; the
    record equals the one a sweep holds for the same cell. Raises :class:`ConfigError`."""
    overrides = normalize_overrides(overrides)
    _check_override_keys(overrides, axes_refused=False)
    conf_dir = Path(conf_dir).resolve()
    with _private_hydra(conf_dir):
        root, choices, env = _compose(conf_dir, overrides)
    _validate_root(conf_dir, root, overrides)
    for axis in AXES:
        _validate_member(conf_dir, axis, choices[axis], root[axis], overrides)
    _check_dataset_fits(conf_dir, root, choices["model"], root["model"], overrides)
    _check_dataset_source(conf_dir, root, [root["model"].get("dataset") or
                                           root["dataset"]["name"]], overrides)
    members = {axis: {choices[axis]: root[axis]} for axis in AXES}
    _check_batches_fit(conf_dir, root, members["model"], overrides)
    root["sweep"] = {"name": "single", **{a + "s": list(members[a]) for a in AXES}}
    exps = _cross(root, members)
    _check_optimizer_kernels(conf_dir, exps, overrides)
    return Sweep(root=root, members=members, experiments=exps, environment=env), exps[0]


def _cross(root: dict[str, Any], members: dict[str, dict[str, dict[str, Any]]]) -> list[Experiment]:
    exps = []
    only = root["sweep"].get("backend_kernels") or {}
    batches = list(root.get("sweep", {}).get("batches") or []) or [None]
    for (m, model_cfg), batch in ((mm, bb) for mm in members["model"].items() for bb in batches):
        mcfg = experiment_model(model_cfg if batch is None
                                else {**model_cfg, "batch_size": int(batch)})
        for d, dcfg in members["device"].items():
            for b, bcfg in members["backend"].items():
                kernels = members["kernel"] if bcfg["kind"] != "cpu" else {NO_KERNEL: None}
                for k, kcfg in kernels.items():
                    if b in only and k not in only[b]:
                        continue
                    if bcfg["kind"] == "vulkan" and not has_shaders(k):
                        continue   # a version without a vk/ folder has no Vulkan kernels
                    cfg = {
                        "model": mcfg, "backend": bcfg, "kernel": kcfg,
                        "device": {x: v for x, v in dcfg.items() if x != "facts"},
                        "dataset": root["dataset"], "measure": root["measure"],
                    } | experiment_lower(root)
                    exps.append(Experiment(m, d, b, k, cfg, batch))
    return exps


def eval_iterations(measure: dict[str, Any]) -> list[int]:
    """The iterations (0-based, warm-up included) after which a run with
    ``measure.eval_every`` > 0 evaluates on the held-out split: every ``eval_every``-th
    measured iteration up to the most a run may measure (``max_iterations`` when
    ``ci_target`` > 0, else ``iterations``), and ``-1`` (the last, counted from the end as
    the plan's checkpoints are). Empty when ``eval_every`` is 0 (off)."""
    every = int(measure.get("eval_every") or 0)
    if every <= 0:
        return []
    most = measure["iterations"]
    if measure.get("ci_target"):
        most = max(most, measure["max_iterations"])
    return [measure["warmup"] + m - 1 for m in range(every, most + 1, every)] + [-1]


def plan_config(exp: Experiment) -> dict[str, Any]:
    """What the lowered plan depends on (the device excluded): model, backend, kernel,
    dataset and the measurement keys that enter the plan. ``measure.checkpoints`` is the
    config's plus :func:`eval_iterations` (the runner keeps the parameters there), so a
    config with evaluation off lowers exactly the plan it did before the key existed."""
    c = exp.config
    keys = ("warmup", "iterations", "seed", "checkpoints")
    ms = {k: c["measure"][k] for k in keys}
    extra = [i for i in eval_iterations(c["measure"]) if i not in ms["checkpoints"]]
    ms["checkpoints"] = list(ms["checkpoints"]) + extra
    return {"id": exp.id, "model": c["model"], "backend": c["backend"], "kernel": c["kernel"],
            "dataset": c["dataset"], "measure": ms} | ({"lower": c["lower"]} if "lower" in c
                                                       else {})
