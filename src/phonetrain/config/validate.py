"""Validation of a composed config: the tables of allowed values and ranges, and the checks
that refuse a bad value before any job runs.

Every defect raises :class:`~phonetrain.config.schema.ConfigError` whose message names the
file (or the override) and the key, and says what to do. The tables (:data:`CHOICES`,
:data:`MIN_INT`, :data:`POSITIVE`, :data:`NON_NEGATIVE`, :data:`BELOW_ONE`, :data:`AT_MOST`)
also give ``docs/configuration.md`` its allowed values (``phonetrain.cli.config_table``).
"""

from __future__ import annotations

import difflib
import math
import os
from pathlib import Path
from typing import Any, Sequence, get_origin, get_type_hints

import yaml

from phonetrain.config.schema import (AXES, NAME_RE, ConfigError, Experiment, _all_keys,
                                      schema_class, schema_keys)
from phonetrain.data import DATASETS, check_compatible, source_folder
from phonetrain.devices import TRANSPORTS
from phonetrain.kernels import KERNELS_ROOT, KernelVersionError, load_version
from phonetrain.models import MODELS

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
           ("measure", "eval_every"): 0, ("measure", "max_attempts"): 1,
           ("measure", "tune_finalists"): 0}
# Floats that must be > 0 (a limit or calibration target of 0 makes every job fail or spin)
# or >= 0 (a negative tolerance fails every verification; a negative wait is meaningless).
POSITIVE = {("model", "eps"), ("measure", "timeout_s"), ("measure", "gemm_min_time_ms"),
            ("measure", "gemm_max_launch_s"), ("measure", "tune_min_time_ms"),
            ("measure", "tune_max_launch_s"), ("measure", "tune_screen_min_time_ms")}
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
    ("measure", "tune_screen_min_time_ms"): (3_600_000, "one hour"),
    ("measure", "gemm_max_shape_s"): (WEEK_S, "one week"),
    ("measure", "power_sample_ms"): (3_600_000, "one hour"),
    ("measure", "cooldown_threshold_c"): (150, "degrees C; a phone shuts down well below"),
    ("report", "dpi"): (2400, "dots per inch of the figures"),
}
# The largest square of the GEMM sweep (measure.gemm_sizes): 65536^2 floats are 16 GiB.
MAX_GEMM_SIZE = 65536
NON_NEGATIVE = {("model", "lr"), ("measure", "verify_atol"), ("measure", "cooldown_s"),
                ("measure", "cooldown_limit_s"), ("model", "momentum"),
                ("model", "weight_decay"), ("measure", "ci_target"),
                ("measure", "max_seconds"), ("measure", "max_other_cpu_share"),
                ("measure", "max_probe_slowdown"), ("measure", "gemm_max_shape_s"),
                ("measure", "gemm_plateau_gain")}


def _group_file(conf_dir: Path, group: str, name: str) -> Path:
    return conf_dir / group / f"{name}.yaml"


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
        by_override = src("name") != str(path)
        todo = (f"drop the override (choose another {group} by name in 'sweep.{group}s')"
                if by_override else "rename the file or fix key 'name'")
        raise ConfigError(f"{src('name')}: key 'name' is {node.get('name')!r}; it must equal "
                          f"the file name {name!r}{what}: {todo}")
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


def _check_device_numbers(path: Path, node: dict[str, Any], overrides: Sequence[str]) -> None:
    """An adb device names its ``serial``; ``adb_port`` a TCP port (1..65535, RFC 793),
    datasheet facts positive, when set."""
    if node.get("transport") == "adb" and not node.get("serial"):
        raise ConfigError(f"{_source(path, 'device.serial', overrides)}: key 'serial' is "
                          f"{node.get('serial')!r}; an adb device needs its phone's serial: "
                          "set it to the serial that 'phonetrain devices' lists")
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
        if not math.isfinite(v):   # nan passes every comparison below
            raise ConfigError(f"{_source(path, f'{group}.{key}', overrides)}: key "
                              f"'{prefix}{key}' is {v}; it must be a finite number")
        high, why = AT_MOST.get((group, key), (INT_MAX, "the runner reads it as a C int")
                                if hint is int else (math.inf, ""))
        if v > high:
            raise ConfigError(f"{_source(path, f'{group}.{key}', overrides)}: key "
                              f"'{prefix}{key}' is {v}; it must be "
                              f"{_allowed_range(group, key, high)} ({why})")


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


