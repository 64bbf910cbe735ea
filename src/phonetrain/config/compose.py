"""Composition: the config tree in ``conf/`` plus Hydra override strings -> the sweep.

:func:`compose_sweep` turns the tree plus Hydra override strings into a
:class:`~phonetrain.config.schema.Sweep`: the list of
:class:`~phonetrain.config.schema.Experiment` records that the Snakefile and
``phonetrain run`` execute. Nothing non-deterministic (time, host name, random state) enters a
composed config, so the same files and overrides always give the same configs and the same
config hash: an interpolation that may resolve differently on the next call is refused
(:data:`DETERMINISTIC_RESOLVERS`, :data:`VOLATILE_ENV`). A value read from the environment
(``${oc.env:VAR}``) is kept beside the config with its variable (``Sweep.environment``, not
hashed); that it stays the same between invocations of one study is checked against the
study's record (:mod:`phonetrain.results.environment`), by value, since no list of variables
that change between sessions is complete. Composition runs in its own Hydra context, so it
also works while the caller's Hydra is initialized. Each member is validated
(:mod:`phonetrain.config.validate`) as it is composed.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import yaml

from phonetrain.config.schema import (AXES, CONF_DIR, NO_KERNEL, Config, ConfigError,
                                      Experiment, Sweep, register_schema, schema_class,
                                      schema_keys)

if TYPE_CHECKING:
    from omegaconf import DictConfig
# Hydra and OmegaConf are imported by the functions that compose: a workflow parse that reads
# its composed study from the cache (phonetrain.stages.study_cache) loads neither.
from phonetrain.config.validate import (ADAM_KEYS, _check_batches_fit, _check_dataset_fits,
                                        _check_dataset_source, _check_optimizer_kernels,
                                        _check_override_keys, _check_results_folder,
                                        _did_you_mean, _group_file,
                                        _is_map_field, _override_key, _source,
                                        _validate_member, _validate_root)
from phonetrain.kernels import KERNELS_ROOT
from phonetrain.kernels.spirv import has_shaders


def normalize_overrides(overrides: Any) -> list[str]:
    """Accept ``None``, one string or a list of strings (Snakemake ``--config overrides=...``).
    Raises :class:`ConfigError` for anything else, or a string starting with ``[`` (a list
    that Snakemake's YAML parse gave back as the string it was)."""
    if overrides is None:
        return []
    if isinstance(overrides, str):
        if overrides.lstrip().startswith("["):   # no Hydra override starts with '['
            raise ConfigError(f"overrides is the string {overrides!r}: a list that did not "
                              "parse (an unclosed bracket or quote?); write e.g. --config "
                              "'overrides=[\"measure.iterations=20\", \"sweep=zoo\"]'")
        return [overrides]
    if isinstance(overrides, (list, tuple)) and all(isinstance(o, str) for o in overrides):
        return list(overrides)
    raise ConfigError(f"overrides must be a list of Hydra override strings, got {overrides!r}; "
                      "write e.g. --config 'overrides=[\"measure.iterations=20\"]'")


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
    from hydra.errors import MissingConfigException, OverrideParseException

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
            todo = (f"'{NO_KERNEL}' is the kernel part of a CPU run's id (the CPU backend runs "
                    "no kernel version): for a CPU run leave the kernel out; any other "
                    "backend takes one of the kernels available"
                    if (group, name) == ("kernel", NO_KERNEL) else "Add the file or fix the name")
            return ConfigError(f"{_group_file(conf_dir, group, name)} does not exist: "
                               f"'{name}' is not a {group} (key '{group}'); available: {avail}. "
                               f"{todo}")
    m = re.search(r"primary config '([^']+)' must be a DictConfig, got (\w+)", msg)
    if m:
        got = {"ListConfig": "list"}.get(m.group(2), m.group(2))
        return ConfigError(f"{conf_dir / (m.group(1) + '.yaml')}: is a {got}, not a "
                           "mapping of the config's sections (measure:, sweep:, ...); fix the "
                           "file")
    m = re.search(r"In '([^']+)': (.*)", msg, re.S)
    if m:
        where, why = m.groups()
        hint = ("; write a YAML list, e.g. [a, b]" if "is not a ListConfig" in why
                else _null_hint(why) or _scalar_hint(why) or _shape_hint(why))
        return ConfigError(f"{conf_dir / (where + '.yaml')}: {_tidy(why)}{hint}"
                           f"{_unknown_key_hint(why)}")
    m = re.search(r"full_key: (\w+)\.(\w+)", msg)
    if "Missing mandatory value" in msg and m and m.group(1) in AXES + ("sweep",):
        group, key = m.groups()
        return ConfigError(f"{_chosen_file(conf_dir, group, overrides)}: key '{key}' is "
                           f"missing; add '{key}: ...' to the file")
    m = re.search(r"full_key: ([\w.\[\]]+)", msg)
    if m and "interpolation" in msg and not any(_override_key(o) == m.group(1)
                                                 for o in overrides):
        # an interpolation written in a config file (${oc.env:VAR} unset or of the wrong
        # type): the file is to blame, not the overrides
        group = m.group(1).split(".")[0]
        where = (_chosen_file(conf_dir, group, overrides)
                 if (conf_dir / group).is_dir() else conf_dir / "config.yaml")
        what = ("set that environment variable (to a value of the key's type), or write the "
                "value itself" if "oc.env" in msg or "Environment variable" in msg
                else "fix the interpolation, or write the value itself")
        return ConfigError(f"{where}: {_tidy(msg)}; {what}")
    if e.__cause__ is not None:  # "Error merging override x=y" hides the reason in its cause
        msg = f"{msg}: {e.__cause__}"
    m = re.search(r"Could not override '([\w.]+)'", msg)
    if m and "not in struct" in msg and not _is_map_field(m.group(1)) \
            and _is_map_field(m.group(1).rpartition(".")[0]):
        # one new entry of a map (sweep.backend_kernels.opencl=[...]): Hydra wants a '+'
        said = [o for o in overrides if _override_key(o) == m.group(1)] or [m.group(1)]
        return ConfigError(f"override {said[-1]!r}: '{m.group(1)}' is not an entry of "
                           f"'{m.group(1).rpartition('.')[0]}' yet; add it with a '+': "
                           f"'+{said[-1]}'")
    if m and "not in struct" in msg and _is_map_field(m.group(1)):
        # a new entry of a map (sweep.backend_kernels): OmegaConf adds none by merging
        entry = re.search(r"full_key: ([\w.]+)", msg)
        entry_key = entry.group(1) if entry else f"{m.group(1)}.NAME"
        said = [o for o in overrides if _override_key(o) == m.group(1)] or [m.group(1)]
        return ConfigError(f"override {said[-1]!r}: '{entry_key}' is not an entry of "
                           f"'{m.group(1)}' yet, and a map gets no new entry from a whole-map "
                           f"override; add each entry with its own, e.g. "
                           f"'+{entry_key}=[...]'")
    m = re.search(r"Error merging override (\S+)", msg)
    named = [o for o in overrides if m and o == m.group(1).rstrip(":")]
    k = re.search(r"full_key: ([\w.\[\]]+)", msg)
    named = named or [o for o in overrides if k and _override_key(o) == k.group(1)]
    which = f"override {named[-1]!r}" if named else f"override {overrides}"
    key, _, value = named[-1].partition("=") if named else ("sweep.models", "", "lenet5")
    hint = (f"; write a list, e.g. '{key}=[{value.strip(chr(39) + chr(34))}]'"
            if "is not a ListConfig" in msg
            else _null_hint(msg) or _scalar_hint(msg))
    return ConfigError(f"{which} on {conf_dir}: {_tidy(msg)}{hint}")


def _chosen_file(conf_dir: Path, group: str, overrides: Sequence[str]) -> Path | str:
    """The file of ``group`` the composition read: the one the last ``group=NAME`` override
    chose, else the words for the default that ``config.yaml`` chooses."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == group]
    return (_group_file(conf_dir, group, chosen[-1]) if chosen
            else f"the {group} chosen in {conf_dir / 'config.yaml'}")


def _unknown_key_hint(msg: str) -> str:
    """". Did you mean 'iterations'?" for OmegaConf's "Key 'iteratoins' not in
    'MeasureConfig'" when a key of that section is close, else the section's valid keys;
    '' for another message."""
    m = re.search(r"Key '([^']+)' not in '(\w+)'", msg)
    if not m:
        return ""
    full = re.search(r"full_key: ([\w.]+)", msg)
    section = (full.group(1).rpartition(".")[0] if full else
               next((f.name for f in fields(Config)
                     if getattr(schema_class(f.name), "__name__", None) == m.group(2)), None))
    valid = schema_keys(section) if section is not None else None
    if not valid:
        return ""
    guess = _did_you_mean(m.group(1), valid)
    return (f". Did you mean '{guess}'?" if guess else
            f". Valid keys{' of ' + repr(section) if section else ''}: {valid}")


def _scalar_hint(msg: str) -> str:
    """What to do about a list or mapping, or a word, given to a key of one value."""
    if re.search(r"Cannot convert '(ListConfig|DictConfig|list|dict)' to string", msg):
        return "; this key takes one string: write it without brackets or braces"
    m = re.search(r"could not be converted to (Integer|Float)", msg)
    if m:
        return f"; write {'an integer' if m.group(1) == 'Integer' else 'a number'}"
    if "is not a valid bool" in msg:
        return "; write true or false"
    return ""


def _shape_hint(msg: str) -> str:
    """What to do about a config file that is a list or one value, not ``key: value`` lines."""
    if re.search(r"Invalid type assigned: \w+ is not a subclass of \w+Config", msg):
        return "; the file must be a mapping of keys ('key: value' lines), as the other files " \
               "of its folder are"
    return ""


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


def _refuse_volatile(body: dict[str, Any], hydra_cfg: dict[str, Any], conf_dir: Path,
                     choices: dict[str, str], overrides: Sequence[str]) -> None:
    """Refuse a value whose interpolation may resolve differently on the next composition
    (a time, a volatile variable): every invocation would see a changed config, plan its jobs
    again and, in ``results_dir``, write into a new folder. ``body`` is the unresolved
    config without its ``hydra`` node, ``hydra_cfg`` that node (plain containers). Raises
    :class:`ConfigError` naming the key and the file (or override) that set it."""
    for key, raw in _raw_strings(body):
        why = _volatile_reason(raw, hydra_cfg)
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
    same object, initialized as it was, is put back after. Hydra is imported here, by the
    compositions only (:func:`phonetrain.config.schema.register_schema`)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.singleton import Singleton

    register_schema()
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


def _environment_reads(body: dict[str, Any]) -> Reads:
    """Every value of the unresolved config ``body`` (plain containers, without its ``hydra``
    node) that an ``${oc.env:VAR}`` interpolation reads: dotted key -> {VAR: its value now,
    None when unset}."""
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
    from hydra import compose
    from hydra.errors import HydraException
    from omegaconf import OmegaConf, open_dict
    from omegaconf.errors import OmegaConfBaseException

    try:
        cfg: DictConfig = compose(config_name="config", overrides=overrides,
                                  return_hydra_config=True)
        choices = {g: str(v) for g, v in cfg.hydra.runtime.choices.items() if "/" not in g}
        body = OmegaConf.to_container(cfg, resolve=False)   # unresolved: read once
        hydra_cfg = body.pop("hydra")  # type: ignore[union-attr]
        _refuse_volatile(body, hydra_cfg, conf_dir, choices, overrides)  # type: ignore[arg-type]
        reads = _environment_reads(body)  # type: ignore[arg-type]
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
        except OSError:   # a dangling link (an editor's lock file): not read by Hydra
            continue
    return None


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


def compose_sweep(overrides: Any = None, conf_dir: Path | str = CONF_DIR) -> Sweep:
    """Compose ``conf_dir`` with Hydra overrides into the sweep of experiments.

    Each axis member is composed once (``model=<m>`` etc. plus ``overrides``), validated, and
    the experiments are the cross product (CPU backends once per model and device). Where
    no member's section can depend on another axis's choice (:func:`_members_independent`),
    one Hydra composition picks a member of every axis at once (the i-th of each list), so a
    sweep of 2 models, 6 backends and 5 kernels takes 6 member compositions, not 14.
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
        composed = (_compose_members_together(conf_dir, root, overrides)
                    if _members_independent(conf_dir, root, overrides) else None)
        members: dict[str, dict[str, dict[str, Any]]] = {}
        for axis in AXES:
            members[axis] = {}
            for name in root["sweep"][axis + "s"]:
                try:
                    if composed is not None:
                        cfg, reads = composed[axis, name]
                    else:
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
    check_host(conf_dir, root, members, overrides)
    exps = _cross(root, members)
    if not exps:
        _refuse_empty_sweep(conf_dir, root, members, overrides)
    _check_optimizer_kernels(conf_dir, exps, overrides)
    return Sweep(root=root, members=members, experiments=exps, environment=env)


# What in a config file or override may make one axis member's composed section depend on
# another axis's choice: a defaults list or package header (a member file writing or choosing
# beyond its own section), an interpolation (reading another section, or the environment),
# another search path (files from elsewhere).
_COUPLING = (b"defaults", b"@package", b"${", b"searchpath")


def _members_independent(conf_dir: Path, root: dict[str, Any], overrides: Sequence[str]) -> bool:
    """Whether each axis member's section composes the same whatever the other axes choose:
    no file under ``conf_dir`` but ``config.yaml`` (whose defaults list picks the groups) and
    no override holds anything of :data:`_COUPLING`, and ``config.yaml`` holds no
    interpolation, package header or search path. A file that cannot be read answers no."""
    if any(c.decode() in o or "hydra" in o for o in overrides for c in _COUPLING):
        return False
    try:
        for f in conf_dir.rglob("*.yaml"):
            body = f.read_bytes()
            coupling = _COUPLING[1:] if f == conf_dir / "config.yaml" else _COUPLING
            if any(c in body for c in coupling):
                return False
    except OSError:
        return False
    return all(isinstance(n, str) for axis in AXES for n in root["sweep"][axis + "s"])


def _compose_members_together(conf_dir: Path, root: dict[str, Any], overrides: list[str]
                              ) -> dict[tuple[str, str], tuple[dict[str, Any], Reads]] | None:
    """Every axis member's composition, one member of each axis per Hydra composition (the
    i-th of each axis's list together): ``(axis, name) -> (resolved config, environment
    reads)``, the config's ``axis`` section being what composing ``overrides`` plus
    ``axis=name`` alone gives where :func:`_members_independent` holds. None where a
    composition fails: the caller composes each member alone, and reports what that gives."""
    lists = {axis: list(dict.fromkeys(root["sweep"][axis + "s"])) for axis in AXES}
    out: dict[tuple[str, str], tuple[dict[str, Any], Reads]] = {}
    for i in range(max((len(v) for v in lists.values()), default=0)):
        picked = {axis: v[i] for axis, v in lists.items() if i < len(v)}
        try:
            cfg, _, reads = _compose(conf_dir, overrides + [f"{a}={n}" for a, n in picked.items()])
        except Exception:   # noqa: BLE001 -- composed alone, each member raises what it raises
            return None
        out |= {(axis, name): (cfg, reads) for axis, name in picked.items()}
    return out


def _refuse_empty_sweep(conf_dir: Path, root: dict[str, Any],
                        members: dict[str, dict[str, Any]], overrides: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for a sweep that crosses no experiment: every backend's
    kernel versions excluded by ``sweep.backend_kernels`` or, for a Vulkan backend, by having
    no shaders. Names the sweep file, each backend and why it has no kernel."""
    only = root["sweep"].get("backend_kernels") or {}
    kernels = list(members["kernel"])
    why = [f"backend {b!r} is restricted to {list(only[b])} by sweep.backend_kernels"
           if b in only else
           f"backend {b!r} is Vulkan and none of sweep.kernels {kernels} has Vulkan shaders "
           "(a vk/ folder)" for b in members["backend"]]
    path = _group_file(conf_dir, "sweep", root["sweep"]["name"])
    raise ConfigError(f"{_source(path, 'sweep.kernels', overrides)}: sweep "
                      f"'{root['sweep']['name']}' crosses no experiment: {'; '.join(why)}. "
                      "Add to sweep.kernels a version those backends take, or the cpu "
                      "backend to sweep.backends")


def check_host(conf_dir: Path, root: dict[str, Any], members: dict[str, dict[str, Any]],
               overrides: Sequence[str]) -> None:
    """The checks of a composed sweep that read this host beyond ``conf_dir`` and the
    sources: each model's dataset folder exists and holds its files, the batch files fit
    in the memory available, and ``results_dir`` is not a file. A sweep kept between invocations
    (:mod:`phonetrain.stages.study_cache`) is checked again with them. Raises
    :class:`ConfigError` naming the file and key."""
    _check_dataset_source(conf_dir, root, [m.get("dataset") or root["dataset"]["name"]
                                           for m in members["model"].values()], overrides)
    _check_batches_fit(conf_dir, root, members["model"], overrides)
    _check_results_folder(conf_dir, root, overrides)


def compose_one(overrides: Any = None, conf_dir: Path | str = CONF_DIR) -> tuple[Sweep, Experiment]:
    """Compose a single experiment (``model=... device=... backend=... kernel=...`` overrides;
    the defaults of ``conf/config.yaml`` fill the rest). Used by ``phonetrain run``; the
    record equals the one a sweep holds for the same cell. Checks this host as a sweep does
    (:func:`check_host`: ``results_dir`` not a file, before the results folder's lock).
    Raises :class:`ConfigError`."""
    overrides = normalize_overrides(overrides)
    _check_override_keys(overrides, axes_refused=False)
    conf_dir = Path(conf_dir).resolve()
    with _private_hydra(conf_dir):
        root, choices, env = _compose(conf_dir, overrides)
    _refuse_several(choices, overrides)
    _validate_root(conf_dir, root, overrides)
    for axis in AXES:
        _validate_member(conf_dir, axis, choices[axis], root[axis], overrides)
    _refuse_cpu_kernel(root, choices, overrides)
    _check_dataset_fits(conf_dir, root, choices["model"], root["model"], overrides)
    members = {axis: {choices[axis]: root[axis]} for axis in AXES}
    check_host(conf_dir, root, members, overrides)
    root["sweep"] = {"name": "single", **{a + "s": list(members[a]) for a in AXES}}
    exps = _cross(root, members)
    if not exps:   # the one cell crossed out: a Vulkan backend with a version without shaders
        _refuse_no_shaders(conf_dir, choices["backend"], choices["kernel"], overrides)
    _check_optimizer_kernels(conf_dir, exps, overrides)
    return Sweep(root=root, members=members, experiments=exps, environment=env), exps[0]


def _refuse_cpu_kernel(root: dict[str, Any], choices: dict[str, str],
                       overrides: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for a one-experiment composition whose override names a
    kernel version for a CPU backend, which runs the runner's C kernels and no version (the
    run would silently be ``<model>.cpu.none``)."""
    said = [o for o in overrides if o.split("=", 1)[0].strip() == "kernel"]
    if said and root["backend"]["kind"] == "cpu":
        raise ConfigError(f"override {said[-1]!r}: backend '{choices['backend']}' runs the "
                          f"runner's C kernels, no kernel version (its run is "
                          f"{choices['model']}.{choices['backend']}.{NO_KERNEL}): leave the "
                          "kernel out, or pick an OpenCL or Vulkan backend")


def _refuse_several(choices: dict[str, str], overrides: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for a one-experiment composition where an override chose
    several members of an axis (``model=[lenet5,mlp_16_16]``: Hydra merges them into one,
    and the axis has no single choice), naming the override and the sweep key to use."""
    for axis in AXES:
        if axis not in choices:
            said = [o for o in overrides if o.split("=", 1)[0].strip() == axis] or [axis]
            raise ConfigError(f"override {said[-1]!r} picks a list of {axis}s, but one run is "
                              f"one experiment: name one {axis} ({axis}=NAME), or run the "
                              f"list as a sweep: snakemake --cores 1 all --config "
                              f"'overrides=[\"sweep.{axis}s=[...]\"]'")


def _refuse_no_shaders(conf_dir: Path, backend: str, kernel: str,
                       overrides: Sequence[str]) -> None:
    """Raise :class:`ConfigError` for a Vulkan ``backend`` chosen with a ``kernel`` version
    that has no Vulkan shaders (no ``vk/`` folder of its own), naming the versions that have."""
    have = sorted(d.name for d in KERNELS_ROOT.iterdir() if has_shaders(d.name))
    raise ConfigError(f"{_source(_group_file(conf_dir, 'kernel', kernel), 'kernel', overrides)}:"
                      f" kernel version {kernel!r} has no Vulkan shaders (no "
                      f"{KERNELS_ROOT / kernel / 'vk'}/), so backend {backend!r} cannot run "
                      f"it; choose a version with shaders ({', '.join(have)}) or an OpenCL or "
                      "CPU backend")


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
