"""The composed study, kept between invocations of the workflow.

Parsing the Snakefile composes the sweep with Hydra (compositions of the axis members), works
out every job's params (lowering each model to find its GEMM shapes) and the tables the rules
read. All of that is a function of files and strings only: :func:`compose_study` computes it,
:func:`load_or_compose` keeps its result, a :class:`Composed`, in one pickle file under the
working directory, ``.snakemake/phonetrain/study-<key>.pickle``, so an invocation whose inputs
are unchanged (a no-op ``snakemake -n all``, each ``run:`` job's own parse) reads it instead.

The key (:func:`study_key`) is the SHA-256 of everything the composition reads:

- the names and bytes of every file under ``conf/`` and under the source folders of the
  imported ``phonetrain`` (the package, ``src/kernels``, ``src/runner``; ``__pycache__`` left
  out);
- the override strings, the workflow folder and the working directory (the cached source paths
  are absolute);
- the value of every environment variable an ``${oc.env:NAME}`` of those config files or of an
  override names (unset and empty differ);
- the Python version and the versions of the libraries that compose and lower (Hydra,
  OmegaConf, PyYAML, NumPy), and :data:`FORMAT`.

So the entry is used exactly when the composition would give the same result, and any edit of
a config file, kernel, source file or override composes again. What depends on this host
beyond those files -- the dataset folder and the memory the batch files need -- is checked on
every invocation (:func:`phonetrain.config.compose.check_host`). A composition that fails is
not kept (the same message stops the next invocation). The file is written atomically (a
temporary file, then a rename); the newest :data:`KEEP` entries stay. An entry that cannot be
read is composed again; a folder that cannot be written leaves the study uncached.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

FORMAT = 2   # bump when Composed changes shape
KEEP = 8     # entries kept per working directory
CACHE_DIR = Path(".snakemake", "phonetrain")
LIBRARIES = ("hydra-core", "omegaconf", "PyYAML", "numpy")
SKIP_DIRS = {"__pycache__", ".pytest_cache"}
_ENV_RE = re.compile(r"oc\.env\s*:\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class Composed:
    """What the rules read, composed once for a set of inputs (the module docstring).

    ``sweep``: the composed sweep; ``job_params``: each job's params by kind
    (:func:`phonetrain.stages.params.job_params`); ``outputs``: every stamped output -> its
    job's params (:func:`phonetrain.stages.current.study_outputs`); ``aggregate_params``,
    ``report_params``: the ``run:`` rules' params; ``expected``: the raw files of a complete
    study (:func:`phonetrain.stages.params.expected_files`); ``summary``: table -> Parquet path;
    ``run_classes``, ``gemm_classes``, ``version_classes``: the GEMM tuning classes by run,
    of the GEMM study and by tunable version; ``tunable``: version -> has candidates;
    ``kernel_files``: version -> its ``.cl`` files and chain's ``version.yaml`` files
    (absolute); ``shader_files``: version -> its Vulkan shader files (absolute, Vulkan
    versions of the sweep only); ``tune_json``/``gemm_json``: (device, version) -> a tune or
    GEMM sweep job's params as canonical JSON; ``vk_run_classes``, ``vk_version_classes``,
    ``vk_tune_json``: the same for the Vulkan tune jobs of versions whose shaders have
    candidates (:func:`phonetrain.stages.params.vk_version_tuning_classes`).
    """

    sweep: Any
    job_params: dict[str, Any]
    outputs: dict[str, dict[str, Any]]
    aggregate_params: dict[str, Any]
    report_params: dict[str, Any]
    expected: dict[str, list[str]]
    summary: dict[str, str]
    run_classes: dict[str, list[str]]
    gemm_classes: list[str]
    version_classes: dict[str, list[str]]
    tunable: dict[str, bool]
    kernel_files: dict[str, tuple[str, ...]]
    shader_files: dict[str, tuple[str, ...]]
    tune_json: dict[tuple[str, str], str]
    gemm_json: dict[tuple[str, str], str]
    vk_run_classes: dict[str, list[str]] = field(default_factory=dict)
    vk_version_classes: dict[str, list[str]] = field(default_factory=dict)
    vk_tune_json: dict[tuple[str, str], str] = field(default_factory=dict)


def compose_study(base: Path, overrides: Any) -> Composed:
    """Compose the study of the workflow folder ``base`` (its ``conf/``) with Hydra
    ``overrides``. Raises :class:`phonetrain.errors.PhonetrainError` (a ConfigError naming the
    file, key or override) on bad input."""
    from phonetrain.config import compose_sweep
    from phonetrain.kernels import load_version, source_files, tuning
    from phonetrain.kernels.spirv import shader_files
    from phonetrain.stages import current, params
    from phonetrain.stages.specs import as_json

    sweep = compose_sweep(overrides, conf_dir=base / "conf")
    jp = params.job_params(sweep)
    classes = params.version_tuning_classes(sweep)
    kernel_files = {}
    for k in sweep.kernels:
        files = [str(p) for p in source_files(k)]
        files += [str(y) for v in load_version(k).chain
                  if (y := base / "src" / "kernels" / v / "version.yaml").exists()]
        kernel_files[k] = tuple(files)
    vulkan = dict.fromkeys(e.kernel for e in sweep.experiments if e.is_vulkan)
    vk_classes = params.vk_version_tuning_classes(sweep)
    return Composed(
        sweep=sweep, job_params=jp, outputs=current.study_outputs(sweep, jp),
        aggregate_params=current.aggregate_params(),
        report_params=current.report_params(sweep), expected=params.expected_files(sweep),
        summary=params.summary_outputs(sweep), run_classes=params.tuning_classes(sweep),
        gemm_classes=params.sweep_tuning_classes(sweep), version_classes=classes,
        tunable={k: tuning.tunable(k) for k in sweep.kernels}, kernel_files=kernel_files,
        shader_files={k: tuple(str(p) for p in shader_files(k)) for k in vulkan},
        tune_json={(d, k): as_json(params.tune_version_job(jp, d, k, c))
                   for d in sweep.devices for k, c in classes.items()},
        gemm_json={(d, v): as_json(params.gemm_job(jp, d, v))
                   for d in sweep.devices for v in params.gemm_versions(sweep)},
        vk_run_classes=params.vk_tuning_classes(sweep), vk_version_classes=vk_classes,
        vk_tune_json={(d, k): as_json(params.tune_version_job(jp, d, k, c, "vulkan"))
                      for d in sweep.devices for k, c in vk_classes.items()})


def source_roots(base: Path) -> list[Path]:
    """The folders whose files the composition reads: ``base/conf``, ``base/src`` and the
    imported ``phonetrain`` package and kernel folder (the same as ``base/src`` in a
    checkout; kept apart for an installed package)."""
    from phonetrain.kernels.versions import KERNELS_ROOT

    pkg = Path(__file__).resolve().parents[1]
    return [base / "conf", base / "src", pkg, KERNELS_ROOT]


def _files(roots: Sequence[Path]) -> list[Path]:
    """Every file under ``roots`` (sorted, each once), without :data:`SKIP_DIRS` and ``.pyc``."""
    tops = sorted({Path(r).resolve() for r in roots})
    tops = [r for r in tops if not any(o != r and r.is_relative_to(o) for o in tops)]
    out: list[Path] = []
    for root in tops:   # none inside another: each file once
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.endswith(".egg-info")]
            out.extend(Path(d, n) for n in names if not n.endswith(".pyc"))
    return sorted(out)


def _bytes(f: Path) -> bytes:
    """A file's bytes for the key; for one that cannot be read (a dangling link such as
    Emacs's lock file ``.#host.yaml`` beside a config being edited, a file without read
    permission), what stands there instead (its link target, or the error), so the key still
    changes when it does. The composition reads only the files a config chooses, which report
    their own errors."""
    try:
        return f.read_bytes()
    except OSError as e:
        target = os.readlink(f) if f.is_symlink() else ""
        return f"<unreadable: {e.strerror or e}; link to {target!r}>".encode()


def _library_versions() -> list[str]:
    out = []
    for name in LIBRARIES:
        try:
            out.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name}=absent")
    return out


def study_key(base: Path, overrides: Sequence[str]) -> str:
    """The cache key of a study (the module docstring lists what it covers): 64 hex digits."""
    h = hashlib.sha256()
    files = _files(source_roots(base))
    conf = (base / "conf").resolve()
    env_names = set(_ENV_RE.findall(" ".join(overrides)))
    head = {"format": FORMAT, "python": sys.version, "libraries": _library_versions(),
            "base": str(base.resolve()), "cwd": os.getcwd(), "overrides": list(overrides)}
    for f in files:
        data = _bytes(f)
        h.update(str(f).encode() + b"\0" + len(data).to_bytes(8, "little") + data)
        if f.is_relative_to(conf):
            env_names.update(_ENV_RE.findall(data.decode("utf-8", "replace")))
    head["environment"] = {n: os.environ.get(n) for n in sorted(env_names)}
    h.update(json.dumps(head, sort_keys=True).encode())
    return h.hexdigest()


def _read(path: Path) -> Composed | None:
    try:
        with open(path, "rb") as f:
            got = pickle.load(f)
    except Exception:   # absent, truncated, or of a phonetrain whose classes moved: compose
        return None
    return got if isinstance(got, Composed) else None


def _write(path: Path, composed: Composed) -> None:
    """Write ``composed`` to ``path`` atomically and keep the newest :data:`KEEP` entries;
    a folder that cannot be written is left alone (the study stays uncached)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".study-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(composed, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        entries = sorted(path.parent.glob("study-*.pickle"), key=lambda p: p.stat().st_mtime)
        for old in entries[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def load_or_compose(base: Path, overrides: Any,
                    compose: Callable[[Path, Any], Composed] = compose_study,
                    cache_dir: Path = CACHE_DIR) -> tuple[Composed, bool]:
    """The study of ``base`` with ``overrides``: the cached entry of its key, else
    ``compose(base, overrides)``, kept for the next invocation. Returns it and whether it came
    from the cache. A cached study is checked against this host again
    (:func:`phonetrain.config.compose.check_host`). Raises what ``compose`` raises (a bad
    config is never kept) and :class:`phonetrain.config.ConfigError`."""
    from phonetrain.config.compose import normalize_overrides

    ov = normalize_overrides(overrides)
    path = Path(cache_dir) / f"study-{study_key(base, ov)}.pickle"
    got = _read(path)
    if got is not None:
        from phonetrain.config.compose import check_host

        sweep = got.sweep
        check_host((base / "conf").resolve(), sweep.root, sweep.members, ov)
        return got, True
    composed = compose(base, ov)
    _write(path, composed)
    return composed, False