def _check_results_folder(conf_dir: Path, root: dict[str, Any],
                          overrides: Sequence[str]) -> None:
    """``results_dir`` (relative to the working folder) is a folder or can become one: no
    existing part of its path is a file (Snakemake would fail listing it, even in a dry
    run)."""
    want = Path(str(root["results_dir"]))
    for p in (want, *want.parents):
        if p.exists():
            if not p.is_dir():
                what = "names a file" if p == want else f"lies under the file {p}"
                raise ConfigError(f"{_source(conf_dir / 'config.yaml', 'results_dir', overrides)}"
                                  f": results_dir {str(want)!r} {what}, not a folder; give "
                                  "results_dir a folder (new or existing)")
            return


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
    bad = [s for s in root["measure"]["gemm_sizes"] if not 1 <= s <= MAX_GEMM_SIZE]
    if bad:
        raise ConfigError(f"{src('measure.gemm_sizes')}: key 'measure.gemm_sizes' lists {bad}; "
                          f"sizes must be 1..{MAX_GEMM_SIZE} (one {MAX_GEMM_SIZE}^2 float "
                          "matrix is 16 GiB, and a GEMM holds three)")
    sizes = list(root["measure"]["gemm_sizes"])
    if len(set(sizes)) != len(sizes):   # each square is one tuning class and one table row
        raise ConfigError(f"{src('measure.gemm_sizes')}: key 'measure.gemm_sizes' lists a "
                          f"size twice: {sizes}; list each once")
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
        where = _source(spath, f"sweep.{axis}s", overrides)
        if not names:
            raise ConfigError(f"{where}: key 'sweep.{axis}s' is empty; list at least one {axis}")
        if len(set(names)) != len(names):
            raise ConfigError(f"{where}: key 'sweep.{axis}s' lists a {axis} twice: {names}; "
                              "list each once")
    for b, ks in (sweep.get("backend_kernels") or {}).items():
        # Checked against conf/, not the sweep's lists, so shrinking sweep.backends or
        # sweep.kernels by override never trips over the file's restriction.
        where = _source(spath, f"sweep.backend_kernels.{b}", overrides)
        if not _group_file(conf_dir, "backend", b).is_file():
            raise ConfigError(f"{where}: key 'sweep.backend_kernels' names backend {b!r}, "
                              f"which has no {_group_file(conf_dir, 'backend', b)}")
        bad = [k for k in ks if not _group_file(conf_dir, "kernel", k).is_file()]
        if not ks or bad:
            raise ConfigError(f"{where}: key 'sweep.backend_kernels.{b}' is {list(ks)}; list "
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


def _is_map_field(dotted: str) -> bool:
    """Whether ``dotted`` (``sweep.backend_kernels``) is a field of the structured config whose
    type is a map (``dict[str, ...]``): its entries' names are the user's, not the schema's."""
    section, _, leaf = dotted.rpartition(".")
    cls = schema_class(section) if section else None
    hint = get_type_hints(cls).get(leaf) if cls is not None else None
    return get_origin(hint) is dict


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
        if _is_map_field(section):   # an entry of a map: '+sweep.backend_kernels.opencl=[..]'
            continue
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


def _did_you_mean(key: str, candidates: Sequence[str]) -> str | None:
    """The candidate closest to a mistyped ``key`` (difflib's ratio >= 0.75), or None."""
    hit = difflib.get_close_matches(key, candidates, n=1, cutoff=0.75)
    return hit[0] if hit else None
