"""Test tiers, assigned from what a test uses (tests/conftest.py marks every collected test).

- ``workflow``: runs Snakemake (``snakemake`` itself, or ``phonetrain stale``'s dry run);
- ``runner``: starts another process (the C runner, a compiler, an adb server, a shell command)
  but no Snakemake;
- ``unit``: starts no process at all.

"Uses" is read from the code: the fixtures a test requests (with their own fixtures), and what
its function and those fixtures' functions read -- globals, modules imported inside them,
``module.name``, string constants and the strings of lists they read -- followed into the
tests' own helper functions (``tests/``), so a helper that runs Snakemake counts for every
test that calls it. The package's code is not followed: what of it starts a process is named
here (``PROCESS_MODULES``, ``PROCESS_USES``, ``CLI_COMMANDS``). A ``unit`` test that starts a
process anyway fails, naming this module (conftest.py's ``unit_tests_start_no_process``), so
the tiers cannot drift from what the tests do.
"""

from __future__ import annotations

import dis
import functools
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from helpers import TESTS, workflow
from phonetrain.cli import main as cli_main
from phonetrain.devices import toolchains

TIERS = ("unit", "runner", "workflow")

# The files of a tier that take longest (pytest --durations, summed per file), started before
# the tier's other files: with one file per worker, a long file started last leaves the other
# worker idle at the end (the longest first keeps the two workers' ends close). Only the order
# depends on this list; a file missing from it runs in collection order.
LONGEST_FIRST = (
    "tests/report/test_figure_layout.py",
    "tests/config/test_config.py",
    "tests/report/test_history.py",
    "tests/reference/test_reference.py",
    "tests/report/test_report.py",
    "tests/config/test_bad_input.py",
    "tests/report/test_report_lines.py",
    "tests/config/test_measure_settings.py",
    "tests/report/test_default_study_shape.py",
)

# Fixtures whose value took a process to make.
WORKFLOW_FIXTURES = {"completed_workspace"}
PROCESS_FIXTURES = {"runner", "pocl", "lavapipe", "adb_server", "vdev", "real_study"}

# The conftest.py fixture that enforces the tiers reads subprocess itself: not a use.
GUARD = "unit_tests_start_no_process"

# What starts Snakemake: the workflow helpers, or a command line that names it.
WORKFLOW_USES = (workflow.snakemake, workflow.planned, workflow.planned_jobs, workflow.SNAKEMAKE,
                 "snakemake")
# Modules whose every use (the module, or anything defined in it) starts a process: the
# runner's one driver, the transports, adb, a browser, subprocess itself (and their submodules).
PROCESS_MODULES = ("subprocess", "phonetrain.runner", "phonetrain.devices.local",
                   "phonetrain.devices.adb", "phonetrain.devices.virtual", "adbutils",
                   "playwright", "phonetrain.kernels.spirv")
PROCESS_USES = (toolchains.build_runner, toolchains.which_cc)
# `phonetrain COMMAND` through click's CliRunner: the commands that start a process.
CLI_COMMANDS = {"run": "runner", "info": "runner", "devices": "runner", "adb": "runner",
                "virtual-device": "runner", "stale": "workflow", "refresh": "workflow"}


IMPORT_NAME = dis.opmap["IMPORT_NAME"]


@dataclass(frozen=True)
class Imported:
    """A module a function imports (``import x`` / ``from x import y`` inside it), named even
    when it is not imported yet while the tests are collected."""
    name: str


def _codes(code: types.CodeType):
    """A code object and the code of every function, lambda and comprehension inside it."""
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _in_tests(obj) -> bool:
    """Whether ``obj`` (a function or module) is the tests' own code, followed into."""
    code = getattr(obj, "__code__", None)
    where = code.co_filename if code is not None else getattr(obj, "__file__", None)
    return where is not None and Path(where).is_relative_to(TESTS)


def _read(code: types.CodeType, scope: dict) -> list[object]:
    """The objects one code object reads: its globals, the modules it imports (``import x``
    inside a function), and ``module.name`` for the names it reads of them."""
    objs = [scope[n] for n in code.co_names if n in scope]
    objs += [sys.modules[n] for n in code.co_names if n in sys.modules]
    for mod in [o for o in objs if isinstance(o, types.ModuleType)]:
        objs += [mod.__dict__[n] for n in code.co_names if n in mod.__dict__]
    return objs


