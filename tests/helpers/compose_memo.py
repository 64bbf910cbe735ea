"""A per-process memo of Hydra compositions for the tests (conftest.py's ``compose_memo``).

Many tests compose the same config files with the same overrides; Hydra's composition of the
same files, overrides and environment values is deterministic (phonetrain.config.compose
refuses every interpolation that is not), so a test process composes each such input once,
with the real Hydra, and every later call gets a fresh copy of that result.

The memo wraps ``phonetrain.config.compose._compose`` (one composition: conf folder plus
overrides -> resolved config, group choices, environment reads). Its key is the content of
every file under the conf folder (names, link targets and bytes), the overrides and, where a
file or an override mentions ``hydra`` (whose ``${hydra:...}`` values may name the conf folder
or the working folder), that folder and the working folder. A stored result is reused only
while every environment variable its ``${oc.env:...}`` interpolations read has the value it
had. A composition that raised is not stored (each call raises anew), nor is one whose folder
could not be read whole. Tests whose subject is composition itself (determinism, a caller's
own Hydra) are marked ``fresh_compose`` and compose every time.

Compositions that differ still read the same files: :func:`memoized_load` keeps what YAML
made of each file's text (``OmegaConf.load``'s parse, the costliest step of reading a config
file), keyed by that text, and builds the config object anew from a copy each time.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

# key -> (the pickled result, the variables it read and their values)
_MEMO: dict[tuple, tuple[bytes, dict[str, str | None]]] = {}
# a config file's text -> its YAML parse, pickled
_PARSED: dict[str, bytes] = {}


def _conf_key(conf_dir: Path, overrides: list[str]) -> tuple | None:
    """The memo key of composing ``conf_dir`` with ``overrides``, or None where a file under
    it cannot be read (the composition then runs, and reports that as it does)."""
    h = hashlib.sha256()
    mentions_hydra = any("hydra" in o for o in overrides)
    try:
        for p in sorted(conf_dir.rglob("*")):
            h.update(b"\0" + p.relative_to(conf_dir).as_posix().encode() + b"\0")
            if p.is_symlink():
                h.update(b"link:" + os.readlink(p).encode() + b"\0")
            if p.is_file():
                body = p.read_bytes()
                mentions_hydra = mentions_hydra or b"hydra" in body
                h.update(b"file:%d:" % len(body) + body)
            elif p.is_dir():
                h.update(b"dir")
            else:
                h.update(b"other")   # a dangling link, a fifo: named, not read
    except OSError:
        return None
    where = (str(conf_dir), os.getcwd()) if mentions_hydra else None
    return h.hexdigest(), tuple(overrides), where


def memoized(compose: Callable[[Path, list[str]], tuple[dict[str, Any], dict[str, str], Any]]
             ) -> Callable[[Path, list[str]], tuple[dict[str, Any], dict[str, str], Any]]:
    """``compose`` (``phonetrain.config.compose._compose``'s signature and result) answered
    from the memo where it holds the same inputs; each answer is a new copy."""
    def wrapper(conf_dir: Path, overrides: list[str]):
        key = _conf_key(Path(conf_dir), list(overrides))
        hit = _MEMO.get(key) if key is not None else None
        if hit is not None and all(os.environ.get(v) == value for v, value in hit[1].items()):
            return pickle.loads(hit[0])
        result = compose(conf_dir, overrides)
        if key is not None:
            read = {v: value for per_key in result[2].values() for v, value in per_key.items()}
            _MEMO[key] = (pickle.dumps(result), read)
        return result
    return wrapper


def memoized_load(load: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``OmegaConf.load`` (``load``, a path or an open text file -> DictConfig or ListConfig)
    with the YAML parse of each file's text kept: the text is parsed by OmegaConf's own YAML
    loader the first time, and ``OmegaConf.create`` builds every answer from a copy of that
    parse. A path, a file that is not read as text, and a text that does not parse or is not
    a mapping, list or string go to ``load`` itself (from where the file was: its error names
    the file); nothing of them is kept."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf._utils import get_yaml_loader

    def wrapper(file_):
        if isinstance(file_, (str, Path)) or not hasattr(file_, "read"):
            return load(file_)
        start = file_.tell()
        text = file_.read()
        if isinstance(text, str) and text not in _PARSED:
            try:
                obj = yaml.load(io.StringIO(text), Loader=get_yaml_loader())
            except Exception:
                obj = load   # not a parse: load itself reads the file again, below
            if obj is None or isinstance(obj, (list, dict, str)):
                _PARSED[text] = pickle.dumps(obj)
        if not isinstance(text, str) or text not in _PARSED:
            file_.seek(start)
            return load(file_)
        obj = pickle.loads(_PARSED[text])
        return OmegaConf.create() if obj is None else OmegaConf.create(obj)
    return staticmethod(wrapper)
