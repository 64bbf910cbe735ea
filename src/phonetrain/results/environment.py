"""The study's environment record: every config value an ``${oc.env:VAR}`` interpolation read.

A value may come from the environment (:attr:`phonetrain.config.Sweep.environment`: dotted
key -> {variable: value}), but one study -- one results folder -- must see the same value on
every invocation: a variable that differs between two invocations (a per-session one such as
``SSH_CONNECTION`` or ``SSH_TTY``, a shell's ``PWD``) would rerun the study's jobs under other
settings, or mix them. No list of such variables can be complete, so the rule is by value:
each invocation that executes jobs (the workflow, ``phonetrain run``) records what it read
in ``environment.json``
(:meth:`phonetrain.layout.Layout.environment_record`: ``{"values": {key: {variable:
value}}}``, None for an unset variable), and :func:`check` refuses an invocation that reads
another value for a key and variable recorded there, naming both values and what to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

from phonetrain.errors import PhonetrainError, ResultsFileError
from phonetrain.io import read_json, write_json
from phonetrain.layout import Layout

Reads = Mapping[str, Mapping[str, Optional[str]]]


class EnvironmentChanged(PhonetrainError):
    """A config value read from the environment differs from the one this study recorded."""


def recorded(L: Layout) -> dict[str, dict[str, Optional[str]]]:
    """The values the study's last invocation that executed jobs read ({} when none). Raises
    :class:`~phonetrain.errors.ResultsFileError` naming the record and what to do when it
    cannot be read or is not ``{"values": {key: {variable: value}}}``."""
    path = Path(L.environment_record())
    if not path.is_file():
        return {}
    try:
        values = read_json(path).get("values") or {}
    except ResultsFileError as e:
        values, why = None, e.message
    else:
        why = f"{path}: 'values' is not an object of keys"
    if not isinstance(values, dict) or not all(isinstance(v, dict) for v in values.values()):
        raise ResultsFileError(f"{why}: no record of the config values this study read from "
                               "the environment",
                               f"delete {path}; the next invocation that runs jobs records "
                               "them again (no measurement is lost)")
    return dict(values)


def check(L: Layout, reads: Reads) -> None:
    """Refuse ``reads`` (this invocation's values from the environment) when a key and
    variable recorded for the study in ``L`` read another value now. Raises
    :class:`EnvironmentChanged` naming each key, variable and both values."""
    before = recorded(L)
    changed = [(key, var, before[key][var], now) for key, got in reads.items()
               for var, now in got.items() if var in before.get(key, {})
               and before[key][var] != now]
    if not changed:
        return
    path = L.environment_record()
    what = "; ".join(f"key '{key}' reads ${{oc.env:{var}}}, which is {now!r} now and was "
                     f"{was!r}" for key, var, was, now in changed)
    raise EnvironmentChanged(
        f"{what} when this study last ran ({path}): a value from the environment that differs "
        "between invocations of one study reruns its jobs under other settings",
        "write the value itself in the config or the override (or set the variable as "
        f"before); if the change is meant, delete {path}")


def record(L: Layout, reads: Reads) -> None:
    """Record ``reads`` as the study's values from the environment, beside the keys recorded
    before that this invocation does not read (a one-off run composes one experiment)."""
    if reads:
        write_json({"values": recorded(L) | {k: dict(v) for k, v in reads.items()}},
                   L.environment_record())