@functools.cache
def _direct(func) -> tuple:
    """What one function's own code reads: objects, strings of its constants and of the lists
    it reads, and the modules it imports."""
    found: list[object] = []
    for code in _codes(func.__code__):
        found += [c for c in code.co_consts if isinstance(c, str)]
        if IMPORT_NAME in code.co_code[::2]:   # an opcode of the code's 2-byte units
            found += [Imported(i.argval) for i in dis.get_instructions(code)
                      if i.opname == "IMPORT_NAME"]
        for obj in _read(code, func.__globals__):
            found.append(obj)
            if isinstance(obj, (list, tuple)):
                found += [s for s in obj if isinstance(s, str)]
    return tuple(found)


def reached(funcs) -> list[object]:
    """What the functions ``funcs`` read (objects and strings), followed through the tests'
    own functions."""
    return [obj for f in funcs if hasattr(f, "__code__") for obj in _reached_from(f)]


@functools.cache
def _reached_from(func) -> tuple:
    """:func:`reached` of one function (kept: the tests share their helpers and fixtures)."""
    todo, seen, found = [func], set(), []
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for obj in _direct(f):
            found.append(obj)
            if (callable(obj) and hasattr(obj, "__code__") and _in_tests(obj)
                    and obj.__module__ != __name__):   # these rules name what they look for
                todo.append(obj)
    return tuple(found)


def _starts_process(obj) -> bool:
    if any(obj is u for u in PROCESS_USES):
        return True
    if isinstance(obj, Imported):
        name = obj.name
    elif isinstance(obj, types.ModuleType):
        name = obj.__name__
    else:
        name = getattr(obj, "__module__", None)
    return isinstance(name, str) and any(name == m or name.startswith(m + ".")
                                         for m in PROCESS_MODULES)


def tier_of(funcs, fixtures: set[str]) -> str:
    """The tier of a test whose function and fixtures' functions are ``funcs`` and whose
    fixture closure is ``fixtures``."""
    return _tier_of(tuple(funcs), frozenset(fixtures))


@functools.cache
def _tier_of(funcs: tuple, fixtures: frozenset[str]) -> str:
    """:func:`tier_of`, kept (a parametrized test's items share their functions)."""
    objs = reached(funcs)
    strings = {o for o in objs if isinstance(o, str)}
    objs = [o for o in objs if not isinstance(o, str)]
    cli = {CLI_COMMANDS[s] for s in strings & set(CLI_COMMANDS)} if any(
        o is cli_main for o in objs) else set()
    if (fixtures & WORKFLOW_FIXTURES or strings & set(WORKFLOW_USES) or "workflow" in cli
            or any(o is u for o in objs for u in WORKFLOW_USES if not isinstance(u, str))):
        return "workflow"
    if fixtures & PROCESS_FIXTURES or "runner" in cli or any(map(_starts_process, objs)):
        return "runner"
    return "unit"


def tier(item) -> str:
    """The tier of one collected test item (a ``pytest.Function``)."""
    fixtures = set(item.fixturenames)
    funcs = [item.function]
    for name in fixtures - {GUARD}:
        funcs += [fdef.func for fdef in item._fixtureinfo.name2fixturedefs.get(name, ())]
    return tier_of(funcs, fixtures)


def refuse_processes(monkeypatch) -> None:
    """Make every way of starting a process fail for the rest of the test, naming this module."""
    def refuse(what) -> None:
        raise AssertionError(
            f"a unit-tier test started a process ({what!r}): tests/helpers/tiers.py assigns "
            "tiers from the fixtures and names a test uses -- add what this test reaches to "
            "PROCESS_FIXTURES/PROCESS_USES (or WORKFLOW_*) there")

    def popen(self, args, *rest, **kwargs):
        self._child_created = False   # what Popen.__del__ reads of a half-made object
        refuse(args)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(os, "fork", lambda: refuse("os.fork()"))
    monkeypatch.setattr(os, "posix_spawn", lambda path, *a, **k: refuse(path))
